"""Reading a stored graph.json: parsed, validated and digested, once per file version.

Plans and runs both keep the frozen graph as graph.json and check its digest on every open (a
modified graph is refused). Parsing, validating and digesting a 750-node graph takes tens of
milliseconds, and status, the notebook widgets and the JupyterLab sidebar open the same run
again and again; so each process remembers the graphs it verified, keyed by the identity of the
file it read them from: device, inode, size, mtime and ctime, taken with ``fstat`` from the very
descriptor the bytes would be read through. Any write to the file, any replacement of it, changes
that key (ctime cannot be set back by an unprivileged writer), and the next open verifies again.

A reader that needs only the graph's name and node names (``status``, the run list: issue 31)
asks for its :class:`GraphOutline` (:func:`load_outline`), which builds no pydantic model when it
can help it: the canonical digest of the file's JSON as it stands (:func:`~rho_notebook.model.canonical.encode`
of the parsed data) is compared with the digest the run or plan was confirmed with. A graph.json
is written as the model's own JSON (``model_dump_json``), and its digest is taken over the same
data (``model_dump(mode="json")``), so a file nobody touched digests the same either way; equal
digests mean the file holds exactly the data of the graph that was validated and confirmed, so
it needs no validation again. Any other file (one written by an older version with fields now
left out, a modified one, one that is not a graph) takes the full path: validated as a
:class:`~rho_notebook.model.graph.Graph` and digested from the model, as before.

What follows from a graph object alone, its graph.json bytes (:func:`graph_file_bytes`) and its
outline (:meth:`GraphOutline.of`), is kept for the last few graph objects: a frozen graph never
changes, and a notebook or a server runs the same plan's graph again and again.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rho_notebook.errors import StoreError
from rho_notebook.model.canonical import ENCODING_VERSION, MAGIC, encode, graph_digest
from rho_notebook.oshelpers import read_fd
from rho_notebook.store.files import FileVersion, check_no_symlink, file_version, open_regular

if TYPE_CHECKING:
    from rho_notebook.model.graph import Graph

__all__ = [
    "load_graph",
    "load_outline",
    "remember_graph",
    "graph_file_bytes",
    "GraphOutline",
    "CACHED_GRAPHS",
    "DUMPED_GRAPHS",
]

CACHED_GRAPHS = 32
"""How many verified graphs one process keeps."""

DUMPED_GRAPHS = 4
"""How many graph objects' graph.json bytes (:func:`graph_file_bytes`), and how many outlines
(:meth:`GraphOutline.of`), one process keeps: each holds its graph object."""

_verified: OrderedDict[tuple[str, FileVersion], tuple[Graph, str]] = OrderedDict()
_outlines: OrderedDict[tuple[str, FileVersion], tuple[GraphOutline, str]] = OrderedDict()
_dumped: OrderedDict[int, tuple[Graph, bytes]] = OrderedDict()
_outlined_graphs: OrderedDict[int, tuple[Graph, GraphOutline]] = OrderedDict()
_lock = threading.Lock()
_Made = TypeVar("_Made")


@dataclass(frozen=True)
class GraphOutline:
    """What a run's status needs of its frozen graph: its name, its node names (in the graph's
    order) and the nodes whose failure does not count (``allow_failure``)."""

    name: str
    nodes: tuple[str, ...]
    allowed_failures: frozenset[str]

    @classmethod
    def of(cls, graph: Graph) -> GraphOutline:
        """The outline of ``graph``; the last few graphs' are kept (keyed by the object, as
        :func:`graph_file_bytes` keys them): an owner outlines the graph it loaded at each open."""
        return _of_graph(_outlined_graphs, graph, cls._build)

    @classmethod
    def _build(cls, graph: Graph) -> GraphOutline:
        return cls(
            name=graph.name,
            nodes=tuple(node.name for node in graph.nodes),
            allowed_failures=frozenset(node.name for node in graph.nodes if node.allow_failure),
        )


def load_outline(path: Path, *, below: Path, expected_digest: str) -> tuple[GraphOutline, str]:
    """The outline of the graph stored at ``path`` and its digest, checked as :func:`load_graph`
    checks the file; without building the graph's models when the file's JSON digests to
    ``expected_digest`` as it stands (the module's docstring says why that is enough). Comparing
    the digest with the expected one is still the caller's job.

    Raises StoreError as :func:`load_graph` does.
    """
    check_no_symlink(path, below=below)
    try:
        fd, info = open_regular(path)
    except FileNotFoundError:
        return _outline_of_graph(path, below=below)  # load_graph names the missing file
    try:
        key = (str(path), file_version(info))
        with _lock:
            known = _outlines.get(key) or _verified.get(key)
        if known is not None:
            return _outlined(key, known)
        data = read_fd(fd)
    finally:
        os.close(fd)
    outline = _light_outline(data, expected_digest)
    if outline is None:
        return _outline_of_graph(path, below=below)
    return _outlined(key, (outline, expected_digest))


def _light_outline(data: bytes, expected_digest: str) -> GraphOutline | None:
    """The outline of graph.json's bytes ``data`` when their JSON digests to ``expected_digest``
    and has a graph's name and nodes; None otherwise (the caller then validates the model)."""
    try:
        parsed: Any = json.loads(data)
        digest = "sha256:" + hashlib.sha256(MAGIC + struct.pack(">I", ENCODING_VERSION) + encode(parsed)).hexdigest()
    except (ValueError, TypeError, RecursionError):
        return None
    if digest != expected_digest or not isinstance(parsed, dict):
        return None
    name, nodes = parsed.get("name"), parsed.get("nodes")
    if not isinstance(name, str) or not isinstance(nodes, list):
        return None
    if not all(isinstance(node, dict) and isinstance(node.get("name"), str) for node in nodes):
        return None
    return GraphOutline(
        name=name,
        nodes=tuple(node["name"] for node in nodes),
        allowed_failures=frozenset(node["name"] for node in nodes if node.get("allow_failure") is True),
    )


def _outline_of_graph(path: Path, *, below: Path) -> tuple[GraphOutline, str]:
    graph, digest = load_graph(path, below=below)
    return GraphOutline.of(graph), digest


def _outlined(
    key: tuple[str, FileVersion], known: tuple[GraphOutline, str] | tuple[Graph, str]
) -> tuple[GraphOutline, str]:
    """``known`` as an outline, remembered for the file version ``key``."""
    found, digest = known
    outline = found if isinstance(found, GraphOutline) else GraphOutline.of(found)
    with _lock:
        _outlines[key] = (outline, digest)
        _outlines.move_to_end(key)
        while len(_outlines) > CACHED_GRAPHS:
            _outlines.popitem(last=False)
    return outline, digest


def load_graph(path: Path, *, below: Path) -> tuple[Graph, str]:
    """The graph stored at ``path`` and its digest (refusing symlinks between ``below`` and it).

    Raises StoreError naming the file when it is missing, not a regular file or not a valid
    graph (a plan or run directory always holds its graph, so a missing one is damage). Comparing
    the digest with the expected one is the caller's job.
    """
    check_no_symlink(path, below=below)
    try:
        fd, info = open_regular(path)
    except FileNotFoundError:
        msg = f"{path} is missing; the store entry is damaged (its frozen graph is gone; delete it and plan again)"
        raise StoreError(msg) from None
    try:
        key = (str(path), file_version(info))
        with _lock:
            known = _verified.get(key)
            if known is not None:
                _verified.move_to_end(key)
                return known
        data = read_fd(fd)
    finally:
        os.close(fd)
    from rho_notebook.model.graph import Graph  # the models: only on this path

    try:
        graph = Graph.model_validate(json.loads(data))
    except (ValueError, TypeError) as err:
        msg = f"{path} is not a valid frozen graph ({str(err).splitlines()[0]}); the store entry is damaged"
        raise StoreError(msg) from None
    result = (graph, graph_digest(graph))
    _keep(key, result)
    return result


def graph_file_bytes(graph: Graph) -> bytes:
    """The bytes a graph.json of ``graph`` holds: its model's JSON and a newline. A graph is
    frozen, so the bytes of the last few graphs are kept (keyed by the object, which the cache
    holds, so its ``id`` is never another's): each run of a plan copies its graph (a 500-node
    graph takes 1.7 ms to dump), and a notebook or a server runs the same plan again and again."""
    return _of_graph(_dumped, graph, _file_bytes)


def _file_bytes(graph: Graph) -> bytes:
    return graph.model_dump_json().encode() + b"\n"


def _of_graph(kept: OrderedDict[int, tuple[Graph, _Made]], graph: Graph, make: Callable[[Graph], _Made]) -> _Made:
    """``make(graph)``, kept in ``kept`` for the last :data:`DUMPED_GRAPHS` graph objects: keyed by
    the object's ``id``, and each entry holds its graph, so that ``id`` is never another graph's."""
    key = id(graph)
    with _lock:
        known = kept.get(key)
        if known is not None and known[0] is graph:
            kept.move_to_end(key)
            return known[1]
    made = make(graph)
    with _lock:
        kept[key] = (graph, made)
        while len(kept) > DUMPED_GRAPHS:
            kept.popitem(last=False)
    return made


def remember_graph(path: Path, graph: Graph, digest: str) -> None:
    """Record that the file just written at ``path`` holds ``graph`` (whose digest is known), so
    the next open in this process need not verify it again. Call it right after writing."""
    fd, info = open_regular(path)
    os.close(fd)
    _keep((str(path), file_version(info)), (graph, digest))


def _keep(key: tuple[str, FileVersion], result: tuple[Graph, str]) -> None:
    with _lock:
        _verified[key] = result
        while len(_verified) > CACHED_GRAPHS:
            _verified.popitem(last=False)
