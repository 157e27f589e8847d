"""Deciding one script step call: a pure function of the key's journaled history and this call.

A script run re-executes its script from the top on every resume; each step call that reaches
the runner is decided by :func:`decide_call` from what the journal says about that step key (its
attempts, whether each settled and how, whether a success's value can be read, the digest of its
execution-affecting inputs), the call's own digest and declared recovery, and this execution's
``--decide`` for the key (None until a person gave one; the driver passes it only until one
attempt used it). The rules, in order:

1. A key that never launched is **executed** (a decision for it is not needed and not used).
2. A key whose stored digest differs from the call's **diverges**: the script changed at that key
   and no decision overrides it (the run fails naming both digests).
3. A decision decides: ``rerun`` **executes** one new attempt, ``skip`` **skips** (the stored
   attempt is answered as a replay, whatever it holds; its value when there is one).
4. The last attempt succeeded and its value is readable: **replay** it (nothing runs).
5. It succeeded but its value cannot be read: **halt** (``its stored result cannot be read``).
6. It never settled (the owner died while it ran): **execute** when the step declared
   ``recovery="rerun"``, else **halt** (``started and never settled``).
7. It settled as a failure, denial or cancellation: ``recovery="manual"`` **halts** (the author
   asked to see any re-execution), otherwise it is **executed** again, as a graph resume re-runs
   failed nodes.

``recovery="manual"`` never stops a replay: replaying a success runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rho_notebook.model.run_state import NodeRecord
from rho_notebook.model.state import NodeState

__all__ = [
    "Decision",
    "Diverge",
    "Execute",
    "Halt",
    "Replay",
    "Skip",
    "StepAttempt",
    "StepHistory",
    "Verdict",
    "decide_call",
    "NEVER_SETTLED",
    "UNREADABLE",
    "MANUAL",
]

Decision = Literal["rerun", "skip"]

NEVER_SETTLED = "started and never settled"
UNREADABLE = "its stored result cannot be read"
MANUAL = 'recovery="manual"'
"""How the why of a rule-7 halt begins: the step settled and its author asked to decide any rerun."""


@dataclass(frozen=True)
class StepAttempt:
    """One journaled attempt of a step key."""

    number: int
    state: str | None
    """Terminal node state it settled in; None when it never settled."""
    readable: bool = False
    """Whether its stored value (value.json) could be read (only asked of a settled last attempt)."""


@dataclass(frozen=True)
class StepHistory:
    """What the journal says about one step key."""

    digest: str | None = None
    """Digest of the execution-affecting inputs of its latest launch; None when it never launched."""
    attempts: tuple[StepAttempt, ...] = ()

    @classmethod
    def of(cls, record: NodeRecord | None, *, readable: Callable[[int], bool]) -> StepHistory:
        """The history of a node record (None: the key is new); ``readable(attempt)`` is asked
        only for the last attempt, when it settled."""
        if record is None or not record.attempts:
            return cls()
        attempts = [StepAttempt(number=a.number, state=a.state) for a in record.attempts]
        last = attempts[-1]
        if last.state is not None:
            attempts[-1] = StepAttempt(number=last.number, state=last.state, readable=readable(last.number))
        digest = record.step.get("digest") if record.step is not None else None
        return cls(digest=digest if isinstance(digest, str) else None, attempts=tuple(attempts))


@dataclass(frozen=True)
class Replay:
    """Answer from the stored success ``attempt``; nothing runs."""

    attempt: int


@dataclass(frozen=True)
class Execute:
    """Launch a new attempt; ``decided`` when a person's ``rerun`` authorised it (used up)."""

    decided: bool = False


@dataclass(frozen=True)
class Skip:
    """A person's ``skip``: answer from the stored ``attempt`` (its value when ``readable``)."""

    attempt: int
    readable: bool


@dataclass(frozen=True)
class Halt:
    """The runner will not decide this call alone: the run stops and needs a decision."""

    why: str


@dataclass(frozen=True)
class Diverge:
    """The key ran before with other execution-affecting inputs."""

    stored_digest: str


Verdict = Replay | Execute | Skip | Halt | Diverge


def decide_call(history: StepHistory, digest: str, recovery: str | None, decision: Decision | None) -> Verdict:
    """The verdict for one step call (the rules are in the module docstring).

    Parameters
    ----------
    history
        The key's journaled attempts and stored digest.
    digest
        The call's execution-affecting digest.
    recovery
        The call's declared recovery: None, ``"rerun"`` or ``"manual"``.
    decision
        This execution's unused ``--decide`` for the key, or None.
    """
    if not history.attempts:
        return Execute()
    if history.digest is not None and history.digest != digest:
        return Diverge(stored_digest=history.digest)
    last = history.attempts[-1]
    if decision == "rerun":
        return Execute(decided=True)
    if decision == "skip":
        return Skip(attempt=last.number, readable=last.readable)
    if last.state == NodeState.SUCCESS.value:
        return Replay(attempt=last.number) if last.readable else Halt(why=UNREADABLE)
    if last.state is None:
        return Execute() if recovery == "rerun" else Halt(why=NEVER_SETTLED)
    if recovery == "manual":
        return Halt(why=f"{MANUAL}: attempt {last.number} ended in {last.state}; decide whether to rerun it")
    return Execute()
