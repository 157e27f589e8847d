"""``rho-notebook agents``: the agents a workflow in a folder can name, each as planning resolves it.

One row per agent id that a definition file of the catalog's directories claims, or that a
built-in has: the definition planning would freeze for a workflow in that folder (its origin,
file, runtime, tools), the files with the same id it hides, or, when the id cannot be resolved
(a broken file claims it, one directory defines it twice), the diagnostics planning would report.
The resolution is :func:`~rho_notebook.agents.catalog.resolve_agent` itself, so the listing
cannot disagree with a plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.agents.catalog import BUILTIN_AGENT_IDS, catalog_claims, resolve_agent
from rho_notebook.errors import Diagnostic, InvalidWorkflow
from rho_notebook.model.agent import AgentDefinition

__all__ = ["AgentRow", "agent_rows"]

BUILT_IN = "built-in"
"""How a row names the built-in definition of an id (it has no file)."""


@dataclass(frozen=True)
class AgentRow:
    """One agent id of the catalog as a workflow in the listed folder sees it."""

    agent_id: str
    definition: AgentDefinition | None
    """What planning freezes for the id; None when it cannot be resolved (see ``problems``)."""
    file: str | None
    """The file the definition comes from; None for a built-in (or an id that cannot be resolved)."""
    claimed_by: tuple[str, ...]
    """Every file claiming the id, highest precedence first, and ``built-in`` when a built-in has it."""
    problems: tuple[Diagnostic, ...]

    @property
    def hides(self) -> tuple[str, ...]:
        """What the definition wins over (nothing when the id cannot be resolved)."""
        if self.definition is None:
            return ()
        chosen = BUILT_IN if self.file is None else self.file
        return tuple(claim for claim in self.claimed_by if claim != chosen)

    def to_json(self) -> dict[str, Any]:
        definition = self.definition
        return {
            "id": self.agent_id,
            "origin": None if definition is None else definition.origin,
            "file": self.file,
            "description": None if definition is None else definition.description,
            "runtime": None if definition is None else definition.runtime,
            "tools": None if definition is None else definition.tools,
            "read_only": None if definition is None else definition.is_read_only(),
            "content_sha256": None if definition is None else definition.content_sha256,
            "claimed_by": list(self.claimed_by),
            "hides": list(self.hides),
            "problems": [problem.to_json() for problem in self.problems],
        }


def agent_rows(folder: Path, *, workspace: Path, user_home: Path) -> list[AgentRow]:
    """Every agent id a workflow whose entry file lies in ``folder`` can name, in id order.

    Raises
    ------
    InvalidWorkflow
        An agent directory is a symlink or not a directory (``agent.root``): every id below it
        would fail to resolve.
    """
    claims = catalog_claims(workflow_dir=folder, workspace=workspace, user_home=user_home)
    rows = []
    for agent_id in sorted(set(claims) | set(BUILTIN_AGENT_IDS)):
        claimed_by = (*claims.get(agent_id, ()), *([BUILT_IN] if agent_id in BUILTIN_AGENT_IDS else []))
        try:
            definition, path = resolve_agent(agent_id, workflow_dir=folder, workspace=workspace, user_home=user_home)
        except InvalidWorkflow as err:
            rows.append(AgentRow(agent_id, None, None, claimed_by, tuple(err.diagnostics())))
            continue
        rows.append(AgentRow(agent_id, definition, None if path is None else str(path), claimed_by, ()))
    return rows
