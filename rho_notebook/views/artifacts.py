"""Bounded, no-follow reads of an attempt's artifacts for the node pane.

A pane never carries more than :data:`PANE_BYTES` of one stream (the tail); a file that is absent,
a symlink or not a regular file reads as absent (a FIFO would block a read).
"""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path
from typing import Any

from rho_notebook.oshelpers import open_regular_nofollow
from rho_notebook.service.wire import StreamView

__all__ = ["ANSWER_BYTES", "PANE_BYTES", "StreamTail", "empty_stream", "read_json", "read_stream"]

PANE_BYTES = 64 * 1024
"""At most this many bytes of one stream (the tail) travel to the output pane."""

ANSWER_BYTES = 256 * 1024


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


def read_stream(path: Path, *, limit: int, truncated: bool, node_limit: int) -> StreamView | None:
    """The last ``limit`` bytes of the stream in ``path``; None when there is no such file."""
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


def empty_stream(node_limit: int) -> StreamView:
    """A stream the process never wrote to (no file): shown as empty, not as absent."""
    return {"text": "", "bytes": 0, "start": 0, "end": 0, "truncated": False, "limit": node_limit}


def read_json(path: Path) -> tuple[bool, Any]:
    """(True, the value) of a JSON file; (False, None) when it is absent or not JSON."""
    try:
        fd, _ = open_regular_nofollow(path)
    except OSError:
        return False, None
    try:
        with os.fdopen(fd, "rb") as handle:
            return True, json.loads(handle.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False, None
