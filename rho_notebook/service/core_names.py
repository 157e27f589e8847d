"""Names of the layers below the service that its verbs take and return, re-exported so that a
front end imports them from :mod:`rho_notebook.service` (docs/architecture.md: front ends import
the service, ``model``, ``views`` and ``errors``, nothing else of ours)."""

from rho_notebook.planning.flow import FlowCheck
from rho_notebook.planning.inputs import parse_input_args
from rho_notebook.planning.plan import PlanRequest
from rho_notebook.policy.approvals import ApprovalDecision, ApprovalRequest, describe_request
from rho_notebook.runtime.cancel import CancelResult
from rho_notebook.runtime.detached import OwnerOptions
from rho_notebook.runtime.follow import RunFollower
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.workspace import Workspace, find_workspace
from rho_notebook.store.journal import JournalRead
from rho_notebook.store.layout import SERVED_ARTIFACTS, StoreLayout
from rho_notebook.store.runs import RunFolder, RunManifest

__all__ = [
    "ApprovalDecision",
    "ApprovalRequest",
    "CancelResult",
    "FlowCheck",
    "JournalRead",
    "Limits",
    "OwnerOptions",
    "PlanRequest",
    "RunFolder",
    "RunFollower",
    "RunManifest",
    "SERVED_ARTIFACTS",
    "StoreLayout",
    "Workspace",
    "describe_request",
    "find_workspace",
    "load_limits",
    "parse_input_args",
]
