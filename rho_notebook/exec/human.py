"""The human operation: ask a person to fill a form, and wait (an item graph's ``human`` step).

The attempt waits without a process for a decision through the owner's approval channel (an
approval request of kind ``form``); a resumed run waits again. Approved: the value is the answer's
fields; declined: a denial naming who declined; nobody answered within the bound: a failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rho_notebook.exec.base import AttemptResult
from rho_notebook.model.itemgraph import FieldDecl
from rho_notebook.model.state import NodeState

__all__ = ["HumanOperation", "ask_person", "form_field"]


@dataclass(frozen=True, kw_only=True)
class HumanOperation:
    """One question to a person: the form to fill and how long to wait."""

    name: str
    """The node's name (the approval request's ``node``)."""
    step: str
    """The step's id in the item graph."""
    question: Any
    """The prompt shown, resolved against the item."""
    form: dict[str, dict[str, Any]]
    """Field name -> its declaration and label (:func:`form_field`)."""
    timeout_seconds: int

    def facts(self) -> dict[str, Any]:
        """What the person is asked (the approval request's facts)."""
        return {"node": self.name, "step": self.step, "prompt": self.question, "form": self.form}


def form_field(name: str, raw: Any) -> dict[str, Any]:
    """One field of a form: its declaration, labelled with its name when it has no label."""
    decl = FieldDecl.model_validate(raw)
    return {**decl.declaration(), "label": decl.label or name}


async def ask_person(
    op: HumanOperation, request_approval: Callable[[dict[str, Any], float], Awaitable[Any]] | None
) -> AttemptResult:
    """Ask through ``request_approval`` (the owner's channel; None: nobody can be asked). The
    success value is the answer's fields."""
    if request_approval is None:
        return AttemptResult(state=NodeState.FAILURE, message="human steps need an owner that can ask a person")
    decided = await request_approval(op.facts(), float(op.timeout_seconds))
    if decided == "cancelled":
        return AttemptResult(state=NodeState.CANCELLATION, message="cancelled while waiting for a person")
    if decided is None:
        return AttemptResult(state=NodeState.FAILURE, message=f"nobody answered within {op.timeout_seconds} s")
    if decided.decision != "approve" or decided.answer is None:
        return AttemptResult(
            state=NodeState.DENIAL,
            message=f"declined by {decided.by}" + (f": {decided.comment}" if decided.comment else ""),
        )
    return AttemptResult(
        state=NodeState.SUCCESS,
        value=dict(decided.answer),
        exit={"kind": "human", "by": decided.by, "at": decided.at, "via": decided.via},
    )
