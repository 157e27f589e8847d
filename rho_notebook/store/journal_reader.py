"""Reading a run journal whole (:func:`read_journal`) or as it grows (:func:`follow_journal`).

Only the last line may be torn (a crash mid-append): it is skipped and reported; any other
unreadable line is damage, raised as :class:`~rho_notebook.errors.StoreError`. The chain of a
``chained-v1`` journal is not checked here: :func:`rho_notebook.store.journal_integrity.check_journal`
does that. The format is described in :mod:`rho_notebook.store.journal`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.errors import StoreError
from rho_notebook.store._journal_lines import READ_FLAGS, SeqChecker, open_nofollow, split_lines
from rho_notebook.store.files import read_nofollow

__all__ = ["JournalRead", "JournalTail", "follow_journal", "read_journal"]


@dataclass(frozen=True)
class JournalRead:
    """The result of :func:`read_journal` and :func:`~rho_notebook.store.journal_integrity.check_journal`."""

    events: list[dict[str, Any]]
    """Records with ``seq > after_seq``, in order (with damage: those before it)."""
    torn: bool
    """True if a torn last line was skipped."""
    last_seq: int
    """The seq of the last valid record in the whole journal (0 if none)."""
    damage: str | None = None
    """Why the journal cannot be trusted past ``events`` (only from ``check_journal``)."""


def read_journal(path: Path, *, after_seq: int = 0) -> JournalRead:
    """Read every valid record of the journal at ``path`` (the chain, if any, is not checked:
    ``check_journal`` does that).

    Parameters
    ----------
    path
        The ``events.jsonl`` file.
    after_seq
        Only records with a greater ``seq`` are returned (all are still validated).

    Raises
    ------
    StoreError
        If the journal is missing, a symlink, or damaged before its last line.
    """
    try:
        data = read_nofollow(path)
    except FileNotFoundError:
        msg = f"journal {path} does not exist; was the run created?"
        raise StoreError(msg) from None
    lines, torn = split_lines(data)
    checker = SeqChecker(path)
    events = [r for r in map(checker.check, lines) if r["seq"] > after_seq]
    return JournalRead(events=events, torn=torn, last_seq=checker.last_seq)


async def _open_when_present(path: Path, *, poll_seconds: float, stop: Callable[[], bool] | None) -> int | None:
    """Open the journal for reading, waiting for it to appear; None if ``stop()`` came first."""
    import asyncio  # here: a reader that does not follow (status, runs) starts without it

    while True:
        stopping = stop is not None and stop()
        try:
            return open_nofollow(path, READ_FLAGS)
        except FileNotFoundError:
            if stopping:
                return None
        await asyncio.sleep(poll_seconds)


class JournalTail:
    """Reads the complete lines appended past ``offset``.

    ``offset`` always sits just after a newline: a line still being written is not consumed and
    is read again on the next drain. Re-reading from a line boundary also keeps the follower
    correct when ``JournalWriter.open`` cuts off a torn tail and appends after it.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.offset = 0
        self.checker = SeqChecker(path)

    @classmethod
    def open(cls, path: Path) -> JournalTail:
        """A tail of the journal at ``path`` from its start (never through a link); close it."""
        return cls(path, open_nofollow(path, READ_FLAGS))

    def close(self) -> None:
        os.close(self.fd)

    def drain(self) -> list[dict[str, Any]]:
        """Every complete record appended since the last call."""
        size = os.fstat(self.fd).st_size
        if size < self.offset:
            msg = f"journal {self.path} shrank below records already read; it was rewritten"
            raise StoreError(msg)
        if size == self.offset:
            return []
        data = os.pread(self.fd, size - self.offset, self.offset)
        complete = data.rfind(b"\n") + 1
        if complete == 0:
            return []  # a line is still being written
        records = [self.checker.check(line) for line in data[: complete - 1].split(b"\n")]
        self.offset += complete
        return records


async def follow_journal(
    path: Path,
    *,
    after_seq: int = 0,
    poll_seconds: float = 0.05,
    stop: Callable[[], bool] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Yield journal records (``seq > after_seq``) as they are appended.

    Keeps a file offset and reads only bytes past the last complete line it consumed; a line
    still being written is left in the file (and read again) until its newline arrives. Waits
    for the journal to be created. Ends when ``stop()`` returns True and everything written
    before that has been yielded; without ``stop`` it follows until cancelled.

    Raises
    ------
    StoreError
        If the journal is a symlink, damaged, or shrinks below what was already read.
    """
    import asyncio  # as in _open_when_present

    fd = await _open_when_present(path, poll_seconds=poll_seconds, stop=stop)
    if fd is None:
        return
    try:
        follower = JournalTail(path, fd)
        while True:
            stopping = stop is not None and stop()
            for record in follower.drain():
                if record["seq"] > after_seq:
                    yield record
            if stopping:
                return
            await asyncio.sleep(poll_seconds)
    finally:
        os.close(fd)
