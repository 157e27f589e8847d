"""The answer shapes that need pydantic, and :data:`WIRE_TYPES`, the list of every answer shape.

Importable from :mod:`rho_notebook.service.wire` (imported from there on first use): a front end
that prints a run's status or the run list never pays for the approval model these need.
"""

from __future__ import annotations

from typing import Any

from rho_notebook.policy.approvals import ApprovalRequest
from rho_notebook.service.wire import (
    CancelJson,
    DeletedJson,
    Detail,
    HaltedStepJson,
    NodeView,
    ResultJson,
    ReusedFromJson,
    RunRowJson,
    RunView,
    StatusJson,
    StepJson,
    StreamView,
    WireLayout,
)
from rho_notebook.service.wire_plans import DiffJson, PlanJson, PlanSummaryJson

__all__ = ["WIRE_TYPES", "ApprovalJson", "approval_json"]


class ApprovalJson(ApprovalRequest):
    """A pending approval request, and whether the run's owner is waiting on it now."""

    waiting: bool
    """False for a request whose node has since ended (e.g. timed out)."""


def approval_json(request: ApprovalRequest, *, waiting: bool) -> dict[str, Any]:
    """A pending approval request in the :class:`ApprovalJson` shape."""
    return ApprovalJson(**dict(request), waiting=waiting).model_dump(mode="json")


WIRE_TYPES: dict[str, Any] = {
    "PlanJson": PlanJson,
    "PlanSummaryJson": PlanSummaryJson,
    "DiffJson": DiffJson,
    "StatusJson": StatusJson,
    "RunRowJson": RunRowJson,
    "ResultJson": ResultJson,
    "ApprovalJson": ApprovalJson,
    "CancelJson": CancelJson,
    "DeletedJson": DeletedJson,
    "WireLayout": WireLayout,
    "ReusedFromJson": ReusedFromJson,
    "StepJson": StepJson,
    "HaltedStepJson": HaltedStepJson,
    "NodeView": NodeView,
    "RunView": RunView,
    "StreamView": StreamView,
    "Detail": Detail,
}
"""Every answer shape by its TypeScript name (``scripts/gen_wire_types.py`` generates from these)."""
