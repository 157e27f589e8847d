"""What the DAG view shows, as plain JSON-able data: node views, the run view, node details.

Shared by the notebook widget (rho_notebook.widgets) and the JupyterLab sidebar's REST API
(rho_notebook.server), so both render one shape with the same dagview front-end module. The view
of a plan or a run is assembled once, by :func:`dag_view` (layout, node views, run view); the
server and the widgets read a run's view through the service with :func:`read_run_view` and a
node's pane with :func:`read_node_detail` (or :func:`node_detail` for a record they hold).

A script run (``Graph.script`` set, no frozen nodes) is drawn from its run state instead: its steps
are the nodes, in arrival order, with edges from each step's ``after`` (:func:`layout_steps`); the
layout grows as steps launch, so :class:`RunTracker` says when it changed.

Pure functions and one small state machine (:class:`RunTracker`) that folds journal events into a
private :class:`RunState` copy and remembers which nodes changed since the last flush. File reads
(attempt artifacts) are bounded: a pane never carries more than :data:`PANE_BYTES` of one stream.
"""

from __future__ import annotations

import asyncio
import codecs
import copy
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from typing_extensions import TypedDict

from rho_notebook.errors import NotFound, RhoError
from rho_notebook.model.events import now_iso
from rho_notebook.model.graph import (
    AgentNode,
    ApprovalNode,
    CommandNode,
    Graph,
    ItemNode,
    Node,
    PythonNode,
    ShellNode,
)
from rho_notebook.model.run_state import NodeRecord, RunState, apply
from rho_notebook.model.state import NodeState
from rho_notebook.oshelpers import open_regular_nofollow
from rho_notebook.service import Service
from rho_notebook.service.wire import (
    LIVE_LIFECYCLES,
    Detail,
    NodeView,
    RunView,
    StreamView,
    WireLayout,
    halted_json,
    outcome_name,
    reused_from_json,
    step_json,
)
from rho_notebook.views.layout import Layout, layered_layout, layout_graph, layout_steps
from rho_notebook.views.text import condition_text, reference_text, schema_text, template_text

__all__ = [
    "PANE_BYTES",
    "NodeView",
    "RunView",
    "StreamView",
    "Detail",
    "DagView",
    "DagViewJson",
    "dag_view",
    "read_run_view",
    "node_detail",
    "step_detail",
    "read_node_detail",
    "layout_of",
    "reused_source_dir",
    "node_view",
    "node_views",
    "run_view_of",
    "RunTracker",
    "StreamTail",
    "condition_text",
    "template_text",
    "schema_text",
    "definition_of",
    "load_detail",
    "run_times",
    "STATE_ORDER",
]

PANE_BYTES = 64 * 1024
"""At most this many bytes of one stream (the tail) travel to the output pane."""

ANSWER_BYTES = 256 * 1024

STATE_ORDER = tuple(state.value for state in NodeState)

_RUN_KINDS = frozenset(
    {
        "run_started",
        "run_completed",
        "cancel_requested",
        "cancel_acknowledged",
        "needs_recovery",
        "owner_exited",
        "run_halted",
        "script_output",
    }
)
_EVERY_NODE_KINDS = frozenset({"run_started", "run_halted"})
"""Events that change node views they do not name (the halted marks)."""


