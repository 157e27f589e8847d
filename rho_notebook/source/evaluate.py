"""Evaluating workflow source in the supervised planning worker (the parent side of the channel).

The parent owns everything the worker may not do: it reads modules (label rules, no symlinks),
validates inputs against the declaration, enforces the wall-time budget by killing the worker,
and turns worker diagnostics into :mod:`rho_notebook.errors` with file:line:column.

:func:`talk_to_worker` is the one way to run a worker (planning here, item-graph code steps in
:mod:`rho_notebook.source.code_step`): the process's warm worker when it keeps one
(:mod:`rho_notebook.source.warm`), else a fresh process for the request; stopped at the wall
budget, and killed and reaped however a fresh worker's conversation ends, cancellation included.

A process that keeps a warm worker also keeps its last few evaluations (:func:`evaluate_source`):
evaluation is a function of the source texts, the inputs build() receives and the limits alone
(the worker reads no file, clock, environment or randomness on Starlark's behalf), so ``validate``
then ``plan`` of unchanged sources evaluates once. A kept evaluation is used only after every
module it loaded has been read again through this request's reader and found unchanged, and the
request's inputs have been checked against its declaration and give the same values.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rho_notebook.errors import Diagnostic, InvalidWorkflow, LimitError, RhoError, SourceError, WorkerStopped
from rho_notebook.source.labels import SourceReader, SourceText
from rho_notebook.source.limits import Limits
from rho_notebook.source.warm import talk_in_worker, warm_pool
from rho_notebook.source.workers import WORKER_PATH, PipeChannel

__all__ = [
    "Evaluation",
    "evaluate_source",
    "forget_evaluations",
    "WORKER_PATH",
    "InputChecker",
    "WorkerChannel",
    "talk_to_worker",
]

_T = TypeVar("_T")

WorkerChannel = PipeChannel
"""The parent's end of a worker's channel: ``await send(frame)``, ``await receive()``."""

InputChecker = Callable[[dict[str, Any]], dict[str, Any]]
"""Validates the declared inputs (raw tagged dict) and returns the values build() receives;
raises InvalidWorkflow (InputError) on missing, unknown or wrong-typed inputs."""


@dataclass
class Evaluation:
    """What one evaluation returned: the raw tagged graph and everything needed to freeze it."""

    graph: dict[str, Any]
    declared_inputs: dict[str, Any]
    input_values: dict[str, Any]
    sources: list[SourceText]
    """Every module evaluated, entry first, then in load order."""
    stats: dict[str, int] = field(default_factory=dict)
    memo: dict[Any, Any] = field(default_factory=dict)
    """What the planner derived from this evaluation (the graph rules' node drafts, the frozen
    command nodes, the last sealed graph's canonical bytes), kept with it by a warm process: a
    reuse of the evaluation reuses them too. A value put there is never changed; an entry may be
    replaced by a newer one (each use checks that what it keeps still applies)."""

    def display(self, label: str | None) -> str | None:
        for source in self.sources:
            if source.label == label:
                return source.display
        return label


async def talk_to_worker(
    talk: Callable[[WorkerChannel], Awaitable[_T]],
    *,
    worker_limits: dict[str, int],
) -> _T:
    """Run ``talk`` with a worker under the wall budget and return what it returns.

    The worker is the process's warm one when it keeps one, else a fresh process. A fresh worker
    is killed and reaped however this ends; a warm one goes back to the pool only when its request
    ended cleanly (:meth:`~rho_notebook.source.warm.WorkerPool.release`), else it is killed too.

    Raises
    ------
    WorkerStopped
        When the wall budget (plus a start-up allowance) ran out or the worker died.
    """
    return await talk_in_worker(talk, worker_limits=worker_limits, pool=warm_pool())


async def evaluate_source(
    entry: SourceText,
    *,
    reader: SourceReader,
    check_inputs: InputChecker,
    limits: Limits,
) -> Evaluation:
    """Evaluate ``entry`` in a planning worker (:func:`talk_to_worker`) and return the raw graph.

    Raises
    ------
    SourceError, InputError, LimitError
        With every diagnostic pointing at the module (its display name), line and column.
    """
    worker_limits = limits.worker_limits()
    key = (entry.label, entry.text, tuple(sorted(worker_limits.items())))
    kept = _reused(key, entry, reader, check_inputs)
    if kept is not None:
        return kept
    sources: dict[str, SourceText] = {entry.label: entry}
    try:
        evaluation = await talk_to_worker(
            lambda chan: _converse(chan, entry, sources, reader, check_inputs, worker_limits),
            worker_limits=worker_limits,
        )
    except WorkerStopped as stopped:
        raise _stopped_error(stopped.diagnostic, entry) from None
    _keep(key, evaluation)
    return evaluation


@dataclass(frozen=True)
class _Kept:
    """A successful evaluation kept by a warm process, and what it depended on."""

    loaded: tuple[tuple[str, str], ...]
    """The label and text of every module it loaded, in load order (the entry is in the key)."""
    declared: dict[str, Any]
    values: str
    """The inputs build() received, as canonical JSON (``True`` and ``1`` differ)."""
    graph: dict[str, Any]
    """The raw tagged graph; shared with every evaluation that reuses it, never changed."""
    stats: dict[str, int]
    memo: dict[Any, Any]
    """:attr:`Evaluation.memo`, shared the same way."""


_KEEP = 4
_kept: OrderedDict[tuple[Any, ...], _Kept] = OrderedDict()
_kept_lock = threading.Lock()


def _inputs_text(values: dict[str, Any]) -> str:
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def _keep(key: tuple[Any, ...], evaluation: Evaluation) -> None:
    """Keep ``evaluation`` for the next calls of a warm process (a process without a warm worker,
    the CLI, keeps nothing)."""
    if warm_pool() is None:
        return
    kept = _Kept(
        loaded=tuple((source.label, source.text) for source in evaluation.sources[1:]),
        declared=evaluation.declared_inputs,
        values=_inputs_text(evaluation.input_values),
        graph=evaluation.graph,
        stats=evaluation.stats,
        memo=evaluation.memo,
    )
    with _kept_lock:
        _kept[key] = kept
        _kept.move_to_end(key)
        while len(_kept) > _KEEP:
            _kept.popitem(last=False)


def _reused(
    key: tuple[Any, ...], entry: SourceText, reader: SourceReader, check_inputs: InputChecker
) -> Evaluation | None:
    """The kept evaluation of this entry text and these limits, when every module it loaded reads
    the same now and the request's inputs give build() the same values; else None (evaluate)."""
    if warm_pool() is None:
        return None
    with _kept_lock:
        kept = _kept.get(key)
    if kept is None:
        return None
    sources = [entry]
    for label, text in kept.loaded:
        try:
            source = reader.read(label)
        except SourceError:
            return None
        if source.text != text:
            return None
        sources.append(source)
    try:
        values = check_inputs(kept.declared)
    except InvalidWorkflow:
        return None  # evaluating again gives the error with its usual path
    if _inputs_text(values) != kept.values:
        return None
    return Evaluation(
        graph=kept.graph,
        declared_inputs=kept.declared,
        input_values=values,
        sources=sources,
        stats=dict(kept.stats),
        memo=kept.memo,
    )


def forget_evaluations() -> None:
    """Drop the kept evaluations (:func:`~rho_notebook.source.warm.use_warm_workers` off, tests)."""
    with _kept_lock:
        _kept.clear()


async def _converse(
    chan: WorkerChannel,
    entry: SourceText,
    sources: dict[str, SourceText],
    reader: SourceReader,
    check_inputs: InputChecker,
    worker_limits: dict[str, int],
) -> Evaluation:
    await chan.send({"op": "evaluate", "entry": entry.label, "text": entry.text, "limits": worker_limits})
    declared: dict[str, Any] = {}
    values: dict[str, Any] = {}
    input_error: InvalidWorkflow | None = None
    while True:
        message = await chan.receive()
        op = message["op"]
        if op == "load":
            label = message["label"]
            try:
                source = reader.read(label)
            except SourceError as err:
                found = err.diagnostics()[0]
                await chan.send({"op": "source_error", "rule": found.rule, "message": found.message})
                continue
            sources[label] = source
            await chan.send({"op": "source", "label": label, "text": source.text})
        elif op == "declared":
            declared = message["inputs"]
            try:
                values = check_inputs(declared)
            except InvalidWorkflow as err:
                input_error = err
                await chan.send({"op": "inputs_error"})
                continue
            await chan.send({"op": "inputs", "values": values})
        elif op == "done" and input_error is not None:
            raise input_error
        elif op == "error":
            raise _diagnostic_error(message["diagnostic"], sources)
        elif op == "result":
            return Evaluation(
                graph=message["graph"],
                declared_inputs=declared,
                input_values=values,
                sources=list(sources.values()),
                stats=message["stats"],
            )
        else:
            raise RhoError(f"planning worker sent an unknown frame {op!r}")


def _display(label: str | None, sources: dict[str, SourceText]) -> str | None:
    if label is None:
        return None
    source = sources.get(label)
    return source.display if source else label


def _diagnostic_error(found: dict[str, Any], sources: dict[str, SourceText]) -> InvalidWorkflow:
    file = _display(found.get("file"), sources)
    if "budget" in found:
        return LimitError(
            budget=found["budget"],
            limit=found["limit"],
            measured=found["measured"],
            file=file,
            line=found.get("line"),
            column=found.get("column"),
            detail=found.get("message", ""),
        )
    message = found["message"]
    for label, source in sources.items():
        message = message.replace(label, source.display) if label != source.display else message
    return SourceError(message, rule=found["rule"], file=file, line=found.get("line"), column=found.get("column"))


def _stopped_error(found: dict[str, Any], entry: SourceText) -> InvalidWorkflow:
    if "budget" in found:
        return LimitError(
            budget=found["budget"],
            limit=found["limit"],
            measured=found["measured"],
            file=entry.display,
            detail=found["message"],
        )
    return InvalidWorkflow([Diagnostic(rule=found["rule"], message=found["message"], file=entry.display)])
