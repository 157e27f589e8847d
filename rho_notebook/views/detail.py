"""The node pane: a node's frozen definition, its state and the artifacts of its latest attempt.

:func:`read_node_detail` reads a run's node through the service; :func:`node_detail` builds the
pane from records already held (a script run's step gets :func:`step_detail`). Artifact reads are
bounded and never follow symlinks (:mod:`rho_notebook.views.artifacts`).

A Python traceback in the pane's stderr starts at the author's code: the frames of our harness
(the run's ``_rho_harness.py``), of the fork server that forked the attempt (run from a
descriptor, ``/proc/self/fd/N``) and of the rho_notebook package are left out
(:func:`user_traceback`); ``rho-notebook logs`` shows the stream as written.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from rho_notebook.errors import NotFound, RhoError
from rho_notebook.model.graph import CommandNode, Graph, ItemNode, Node, ShellNode
from rho_notebook.model.run_state import NodeRecord
from rho_notebook.model.state import NodeState
from rho_notebook.service import Service
from rho_notebook.service.reading import taken_attempt
from rho_notebook.service.usage import node_spend
from rho_notebook.service.wire import Detail, UsageJson, reused_from_json, step_json
from rho_notebook.store.layout import ANSWER_PROSE_FILE, ANSWER_TEXT_FILE, INPUT_FILE, USAGE_FILE, VALUE_FILE
from rho_notebook.store.runs import RunFolder
from rho_notebook.views.artifacts import ANSWER_BYTES, PANE_BYTES, empty_stream, read_json, read_stream
from rho_notebook.views.definition import definition_of
from rho_notebook.views.state import halted_by_step

__all__ = ["load_detail", "node_detail", "read_node_detail", "reused_source_dir", "step_detail", "user_traceback"]

_STDOUT, _STDERR = "stdout", "stderr"

_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep
_FRAME = re.compile(r'^(?P<indent>[ |]*)File "(?P<file>[^"]+)", line \d+')
_HARNESS = re.compile(r"(^/proc/self/fd/\d+$)|((^|/)python/_rho_harness\.py$)|((^|/)_py_forkserver\.py$)")


def _ours(file: str) -> bool:
    """Whether a traceback frame's file is ours: the harness, the fork server or the package."""
    return bool(_HARNESS.search(file)) or file.startswith(_PACKAGE)


def user_traceback(text: str) -> str:
    """``text`` with the frames of our own code left out of every Python traceback in it (a frame
    line ``File "...", line N, in f`` and the more indented source and caret lines under it); the
    author's frames and the exception line stay. A traceback with no frame but ours is kept whole
    (then the fault is ours, and its frames say where)."""
    lines = text.split("\n")
    frames = [_FRAME.match(line) for line in lines]
    if not any(m is not None and not _ours(m["file"]) for m in frames):
        return text
    kept: list[str] = []
    skip_under: int | None = None
    for line, frame in zip(lines, frames, strict=True):
        if frame is not None:
            skip_under = len(frame["indent"]) if _ours(frame["file"]) else None
            if skip_under is not None:
                continue
        elif skip_under is not None and line.strip() and len(line) - len(line.lstrip(" |")) > skip_under:
            continue  # the source and caret lines of a frame left out
        else:
            skip_under = None
        kept.append(line)
    return "\n".join(kept)


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
    artifact = _artifacts_of(attempt_dir, source_dir)
    exit_info = _read_outputs(detail, artifact, node_limit=node.max_output_bytes)
    has_exit = bool(exit_info.get("kind")) and exit_info.get("kind") != "not_started"
    if isinstance(node, (CommandNode, ShellNode)) and has_exit:
        # a stream the process never wrote to has no file: show it as empty, not as absent
        if detail["stdout"] is None:
            detail["stdout"] = empty_stream(node.max_output_bytes)
        if detail["stderr"] is None:
            detail["stderr"] = empty_stream(node.max_output_bytes)
    detail["raw_answer"] = read_stream(
        artifact(ANSWER_TEXT_FILE), limit=ANSWER_BYTES, truncated=False, node_limit=node.max_output_bytes
    )
    if isinstance(node, ItemNode):
        detail["has_input"], detail["input"] = read_json(artifact(INPUT_FILE))
    return detail


