"""Names of the layers below the service that its verbs take and return, re-exported so that a
front end imports them from :mod:`rho_notebook.service` (docs/architecture.md: front ends import
the service, ``model``, ``views`` and ``errors``, nothing else of ours).

Each name is imported from its module the first time it is asked for
(:func:`rho_notebook.lazy.lazy_face`): ``from rho_notebook.service import RunFolder`` loads the run
store, not the planner that :class:`PlanRequest` needs.
"""

from typing import TYPE_CHECKING

from rho_notebook.lazy import lazy_face

_FACE = {
    "ApprovalDecision": "rho_notebook.policy.approvals",
    "ApprovalRequest": "rho_notebook.policy.approvals",
    "CancelResult": "rho_notebook.runtime.cancel",
    "FlowCheck": "rho_notebook.planning.flow",
    "JournalRead": "rho_notebook.store.journal",
    "Limits": "rho_notebook.source.limits",
    "OwnerOptions": "rho_notebook.runtime.detached",
    "PlanRequest": "rho_notebook.planning.plan",
    "RunFolder": "rho_notebook.store.runs",
    "RunFollower": "rho_notebook.runtime.follow",
    "RunManifest": "rho_notebook.store.runs",
    "SERVED_ARTIFACTS": "rho_notebook.store.layout",
    "StoreLayout": "rho_notebook.store.layout",
    "Workspace": "rho_notebook.source.workspace",
    "describe_request": "rho_notebook.policy.approvals",
    "find_workspace": "rho_notebook.source.workspace",
    "load_limits": "rho_notebook.source.limits",
    "parse_input_args": "rho_notebook.planning.inputs",
}
__getattr__, __dir__ = lazy_face(__name__, _FACE)
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

if TYPE_CHECKING:
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
