"""Launch approvals that carry over to later runs of the same workspace.

A person who approves a supervised launch approves its exact launch facts (executable and digest,
argv, cwd; an agent's definition and prompt; a Python node's interpreter, module and arguments),
not one attempt. So the owner records each such approval in an index, and before asking for a
later launch it looks the facts up there: one read, no scan of runs.

``carried-approvals/<WORKSPACE_KEY>/<FACTS_DIGEST_HEX>.json`` holds the newest approval of those
facts in that workspace: the run and node it was given in, who decided, when and through which
front end. The rules, each enforced here:

1. Only launch approvals carry. An approval node asks a person about one run's data every time.
2. Only approvals: a denial is never recorded, so it never carries (the next run asks again).
3. Scoped to one workspace (its key: another checkout of the same files asks again) and to one
   facts digest (any change to what would run asks again).
4. Runs started through MCP (origin ``mcp``) never use a carried approval, and approvals given in
   them are not recorded: a model-driven run always asks a person.

A damaged or mismatched entry carries nothing: the person is asked, and their approval rewrites it.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from rho_notebook.errors import StoreError
from rho_notebook.model.base import FrozenModel
from rho_notebook.policy.approvals import ApprovalDecision, ApprovalRequest
from rho_notebook.store.files import atomic_write_json, read_nofollow
from rho_notebook.store.layout import StoreLayout

__all__ = ["CarriedApproval", "CarriedApprovals", "carries"]

_KEY = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")

NEVER_CARRIED_ORIGINS = frozenset({"mcp"})
"""Front ends whose runs always ask (rule 4)."""


class CarriedApproval(FrozenModel):
    """A person's approval of one set of launch facts in one workspace."""

    workspace_key: str
    facts_sha256: str
    run_id: str
    """The run the approval was given in."""
    node: str
    by: str
    decided_at: str
    via: str
    """The front end the person decided through (cli, terminal, notebook, server)."""


def carries(origin: str) -> bool:
    """Whether runs started by front end ``origin`` use and leave carried approvals (rule 4)."""
    return origin not in NEVER_CARRIED_ORIGINS


class CarriedApprovals:
    """The carried approvals of one workspace in the store ``layout``."""

    def __init__(self, layout: StoreLayout, workspace_key: str) -> None:
        if not _KEY.fullmatch(workspace_key):
            msg = f"workspace key {workspace_key!r} cannot name a store folder (use letters, digits, '.', '_', '-')"
            raise StoreError(msg)
        self.layout = layout
        self.workspace_key = workspace_key

    @property
    def folder(self) -> Path:
        return self.layout.carried_approvals / self.workspace_key

    def _path(self, facts_sha256: str) -> Path | None:
        found = _DIGEST.fullmatch(facts_sha256)
        return None if found is None else self.folder / f"{found.group(1)}.json"

    def find(self, facts_sha256: str) -> CarriedApproval | None:
        """The standing approval of these facts in this workspace, or None (then ask a person)."""
        path = self._path(facts_sha256)
        if path is None:
            return None
        try:
            entry = CarriedApproval.model_validate_json(read_nofollow(path))
        except FileNotFoundError:
            return None
        except (StoreError, ValidationError):
            return None  # damaged or planted: carries nothing, the person is asked (module docstring)
        if entry.workspace_key != self.workspace_key or entry.facts_sha256 != facts_sha256:
            return None
        return entry

    def record(self, request: ApprovalRequest, decision: ApprovalDecision) -> CarriedApproval | None:
        """Remember ``decision`` on ``request`` when it carries over (rules 1 and 2); returns the
        entry written, or None when nothing carries. The caller checks the run's origin."""
        if request.kind != "launch" or decision.decision != "approve":
            return None
        if decision.facts_sha256 != request.facts_sha256:
            return None  # the decider was shown other facts; wait_for_decision refuses it anyway
        path = self._path(request.facts_sha256)
        if path is None:
            return None
        entry = CarriedApproval(
            workspace_key=self.workspace_key,
            facts_sha256=request.facts_sha256,
            run_id=request.run_id,
            node=request.node,
            by=decision.by,
            decided_at=decision.at,
            via=decision.via,
        )
        self.layout.ensure(self.folder)
        atomic_write_json(path, entry.model_dump(mode="json"))
        return entry