def _artifacts_of(attempt_dir: Path, source_dir: Path | None) -> Callable[[str], Path]:
    """Where an artifact of the attempt is: in its own folder, else (reused) in ``source_dir``."""

    def artifact(name: str) -> Path:
        own = attempt_dir / name
        if source_dir is None or os.path.lexists(own):
            return own
        return source_dir / name

    return artifact


def _read_outputs(detail: Detail, artifact: Callable[[str], Path], *, node_limit: int) -> dict[str, Any]:
    """Read stdout, stderr, the prose answer, usage and value into ``detail``; the exit record
    (journaled with node_finished; empty when there is none)."""
    exit_info: dict[str, Any] = detail["exit"] if isinstance(detail["exit"], dict) else {}
    detail["stdout"] = read_stream(
        artifact(_STDOUT), limit=PANE_BYTES, truncated=bool(exit_info.get("stdout_truncated")), node_limit=node_limit
    )
    detail["stderr"] = read_stream(
        artifact(_STDERR), limit=PANE_BYTES, truncated=bool(exit_info.get("stderr_truncated")), node_limit=node_limit
    )
    if detail["stderr"] is not None:
        detail["stderr"]["text"] = user_traceback(detail["stderr"]["text"])
    detail["answer"] = read_stream(
        artifact(ANSWER_PROSE_FILE), limit=ANSWER_BYTES, truncated=False, node_limit=node_limit
    )
    has_usage, usage = read_json(artifact(USAGE_FILE))
    detail["usage"] = usage if has_usage else None
    detail["has_value"], detail["value"] = read_json(artifact(VALUE_FILE))
    if not detail["has_value"]:
        journaled = _journaled_value(artifact(VALUE_FILE))
        if journaled is not None:
            detail["has_value"], detail["value"] = True, journaled
    return exit_info


def _journaled_value(path: Path) -> Any | None:
    """The value journaled with the attempt's ``node_finished`` (a small value of a Python node or
    script step, whose ``value.json`` is a copy a machine crash can lose or tear), or None."""
    if len(path.parents) < 5:
        return None
    try:
        return RunFolder(path.parents[4]).journaled_step_value(path)
    except (RhoError, OSError):
        return None


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
    latest attempt (``value`` is the attempt's value file: ``{"output", "value"}``)."""
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
    _read_outputs(detail, attempt_dir.joinpath, node_limit=max_output_bytes)
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
    stopped at it). ``spend``: what the node's model calls spent (:func:`node_spend`).

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
        detail = step_detail(
            name,
            record,
            attempt_dir=attempt_dir,
            max_output_bytes=limit if isinstance(limit, int) else graph.script.max_output_bytes,
            halted=halted,
        )
    else:
        detail = load_detail(
            node=graph.node(name), record=record or NodeRecord(), attempt_dir=attempt_dir, source_dir=source_dir
        )
    if record is not None:
        spend = node_spend(name, record, attempt_dir=attempt_dir, source_dir=source_dir)
        detail["spend"] = cast("UsageJson | None", spend)
    return detail


async def reused_source_dir(service: Service, record: NodeRecord | None, *, run_id: str) -> Path | None:
    """The attempt folder a reused latest attempt of run ``run_id`` took its success from (checked
    like any attempt folder, :meth:`Service.node_attempt`): for a node a fork took, whose value the
    fork copied into its own folder, the source run's attempt, which holds its output; None when
    the attempt was not reused or its source run is no longer in the store."""
    reused = reused_from_json(record) if record is not None else None
    if reused is None:
        return None
    source, node, number = reused["run_id"], reused["node"], reused["attempt"]
    try:
        if source == run_id:
            taken = await asyncio.to_thread(taken_attempt, service.layout, run_id, node)
            if taken is None:
                return None
            source, number = taken
        found = await service.node_attempt(source, node, attempt=number)
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
    source = await reused_source_dir(service, attempt.record, run_id=attempt.run_id)
    halted = None
    if graph.script is not None:
        halted = halted_by_step(await service.status(attempt.run_id)).get(name)
    return await asyncio.to_thread(
        node_detail, graph, name, attempt.record, attempt_dir=attempt.folder, source_dir=source, halted=halted
    )
