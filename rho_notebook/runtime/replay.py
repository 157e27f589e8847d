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

Forks (docs/fork.md)
--------------------
A fork's graph carries a :class:`~rho_notebook.model.fork.ForkRecord`; its seeds
(:func:`fork_seeds`) are the taken nodes and the edited node, each from a copy written into the
fork's own folder (:func:`fork_copies`: from the source run, checked against the digest the person
consented to, or the edited value from the record), so the fork never reads the source run after
that. :func:`fork_verdict` takes such a seed: ``node_reused`` names the copy and carries
``taken_from`` (or ``edited``), ``node_finished`` the source attempt's exit code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rho_notebook.errors import RhoError
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.fork import ForkRecord, value_digest
from rho_notebook.model.graph import AgentNode, Graph, Node, PythonNode
from rho_notebook.model.run_state import NodeRecord
from rho_notebook.model.state import NodeState
from rho_notebook.oshelpers import read_regular_nofollow
from rho_notebook.store.files import atomic_write
from rho_notebook.store.layout import VALUE_FILE, StoreLayout
from rho_notebook.store.runs import RunFolder

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
    "FORK_COPY_ATTEMPT",
    "SourceValue",
    "fork_copies",
    "source_values",
    "fork_seeds",
    "fork_verdict",
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
    exit_code: int | None = None
    """A fork's taken node: its source attempt's exit code (``exit_code(NODE)`` conditions see it)."""
    provenance: tuple[tuple[str, Any], ...] = ()
    """A fork's taken or edited node: extra fields of its ``node_reused`` record (``taken_from``,
    ``edited``); readers that do not know them ignore them."""


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


def seed_verdict(seed: Seed | str, fork: ForkRecord | None = None) -> TakeStored | NoSeed:
    """Rule 1: take the seed's attempt, or fail saying why there is none. ``fork``: the run is a
    fork (the graph's record), whose seeds are its own copies (:func:`fork_seeds`)."""
    if isinstance(seed, str):
        return NoSeed(seed)
    value: Any = UNAVAILABLE if seed.value_bytes is None else json.loads(seed.value_bytes)
    if fork is not None:
        return fork_verdict(
            fork, seed.node, source=(seed.run_id, seed.node, seed.attempt), value_bytes=seed.value_bytes, value=value
        )
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
    code = verdict.exit_code
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
            **dict(verdict.provenance),
        ),
        event(
            EventKind.NODE_FINISHED,
            run_id,
            node=name,
            attempt=number,
            state=NodeState.SUCCESS.value,
            exit=None if code is None else {"kind": "exit", "code": code, "signal": None},
            message=verdict.message,
        ),
    ]


# -- forks (docs/fork.md) --------------------------------------------------------------------------

FORK_COPY_ATTEMPT = 1
"""The attempt folder of a fork's own run that holds the copy of a taken (or edited) node's value:
the attempt a fresh fork's take is, so readers find the value where a launched attempt's would be."""


def fork_verdict(
    fork: ForkRecord, name: str, *, source: tuple[str, str, int], value_bytes: bytes | None, value: Any
) -> TakeStored:
    """Take a fork node's copied value: the source attempt (the fork's own copy) and, in the
    journal, where it came from (``taken_from``) or the person's edit (``edited``)."""
    edit = fork.edit if name == fork.node else None
    taken = {t.node: t for t in fork.taken}.get(name)
    extra: dict[str, Any]
    if edit is not None:
        extra = {"edited": {"by": edit.by, "via": edit.via, "value_digest": edit.value_digest}}
        message = f"edited by {edit.by} via {edit.via} (value {edit.value_digest[:19]}, kept in run {source[0]}); not launched"
        code = None
    else:
        attempt = taken.attempt if taken is not None else 0
        extra = {"taken_from": {"run": fork.source_run, "node": name, "attempt": attempt}}
        message = f"taken from run {fork.source_run} (node {name}, attempt {attempt}), its value copied into run {source[0]}; not launched"
        code = taken.exit_code if taken is not None else None
    return TakeStored(
        source=source,
        value_bytes=value_bytes,
        value=value,
        key=None,
        message=message,
        exit_code=code,
        provenance=tuple(extra.items()),
    )


@dataclass(frozen=True)
class SourceValue:
    """A node's successful attempt in a fork's source run, and its value's bytes."""

    attempt: int
    value_bytes: bytes | None
    """None when the attempt stored no value."""
    exit_code: int | None


