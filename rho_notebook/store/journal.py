"""The append-only run journal ``events.jsonl``: its format, its writer, and the face of its readers.

:class:`JournalWriter` lives here; reading and following are in
:mod:`~rho_notebook.store.journal_reader`, the chain and watermark check in
:mod:`~rho_notebook.store.journal_integrity` (both re-exported here, the names callers import).

Owns the on-disk journal format: one compact JSON object per line, each carrying a ``seq``
(first key) that starts at 1 and grows by one per line. The writer assigns ``seq``; callers hand
it records without one (see :mod:`rho_notebook.model.events` for the record kinds).

Durability model: :meth:`JournalWriter.append` writes a whole batch with one ``write(2)`` on an
``O_APPEND`` descriptor and does not fsync; :meth:`JournalWriter.sync` fsyncs only when something
was written since the last sync. A crash can therefore leave a *torn* last line (no trailing
newline, or bytes that are not a valid record). Only the last line may be torn:

* :func:`read_journal` skips it and reports ``torn=True``;
* :meth:`JournalWriter.open` cuts it off and reports how many bytes it removed in
  :attr:`JournalWriter.repaired_bytes`, so the caller can journal a ``journal_repaired`` event;
* any other unreadable line is damage, reported as :class:`~rho_notebook.errors.StoreError`.

A valid record is a JSON object whose ``seq`` is a positive integer. Symlinked journals are
refused everywhere.

Integrity (``chained-v1``, recorded in the run manifest as ``journal_format``): every record
ends with ``"h"``, the first 16 hex digits of ``sha256(previous h + "\n" + the line without its
h)`` (the first record chains to ``""``), so an edited, removed or inserted record breaks the
chain at that line. After every fsync the writer also replaces a small *watermark* file
(``journal.mark``: the last fsynced seq and its ``h``, temp file + fsync + rename), so a journal
that was deleted, emptied or cut short below what was fsynced is told apart from a torn tail
(which lies past the watermark). :func:`check_journal` reads a journal against both and reports
damage with the readable prefix instead of raising. Journals written before (no
``journal_format``) are read as before, without either check. This detects accidental and casual
edits, not someone who rewrites the whole chain and the watermark.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.errors import StoreError
from rho_notebook.store._journal_lines import (
    READ_FLAGS,
    WRITE_FLAGS,
    damaged,
    h_of,
    open_nofollow,
    parse_record,
    stamp_lines,
)
from rho_notebook.store.journal_integrity import (
    CHAINED,
    Watermark,
    check_journal,
    mark_line,
    open_mark,
    read_watermark,
    write_watermark,
)
from rho_notebook.store.journal_reader import JournalRead, follow_journal, read_journal

__all__ = [
    "CHAINED",
    "JournalWriter",
    "JournalRead",
    "Watermark",
    "read_journal",
    "check_journal",
    "read_watermark",
    "write_watermark",
    "follow_journal",
]

MARK_DURABLE_SECONDS = 1.0
"""Between fsyncs of the journal that end or open an execution, the watermark is made durable at
most this often (it is still rewritten, not fdatasynced, at every journal fsync)."""
_DURABLE_MARK_KINDS = frozenset({"run_started", "run_completed", "cancel_acknowledged", "needs_recovery"})
_TAIL_CHUNK = 1 << 16


# --------------------------------------------------------------------------- writer


@dataclass(frozen=True)
class _Tail:
    """What :meth:`JournalWriter.open` learns from the end of an existing journal."""

    valid_end: int
    """File offset just past the last complete valid line (where appends continue)."""
    last_seq: int
    last_h: str = ""
    """The chain hash of the last valid record ("" if none, or unchained)."""


def _read_tail(fd: int, size: int) -> tuple[int, bytes]:
    """The last bytes of the file: enough to hold the final segment and the two lines before it.

    Returns ``(base, data)`` where ``base`` is the file offset of ``data[0]``; unless ``base`` is
    0, ``data`` starts at a line boundary.
    """
    length = _TAIL_CHUNK
    while True:
        base = max(0, size - length)
        data = os.pread(fd, size - base, base)
        if base == 0:
            return 0, data
        if data.count(b"\n") >= 4:
            cut = data.index(b"\n") + 1
            return base + cut, data[cut:]
        length *= 2


def _line_spans(base: int, data: bytes) -> tuple[list[tuple[int, int]], int]:
    """Spans ``(start, end)`` of the complete lines in ``data`` (end excludes the newline),
    and the file offset where the unterminated final segment starts."""
    spans: list[tuple[int, int]] = []
    start = 0
    while (newline := data.find(b"\n", start)) != -1:
        spans.append((base + start, base + newline))
        start = newline + 1
    return spans, base + start


def _scan_tail(path: Path, fd: int, size: int) -> _Tail:
    """Find the last valid seq and where the torn last line (if any) starts.

    Only the tail is examined, so reopening a long journal stays cheap; full validation is
    :func:`read_journal`'s job.
    """
    if size == 0:
        return _Tail(valid_end=0, last_seq=0)
    base, data = _read_tail(fd, size)
    spans, segment_start = _line_spans(base, data)
    if segment_start == size and spans:
        last_start, last_end = spans[-1]
        record = parse_record(data[last_start - base : last_end - base])
        if record is not None:
            return _Tail(valid_end=size, last_seq=record["seq"], last_h=h_of(record))
        spans.pop()  # the last complete line is the torn one
        valid_end = last_start
    else:
        valid_end = segment_start  # an unterminated final segment is the torn line
    if not spans:
        return _Tail(valid_end=valid_end, last_seq=0)
    start, end = spans[-1]
    record = parse_record(data[start - base : end - base])
    if record is None:
        raise damaged(path, _line_number(fd, start), "line is not a valid journal record")
    return _Tail(valid_end=valid_end, last_seq=record["seq"], last_h=h_of(record))


def _line_number(fd: int, offset: int) -> int:
    """1-based number of the line starting at ``offset`` (only computed for error messages)."""
    return os.pread(fd, offset, 0).count(b"\n") + 1


class JournalWriter:
    """Appends records to one run journal; one writer per journal (the run owner).

    Create it with :meth:`open`. Not thread-safe; cheap enough to call from the event loop
    (one ``write(2)`` per batch, no fsync until :meth:`sync`).
    """

    fsync_count: int
    """How many fsyncs :meth:`sync` has issued (for benchmarks and tests)."""

    def __init__(
        self, path: Path, *, fd: int, tail: _Tail, repaired_bytes: int, mark: tuple[Path, int] | None = None
    ) -> None:
        self._path = path
        self._fd: int | None = fd
        self._mark = mark[0] if mark is not None else None
        self._mark_fd = mark[1] if mark is not None else None
        self._mark_durable_at = -MARK_DURABLE_SECONDS
        self._mark_pending = False
        """The watermark was last written without fdatasync."""
        self._closing_kind = False
        self._last_seq = tail.last_seq
        self._last_h = tail.last_h
        self._size = tail.valid_end
        self._held: list[bytes] = []
        """Lines appended ``later``, not written yet (:meth:`flush`)."""
        self._repaired_bytes = repaired_bytes
        self._dirty = repaired_bytes > 0
        self.fsync_count = 0

    @classmethod
    def open(cls, path: Path, *, mark: Path | None = None) -> JournalWriter:
        """Open (creating 0600) the journal at ``path`` for appending, repairing a torn tail.

        With ``mark`` (a ``chained-v1`` run: its existing watermark file) every record carries
        its chain hash and every :meth:`sync` that fsyncs also rewrites the watermark. Check the
        journal with :func:`check_journal` first: opening does not verify the chain.

        Raises
        ------
        StoreError
            If ``path`` is a symlink or not a regular file, or a line before the last is damaged.
        """
        try:
            fd = open_nofollow(path, WRITE_FLAGS)
        except FileNotFoundError:
            msg = f"cannot create journal {path}: its directory does not exist"
            raise StoreError(msg) from None
        mark_fd = None
        try:
            tail, repaired = _scan_and_repair(path, fd)
            if mark is not None:
                mark_fd = open_mark(mark)
        except BaseException:
            os.close(fd)
            raise
        return cls(
            path,
            fd=fd,
            tail=tail,
            repaired_bytes=repaired,
            mark=(mark, mark_fd) if mark is not None and mark_fd is not None else None,
        )

    @property
    def path(self) -> Path:
        return self._path

    @property
    def last_seq(self) -> int:
        """The seq of the last record in the journal (0 if it is empty)."""
        return self._last_seq

    @property
    def repaired_bytes(self) -> int:
        """How many bytes of a torn last line :meth:`open` cut off (0 if none)."""
        return self._repaired_bytes

    @property
    def closed(self) -> bool:
        return self._fd is None

    def append(self, records: Sequence[dict[str, Any]], *, later: bool = False) -> list[dict[str, Any]]:
        """Append ``records`` as one write; return copies carrying their assigned ``seq``.

        Nothing is written if any record cannot be encoded. Records must not carry ``seq``.
        Not durable until :meth:`sync`. With ``later`` the lines are held and written by the
        next append without it, :meth:`flush` or :meth:`sync`, in the same write (a scheduler
        turn's records as one write): a process killed before then loses them, as it would have
        a moment earlier, before they were made. A failed write of held lines closes the writer
        (records already handed out cannot be taken back).
        """
        fd = self._require_open()
        chained = self._mark is not None
        data, stamped, last_h = stamp_lines(
            records, first_seq=self._last_seq + 1, prev=self._last_h if chained else None
        )
        if not stamped:
            return []
        if chained and not self._closing_kind:
            for record in records:
                if record.get("kind") in _DURABLE_MARK_KINDS:
                    self._closing_kind = True
                    break
        if later:
            self._held.append(data)
        else:
            self._write_out(fd, data)
        self._last_seq += len(stamped)
        self._last_h = last_h
        self._dirty = True
        return stamped

    def flush(self) -> None:
        """Write the lines :meth:`append` holds (``later``), if any: before the owner waits."""
        if self._held:
            self._write_out(self._require_open(), b"")

    def sync(self) -> None:
        """fsync the journal if anything was written (or repaired) since the last sync; then
        (chained runs) rewrite the watermark with the last seq and hash.

        The watermark is rewritten in place at every such sync (it survives the owner being
        killed) and made durable (``fdatasync``) when the batch ends or opens an execution
        (:data:`_DURABLE_MARK_KINDS`), at :meth:`close`, and otherwise at most every
        :data:`MARK_DURABLE_SECONDS`: a durable rename per launch doubled its cost.
        """
        fd = self._require_open()
        self.flush()
        if not self._dirty:
            return
        # the watermark's line is made before the fsync, not after it: right after an fsync the
        # CPU caches are cold, and the same work cost 3-4x as much (bench/fan_overhead.py (c))
        mark = mark_line(self._last_seq, self._last_h) if self._mark_fd is not None else None
        os.fsync(fd)
        self.fsync_count += 1
        self._dirty = False
        if mark is not None:
            now = time.monotonic()
            durable = self._closing_kind or now - self._mark_durable_at >= MARK_DURABLE_SECONDS
            self._write_mark(durable=durable, data=mark)
            self._closing_kind = False
            if durable:
                self._mark_durable_at = now

    def _write_mark(self, *, durable: bool, data: bytes | None = None) -> None:
        if self._mark_fd is None:
            return
        if data is None:
            data = mark_line(self._last_seq, self._last_h)
        try:
            os.pwrite(self._mark_fd, data, 0)
            if durable:
                os.fdatasync(self._mark_fd)
        except OSError as err:
            msg = f"cannot write the journal watermark {self._mark}: {err.strerror}"
            raise StoreError(msg) from err
        self._mark_pending = not durable

    def close(self) -> None:
        """Sync pending writes (and make the watermark durable), then close. Closing twice is harmless."""
        if self._fd is None:
            return
        try:
            self.sync()
            if self._mark_pending:
                self._write_mark(durable=True)
        finally:
            fd, self._fd = self._fd, None
            os.close(fd)
            self._close_mark()

    def _close_mark(self) -> None:
        mark_fd, self._mark_fd = self._mark_fd, None
        if mark_fd is not None:
            os.close(mark_fd)

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _require_open(self) -> int:
        if self._fd is None:
            msg = f"journal writer for {self._path} is closed; open it again with JournalWriter.open"
            raise StoreError(msg)
        return self._fd

    def _write_out(self, fd: int, data: bytes) -> None:
        """Write the held lines and then ``data`` (one write)."""
        held, self._held = self._held, []
        if held:
            data = b"".join((*held, data))
        try:
            self._write_all(fd, data)
        except StoreError:
            if held and self._fd is not None:  # lines handed out were not written: nothing may follow them
                self._refuse_appends(fd)
            raise
        self._size += len(data)

    def _write_all(self, fd: int, data: bytes) -> None:
        """One ``write(2)`` for the batch, looping only on a partial write.

        On failure the partial batch is cut off again so the journal ends on a whole line.
        """
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError as err:
            self._undo_partial(fd)
            msg = f"cannot append to journal {self._path}: {err.strerror}"
            raise StoreError(msg) from err

    def _undo_partial(self, fd: int) -> None:
        try:
            os.ftruncate(fd, self._size)
        except OSError:
            # The tail stays torn; the next open() repairs it. Refuse further appends meanwhile.
            self._refuse_appends(fd)

    def _refuse_appends(self, fd: int) -> None:
        """Close the journal (``fd``) and its watermark: every later call raises "closed"."""
        self._fd = None
        os.close(fd)
        self._close_mark()


def _scan_and_repair(path: Path, fd: int) -> tuple[_Tail, int]:
    size = os.fstat(fd).st_size
    read_fd = open_nofollow(path, READ_FLAGS)
    try:
        _check_same_file(path, fd, read_fd)
        tail = _scan_tail(path, read_fd, size)
    finally:
        os.close(read_fd)
    repaired = size - tail.valid_end
    if repaired:
        os.ftruncate(fd, tail.valid_end)
    return tail, repaired


def _check_same_file(path: Path, fd: int, other: int) -> None:
    a, b = os.fstat(fd), os.fstat(other)
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
        msg = f"journal {path} was replaced while it was being opened; try again"
        raise StoreError(msg)
