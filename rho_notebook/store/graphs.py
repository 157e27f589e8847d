"""Reading a stored graph.json: parsed, validated and digested, once per file version.

Plans and runs both keep the frozen graph as graph.json and check its digest on every open (a
modified graph is refused). Parsing, validating and digesting a 750-node graph takes tens of
milliseconds, and status, the notebook widgets and the JupyterLab sidebar open the same run
again and again; so each process remembers the graphs it verified, keyed by the identity of the
file it read them from: device, inode, size, mtime and ctime, taken with ``fstat`` from the very
descriptor the bytes would be read through. Any write to the file, any replacement of it, changes
that key (ctime cannot be set back by an unprivileged writer), and the next open verifies again.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from pathlib import Path

from rho_notebook.errors import StoreError
from rho_notebook.model.canonical import graph_digest
from rho_notebook.model.graph import Graph
from rho_notebook.oshelpers import read_fd
from rho_notebook.store.files import FileVersion, check_no_symlink, file_version, open_regular

__all__ = ["load_graph", "remember_graph", "CACHED_GRAPHS"]

CACHED_GRAPHS = 32
"""How many verified graphs one process keeps."""

_verified: OrderedDict[tuple[str, FileVersion], tuple[Graph, str]] = OrderedDict()
_lock = threading.Lock()


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
    try:
        graph = Graph.model_validate(json.loads(data))
    except (ValueError, TypeError) as err:
        msg = f"{path} is not a valid frozen graph ({str(err).splitlines()[0]}); the store entry is damaged"
        raise StoreError(msg) from None
    result = (graph, graph_digest(graph))
    _keep(key, result)
    return result


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