def source_values(layout: StoreLayout, run_id: str, names: tuple[str, ...]) -> dict[str, SourceValue | str]:
    """For each of ``names``: its successful attempt in run ``run_id`` and the bytes of its value
    (read where the run's journal says it is: a reused attempt's is its source's), or why there
    is none. The same bytes for the same run every time: a fork digests them when it is planned
    and checks them when it copies them."""
    from rho_notebook.runtime.status import journal_state  # status imports the reuse module, which imports this one

    state = journal_state(layout, run_id)
    if state.damage is not None:
        return dict.fromkeys(names, f"run {run_id} is damaged ({state.damage}); no value is taken from it")
    where = state.value_sources()
    found: dict[str, SourceValue | str] = {}
    for name in names:
        record = state.nodes.get(name)
        if name not in where or record is None:
            how = "is not in it" if record is None else f"ended {record.state.value}"
            found[name] = f"node {name!r} did not succeed in run {run_id} ({how})"
            continue
        run, node, attempt = where[name]
        path = RunFolder(layout.run_dir(run)).attempt_dir(node, attempt) / VALUE_FILE
        data = _read_copy(path)
        if data is None:
            journaled = RunFolder(layout.run_dir(run)).journaled_step_value(path)
            data = None if journaled is None else json.dumps(journaled).encode()
        found[name] = SourceValue(attempt=record.attempt, value_bytes=data, exit_code=record.exit_code())
    return found


def fork_copies(layout: StoreLayout, run_id: str, fork: ForkRecord) -> dict[str, bytes | str | None]:
    """Write (once) the values a fork takes into its own run folder, and return them: node -> the
    bytes (None: the source attempt stored no value), or why the value cannot be had. A taken
    value is read from the source run and checked against the digest the person consented to;
    the edited value comes from the record itself. Copies already written are read back, so the
    source run may be deleted once the fork has been created."""
    folder = RunFolder(layout.run_dir(run_id))
    wanted: dict[str, str | None] = {t.node: t.value_digest for t in fork.taken}
    if fork.edit is not None:
        wanted[fork.node] = fork.edit.value_digest
    found: dict[str, bytes | str | None] = {}
    missing: list[str] = []
    for name, digest in wanted.items():
        data = None if digest is None else _read_copy(folder.attempt_dir(name, FORK_COPY_ATTEMPT) / VALUE_FILE)
        if digest is None or data is not None:
            found[name] = data
        elif fork.edit is not None and name == fork.node:
            found[name] = fork.edit.value_json.encode()
        else:
            missing.append(name)
    try:
        sources: dict[str, SourceValue | str] = (
            source_values(layout, fork.source_run, tuple(missing)) if missing else {}
        )
    except (RhoError, OSError) as err:
        sources = dict.fromkeys(missing, f"run {fork.source_run} cannot be read ({err})")
    for name in missing:
        got = sources[name]
        found[name] = got if isinstance(got, str) else got.value_bytes
    for name, got_bytes in found.items():
        copy = folder.attempt_dir(name, FORK_COPY_ATTEMPT) / VALUE_FILE
        if not isinstance(got_bytes, bytes) or _read_copy(copy) is not None:
            continue
        if value_digest(got_bytes) != wanted[name]:
            found[name] = f"the value of node {name!r} in run {fork.source_run} changed since the fork was planned"
            continue
        _write_copy(layout, copy, got_bytes)
    return found


def _read_copy(path: Path) -> bytes | None:
    try:
        return read_regular_nofollow(path)
    except OSError:
        return None


def _write_copy(layout: StoreLayout, path: Path, data: bytes) -> None:
    """A private, durable copy (``nodes/<node>/attempts/1/value.json``, folders 0700, file 0600)."""
    for parent in reversed(path.parents[:3]):
        layout.ensure(parent)
    atomic_write(path, data)


def fork_seeds(layout: StoreLayout, run_id: str, graph: Graph) -> dict[str, Seed | str]:
    """A graph fork's seeds: every taken node and the edited node, each from its copy in the fork's
    own folder (:func:`fork_copies`), or why it has none (the node then fails without a launch).
    Empty for a run that is not a graph fork (script forks replay their own way)."""
    from rho_notebook.runtime.reuse import Seed  # reuse imports this module

    fork = graph.fork
    if fork is None or graph.script is not None:
        return {}
    found: dict[str, Seed | str] = {}
    for name, data in fork_copies(layout, run_id, fork).items():
        found[name] = data if isinstance(data, str) else Seed(run_id, name, FORK_COPY_ATTEMPT, data)
    return found
