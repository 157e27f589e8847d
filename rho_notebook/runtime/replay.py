"""Replay decisions: for every form, "take a stored result, run, halt or diverge".

Pure functions of what the journal (or the reuse index, or a ``try``'s source run) says, and of
the call or node at hand; the loops apply the verdicts (journal, launch, answer).

Script steps (the channel loop)
-------------------------------
Deciding one script step call: a pure function of the key's journaled history and this call.

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

Graph nodes (the DAG loop)
--------------------------
Of the nodes the scheduler would launch (:func:`split_launches`):

1. A node seeded by a ``try`` (``seeded``) **takes** its source attempt whatever its reuse flag
   (:func:`seed_verdict`); when the source run has no value to give it, the node **fails** at
   once, saying why (:class:`NoSeed`), and no process starts.
2. A node whose definition allows reuse (:func:`may_reuse`) and whose needs all succeeded is a
   candidate: with a verified entry under its reuse key it **takes** that stored success
   (:func:`reuse_verdict`); without one it **launches**, and its success is indexed under the key.
3. Every other node **launches** (no key).

:func:`node_records` turns a take or a failed seed into the records that finish the node without a
launch (``node_reused`` + ``node_finished``, or ``node_launched`` + a failed ``node_finished``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.graph import AgentNode, Node, PythonNode
from rho_notebook.model.run_state import NodeRecord
from rho_notebook.model.state import NodeState

if TYPE_CHECKING:
    from rho_notebook.runtime.reuse import Seed
    from rho_notebook.store.reuse import ReuseHit

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
    "LaunchNode",
    "NoSeed",
    "NodeVerdict",
    "TakeStored",
    "may_reuse",
    "node_records",
    "reusable",
    "reuse_verdict",
    "seed_verdict",
    "split_launches",
]

# -- script steps ----------------------------------------------------------------------------------

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


# -- graph nodes -----------------------------------------------------------------------------------


def may_reuse(node: Node) -> bool:
    """Whether ``node``'s definition allows reuse: a read-only Python or agent node with ``reuse = True``."""
    return isinstance(node, (PythonNode, AgentNode)) and node.reuse and node.access == "read_only"


def reusable(node: Node, states: Mapping[str, NodeState]) -> bool:
    """Whether ``node`` may take a stored success now: :func:`may_reuse`, and every need succeeded."""
    return may_reuse(node) and all(states.get(need) is NodeState.SUCCESS for need in node.needs)


@dataclass(frozen=True)
class TakeStored:
    """Finish the node with the stored success ``source`` = (run, node, attempt); nothing launches."""

    source: tuple[str, str, int]
    value_bytes: bytes | None
    """The source attempt's ``value.json`` bytes; None when it stored no value."""
    value: Any
    """Those bytes decoded (UNAVAILABLE when there are none)."""
    key: str | None
    """The reuse key it was found under; None for a ``try`` seed."""
    message: str


@dataclass(frozen=True)
class LaunchNode:
    """Launch the node; index its success under ``key`` (None: not reusable)."""

    key: str | None = None


@dataclass(frozen=True)
class NoSeed:
    """A ``try`` node whose source run has no value to give it: it fails at once, saying ``why``."""

    why: str


NodeVerdict = TakeStored | LaunchNode | NoSeed


def split_launches(
    names: list[str], *, nodes: Mapping[str, Node], states: Mapping[str, NodeState], seeded: Mapping[str, object]
) -> tuple[list[str], list[str]]:
    """(seeded, reuse candidates) among the nodes the scheduler would launch (rules 1 and 2)."""
    chosen = [name for name in names if name in seeded]
    candidates = [
        name
        for name in names
        if name not in seeded
        and may_reuse(node := nodes[name])
        and all(states[need] is NodeState.SUCCESS for need in node.needs)
    ]
    return chosen, candidates


def seed_verdict(seed: Seed | str) -> TakeStored | NoSeed:
    """Rule 1: take the seed's attempt, or fail saying why there is none."""
    if isinstance(seed, str):
        return NoSeed(seed)
    value: Any = UNAVAILABLE if seed.value_bytes is None else json.loads(seed.value_bytes)
    return TakeStored(
        source=(seed.run_id, seed.node, seed.attempt),
        value_bytes=seed.value_bytes,
        value=value,
        key=None,
        message=f"taken from run {seed.run_id} (node {seed.node}, attempt {seed.attempt}) for this try",
    )


def reuse_verdict(key: str, hit: ReuseHit | None, value: Any) -> TakeStored | LaunchNode:
    """Rule 2: a candidate with key ``key`` takes the verified ``hit`` (its decoded ``value``), or
    launches when there is none."""
    if hit is None:
        return LaunchNode(key)
    source = hit.entry
    return TakeStored(
        source=(source.run_id, source.node, source.attempt),
        value_bytes=hit.value_bytes,
        value=value,
        key=key,
        message=f"reused from run {source.run_id} (node {source.node}, attempt {source.attempt})",
    )


def node_records(verdict: TakeStored | NoSeed, run_id: str, name: str, number: int) -> list[dict[str, Any]]:
    """The records that finish attempt ``number`` of ``name`` without a launch."""
    if isinstance(verdict, NoSeed):
        return [
            event(EventKind.NODE_LAUNCHED, run_id, node=name, attempt=number),
            event(
                EventKind.NODE_FINISHED,
                run_id,
                node=name,
                attempt=number,
                state=NodeState.FAILURE.value,
                exit=None,
                message=f"{verdict.why}; no process was started",
            ),
        ]
    source_run, source_node, source_attempt = verdict.source
    return [
        event(
            EventKind.NODE_REUSED,
            run_id,
            node=name,
            attempt=number,
            source_run=source_run,
            source_node=source_node,
            source_attempt=source_attempt,
            reuse_key=verdict.key,
        ),
        event(
            EventKind.NODE_FINISHED,
            run_id,
            node=name,
            attempt=number,
            state=NodeState.SUCCESS.value,
            exit=None,
            message=verdict.message,
        ),
    ]
