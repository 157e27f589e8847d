# docs/examples/porting/openrath_selector.py
from rho_notebook import flow
from rho_notebook.flow import Session, Workflow


class SupportWorkflow(Workflow):
    def __init__(self, provider: str = "main"):
        super().__init__()
        self.selector = flow.Selector(provider)
        self.triage = flow.Agent(
            "Triage the request.",
            provider,
            description="Classify a new support request",
        )
        self.resolve = flow.Agent(
            "Resolve the technical problem.",
            provider,
            description="Installation, configuration, or runtime errors",
        )

    def forward(self, session: Session) -> Session:
        chosen = self.selector.forward(session, self.triage, self.resolve)
        if not isinstance(chosen, flow.EmptyWorkflow):
            session = chosen(session)
        return session
