# docs/examples/porting/openrath_tree.py
from rho_notebook.flow import AgentParam, Session, Workflow, run_session_loop

LEAD_ENGINEER_SYSTEM = "You lead the project. Plan the work for the squad and QA."


class IdentityWorkflow(Workflow):
    def forward(self, session: Session) -> Session:
        return session


class PlanningWorkflow(Workflow):
    def __init__(self):
        super().__init__()
        self.planner = AgentParam(
            Session.from_agent_prompt("Plan the work."),
            "main",
        )

    def forward(self, session: Session) -> Session:
        return run_session_loop(session, self.planner.agent_session, agent_provider=self.planner.provider)


class ResearchWorkflow(Workflow):
    def __init__(self, provider: str) -> None:
        super().__init__()
        self.researcher = AgentParam(Session.from_agent_prompt("Research the topic."), provider)

    def forward(self, session: Session) -> Session:
        return run_session_loop(session, self.researcher.agent_session, agent_provider=self.researcher.provider)


class Team(Workflow):
    def __init__(self, provider: str = "main") -> None:
        super().__init__()
        self.research = ResearchWorkflow(provider)
        self.writer = AgentParam(
            Session.from_agent_prompt("Write the result."),
            provider,
        )

    def forward(self, session: Session) -> Session:
        s = self.research(session)
        return run_session_loop(s, self.writer.agent_session, agent_provider=self.writer.provider)


class FeatureSquadWorkflow(Workflow):
    def __init__(self, provider: str) -> None:
        super().__init__()
        self.architect = AgentParam(Session.from_agent_prompt("Design the feature."), provider)

    def forward(self, session: Session) -> Session:
        return run_session_loop(session, self.architect.agent_session, agent_provider=self.architect.provider)


class QualityAssuranceWorkflow(Workflow):
    def __init__(self, provider: str) -> None:
        super().__init__()
        self.tester = AgentParam(Session.from_agent_prompt("Check the work and list the risks."), provider)

    def forward(self, session: Session) -> Session:
        return run_session_loop(session, self.tester.agent_session, agent_provider=self.tester.provider)


class EngineeringProjectWorkflow(Workflow):
    def __init__(self, provider: str = "main") -> None:
        super().__init__()
        self.lead = AgentParam(Session.from_agent_prompt(LEAD_ENGINEER_SYSTEM), provider)
        self._squad = FeatureSquadWorkflow(provider)
        self._qa = QualityAssuranceWorkflow(provider)

    def forward(self, session: Session) -> Session:
        s = run_session_loop(
            session,
            self.lead.agent_session,
            agent_provider=self.lead.provider,
            tools=None,
        )
        s = self._squad.forward(s)
        return self._qa.forward(s)
