"""A selector-routed support flow: a Selector reads the request and picks the team that answers
it (docs/flows.md).

The selector is one model call with tools disabled that sees a numbered menu of the candidates'
descriptions and answers with a number; no match (no number, a negative one, or one out of range)
is an EmptyWorkflow, and the flow answers that a person will follow up. Keys in a run:
``support.route.router#1`` for the routing call, then ``support.billing.agent#1`` or
``support.technical.agent#1``. Run it with:

    rho-notebook validate examples/flows/support.py --flow Support
    rho-notebook run examples/flows/support.py --flow Support --input 'prompt="I was charged twice"' --yes
"""

from rho_notebook.flow import Agent, EmptyWorkflow, Selector, Session, Workflow


class Support(Workflow):
    """Route a support request to billing or technical, or hand it to a person."""

    description = "Answer a customer support request"

    def __init__(self) -> None:
        super().__init__()
        self.billing = Agent(
            "You are the billing team. Answer questions about invoices, refunds and plans.",
            description="Billing: invoices, double charges, refunds, payment plans",
        )
        self.technical = Agent(
            "You are the technical team. Solve the user's problem step by step.",
            description="Technical: installation, configuration or runtime errors",
        )
        self.route = Selector(candidates=(self.billing, self.technical))

    def forward(self, session: Session) -> Session:
        team = self.route(session)
        if isinstance(team, EmptyWorkflow):
            return session.append("assistant", "No team handles this request; a person will follow up.")
        return team(session)