def definition_of(node: Node) -> dict[str, Any]:
    """The frozen facts of a node, as short texts for the output pane."""
    found: dict[str, Any] = {"kind": node.kind, "needs": list(node.needs)}
    if isinstance(node, CommandNode):
        found["argv"] = [template_text(part) for part in node.argv]
        found["cwd"] = node.cwd
        found["executable"] = node.executable.file.path
    elif isinstance(node, ShellNode):
        found["executable"] = node.executable.file.path
        found["arguments"] = list(node.arguments)
        found["command"] = node.command
        found["cwd"] = node.cwd
    elif isinstance(node, AgentNode):
        found["agent"] = node.agent
        found["access"] = node.access
        found["prompt"] = template_text(node.prompt)
        if node.reuse:
            found["reuse"] = True
    elif isinstance(node, ItemNode):
        found["step"] = node.step
        found["step_kind"] = node.step_kind
        if node.round is not None:
            found["round"] = node.round
        found["params"] = node.params
        found["edges"] = [
            route.to
            + (
                f" when {route.when['field']} {route.when['op']} {json.dumps(route.when.get('value'))}"
                if route.when
                else ""
            )
            for route in node.routes
        ]
    elif isinstance(node, PythonNode):
        found["module"] = node.module
        found["function"] = node.function
        found["args"] = [
            f"{arg.name}={{{reference_text(arg.ref)}}}"
            if arg.ref is not None
            else f"{arg.name}={json.dumps(arg.value)}"
            for arg in node.args
        ]
        found["cwd"] = node.cwd
        found["access"] = node.access
        if node.reuse:
            found["reuse"] = True
            found["reuse_inputs"] = [frozen.path for frozen in node.reuse_inputs]
    elif isinstance(node, ApprovalNode):
        found["prompt"] = template_text(node.prompt)
    if node.when is not None:
        found["when"] = condition_text(node.when)
    if node.output is not None:
        found["output"] = schema_text(node.output)
    if isinstance(node, (CommandNode, ShellNode, PythonNode)):
        found["placement"] = node.placement
        if node.resources:
            found["resources"] = [f"{key}={amount}" for key, amount in node.resources]
    found["allow_failure"] = node.allow_failure
    found["timeout_seconds"] = node.timeout_seconds
    found["max_output_bytes"] = node.max_output_bytes
    return found


# -- node and run views -----------------------------------------------------------------------------


def node_view(record: NodeRecord, version: int = 0, *, halted: str | None = None) -> NodeView:
    """The view of one node; ``halted`` says why a script run stopped at this step."""
    current = record.current
    view: NodeView = {
        "state": record.state.value,
        "attempt": record.attempt,
        "started_at": current.started_at if current is not None else None,
        "ended_at": current.ended_at if current is not None else None,
        "reason": record.reason,
        "exit_code": record.exit_code(),
        "uncertain": bool(current is not None and current.uncertain and not current.abandoned),
        "v": version,
    }
    reused = reused_from_json(record)
    if reused is not None:
        view["reused_from"] = reused
    if record.step is not None:
        view["step_kind"] = str(record.step.get("kind", ""))
        view["replayed"] = record.replayed
    if halted is not None:
        view["halted"] = halted
    return view


def _halted_by_step(state: RunState) -> dict[str, str]:
    return {h["step"]: h["why"] for h in halted_json(state)}


def node_views(state: RunState | None, graph: Graph | None = None, *, version: int = 0) -> dict[str, NodeView]:
    """The view of every node: of ``graph`` in its order (a node ``state`` has no record of is
    pending), else of ``state``'s nodes by name; a script run's steps in arrival order."""
    records = state.nodes if state is not None else {}
    if graph is not None and graph.script is None:
        names = [node.name for node in graph.nodes]
    elif any(record.step is not None for record in records.values()) or graph is not None:
        names = list(records)
    else:
        names = sorted(records)
    halted = _halted_by_step(state) if state is not None else {}
    return {name: node_view(records.get(name) or NodeRecord(), version, halted=halted.get(name)) for name in names}


def node_view_copy(view: NodeView) -> NodeView:
    copied: NodeView = {**view}
    if "reused_from" in view:
        copied["reused_from"] = {**view["reused_from"]}
    return copied


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in set(a) | set(b) if k != "v")


def run_view_of(
    state: RunState, *, started_at: str | None = None, ended_at: str | None = None, version: int = 0
) -> RunView:
    live = state.lifecycle in LIVE_LIFECYCLES
    lifecycle = state.lifecycle.value
    view: RunView = {
        "run_id": state.run_id,
        "plan_id": state.plan_id,
        "workflow": state.workflow,
        "graph_digest": state.graph_digest,
        "lifecycle": state.lifecycle.value,
        "outcome": outcome_name(state),
        "started_at": started_at,
        "ended_at": ended_at,
        "cancel_pending": bool(state.cancel_pending),
        "can_cancel": live,
        "can_resume": lifecycle == "needs_decision"
        or (lifecycle in ("completed", "needs_recovery") and state.outcome != "success"),
        "v": version,
    }
    if any(record.step is not None for record in state.nodes.values()):
        view["script"] = True
    if state.halted:
        view["halted"] = halted_json(state)
    if state.output is not None:
        view["output"] = state.output
    return view


