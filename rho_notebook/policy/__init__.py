"""Permission modes, hooks, trust and approval records, and the launch gate that applies them.

The face imports on first use (:func:`rho_notebook.lazy.lazy_face`): ``from rho_notebook.policy
import PermissionMode`` loads the permission table, not the hooks or approval records.
"""

from rho_notebook.lazy import lazy_face

_FACE = {
    "PermissionMode": "permission",
    "LaunchKind": "permission",
    "LaunchDecision": "permission",
    "decide": "permission",
    "Launch": "gate",
    "LaunchGate": "gate",
    "Refusal": "gate",
    "HookSpec": "hooks",
    "load_hooks": "hooks",
    "ApprovalRequest": "approvals",
    "ApprovalDecision": "approvals",
    "who_am_i": "approvals",
    "CarriedApprovals": "carried",
    "PlanApproval": "plan_approval",
    "PlanApprovals": "plan_approval",
    "TrustStore": "trust",
}
__getattr__, __dir__ = lazy_face(__name__, _FACE)
__all__ = sorted(_FACE)
