"""Typed requests of the service verbs that carry a person's intent: consent, start, resume.

Consent is a value, not a flag scattered through front ends: :class:`Consent` says how one person
agreed to one exact graph digest (``--yes`` / ``yes=True`` at a prompt they answered, the digest
itself typed back, or a standing ``approve-plan`` record of that digest), and :meth:`Consent.check`
is the one rule every front end shares.
"""

from __future__ import annotations

from typing import Literal

from rho_notebook.errors import ConfirmationRequired
from rho_notebook.model.base import FrozenModel
from rho_notebook.service.flags import Decision

__all__ = ["Consent", "Mode", "Via", "StartRun", "ResumeRun", "normalize_digest"]

Mode = Literal["auto", "plan", "supervised"]
"""Permission mode for command launches, recorded in the run."""

Via = Literal["cli", "terminal", "notebook", "server", "mcp"]
"""How a run was started, recorded in its manifest (``via``)."""


def normalize_digest(given: str) -> str:
    """A typed-back digest with or without its ``sha256:`` prefix, as the canonical string."""
    given = given.strip()
    return given if given.startswith("sha256:") else "sha256:" + given


class Consent(FrozenModel):
    """How a person agreed to run one exact graph digest."""

    yes: bool = False
    """They said yes to the digest they were shown (``--yes``, ``yes=True``, a prompt answered y)."""
    digest: str | None = None
    """Or they typed the digest back (``confirm_digest=``, the server's ``graph_digest``)."""
    plan_approved: bool = False
    """Or the front end accepts a person's ``approve-plan`` record of the digest as the
    confirmation (headless ``run`` does, and says so); it covers that digest only."""
    hint: str = "pass --yes"
    """How this front end asks for consent, named in the refusal (e.g. ``send {"graph_digest": ...}``)."""

    def check(self, digest: str, *, what: str, approved_digest: str | None = None) -> None:
        """Refuse unless this consent covers ``digest``.

        ``approved_digest`` is the digest of the ``approve-plan`` record the service found for
        ``digest`` (None: there is none); it counts only when :attr:`plan_approved` accepts it.

        Raises
        ------
        ConfirmationRequired
            A typed-back digest differs from ``digest``, or there is no consent at all.
        """
        if self.digest is not None and self.digest.strip():
            given = normalize_digest(self.digest)
            if given != digest:
                msg = f"{what}: you confirmed digest {given}, but the graph digest is {digest}; nothing was started"
                raise ConfirmationRequired(msg)
            return
        if self.plan_approved and approved_digest is not None and approved_digest == digest:
            return
        if not self.yes:
            msg = f"{what} needs confirmation of graph digest {digest}: {self.hint.format(digest=digest)}"
            raise ConfirmationRequired(msg)


class StartRun(FrozenModel):
    """Create a run of a stored plan (ID or unique prefix) with consent for its digest."""

    plan: str
    consent: Consent
    mode: Mode = "auto"
    origin: Literal["cli", "notebook", "server", "mcp"] = "cli"
    """Which front end created the run (recorded in its manifest)."""
    via: Via | None = None
    """How the run was started (recorded in its manifest; None: the same as ``origin``)."""
    client: str | None = None
    """Runs started through MCP: the client's self-reported name (recorded in the manifest)."""
    reuse: bool = True
    """Take stored successes of unchanged ``reuse = True`` nodes (False: ``run --no-reuse``)."""
    seed_from: str | None = None
    """``try``: the run (ID or unique prefix) whose successful attempts of ``seed_nodes`` the new
    run takes instead of launching them."""
    seed_nodes: tuple[str, ...] = ()
    executor: str | None = None
    """Where remotable attempts run: ``local``, ``dask`` or ``dask=ADDRESS`` (None: local);
    recorded in the run manifest, never in the digest (docs/distributed.md)."""
    run_id: str | None = None
    """The new run's ID, chosen by the caller (``run --run-id``): a canonical UUIDv7 that no run
    has yet (None: a new one). Known before the run exists, so a caller can announce it."""


class ResumeRun(FrozenModel):
    """Resume a cancelled or interrupted run (ID or unique prefix) with consent for its digest."""

    run: str
    consent: Consent
    recover_uncertain: bool = False
    """After inspection: stop leftover processes and rerun attempts without a journaled result."""
    decisions: dict[str, Decision] = {}
    """A script run's ``--decide STEP=rerun|skip``: each authorises one call of that step (rerun:
    one new attempt; skip: its stored result is accepted)."""
    executor: str | None = None
    """``local``, ``dask`` or ``dask=ADDRESS`` for this resume (None: the run's recorded choice)."""
    follow_hint: str = ""
    """How this front end follows a run, said when a live owner already executes it
    (``follow it with workflow_wait(run_id=...)``); empty: nothing is added."""
