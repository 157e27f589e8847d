"""Permission modes and what they decide for a node launch (the seed's table).

=========== =============== =================================
mode        policy decision host prompt
=========== =============== =================================
auto        allow           no
plan        deny            no (the node ends in ``denial``)
supervised  require approval yes, when a responder is available
=========== =============== =================================

Plan confirmation (the digest) is separate: it never changes the mode or approves a capability.
"""

from __future__ import annotations

from enum import Enum

from rho_notebook.model.graph import ApprovalNode, Node

__all__ = ["PermissionMode", "LaunchDecision", "decide_launch"]


class PermissionMode(str, Enum):
    AUTO = "auto"
    PLAN = "plan"
    SUPERVISED = "supervised"


class LaunchDecision(str, Enum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


def decide_launch(mode: PermissionMode, node: Node) -> LaunchDecision:
    """The workspace policy's decision for launching ``node`` under ``mode``.

    Approval nodes are not capabilities: a person decides them in every mode.
    """
    if isinstance(node, ApprovalNode):
        return LaunchDecision.ALLOW
    if mode is PermissionMode.AUTO:
        return LaunchDecision.ALLOW
    if mode is PermissionMode.PLAN:
        return LaunchDecision.DENY
    return LaunchDecision.ASK
