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
import stat
import threading
from collections import OrderedDict
from pathlib import Path

from rho_notebook.errors import StoreError
from rho_notebook.model.canonical import graph_digest
from rho_notebook.model.graph import Graph
from rho_notebook.store.files import check_no_symlink

__all__ = ["load_graph", "remember_graph", "CACHED_GRAPHS"]

CACHED_GRAPHS = 32
"""How many verified graphs one process keeps."""

_Key = tuple[int, int, int, int, int]
_verified: OrderedDict[tuple[str, _Key], tuple[Graph, str]] = OrderedDict()
_lock = threading.Lock()


def load_graph(path: Path, *, below: Path) -> tuple[Graph, str]:
    """The graph stored at ``path`` and its digest (refusing symlinks between ``below`` and it).

    Raises FileNotFoundError when there is no file, StoreError when it is not a regular file or
    not a valid graph. Comparing the digest with the expected one is the caller's job.
    """
    check_no_symlink(path, below=below)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as err:
        msg = f"cannot read {path}: {err.strerror} (store entries must be regular files, not symlinks)"
        raise StoreError(msg) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            msg = f"store entry {path} is not a regular file"
            raise StoreError(msg)
        key = (str(path), (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
        with _lock:
            known = _verified.get(key)
            if known is not None:
                _verified.move_to_end(key)
                return known
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    try:
        graph = Graph.model_validate(json.loads(b"".join(chunks)))
    except (ValueError, TypeError) as err:
        msg = f"{path} is not a valid frozen graph ({str(err).splitlines()[0]}); the store entry is damaged"
        raise StoreError(msg) from None
    result = (graph, graph_digest(graph))
    _keep(key, result)
    return result


def remember_graph(path: Path, graph: Graph, digest: str) -> None:
    """Record that the file just written at ``path`` holds ``graph`` (whose digest is known), so
    the next open in this process need not verify it again. Call it right after writing."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    _keep((str(path), (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)), (graph, digest))


def _keep(key: tuple[str, _Key], result: tuple[Graph, str]) -> None:
    with _lock:
        _verified[key] = result
        while len(_verified) > CACHED_GRAPHS:
            _verified.popitem(last=False)