def run_times(events: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """Start of the latest execution and, if it finished, its end, from journal records."""
    started: str | None = None
    ended: str | None = None
    for ev in events:
        if ev.get("kind") == "run_started":
            started, ended = ev.get("at"), None
        elif ev.get("kind") == "run_completed":
            ended = ev.get("at")
    return started, ended


# -- the whole view ----------------------------------------------------------------------------------


class DagViewJson(TypedDict, total=False):
    """What the DAG view module draws: ``GET runs/<run>/view`` (``layout`` unless left out)."""

    title: str
    mode: Literal["plan", "run"]
    now: str
    last_seq: int
    nodes: dict[str, NodeView]
    run: RunView
    """Absent for a plan."""
    layout: WireLayout


@dataclass(frozen=True)
class DagView:
    """The DAG of a plan or a run as the view module draws it (:func:`dag_view`)."""

    graph: Graph
    layout: Layout
    mode: Literal["plan", "run"]
    nodes: dict[str, NodeView]
    run: RunView | None
    last_seq: int = 0

    @property
    def title(self) -> str:
        return self.graph.name

    @property
    def script(self) -> bool:
        """A script run: the layout grows while it runs."""
        return self.graph.script is not None

    def to_wire(self, *, with_layout: bool = True) -> DagViewJson:
        wire: DagViewJson = {
            "title": self.title,
            "mode": self.mode,
            "now": now_iso(),
            "last_seq": self.last_seq,
            "nodes": self.nodes,
        }
        if self.run is not None:
            wire["run"] = self.run
        if with_layout:
            wire["layout"] = self.layout.to_wire()
        return wire


def dag_view(
    graph: Graph,
    state: RunState | None = None,
    *,
    started_at: str | None = None,
    ended_at: str | None = None,
    version: int = 0,
    digest: str | None = None,
    actions: bool = True,
) -> DagView:
    """The view of a frozen graph: of a plan (no ``state``), or of a run in ``state`` whose
    latest execution started at ``started_at`` (see :func:`run_times`).

    ``version`` stamps every view (newest wins in the front end); ``digest`` (the graph's) keeps
    the layout for the next view of the same graph; without ``actions`` the run view offers no
    Cancel or Resume (a snapshot).
    """
    run = None
    if state is not None:
        run = run_view_of(state, started_at=started_at, ended_at=ended_at, version=version)
        if not actions:
            run["can_cancel"] = run["can_resume"] = False
    return DagView(
        graph=graph,
        layout=layout_of(graph, state, digest=digest),
        mode="plan" if state is None else "run",
        nodes=node_views(state, graph, version=version),
        run=run,
        last_seq=state.last_seq if state is not None else 0,
    )


def layout_of(graph: Graph, state: RunState | None = None, *, digest: str | None = None) -> Layout:
    """The layout of a plan's or run's DAG: the frozen graph's, or for a script run the steps it
    has so far (a script plan, without ``state``, has none)."""
    if graph.script is not None:
        return layout_steps(state, digest=digest) if state is not None else layered_layout([])
    return layout_graph(graph, digest=digest)


async def read_run_view(service: Service, run: str) -> DagView:
    """The view of a run (ID or unique prefix) as its journal stands now, whoever owns it;
    every view carries the run's last seq as its version."""
    run_id = await service.resolve_run(run)
    journal = await service.journal(run_id)
    state = await service.status(run_id)
    graph = await service.run_graph(run_id)
    started, ended = run_times(journal.events)
    return await asyncio.to_thread(
        dag_view, graph, state, started_at=started, ended_at=ended, version=state.last_seq, digest=state.graph_digest
    )


class RunTracker:
    """Folds events into a private RunState copy; remembers changed node and run views.

    With a script run's ``graph``, a step launched for the first time is a new node: its view is
    added and :attr:`layout_dirty` says the layout must be drawn again (:meth:`take_layout`).
    """

    def __init__(
        self,
        state: RunState,
        *,
        started_at: str | None = None,
        ended_at: str | None = None,
        graph: Graph | None = None,
    ) -> None:
        self.state = copy.deepcopy(state)
        self.version = 0
        self.started_at = started_at
        self.ended_at = ended_at
        self.graph = graph
        self.nodes: dict[str, NodeView] = node_views(self.state, graph if graph is not None and graph.script else None)
        self.run: dict[str, Any] = dict(run_view_of(self.state, started_at=started_at, ended_at=ended_at))
        self.dirty: set[str] = set()
        self.run_dirty = False
        self.layout_dirty = False
        """A new step appeared since the last :meth:`take_layout` (script runs)."""
        self.output_dirty: set[str] = set()
        """Nodes with new output bytes since the last flush (from output_chunk events)."""

    @property
    def script(self) -> bool:
        return self.graph is not None and self.graph.script is not None

    def feed(self, event: Mapping[str, Any]) -> bool:
        """Fold one event; True when some view changed. Events already folded (by seq) are ignored."""
        kind = event.get("kind")
        if kind == "output_chunk":
            node = event.get("node")
            if isinstance(node, str):
                self.output_dirty.add(node)
            return False
        seq = event.get("seq")
        if isinstance(seq, int) and seq <= self.state.last_seq:
            return False
        apply(self.state, dict(event))
        changed = False
        names: list[str] = []
        if kind in _EVERY_NODE_KINDS:
            names.extend(self.state.nodes)
        if isinstance(event.get("node"), str):
            names.append(event["node"])
        names.extend(n for n in event.get("nodes", []) if isinstance(n, str))
        halted = _halted_by_step(self.state)
        for name in dict.fromkeys(names):
            record = self.state.nodes.get(name)
            if record is None:
                continue
            view = node_view(record, halted=halted.get(name))
            known = self.nodes.get(name)
            if known is None:  # a script step launched for the first time
                self.layout_dirty = True
            elif _same(view, known):
                continue
            self.version += 1
            view["v"] = self.version
            self.nodes[name] = view
            self.dirty.add(name)
            changed = True
        if kind == "run_started":
            self.started_at, self.ended_at = event.get("at"), None
        elif kind == "run_completed":
            self.ended_at = event.get("at")
        if kind in _RUN_KINDS or (self.layout_dirty and "script" not in self.run):
            view_run = run_view_of(self.state, started_at=self.started_at, ended_at=self.ended_at)
            if not _same(view_run, self.run):
                self.version += 1
                view_run["v"] = self.version
                self.run.clear()
                self.run.update(view_run)
                self.run_dirty = True
                changed = True
        return changed

    def take(self) -> tuple[dict[str, NodeView], dict[str, Any] | None]:
        """Copies of the changed views since the last take, and forget them."""
        nodes: dict[str, NodeView] = {name: node_view_copy(self.nodes[name]) for name in sorted(self.dirty)}
        run = dict(self.run) if self.run_dirty else None
        self.dirty.clear()
        self.run_dirty = False
        return nodes, run

    def take_layout(self, *, digest: str | None = None) -> Layout | None:
        """The layout of a script run's steps when a step appeared since the last call, else None."""
        dirty, self.layout_dirty = self.layout_dirty, False
        if not dirty or self.graph is None or self.graph.script is None:
            return None
        return layout_of(self.graph, self.state, digest=digest)


# -- artifacts --------------------------------------------------------------------------------------


class StreamTail:
    """Incremental reader of one growing artifact file (UTF-8, decoded across chunk borders)."""

    def __init__(self, path: Path, *, start: int = 0) -> None:
        self.path = path
        self.offset = start
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def read(self, *, limit: int = PANE_BYTES) -> tuple[int, str]:
        """New text since the last read: (offset it starts at, text); at most ``limit`` bytes."""
        try:
            fd, _ = open_regular_nofollow(self.path)
        except OSError:  # absent, a symlink, or not a regular file (a FIFO would block a read)
            return self.offset, ""
        try:
            size = os.fstat(fd).st_size
            if size <= self.offset:
                return self.offset, ""
            if size - self.offset > limit:  # fell behind: skip to the newest bytes
                self.offset = size - limit
                self._decoder.reset()
            os.lseek(fd, self.offset, os.SEEK_SET)
            data = os.read(fd, size - self.offset)
        finally:
            os.close(fd)
        start = self.offset
        self.offset += len(data)
        return start, self._decoder.decode(data)


def _read_stream(path: Path, *, limit: int, truncated: bool, node_limit: int) -> StreamView | None:
    try:
        size = os.stat(path, follow_symlinks=False).st_size
    except FileNotFoundError:
        return None
    tail = StreamTail(path, start=max(size - limit, 0))
    start, text = tail.read(limit=limit)
    if start > 0:  # do not start in the middle of a UTF-8 sequence
        text = text.lstrip("\ufffd")
    return {
        "text": text,
        "bytes": size,
        "start": start,
        "end": tail.offset,
        "truncated": truncated,
        "limit": node_limit,
    }


def _read_json(path: Path) -> tuple[bool, Any]:
    try:
        fd, _ = open_regular_nofollow(path)
    except OSError:
        return False, None
    try:
        with os.fdopen(fd, "rb") as handle:
            return True, json.loads(handle.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False, None


def load_detail(*, node: Node, record: NodeRecord, attempt_dir: Path | None, source_dir: Path | None = None) -> Detail:
    """Everything the output pane shows for one node of a run (latest attempt's artifacts).

    ``source_dir`` is the attempt folder a reused attempt took its success from: an artifact the
    reused attempt's own folder lacks is read from there.
    """
    current = record.current
    detail: Detail = {
        "node": node.name,
        "kind": node.kind,
        "state": record.state.value,
        "reason": record.reason,
        "attempt": record.attempt,
        "live": record.state is NodeState.RUNNING,
        "definition": definition_of(node),
        "attempts": [a.to_json() for a in record.attempts],
        "exit": record.current.exit if record.current is not None else None,
        "answer": None,
        "raw_answer": None,
        "usage": None,
        "stdout": None,
        "stderr": None,
        "has_value": False,
        "value": None,
        "reused_from": reused_from_json(record),
        "approval": dict(current.approval) if current is not None and current.approval is not None else None,
    }
    if attempt_dir is None or record.attempt == 0:
        return detail

    def artifact(name: str) -> Path:
        own = attempt_dir / name
        if source_dir is None or os.path.lexists(own):
            return own
        return source_dir / name

    exit_info = detail["exit"] if isinstance(detail["exit"], dict) else {}  # journaled with node_finished
    has_exit = bool(exit_info.get("kind")) and exit_info.get("kind") != "not_started"
    detail["stdout"] = _read_stream(
        artifact("stdout"),
        limit=PANE_BYTES,
        truncated=bool(exit_info.get("stdout_truncated")),
        node_limit=node.max_output_bytes,
    )
    detail["stderr"] = _read_stream(
        artifact("stderr"),
        limit=PANE_BYTES,
        truncated=bool(exit_info.get("stderr_truncated")),
        node_limit=node.max_output_bytes,
    )
    if isinstance(node, (CommandNode, ShellNode)) and has_exit:
        # a stream the process never wrote to has no file: show it as empty, not as absent
        for stream in ("stdout", "stderr"):
            if detail[stream] is None:
                detail[stream] = {
                    "text": "",
                    "bytes": 0,
                    "start": 0,
                    "end": 0,
                    "truncated": False,
                    "limit": node.max_output_bytes,
                }
    detail["answer"] = _read_stream(
        artifact("answer.md"), limit=ANSWER_BYTES, truncated=False, node_limit=node.max_output_bytes
    )
    detail["raw_answer"] = _read_stream(
        artifact("answer.txt"), limit=ANSWER_BYTES, truncated=False, node_limit=node.max_output_bytes
    )
    has_usage, usage = _read_json(artifact("usage.json"))
    detail["usage"] = usage if has_usage else None
    has_value, value = _read_json(artifact("value.json"))
    detail["has_value"] = has_value
    detail["value"] = value
    if isinstance(node, ItemNode):
        detail["has_input"], detail["input"] = _read_json(artifact("input.json"))
    return detail


def step_detail(
    name: str,
    record: NodeRecord,
    *,
    attempt_dir: Path | None,
    max_output_bytes: int,
    halted: str | None = None,
) -> Detail:
    """The pane of a script run's step: its journaled facts (kind, digest, facts, edges,
    recovery) as the definition, its state, how often it was replayed, and the artifacts of its
    latest attempt (``value`` is the attempt's ``value.json``: ``{"output", "value"}``)."""
    step = step_json(record)
    if step is None:
        msg = f"node {name!r} is no script step"
        raise NotFound(msg)
    current = record.current
    definition: dict[str, Any] = {"kind": step["kind"], "digest": step["digest"]}
    definition.update(
        {key: value if isinstance(value, str) else json.dumps(value) for key, value in step["facts"].items()}
    )
    definition["after"] = list(step["after"])
    definition["recovery"] = step["recovery"] or "(default)"
    detail: Detail = {
        "node": name,
        "kind": step["kind"],
        "state": record.state.value,
        "reason": record.reason,
        "attempt": record.attempt,
        "live": record.state is NodeState.RUNNING and halted is None,
        "definition": definition,
        "attempts": [a.to_json() for a in record.attempts],
        "exit": current.exit if current is not None else None,
        "answer": None,
        "raw_answer": None,
        "usage": None,
        "stdout": None,
        "stderr": None,
        "has_value": False,
        "value": None,
        "reused_from": None,
        "approval": None,
        "step": step,
        "replayed": record.replayed,
    }
    if halted is not None:
        detail["halted"] = halted
    if attempt_dir is None or record.attempt == 0:
        return detail
    exit_info = detail["exit"] if isinstance(detail["exit"], dict) else {}
    detail["stdout"] = _read_stream(
        attempt_dir / "stdout",
        limit=PANE_BYTES,
        truncated=bool(exit_info.get("stdout_truncated")),
        node_limit=max_output_bytes,
    )
    detail["stderr"] = _read_stream(
        attempt_dir / "stderr",
        limit=PANE_BYTES,
        truncated=bool(exit_info.get("stderr_truncated")),
        node_limit=max_output_bytes,
    )
    detail["answer"] = _read_stream(
        attempt_dir / "answer.md", limit=ANSWER_BYTES, truncated=False, node_limit=max_output_bytes
    )
    has_usage, usage = _read_json(attempt_dir / "usage.json")
    detail["usage"] = usage if has_usage else None
    has_value, value = _read_json(attempt_dir / "value.json")
    detail["has_value"] = has_value
    detail["value"] = value
    return detail


def node_detail(
    graph: Graph,
    name: str,
    record: NodeRecord | None = None,
    *,
    attempt_dir: Path | None = None,
    source_dir: Path | None = None,
    halted: str | None = None,
) -> Detail:
    """The pane of node ``name``: its frozen definition, its state when ``record`` is given, and
    the artifacts of the attempt in ``attempt_dir`` (none for a plan); for a reused attempt,
    ``source_dir`` (:func:`reused_source_dir`) holds what its own folder lacks. A script run's
    step (``graph.script`` set) has the pane of :func:`step_detail` (``halted``: why the run
    stopped at it).

    Raises
    ------
    NotFound
        A script run has no step ``name`` (yet).
    """
    if graph.script is not None:
        if record is None:
            msg = f"the script run has no step named {name!r} (yet)"
            raise NotFound(msg)
        facts = (record.step or {}).get("facts") or {}
        limit = facts.get("max_output_bytes") if isinstance(facts, dict) else None
        return step_detail(
            name,
            record,
            attempt_dir=attempt_dir,
            max_output_bytes=limit if isinstance(limit, int) else graph.script.max_output_bytes,
            halted=halted,
        )
    return load_detail(
        node=graph.node(name), record=record or NodeRecord(), attempt_dir=attempt_dir, source_dir=source_dir
    )


async def reused_source_dir(service: Service, record: NodeRecord | None) -> Path | None:
    """The attempt folder a reused latest attempt took its success from (checked like any
    attempt folder, :meth:`Service.node_attempt`); None when the attempt was not reused or its
    source run is no longer in the store."""
    reused = reused_from_json(record) if record is not None else None
    if reused is None:
        return None
    try:
        found = await service.node_attempt(reused["run_id"], reused["node"], attempt=reused["attempt"])
    except (RhoError, OSError):  # the source run was deleted: the pane shows what this run holds
        return None
    return found.folder


async def read_node_detail(service: Service, run: str, name: str) -> Detail:
    """The pane of node ``name`` of a run (ID or unique prefix): its latest attempt's artifacts,
    read without following symlinks in the store.

    Raises
    ------
    NotFound
        No such run, or the run has no such node.
    """
    attempt = await service.node_attempt(run, name)
    graph = await service.run_graph(attempt.run_id)
    source = await reused_source_dir(service, attempt.record)
    halted = None
    if graph.script is not None:
        halted = _halted_by_step(await service.status(attempt.run_id)).get(name)
    return await asyncio.to_thread(
        node_detail, graph, name, attempt.record, attempt_dir=attempt.folder, source_dir=source, halted=halted
    )
