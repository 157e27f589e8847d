"""Plan approval (after CAO): an approval bound to a graph digest, not to a plan ID, so that
re-planning the same graph keeps it. Enforcement is off by default; ``"require_plan_approval":
true`` in user settings or ``RHO_NOTEBOOK_REQUIRE_PLAN_APPROVAL=1`` turns it on, and nothing turns
it off once either says so. Records are written once (O_EXCL) and never revoked:
``$RHO_NOTEBOOK_HOME/plan-approvals/<DIGEST_HEX>.json``.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from rho_notebook.errors import BadArgument, PlanNotApproved
from rho_notebook.model.base import FrozenModel
from rho_notebook.store.files import read_nofollow
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.settings import settings_documents

__all__ = ["PlanApproval", "PlanApprovals", "ENV_REQUIRE"]

ENV_REQUIRE = "RHO_NOTEBOOK_REQUIRE_PLAN_APPROVAL"

_GRAPH_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class PlanApproval(FrozenModel):
    graph_digest: str
    by: str
    at: str
    plan_id: str | None = None
    """The plan the approver looked at (informational; the approval binds the digest)."""


class PlanApprovals:
    def __init__(self, layout: StoreLayout) -> None:
        self.layout = layout

    @property
    def folder(self) -> Path:
        return self.layout.home / "plan-approvals"

    def _path(self, digest: str) -> Path:
        """The record of ``digest``; anything but ``sha256:`` and 64 lower-case hex digits is refused
        (a ``/`` or ``..`` in it would name a file outside the folder).

        Raises BadArgument: ``digest`` is not a graph digest."""
        if _GRAPH_DIGEST.fullmatch(digest) is None:
            msg = (
                f"{digest!r} is not a graph digest: write sha256: and its 64 hex digits, as `plans` and `plan` show it"
            )
            raise BadArgument(msg)
        return self.folder / f"{digest.removeprefix('sha256:')}.json"

    def required(self) -> bool:
        if os.environ.get(ENV_REQUIRE, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
        for doc in settings_documents(self.layout.home, None, trusted=False):
            if doc.data.get("require_plan_approval") is True:
                return True
        return False

    def get(self, digest: str) -> PlanApproval | None:
        try:
            return PlanApproval.model_validate_json(read_nofollow(self._path(digest)))
        except FileNotFoundError:
            return None

    def approve(self, digest: str, *, by: str, plan_id: str | None) -> tuple[PlanApproval, bool]:
        """Record an approval; returns (the record that stands, whether it is new)."""
        existing = self.get(digest)
        if existing is not None:
            return existing, False
        self.layout.ensure(self.folder)
        record = PlanApproval(
            graph_digest=digest, by=by, at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), plan_id=plan_id
        )
        try:
            fd = os.open(self._path(digest), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            found = self.get(digest)
            if found is None:
                raise
            return found, False
        try:
            os.write(fd, record.model_dump_json().encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return record, True

    def check(self, digest: str) -> PlanApproval | None:
        """Raise PlanNotApproved when enforcement is on and ``digest`` has no approval."""
        record = self.get(digest)
        if record is None and self.required():
            msg = (
                f"plan approval is required and graph digest {digest} has none; a person must run "
                f"`rho-notebook approve-plan {digest}` first"
            )
            raise PlanNotApproved(msg)
        return record
