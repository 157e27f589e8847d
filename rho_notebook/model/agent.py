"""A fully resolved agent definition, as frozen into a plan (Rho's agent definition schema)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from rho_notebook.model.base import FrozenModel

__all__ = ["AgentDefinition", "AgentOrigin", "READ_ONLY_TOOLS", "MUTATING_TOOLS", "RHO_TOOLS", "agent_launch_facts"]

RHO_TOOLS: tuple[str, ...] = (
    "agent",
    "agents",
    "bash",
    "edit",
    "fetch_content",
    "get_search_content",
    "glob",
    "grep",
    "list_dir",
    "powershell",
    "process",
    "questionnaire",
    "read_file",
    "rho",
    "shell",
    "skill",
    "web_search",
    "write",
)
"""Rho's built-in capability names (the schema page's tool vocabulary for runtime rho)."""

READ_ONLY_TOOLS: frozenset[str] = frozenset(
    {
        "list_dir",
        "read_file",
        "grep",
        "glob",
        "fetch_content",
        "get_search_content",
        "web_search",
        "skill",
        "questionnaire",
    }
)
"""Capabilities that neither write, run processes, nor start nested agents or workflows."""

MUTATING_TOOLS: frozenset[str] = frozenset(RHO_TOOLS) - READ_ONLY_TOOLS

AgentOrigin = Literal["workflow", "project", "user", "builtin", "notebook"]


class AgentDefinition(FrozenModel):
    """One agent, parsed and validated; the planner freezes it whole into the graph."""

    id: str
    description: str
    runtime: Literal["rho", "claude-cli"] = "rho"
    prompt: Literal["extend", "replace"] = "extend"
    model_policy: Literal["inherit", "prefer", "require", "select"] = "inherit"
    model: str | None = None
    provider: str | None = None
    auth: str | None = None
    reasoning: Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    tools: Literal["all"] | tuple[str, ...] = "all"
    """``"all"`` or an allowlist: Rho capability names (rho) or Claude tool entries (claude-cli)."""
    inherit_claude_config: bool = False
    body: str = ""
    """The trimmed markdown body: appended to the base prompt (extend) or the whole prompt (replace)."""
    origin: AgentOrigin = "builtin"
    """Which catalog root supplied the definition (not its path, which varies per checkout)."""
    content_sha256: str | None = None
    """sha256 of the definition file's bytes; None for built-ins."""

    def capability_set(self) -> frozenset[str]:
        """The capabilities this agent may use (claude-cli: the tool base names)."""
        if self.tools == "all":
            if self.runtime == "claude-cli":
                return frozenset()
            return frozenset(RHO_TOOLS) - {"agent", "agents"}
        names = set()
        for entry in self.tools:
            names.add(entry.split("(", 1)[0])
        return frozenset(names)

    def is_read_only(self) -> bool:
        """True when the frozen capability set has no writes, processes or nested agents/workflows."""
        if self.runtime == "claude-cli":
            return False
        caps = self.capability_set()
        return caps <= READ_ONLY_TOOLS


def agent_launch_facts(agent: AgentDefinition, *, access: str, prompt: str) -> dict[str, Any]:
    """What a person or a hook decides on before an agent starts (an agent node, an item agent
    step, a script's ``run_step``): the agent, its runtime and tools, a digest of its whole frozen
    definition (so an approval never carries over to an edited agent: another body, model or
    tool list) and the rendered prompt."""
    definition = json.dumps(agent.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return {
        "agent": agent.id,
        "runtime": agent.runtime,
        "tools": agent.tools if agent.tools == "all" else list(agent.tools),
        "definition_sha256": "sha256:" + hashlib.sha256(definition.encode()).hexdigest(),
        "access": access,
        "prompt": prompt,
    }
