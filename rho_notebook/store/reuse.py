"""The reuse index: reuse key -> the stored successful attempt it names, one small file per key.

Layout: ``workflows/reuse/<hex[:2]>/<hex>.json`` (``hex`` is the key without ``sha256:``) holding
``{"run_id", "node", "attempt", "value_sha256", "workspace_key"}``; directories 0700, files 0600,
written atomically like the rest of the store (:mod:`rho_notebook.store.files`).

The index is a cache, never a source of truth. A lookup is one read; any entry that is missing,
damaged, a symlink, for another workspace, or whose source attempt no longer holds the value it
recorded (``value.json`` gone or with another sha256; the run deleted) is a *miss*, never an
error. The run driver writes an entry only after the ``node_finished`` record of that attempt is
fsynced in its journal, so an entry never names an attempt the journal does not prove succeeded;
a lookup therefore verifies the value file and not the source run's journal.

Entries are written non-durably: a crash may lose or truncate one, which is a miss later.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.errors import StoreError
from rho_notebook.oshelpers import read_regular_nofollow
from rho_notebook.store.files import atomic_write, json_bytes
from rho_notebook.store.layout import VALUE_FILE, StoreLayout

__all__ = ["ReuseEntry", "ReuseHit", "ReuseIndex", "value_file_sha256"]


@dataclass(frozen=True)
class ReuseEntry:
    """Where a successful attempt with some reuse key is stored."""

    run_id: str
    node: str
    attempt: int
    value_sha256: str | None
    """``sha256:<hex>`` of the attempt's ``value.json`` bytes; None when the node stores no value."""
    workspace_key: str

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "node": self.node,
            "attempt": self.attempt,
            "value_sha256": self.value_sha256,
            "workspace_key": self.workspace_key,
        }

    @classmethod
    def from_json(cls, data: Any) -> ReuseEntry | None:
        """The entry, or None when ``data`` is not one (a damaged file is a miss)."""
        if not isinstance(data, dict):
            return None
        run_id, node, attempt = data.get("run_id"), data.get("node"), data.get("attempt")
        value_sha256, workspace_key = data.get("value_sha256"), data.get("workspace_key")
        if not (isinstance(run_id, str) and isinstance(node, str) and isinstance(workspace_key, str)):
            return None
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
            return None
        if value_sha256 is not None and not isinstance(value_sha256, str):
            return None
        if "/" in run_id or "/" in node or run_id in ("", ".", "..") or node in ("", ".", ".."):
            return None
        return cls(run_id, node, attempt, value_sha256, workspace_key)


@dataclass(frozen=True)
class ReuseHit:
    """A verified entry and the bytes of its value file (None when the node stores no value)."""

    entry: ReuseEntry
    value_bytes: bytes | None


def value_file_sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class ReuseIndex:
    """Reads and writes the reuse index of one store."""

    def __init__(self, layout: StoreLayout) -> None:
        self.layout = layout

    def path(self, key: str) -> Path:
        digest = key.removeprefix("sha256:")
        if len(digest) < 3 or not all(c in "0123456789abcdef" for c in digest):
            msg = f"reuse key {key!r} is not a sha256 digest"
            raise ValueError(msg)
        return self.layout.reuse_index / digest[:2] / f"{digest}.json"

    def attempt_dir(self, entry: ReuseEntry) -> Path:
        return self.layout.run_dir(entry.run_id) / "nodes" / entry.node / "attempts" / str(entry.attempt)

    def entry(self, key: str) -> ReuseEntry | None:
        """The entry stored under ``key`` as it is on disk (not verified); None if absent or damaged."""
        try:
            data = json.loads(read_regular_nofollow(self.path(key)))
        except (OSError, ValueError):  # absent, a symlink, not a file, unreadable, not JSON
            return None
        return ReuseEntry.from_json(data)

    def lookup(self, key: str, *, workspace_key: str) -> ReuseHit | None:
        """The verified hit for ``key`` in ``workspace_key``, or None (a miss).

        Verified: the entry is for this workspace, and its source attempt's ``value.json`` exists
        with the recorded sha256 (or, for a node without a value, its run folder still exists).
        """
        entry = self.entry(key)
        if entry is None or entry.workspace_key != workspace_key:
            return None
        if entry.value_sha256 is None:
            try:
                info = os.lstat(self.layout.run_dir(entry.run_id) / "manifest.json")
            except OSError:
                return None
            return ReuseHit(entry, None) if stat.S_ISREG(info.st_mode) else None
        try:
            data = read_regular_nofollow(self.attempt_dir(entry) / VALUE_FILE)
        except OSError:
            return None
        if value_file_sha256(data) != entry.value_sha256:
            return None
        return ReuseHit(entry, data)

    def record(self, key: str, entry: ReuseEntry) -> None:
        """Store ``entry`` under ``key`` (atomic, not durable: a lost entry is a later miss).

        Raises
        ------
        StoreError
            A store directory on the way is a symlink or not a directory.
        """
        path = self.path(key)
        self.layout.ensure(path.parent)
        try:
            atomic_write(path, json_bytes(entry.to_json(), compact=True), durable=False)
        except OSError as err:
            msg = f"cannot write the reuse index entry {path}: {err.strerror or err}"
            raise StoreError(msg) from None

    def record_attempt(self, key: str, *, run_id: str, node: str, attempt: int, workspace_key: str) -> None:
        """Store an entry for a finished attempt, reading the sha256 of its ``value.json`` (if any)."""
        entry = ReuseEntry(run_id, node, attempt, None, workspace_key)
        try:
            data = read_regular_nofollow(self.attempt_dir(entry) / VALUE_FILE)
        except FileNotFoundError:
            data = None
        except OSError as err:
            msg = f"cannot read {self.attempt_dir(entry) / 'value.json'} for the reuse index: {err}"
            raise StoreError(msg) from None
        if data is not None:
            entry = ReuseEntry(run_id, node, attempt, value_file_sha256(data), workspace_key)
        self.record(key, entry)
