"""Forks of script and flow runs at a step key (issue 35, docs/fork.md#scripts-flows-and-item-graphs).

A script run has no graph of nodes to cut: its steps are the calls its script made, in the order
its journal shows them. A fork at step KEY is a new run of the same script whose journal starts
with

* every step launched before KEY in the source run (in the source journal's order of first
  launches), *taken*: its successful attempt's ``{"output", "value"}`` copied into the fork's own
  folder, journaled as ``node_launched`` (with the source's step record and ``taken_from``: the
  source run, step and attempt) and a successful ``node_finished``; no process starts;
* KEY, when the person gave a value, *edited*: the same two records with ``edited`` (who, via,
  the value's digest; the record's ``at`` says when) in place of ``taken_from``; without a value KEY is not journaled at all.

The script then runs from the top as a resume does (:mod:`rho_notebook.runtime.replay`): a taken
step's call is **replayed** from the fork's copy (``step_replayed``; nothing runs), KEY replays the
edit, and every later step has no history in the fork, so it is **executed**. A taken call whose
request changed (an input, the script) **diverges**, as any replay does.

Why ``node_launched``, not ``node_reused``: a script step's node exists only once it launched (the
run state folds it from ``node_launched``'s ``step``), and its value must be the fork's own copy
(``value_sources`` of a reused attempt point at the source run), so deleting or pruning the source
run never breaks the fork. ``taken_from``/``edited`` (named as a graph fork's ``node_reused``
names them) say that nothing ran.

:func:`fork_script_record` checks the fork and builds the frozen :class:`ForkRecord` the derived
plan carries (its digest is what a person consents to); :func:`copy_script_values` journals the
fork's first records after the run is created, before its owner starts. When they are missing
(a crash in between, or a front end that created the run from the derived plan alone), the owner
takes each such step when its call comes (:func:`take_step`), checked against the record's
digests; when the source run is gone or changed by then, the step fails and nothing is launched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from rho_notebook.errors import ForkRefused, RhoError
from rho_notebook.exec.base import JOURNALED_VALUE_BYTES
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.fork import (
    ForkEdit,
    ForkRecord,
    TakenAttempt,
    canonical_json,
    edit_of,
    value_digest,
    value_named,
)
from rho_notebook.model.graph import Graph
from rho_notebook.model.run_state import RunState
from rho_notebook.model.schema import validate_value
from rho_notebook.model.state import Lifecycle, NodeState, not_completed
from rho_notebook.runtime.script_attempts import STEP_VALUE_FIELD
from rho_notebook.runtime.status import journal_state
from rho_notebook.store.files import atomic_write_json, ensure_private_dir, read_nofollow
from rho_notebook.store.layout import VALUE_FILE, StoreLayout
from rho_notebook.store.runs import RunFolder, RunStore

__all__ = [
    "PlannedFork",
    "SourceStep",
    "copy_script_values",
    "edited_payload",
    "fork_script_record",
    "planned_fork",
    "source_steps",
    "take_step",
]


@dataclass(frozen=True)
class SourceStep:
    """A step of the source run as the fork takes it."""

    key: str
    attempt: int
    step: dict[str, Any]
    """The step record of its latest ``node_launched`` (kind, digest, facts, after, recovery, args)."""
    exit: dict[str, Any] | None
    payload: dict[str, Any]
    """Its stored ``{"output", "value"}``."""

    @property
    def digest(self) -> str:
        """Digest of the payload as canonical JSON (the same whichever copy it was read from)."""
        return value_digest(canonical_json(self.payload).encode())


def _refuse(message: str, key: str) -> ForkRefused:
    return ForkRefused(message, node=key)


def _completed_state(layout: StoreLayout, run_id: str) -> RunState:
    state = journal_state(layout, run_id)
    if state.damage is not None:
        msg = f"run {run_id} is damaged ({state.damage}); nothing can be taken from it"
        raise _refuse(msg, "")
    if state.lifecycle is not Lifecycle.COMPLETED:
        raise _refuse(not_completed(run_id, state.lifecycle, action="fork"), "")
    return state


def _step_order(state: RunState, run_id: str, at: str) -> list[str]:
    """The source run's step keys in its journal's order of first launches, up to ``at`` (excluded)."""
    keys = [key for key, record in state.nodes.items() if record.step is not None]
    if at not in keys:
        shown = ", ".join(keys[:20]) + (", ..." if len(keys) > 20 else "")
        msg = f"run {run_id} has no step {at!r}; its steps, in the order they were called: {shown or '(none)'}"
        raise _refuse(msg, at)
    return keys[: keys.index(at)]


def _stored_payload(folder: RunFolder, key: str, attempt: int) -> dict[str, Any] | None:
    """The ``{"output", "value"}`` attempt ``attempt`` of ``key`` stored: its ``value.json``, else the
    copy its ``node_finished`` journaled (a small value whose file a crash lost)."""
    path = folder.attempt_dir(key, attempt) / VALUE_FILE
    try:
        found = json.loads(read_nofollow(path))
    except (OSError, RhoError, ValueError):
        found = folder.journaled_step_value(path)
    return found if isinstance(found, dict) else None


def source_steps(layout: StoreLayout, run_id: str, at: str) -> tuple[list[SourceStep], dict[str, Any]]:
    """(the steps a fork of ``run_id`` at ``at`` takes, in journal order; ``at``'s step record).

    Raises
    ------
    ForkRefused
        The run is not completed or is damaged, has no step ``at``, or a step before it did not
        succeed or has no readable value (each named).
    """
    state = _completed_state(layout, run_id)
    folder = RunStore(layout).folder(run_id)
    taken: list[SourceStep] = []
    for key in _step_order(state, run_id, at):
        record = state.nodes[key]
        current = record.current
        if record.state is not NodeState.SUCCESS or current is None or record.step is None:
            msg = (
                f"step {key!r}, called before {at!r}, ended {record.state.value} in run {run_id}: a fork takes "
                f"only steps that succeeded; fork at {key!r} instead"
            )
            raise _refuse(msg, key)
        payload = _stored_payload(folder, key, current.number)
        if payload is None:
            msg = f"the stored value of step {key!r} (attempt {current.number}) in run {run_id} cannot be read"
            raise _refuse(msg, key)
        taken.append(SourceStep(key, current.number, dict(record.step), current.exit, payload))
    step = state.nodes[at].step
    return taken, dict(step or {})


def _schema_of(key: str, args: dict[str, Any]) -> Any:
    from rho_notebook.planning.normalize import to_schema

    raw = args.get("output")
    if raw is None:
        return None
    try:
        return to_schema(raw if isinstance(raw, dict) else {"type": None})
    except (KeyError, TypeError, ValueError, ValidationError) as err:
        raise _refuse(f"step {key!r}: its output schema cannot be read ({err})", key) from None


def edited_payload(key: str, step: dict[str, Any], value: Any, *, via: str = "cli") -> dict[str, Any]:
    """The ``{"output", "value"}`` a step call gets when a person gave ``value`` for step ``key``
    (``step``: its journaled record) through front end ``via`` (how a refusal names the value).

    A step with an output schema (``output=``) takes ``value`` as both, checked against the schema;
    any other step's edited value is its output text (a string): a command step's ``value`` is then
    ``{"exit_code": 0, "stdout": TEXT, "stderr": ""}``, a model step with tools
    ``{"content": TEXT, "tool_calls": []}``, an agent or model step's None, as when they run.

    Raises
    ------
    ForkRefused
        The value does not match the schema (the first mismatch names the field), or is not text
        for a step without one, or the step's arguments were too big to be journaled.
    """
    args = step.get("args")
    if not isinstance(args, dict):
        msg = (
            f"step {key!r}: its arguments were too big to be journaled, so its output cannot be checked; "
            "fork at it without a value (it runs again)"
        )
        raise _refuse(msg, key)
    schema = _schema_of(key, args)
    if schema is not None:
        problems = validate_value(schema, value, where="$")
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            where = problems[0].split(":", 1)[0].removeprefix("$").removeprefix(".")
            message = f"the value for step {key!r} does not match its output schema: {problems[0]}{more}"
            raise ForkRefused(message, node=key, fields=(where,) if where else ())
        return {"output": value, "value": value}
    if not isinstance(value, str):
        how = "--value '\"...\"'" if value_named(via) == "--value" else value_named(via)
        msg = (
            f"step {key!r} has no output schema: its value is its output text, a JSON string "
            f"({how}), not {type(value).__name__}"
        )
        raise _refuse(msg, key)
    if step.get("kind") == "command":
        return {"output": value, "value": {"exit_code": 0, "stdout": value, "stderr": ""}}
    if step.get("kind") == "model" and args.get("tools") is not None:
        return {"output": value, "value": {"content": value, "tool_calls": []}}
    return {"output": value, "value": None}


def fork_script_record(
    layout: StoreLayout, run_id: str, graph: Graph, *, at: str, value: Any, has_value: bool, by: str, via: str
) -> ForkRecord:
    """The fork record of a fork of script (or flow) run ``run_id`` (its frozen graph ``graph``) at
    step key ``at``: the steps before it taken, and ``value`` (when ``has_value``) as its edit.

    Checks everything before anything is stored: the run completed, ``at`` is one of its steps,
    each step before it succeeded and its value reads, and ``value`` fits step ``at``
    (:func:`edited_payload`). Changes nothing.

    Raises
    ------
    ForkRefused
        As :func:`source_steps` and :func:`edited_payload` say, or ``graph`` is not a script's.
    """
    if graph.script is None:
        raise _refuse(f"run {run_id} is not a script or flow run; fork it at a node", at)
    taken, step = source_steps(layout, run_id, at)
    edit: ForkEdit | None = None
    if has_value:
        edited_payload(at, step, value, via=via)
        try:
            edit = edit_of(value, by=by, via=via)
        except ValueError as err:
            raise _refuse(f"the value for step {at!r} is not JSON data: {err}", at) from None
    attempts = [
        TakenAttempt(node=s.key, attempt=s.attempt, value_digest=s.digest, exit_code=_exit_code(s.exit)) for s in taken
    ]
    return ForkRecord(
        source_run=run_id,
        source_digest=RunStore(layout).manifest(run_id).graph_digest,
        node=at,
        taken=tuple(sorted(attempts, key=lambda t: t.node)),
        edit=edit,
    )


def _exit_code(record: dict[str, Any] | None) -> int | None:
    code = record.get("code") if isinstance(record, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _as_planned(layout: StoreLayout, record: ForkRecord) -> tuple[list[SourceStep], dict[str, Any]]:
    """The source steps ``record`` takes, in journal order, each checked to be the attempt and
    value the fork was planned with, and the fork step's record.

    Raises
    ------
    ForkRefused
        One changed or is gone (as :func:`source_steps` refuses too).
    """
    steps, at_step = source_steps(layout, record.source_run, record.node)
    wanted = {t.node: t for t in record.taken}
    chosen = [s for s in steps if s.key in wanted]
    for s in chosen:
        if wanted[s.key].attempt != s.attempt or wanted[s.key].value_digest != s.digest:
            msg = f"step {s.key!r} of run {record.source_run} changed since the fork was planned; plan the fork again"
            raise _refuse(msg, s.key)
    if len(chosen) != len(wanted):
        missing = sorted(set(wanted) - {s.key for s in chosen})
        msg = f"run {record.source_run} no longer has step(s) {', '.join(missing)} before {record.node!r}"
        raise _refuse(msg, missing[0])
    return chosen, at_step


@dataclass(frozen=True)
class PlannedFork:
    """What a fork takes from its source run, read once and checked against its record."""

    record: ForkRecord
    steps: dict[str, SourceStep]
    """The taken steps by key, in the source journal's order."""
    at_step: dict[str, Any]
    """The fork step's record in the source run."""


def planned_fork(layout: StoreLayout, record: ForkRecord) -> PlannedFork:
    """The source steps of ``record``, checked (:func:`_as_planned`); raises ForkRefused."""
    chosen, at_step = _as_planned(layout, record)
    return PlannedFork(record, {s.key: s for s in chosen}, at_step)


def take_step(
    planned: PlannedFork, folder: RunFolder, run_id: str, key: str, digest: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the records that take step ``key`` into fork ``run_id`` now, its payload), its value copied
    into ``folder`` first: the owner's fallback when the fork's copies were never journaled
    (:class:`~rho_notebook.runtime.script_attempts.StepAttempts`). ``digest`` is the call's: it
    must be the one the source run journaled, as a replay requires.

    Raises
    ------
    ForkRefused
        The call changed (its digest is not the source's).
    """
    record = planned.record
    edited = record.edit is not None and key == record.node
    source = planned.steps.get(key)
    step = planned.at_step if edited else (source.step if source is not None else {})
    if step.get("digest") != digest:
        msg = f"the call of step {key!r} is not the one run {record.source_run} made (its digest changed)"
        raise _refuse(msg, key)
    if record.edit is not None and edited:
        payload = edited_payload(key, step, json.loads(record.edit.value_json))
        return _edited_records(folder, run_id, key, step, payload, record.edit), payload
    if source is None:  # (not a taken key: the caller asks only for taken ones)
        raise _refuse(f"step {key!r} is not taken from run {record.source_run}", key)
    return _taken_records(folder, run_id, source, record.source_run), source.payload


def copy_script_values(layout: StoreLayout, fork_run_id: str, record: ForkRecord) -> None:
    """Journal the fork's taken and edited steps into the new run ``fork_run_id`` (created, not
    started), their values copied into its folder first (durably), so its owner replays them.

    Called once, after the run is created and before its owner starts. Fails closed: a taken
    value that changed in the source run since the fork was planned (its digest differs), a
    source that no longer reads, or a run that is already started or owned is refused and nothing
    is journaled.

    Raises
    ------
    ForkRefused
        As said above.
    """
    chosen, at_step = _as_planned(layout, record)
    edited = None if record.edit is None else edited_payload(record.node, at_step, json.loads(record.edit.value_json))
    store = RunStore(layout)
    folder = store.folder(fork_run_id)

    def steps() -> list[dict[str, Any]]:
        state = journal_state(layout, fork_run_id)
        if state.lifecycle is not Lifecycle.PLANNED or state.nodes:
            msg = f"run {fork_run_id} has started or has steps already; a fork's steps are written once"
            raise _refuse(msg, record.node)
        records = [r for s in chosen for r in _taken_records(folder, fork_run_id, s, record.source_run)]
        if record.edit is not None and edited is not None:
            records += _edited_records(folder, fork_run_id, record.node, at_step, edited, record.edit)
        return records

    if not store.append_unowned(fork_run_id, steps):
        raise _refuse(f"run {fork_run_id} is owned by a live process; its taken steps cannot be written", record.node)


def _write_value(folder: RunFolder, key: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Write ``payload`` as attempt 1's ``value.json``; the ``node_finished`` fields that carry it
    inline when it is small, as an executed step's (its file is then a copy written without an
    fsync, which a replay does without when a crash lost it: runtime/script_values.py); a bigger
    one is written durably, before the journal refers to it."""
    attempt_dir = folder.attempt_dir(key, 1)
    ensure_private_dir(attempt_dir, below=folder.path)
    small = len(canonical_json(payload).encode()) <= JOURNALED_VALUE_BYTES
    atomic_write_json(attempt_dir / VALUE_FILE, payload, durable=not small)
    return {STEP_VALUE_FIELD: payload} if small else {}


def _taken_records(folder: RunFolder, run_id: str, source: SourceStep, source_run: str) -> list[dict[str, Any]]:
    inline = _write_value(folder, source.key, source.payload)
    taken = {"run": source_run, "node": source.key, "attempt": source.attempt}
    message = (
        f"taken from run {source_run} (step {source.key}, attempt {source.attempt}), its value copied into run "
        f"{run_id}; not launched"
    )
    return [
        event(EventKind.NODE_LAUNCHED, run_id, node=source.key, attempt=1, step=source.step, taken_from=taken),
        event(
            EventKind.NODE_FINISHED,
            run_id,
            node=source.key,
            attempt=1,
            state=NodeState.SUCCESS.value,
            exit=source.exit,
            message=message,
            **inline,
        ),
    ]


def _edited_records(
    folder: RunFolder, run_id: str, key: str, step: dict[str, Any], payload: dict[str, Any], edit: ForkEdit
) -> list[dict[str, Any]]:
    inline = _write_value(folder, key, payload)
    edited = {"by": edit.by, "via": edit.via, "value_digest": edit.value_digest}
    message = f"edited by {edit.by} via {edit.via} (value {edit.value_digest[:19]}, kept in run {run_id}); not launched"
    return [
        event(EventKind.NODE_LAUNCHED, run_id, node=key, attempt=1, step=step, edited=edited),
        event(
            EventKind.NODE_FINISHED,
            run_id,
            node=key,
            attempt=1,
            state=NodeState.SUCCESS.value,
            exit=None,
            message=message,
            **inline,
        ),
    ]
