"""Permission modes and what they decide for a launch (the seed's table), per kind of launch.

=========== ================ =================================
mode        policy decision  host prompt
=========== ================ =================================
auto        allow            no
plan        deny             no (the launch ends in ``denial``)
supervised  require approval yes, when a responder is available
=========== ================ =================================

The table applies to process launches (command, shell and Python nodes, item ``command`` steps,
script ``run_command`` steps and flow tool calls, the script or flow process itself) and to
mutating agents (agent nodes, item ``agent`` steps, script ``run_step``). A read-only agent and a
model call (one completion, no tools of ours) are allowed in every mode; approval nodes, human
steps and the steps the owner computes are not launches at all. A read-only Python node is still a
process launch: its ``access`` is the author's unverified declaration, so it is decided like a
command.

Plan confirmation (the digest) is separate: it never changes the mode or approves a capability.
"""

from __future__ import annotations

from enum import Enum

from rho_notebook.model.graph import AgentNode, ItemNode, Node, PythonNode

__all__ = ["LaunchDecision", "LaunchKind", "PermissionMode", "decide", "decide_launch", "launch_kind", "read_only"]


class PermissionMode(str, Enum):
    AUTO = "auto"
    PLAN = "plan"
    SUPERVISED = "supervised"


class LaunchDecision(str, Enum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


class LaunchKind(str, Enum):
    """What starts; its value after ``workflow_`` is the ``tool`` a hook sees."""

    COMMAND = "command"
    """A verified process: command and shell nodes, item command steps, script command steps."""
    PYTHON = "python"
    """A Python node's function in the frozen interpreter."""
    AGENT = "agent"
    """An agent loop: agent nodes, item agent steps, script ``run_step`` calls."""
    MODEL = "model"
    """One completion: item model steps, script ``run_model`` calls, a flow's model calls."""
    SCRIPT = "script"
    """The interpreter of a script or flow run."""
    NONE = "none"
    """Not a launch: approval nodes, human steps and item steps the owner computes."""

    @property
    def tool(self) -> str:
        return f"workflow_{self.value}"


def launch_kind(node: Node) -> LaunchKind:
    """The kind of launch an attempt of ``node`` is."""
    if isinstance(node, ItemNode):
        if node.acting_kind in ("agent", "command", "model"):
            return LaunchKind(node.acting_kind)
        return LaunchKind.NONE
    if isinstance(node, AgentNode):
        return LaunchKind.AGENT
    if isinstance(node, PythonNode):
        return LaunchKind.PYTHON
    if node.kind in ("command", "shell"):
        return LaunchKind.COMMAND
    return LaunchKind.NONE


def read_only(node: Node) -> bool:
    """Whether ``node`` is an agent whose frozen capability set has no writes, processes or
    nested agents (its launch is allowed in every mode)."""
    agent = isinstance(node, AgentNode) or (isinstance(node, ItemNode) and node.acting_kind == "agent")
    return agent and getattr(node, "access", None) == "read_only"


def decide(mode: PermissionMode, kind: LaunchKind, *, read_only: bool = False) -> LaunchDecision:
    """The workspace policy's decision for a launch of ``kind`` under ``mode``."""
    if kind in (LaunchKind.NONE, LaunchKind.MODEL) or (kind is LaunchKind.AGENT and read_only):
        return LaunchDecision.ALLOW
    if mode is PermissionMode.AUTO:
        return LaunchDecision.ALLOW
    if mode is PermissionMode.PLAN:
        return LaunchDecision.DENY
    return LaunchDecision.ASK


def decide_launch(mode: PermissionMode, node: Node) -> LaunchDecision:
    """The workspace policy's decision for launching ``node`` under ``mode``."""
    return decide(mode, launch_kind(node), read_only=read_only(node))
