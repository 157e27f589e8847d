"""A two-role review flow: a writer drafts an answer, a reviewer tightens it (docs/flows.md).

Each role is an inline agent (an AgentParam with a system prompt) on the settings' default
provider and model. In a run every call is a journaled model step keyed by its module path:
``review.writer#1``, then ``review.reviewer#1``. Run it with:

    rho-notebook validate examples/flows/review.py --flow Review
    rho-notebook run examples/flows/review.py --flow Review --input 'prompt="Explain durable runs"' --yes
"""

from rho_notebook.flow import AgentParam, Session, Workflow, run_session_loop


class Review(Workflow):
    """Writer, then reviewer: the reviewer sees the request and the draft."""

    description = "Draft an answer, then review and tighten it"

    def __init__(self) -> None:
        super().__init__()
        self.writer = AgentParam(system="You are the writer. Write a short first draft that answers the request.")
        self.reviewer = AgentParam(
            system="You are the reviewer. Tighten the draft in the conversation and answer with the final text only."
        )

    def forward(self, session: Session) -> Session:
        draft = run_session_loop(session, self.writer)
        return run_session_loop(draft, self.reviewer)
