"""Reading a run without owning it: its result, a node's attempt and artifacts, its journal and a
node's output, whole or followed while the run goes on.

Front ends read a run's files only through these (and :mod:`rho_notebook.service.listing`): never
through the run's folder, so the symlink checks and the journal's chain are applied once.
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rho_notebook.errors import NotFound
from rho_notebook.model.graph import Graph
from rho_notebook.model.node_names import no_node
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.model.state import NodeState
from rho_notebook.runtime.status import load_state
from rho_notebook.service.results import RunResult, run_result
from rho_notebook.service.wire import LIVE_LIFECYCLES, ResultJson, result_json
from rho_notebook.store.files import check_no_symlink
from rho_notebook.store.journal import JournalRead, check_journal, follow_journal, read_journal
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.run_locks import OwnerLock
from rho_notebook.store.runs import RunStore

__all__ = [
    "NodeAttempt",
    "Stream",
    "attempt_dir",
    "taken_attempt",
    "node_attempt",
    "read_result",
    "read_run_result",
    "run_graph",
    "journal",
    "events",
    "logs",
]

Stream = Literal["stdout", "stderr"]

_LOG_POLL_SECONDS = 0.1
LOG_PIECE_BYTES = 1 << 20
"""The most of a stream :func:`logs` reads (and yields, decoded) at once."""
_WAITING = (NodeState.RUNNING, NodeState.READY, NodeState.PENDING)
"""Node states in which a followed log may still grow."""


@dataclass(frozen=True)
class NodeAttempt:
    """One attempt of a node and where it keeps its artifacts (:meth:`Service.node_attempt`)."""

    run_id: str
    node: str
    attempt: int
    """0 when the node has not started."""
    folder: Path | None
    """None when the node has not started."""
    record: NodeRecord
    """The node's record in the snapshot the attempt was read from."""


def _no_node(state: RunState, node: str) -> NotFound:
    return NotFound(no_node(f"run {state.run_id}", node, state.nodes))


def read_result(layout: StoreLayout, run: str) -> ResultJson:
    """Per node: state, attempts, exit, artifact paths and validated output (the wire shape)."""
    store = RunStore(layout)
    run_id = store.resolve(run)
    return result_json(store.folder(run_id), load_state(layout, run_id))


def read_run_result(layout: StoreLayout, run: str) -> RunResult:
    """:func:`read_result` as Python values (:class:`RunResult`)."""
    store = RunStore(layout)
    state = load_state(layout, store.resolve(run))
    return run_result(store.folder(state.run_id), state)


def run_graph(layout: StoreLayout, run: str) -> Graph:
    """The frozen graph a run executes, checked against the digest it was created with."""
    store = RunStore(layout)
    run_id = store.resolve(run)
    return store.graph(run_id, expected_digest=store.manifest(run_id).graph_digest)


def attempt_dir(layout: StoreLayout, run_id: str, node: str, attempt: int) -> Path:
    """Where attempt ``attempt`` of ``node`` keeps its own artifacts (no file is read)."""
    return RunStore(layout).folder(run_id).attempt_dir(node, attempt)


def node_attempt(layout: StoreLayout, run: str, node: str, *, attempt: int) -> NodeAttempt:
    """One attempt of a node (0: its latest) and the folder of its artifacts (stdout,
    exit.json, ...), checked to hold no symlinked entry below the store. The folder is None
    when the latest attempt was asked for and the node has not started.

    Raises NotFound: The run has no such node, or the node no such attempt; StoreError: A symlink stands on
    the way to the folder.
    """
    store = RunStore(layout)
    state = load_state(layout, store.resolve(run))
    record = state.nodes.get(node)
    if record is None:
        raise _no_node(state, node)
    number = attempt or record.attempt
    if number == 0:
        return NodeAttempt(run_id=state.run_id, node=node, attempt=0, folder=None, record=record)
    if number < 1 or number > record.attempt:
        msg = f"node {node!r} of run {state.run_id} has no attempt {number} (it has {record.attempt})"
        raise NotFound(msg)
    attempt_record = next((a for a in record.attempts if a.number == number), None)
    run_folder = store.folder(state.run_id)
    folder = run_folder.attempt_dir(node, number)
    if attempt_record is not None:  # a reused attempt's files are its source attempt's
        folder = run_folder.files_of(node, attempt_record)
    check_no_symlink(folder, below=layout.home)
    return NodeAttempt(run_id=state.run_id, node=node, attempt=number, folder=folder, record=record)


