"""Two runs side by side, for the sidebar's compare view: ``GET runs/<old>/compare/<new>``.

The plan diff is the one ``rho-notebook diff OLD NEW`` shows (:meth:`Service.diff`, the same
``diff --output json`` answer plus its text lines); per node it adds what the runs did: the state
each shows (``shown``, as the DAG view draws it), the exit code, and the value: the validated
output when the node has one, else a digest of its stdout, so "same value" can be told apart from
"ran again" without shipping the outputs themselves (the node pane reads those).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any, TypedDict

from rho_notebook.oshelpers import open_regular_nofollow
from rho_notebook.service import Service
from rho_notebook.service.wire import diff_json
from rho_notebook.views.dag import read_run_view

__all__ = ["NodeSideJson", "NodeCompareJson", "compare_runs"]

PREVIEW_CHARS = 200
"""A value is previewed up to this many characters (its digest says whether it changed)."""
_STDOUT_LIMIT = 1 << 24
"""Stdout is digested up to this many bytes (a larger one is compared by its first 16 MiB)."""


class NodeSideJson(TypedDict):
    state: str
    """The state as shown (``shown`` of the node view, its ``state`` when absent)."""
    exit_code: int | None
    value_sha256: str | None
    """sha256 of the validated output (canonical JSON) or, without one, of the stdout file."""
    preview: str
    """The output as JSON (or the stdout's start), at most PREVIEW_CHARS characters."""


class NodeCompareJson(TypedDict):
    node: str
    old: NodeSideJson | None
    """None: the node is not in the old run."""
    new: NodeSideJson | None
    changed: list[str]
    """Which of ``state``, ``exit_code``, ``value``, ``presence`` differ (empty: the same)."""


async def compare_runs(service: Service, old: str, new: str) -> dict[str, Any]:
    """The compare answer of runs ``old`` and ``new`` (IDs or unique prefixes).

    Raises NotFound / AmbiguousId (from the run store) when either does not name one run.
    """
    old_id = await service.resolve_run(old)
    new_id = await service.resolve_run(new)
    found = await service.diff(old_id, new_id)
    sides = [await _sides(service, run_id) for run_id in (old_id, new_id)]
    names = list(sides[1]) + [name for name in sides[0] if name not in sides[1]]
    nodes = [_node(name, sides[0].get(name), sides[1].get(name)) for name in names]
    return {
        "old_run": old_id,
        "new_run": new_id,
        "plan": diff_json(found),
        "text": found.lines(),
        "nodes": nodes,
        "changed_nodes": sum(1 for n in nodes if n["changed"]),
    }


def _node(name: str, old: NodeSideJson | None, new: NodeSideJson | None) -> NodeCompareJson:
    if old is None or new is None:
        return {"node": name, "old": old, "new": new, "changed": ["presence"]}
    changed = [key for key in ("state", "exit_code") if old[key] != new[key]]
    if old["value_sha256"] != new["value_sha256"]:
        changed.append("value")
    return {"node": name, "old": old, "new": new, "changed": changed}


async def _sides(service: Service, run_id: str) -> dict[str, NodeSideJson]:
    view = await read_run_view(service, run_id)
    result = await service.result(run_id)
    return await asyncio.to_thread(_read_sides, view.nodes, result["nodes"])


def _read_sides(views: Mapping[str, Any], results: Mapping[str, Any]) -> dict[str, NodeSideJson]:
    """Each node's side from its view (state as shown, exit code) and result (value); reads stdout files."""
    sides: dict[str, NodeSideJson] = {}
    for name, entry in results.items():
        shown = views.get(name, {})
        code = shown.get("exit_code")
        digest, preview = _value(entry)
        sides[name] = {
            "state": str(shown.get("shown") or shown.get("state") or entry["state"]),
            "exit_code": code if isinstance(code, int) else None,
            "value_sha256": digest,
            "preview": preview,
        }
    return sides


def _value(entry: Any) -> tuple[str | None, str]:
    """(digest, preview) of a node's value: its validated output, else its stdout file."""
    if "output" in entry:
        text = json.dumps(entry["output"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest(), text[:PREVIEW_CHARS]
    path = (entry.get("artifacts") or {}).get("stdout")
    if not path:
        return None, ""
    try:  # a store file: never through a symbolic link, never a FIFO or device (as the node pane reads)
        fd, _ = open_regular_nofollow(path)
        with os.fdopen(fd, "rb") as stream:
            data = stream.read(_STDOUT_LIMIT)
    except OSError:
        return None, ""
    return "sha256:" + hashlib.sha256(data).hexdigest(), data[:PREVIEW_CHARS].decode("utf-8", "replace")
