"""The exceptions a step call raises when the runner stops the run instead of answering.

They are ordinary :class:`Exception` subclasses raised by the call, so the script's own handlers
and ``finally`` blocks run (CAO's halt arrives in the script the same way, as an HTTP 409 error).
After a halt or a divergence the runner gives the script 5 s to exit; every later step call in
that time raises the same exception and launches nothing; then the runner stops the script's
process group. A blanket ``except Exception`` catches them too: re-raise :class:`RunStopped` (the
common base) first. Catching one changes nothing the runner decided (the halt, the divergence or
the cancel is already journaled, and the run ends ``needs_decision``, diverged or cancelled even
when the script exits 0), it only hides the reason from the script's own output.
"""

from __future__ import annotations

__all__ = ["RunStopped", "DecisionRequired", "ReplayDivergenceError", "RunCancelled"]


class RunStopped(Exception):
    """The runner stopped this run at a step call; do not catch it (``except RunStopped: raise``)."""


class DecisionRequired(RunStopped):
    """The runner halted the run at ``step``: its earlier attempt never settled, its stored result
    is unreadable, or it declared ``recovery="manual"``. A person decides with
    ``rho-notebook resume RUN --decide STEP=rerun|skip``. Do not catch it."""

    def __init__(self, step: str, why: str) -> None:
        self.step = step
        self.why = why
        super().__init__(
            f"step {step!r} needs a decision ({why}); the run stops here. Resume it with "
            f"`rho-notebook resume RUN --decide {step}=rerun` or `--decide {step}=skip`. "
            "Do not catch this exception: re-raise it from any blanket except."
        )

    def __reduce__(self) -> tuple[type[DecisionRequired], tuple[str, str]]:
        return (DecisionRequired, (self.step, self.why))


class ReplayDivergenceError(RunStopped):
    """The script changed at ``step``: the same key was called with execution-affecting inputs
    whose digest differs from the journaled one. The run fails; start a new run of the edited
    script, or make the script deterministic (docs/scripts.md). Do not catch it."""

    def __init__(self, step: str, stored_digest: str, digest: str) -> None:
        self.step = step
        self.stored_digest = stored_digest
        self.digest = digest
        super().__init__(
            f"step {step!r} diverged from the journal: it was run with inputs {stored_digest}, "
            f"this call has {digest}. The script is not the one that started this run, or it is not "
            "deterministic (clock, random numbers, unsorted sets, unstable step ids); start a new run. "
            "Do not catch this exception."
        )

    def __reduce__(self) -> tuple[type[ReplayDivergenceError], tuple[str, str, str]]:
        return (ReplayDivergenceError, (self.step, self.stored_digest, self.digest))


class RunCancelled(RunStopped):
    """The run was cancelled; the runner stops this process. Do not catch it."""

    def __init__(self, message: str = "the run was cancelled; the runner stops this script") -> None:
        super().__init__(message)