def journal(layout: StoreLayout, run: str, *, after_seq: int) -> JournalRead:
    """The run's journal records after ``after_seq``; a chained run's checked against its chain."""
    store = RunStore(layout)
    run_id = store.resolve(run)
    folder = store.folder(run_id)
    if store.manifest(run_id).chained:
        return check_journal(folder.events, mark=folder.mark, after_seq=after_seq)
    return read_journal(folder.events, after_seq=after_seq)


async def events(
    layout: StoreLayout, run: str, *, after_seq: int, follow: bool, stop: Callable[[], bool] | None
) -> AsyncIterator[dict[str, Any]]:
    """The run's journal records after ``after_seq``; with ``follow``, new ones until the run is
    no longer live (or ``stop()``)."""
    store = RunStore(layout)
    run_id = await asyncio.to_thread(store.resolve, run)
    folder = store.folder(run_id)
    if not follow:
        read = await asyncio.to_thread(read_journal, folder.events, after_seq=after_seq)
        for record in read.events:
            yield record
        return

    def finished() -> bool:
        return not OwnerLock.is_held(folder.lock) and load_state(layout, run_id).lifecycle not in LIVE_LIFECYCLES

    async for record in follow_journal(folder.events, after_seq=after_seq, stop=stop or finished):
        yield record


def taken_attempt(layout: StoreLayout, run_id: str, node: str) -> tuple[str, int] | None:
    """(source run, attempt) of ``node`` when run ``run_id`` is a fork that took it: a fork copies
    only the value into its own folder, so the output is that attempt's (None: not a fork, or the
    node was not taken, e.g. it is the fork's edited node)."""
    store = RunStore(layout)
    fork = store.graph(run_id, expected_digest=store.manifest(run_id).graph_digest).fork
    if fork is None:
        return None
    taken = next((t for t in fork.taken if t.node == node), None)
    return None if taken is None else (fork.source_run, taken.attempt)


async def logs(
    layout: StoreLayout, run: str, node: str, *, streams: tuple[Stream, ...], follow: bool
) -> AsyncIterator[tuple[Stream, str]]:
    """A node's retained output, latest attempt, as (stream, text) pieces; with ``follow``, new
    output while the node runs."""
    store = RunStore(layout)
    run_id = await asyncio.to_thread(store.resolve, run)
    folder = store.folder(run_id)
    offsets = dict.fromkeys(streams, 0)
    # a read may end inside a character the node has not finished writing: its bytes wait for the next
    decoders = {stream: codecs.getincrementaldecoder("utf-8")("replace") for stream in streams}
    while True:
        state = await asyncio.to_thread(load_state, layout, run_id)
        if node not in state.nodes:
            raise _no_node(state, node)
        record = state.nodes[node]
        current = record.current  # a reused or taken attempt's output is its source attempt's
        attempt_folder = folder.attempt_dir(node, 1) if current is None else folder.files_of(node, current)
        if current is not None and current.reused_from and current.reused_from["run_id"] == run_id:
            taken = await asyncio.to_thread(taken_attempt, layout, run_id, node)
            if taken is not None:  # a fork's copy of a taken node's value
                attempt_folder = store.folder(taken[0]).attempt_dir(node, taken[1])
        last = not follow or record.state not in _WAITING or state.lifecycle not in LIVE_LIFECYCLES
        for stream in streams:
            while True:  # a piece at a time: a node's retained output may be 64 MiB
                data = await asyncio.to_thread(
                    folder.read_from, attempt_folder / stream, offsets[stream], limit=LOG_PIECE_BYTES
                )
                offsets[stream] += len(data)
                more = len(data) == LOG_PIECE_BYTES
                text = decoders[stream].decode(data, final=last and not more)
                if text:
                    yield stream, text
                if not more:
                    break
        if last:
            return
        await asyncio.sleep(_LOG_POLL_SECONDS)
