"""Permission modes and what they decide for a node launch (the seed's table).

=========== ================ =================================
mode        policy decision  host prompt
=========== ================ =================================
auto        allow            no
plan        deny             no (the node ends in ``denial``)
supervised  require approval yes, when a responder is available
=========== ================ =================================

It applies to command, shell and Python launches and to mutating agent nodes; read-only agents and
approval nodes are always allowed to start. A read-only Python node is still a process launch: its
``access`` is the author's unverified declaration, so it is decided like a command.

Plan confirmation (the digest) is separate: it never changes the mode or approves a capability.
"""

from __future__ import annotations

from enum import Enum

from rho_notebook.model.graph import AgentNode, ApprovalNode, ItemNode, Node

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

    Approval nodes are not capabilities: a person decides them in every mode. A read-only agent
    (its frozen capability set has no writes, processes or nested agents) is allowed in every
    mode; a mutating agent is treated like a command launch.
    """
    if isinstance(node, ApprovalNode):
        return LaunchDecision.ALLOW
    if isinstance(node, AgentNode) and node.access == "read_only":
        return LaunchDecision.ALLOW
    if isinstance(node, ItemNode) and (
        node.step_kind not in ("agent", "command") or (node.step_kind == "agent" and node.access == "read_only")
    ):
        return LaunchDecision.ALLOW  # computed by the owner, a person's form, or one completion
    if mode is PermissionMode.AUTO:
        return LaunchDecision.ALLOW
    if mode is PermissionMode.PLAN:
        return LaunchDecision.DENY
    return LaunchDecision.ASK
