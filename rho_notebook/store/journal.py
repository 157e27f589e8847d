"""The append-only run journal ``events.jsonl``: writing, reading and following it.

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

import asyncio
import errno
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.errors import NotFound, NotRegularFile, StoreError
from rho_notebook.oshelpers import open_regular_nofollow
from rho_notebook.store.files import atomic_write, read_nofollow

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
_MARK_SIZE = 128
_DURABLE_MARK_KINDS = frozenset({"run_started", "run_completed", "cancel_acknowledged", "needs_recovery"})

CHAINED = "chained-v1"
"""The ``journal_format`` of a run whose records carry a hash chain and whose folder keeps a watermark."""

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_WRITE_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_TAIL_CHUNK = 1 << 16


# --------------------------------------------------------------------------- shared helpers


def _parse_record(line: bytes) -> dict[str, Any] | None:
    """The record on ``line`` (without its newline), or None if it is not a valid record."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    seq = value.get("seq")
    if type(seq) is not int or seq < 1:
        return None
    return value


_H_PREFIX = b',"h":"'
_H_LEN = 16
_H_SUFFIX_LEN = len(_H_PREFIX) + _H_LEN + 2  # ,"h":"<16 hex>"}


def _chain(prev: str, body: bytes) -> str:
    """The ``h`` of a record whose line without ``h`` is ``body``, after a record whose ``h`` is ``prev``."""
    return hashlib.sha256(prev.encode() + b"\n" + body).hexdigest()[:_H_LEN]


def _chained_line(prev: str, record: dict[str, Any]) -> tuple[str, str]:
    """(the line of ``record`` with its ``h`` appended as the last key, that ``h``)."""
    body = _ENCODER.encode(record)
    h = _chain(prev, body.encode())
    return f'{body[:-1]},"h":"{h}"}}', h


def _verify_chain(line: bytes, record: dict[str, Any], prev: str) -> str | None:
    """Why ``line`` does not chain to ``prev`` (None if it does)."""
    h = record.get("h")
    if not isinstance(h, str) or line[-_H_SUFFIX_LEN : -_H_LEN - 2] != _H_PREFIX or not line.endswith(b'"}'):
        return f"record seq {record['seq']} carries no chain hash in a chained journal"
    body = line[:-_H_SUFFIX_LEN] + b"}"
    if _chain(prev, body) != h or line[-_H_LEN - 2 : -2].decode("ascii", "replace") != h:
        return f"record seq {record['seq']} does not match its chain hash (it was edited, or a record before it was removed)"
    return None


def _symlink_error(path: Path) -> StoreError:
    msg = f"journal {path} is a symlink; the store rejects symlinked entries (remove it)"
    return StoreError(msg)


def _open_nofollow(path: Path, flags: int, mode: int = 0o600) -> int:
    """Open ``path`` without following a final symlink and check it is a regular file."""
    try:
        fd, _ = open_regular_nofollow(path, flags, mode)
    except NotRegularFile:
        msg = f"journal {path} is not a regular file"
        raise StoreError(msg) from None
    except OSError as err:
        if err.errno == errno.ELOOP or os.path.islink(path):
            raise _symlink_error(path) from None
        if isinstance(err, FileNotFoundError):
            raise
        msg = f"cannot open journal {path}: {err.strerror}"
        raise StoreError(msg) from None
    return fd


def _damaged(path: Path, line_no: int, why: str) -> StoreError:
    msg = (
        f"{path}:{line_no}: {why}; only the last journal line may be torn, so the journal is "
        "damaged (restore it from a backup or remove the run)"
    )
    return StoreError(msg)


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
        record = _parse_record(data[last_start - base : last_end - base])
        if record is not None:
            return _Tail(valid_end=size, last_seq=record["seq"], last_h=_h_of(record))
        spans.pop()  # the last complete line is the torn one
        valid_end = last_start
    else:
        valid_end = segment_start  # an unterminated final segment is the torn line
    if not spans:
        return _Tail(valid_end=valid_end, last_seq=0)
    start, end = spans[-1]
    record = _parse_record(data[start - base : end - base])
    if record is None:
        raise _damaged(path, _line_number(fd, start), "line is not a valid journal record")
    return _Tail(valid_end=valid_end, last_seq=record["seq"], last_h=_h_of(record))


def _h_of(record: dict[str, Any]) -> str:
    h = record.get("h")
    return h if isinstance(h, str) else ""


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
            fd = _open_nofollow(path, _WRITE_FLAGS)
        except FileNotFoundError:
            msg = f"cannot create journal {path}: its directory does not exist"
            raise StoreError(msg) from None
        mark_fd = None
        try:
            tail, repaired = _scan_and_repair(path, fd)
            if mark is not None:
                mark_fd = _open_mark(mark)
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

    def append(self, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Append ``records`` as one write; return copies carrying their assigned ``seq``.

        Nothing is written if any record cannot be encoded. Records must not carry ``seq``.
        Not durable until :meth:`sync`.
        """
        fd = self._require_open()
        stamped = _stamp(records, first_seq=self._last_seq + 1)
        if not stamped:
            return []
        last_h = self._last_h
        if self._mark is None:
            data = "".join([_ENCODER.encode(r) + "\n" for r in stamped]).encode()
        else:
            lines = []
            for record in stamped:
                line, last_h = _chained_line(last_h, record)
                record["h"] = last_h
                lines.append(line + "\n")
            data = "".join(lines).encode()
            self._closing_kind = self._closing_kind or any(r.get("kind") in _DURABLE_MARK_KINDS for r in stamped)
        self._write_all(fd, data)
        self._last_seq = stamped[-1]["seq"]
        self._last_h = last_h
        self._size += len(data)
        self._dirty = True
        return stamped

    def sync(self) -> None:
        """fsync the journal if anything was written (or repaired) since the last sync; then
        (chained runs) rewrite the watermark with the last seq and hash.

        The watermark is rewritten in place at every such sync (it survives the owner being
        killed) and made durable (``fdatasync``) when the batch ends or opens an execution
        (:data:`_DURABLE_MARK_KINDS`), at :meth:`close`, and otherwise at most every
        :data:`MARK_DURABLE_SECONDS`: a durable rename per launch doubled its cost.
        """
        fd = self._require_open()
        if not self._dirty:
            return
        os.fsync(fd)
        self.fsync_count += 1
        self._dirty = False
        if self._mark_fd is not None:
            now = time.monotonic()
            durable = self._closing_kind or now - self._mark_durable_at >= MARK_DURABLE_SECONDS
            self._write_mark(durable=durable)
            self._closing_kind = False
            if durable:
                self._mark_durable_at = now

    def _write_mark(self, *, durable: bool) -> None:
        if self._mark_fd is None:
            return
        data = _mark_bytes(Watermark(seq=self._last_seq, h=self._last_h))
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
            self._fd = None
            os.close(fd)
            self._close_mark()


def _scan_and_repair(path: Path, fd: int) -> tuple[_Tail, int]:
    size = os.fstat(fd).st_size
    read_fd = _open_nofollow(path, _READ_FLAGS)
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


def _stamp(records: Sequence[dict[str, Any]], *, first_seq: int) -> list[dict[str, Any]]:
    stamped: list[dict[str, Any]] = []
    for offset, record in enumerate(records):
        if "seq" in record:
            msg = "journal records must not carry 'seq'; the journal assigns it"
            raise ValueError(msg)
        stamped.append({"seq": first_seq + offset, **record})
    return stamped


# --------------------------------------------------------------------------- reader


@dataclass(frozen=True)
class JournalRead:
    """The result of :func:`read_journal` and :func:`check_journal`."""

    events: list[dict[str, Any]]
    """Records with ``seq > after_seq``, in order (with damage: those before it)."""
    torn: bool
    """True if a torn last line was skipped."""
    last_seq: int
    """The seq of the last valid record in the whole journal (0 if none)."""
    damage: str | None = None
    """Why the journal cannot be trusted past ``events`` (only from :func:`check_journal`)."""


class _Damage(Exception):
    def __init__(self, line_no: int, why: str) -> None:
        super().__init__(why)
        self.line_no = line_no
        self.why = why


class _SeqChecker:
    """Validates lines in order: each a record, each seq greater than the one before, and (chained)
    each record's hash chained to the one before."""

    def __init__(self, path: Path, *, line_no: int = 0, last_seq: int = 0, chained: bool = False) -> None:
        self.path = path
        self.line_no = line_no
        self.last_seq = last_seq
        self.chained = chained
        self.last_h = ""

    def check(self, line: bytes) -> dict[str, Any]:
        try:
            return self.check_or_damage(line)
        except _Damage as err:
            raise _damaged(self.path, err.line_no, err.why) from None

    def check_or_damage(self, line: bytes) -> dict[str, Any]:
        """:meth:`check`, raising :class:`_Damage` (line and reason) instead of a StoreError."""
        self.line_no += 1
        record = _parse_record(line)
        if record is None:
            raise _Damage(self.line_no, "line is not a valid journal record")
        if record["seq"] <= self.last_seq:
            raise _Damage(self.line_no, f"seq {record['seq']} does not follow seq {self.last_seq}")
        if self.chained:
            why = _verify_chain(line, record, self.last_h)
            if why is not None:
                raise _Damage(self.line_no, why)
            self.last_h = record["h"]
        self.last_seq = record["seq"]
        return record


@dataclass(frozen=True)
class Watermark:
    """What a chained journal is known to hold durably: its last fsynced seq and that record's hash."""

    seq: int
    h: str


def _mark_check(seq: int, h: str) -> str:
    return hashlib.sha256(f"{seq}:{h}".encode()).hexdigest()[:8]


def _mark_bytes(mark: Watermark) -> bytes:
    """The watermark as one fixed-size line (overwritten in place, within one disk sector)."""
    text = _ENCODER.encode({"seq": mark.seq, "h": mark.h, "c": _mark_check(mark.seq, mark.h)})
    return text.ljust(_MARK_SIZE - 1).encode() + b"\n"


def _open_mark(path: Path) -> int:
    try:
        fd, _ = open_regular_nofollow(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        msg = f"journal watermark {path} is missing; the run is damaged"
        raise StoreError(msg) from None
    except (NotRegularFile, OSError):
        msg = f"journal watermark {path} is not a regular file"
        raise StoreError(msg) from None
    return fd


def write_watermark(path: Path, mark: Watermark) -> None:
    """Create or replace the watermark durably (temp file, fsync, rename, directory fsync)."""
    try:
        atomic_write(path, _mark_bytes(mark))
    except OSError as err:
        msg = f"cannot write the journal watermark {path}: {err.strerror}"
        raise StoreError(msg) from err


def read_watermark(path: Path) -> Watermark | None:
    """The watermark at ``path``; None when it does not exist.

    Raises
    ------
    StoreError
        If it is a symlink, not a regular file, or not a watermark.
    """
    for _ in range(3):  # a read racing the owner's in-place rewrite fails its check: read again
        try:
            data = read_nofollow(path)
        except FileNotFoundError:
            return None
        try:
            value = json.loads(data)
        except ValueError:
            value = None
        if (
            isinstance(value, dict)
            and type(value.get("seq")) is int
            and value["seq"] >= 0
            and isinstance(value.get("h"), str)
            and value.get("c") == _mark_check(value["seq"], value["h"])
        ):
            return Watermark(seq=value["seq"], h=value["h"])
    msg = f"journal watermark {path} is not a watermark ({data[:60]!r})"
    raise StoreError(msg)


def _split(data: bytes) -> tuple[list[bytes], bool]:
    """The complete lines of a journal and whether a torn last line was dropped."""
    lines = data.split(b"\n")
    final = lines.pop()  # b"" when the file ends with a newline
    torn = final != b""
    if not torn and lines and _parse_record(lines[-1]) is None:
        lines.pop()
        torn = True
    return lines, torn


def read_journal(path: Path, *, after_seq: int = 0) -> JournalRead:
    """Read every valid record of the journal at ``path`` (the chain, if any, is not checked:
    :func:`check_journal` does that).

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
    lines, torn = _split(data)
    checker = _SeqChecker(path)
    events = [r for r in map(checker.check, lines) if r["seq"] > after_seq]
    return JournalRead(events=events, torn=torn, last_seq=checker.last_seq)


def check_journal(path: Path, *, mark: Path, after_seq: int = 0) -> JournalRead:
    """Read a ``chained-v1`` journal against its chain and its watermark ``mark``.

    Damage is reported, not raised: :attr:`JournalRead.damage` says what is wrong and
    :attr:`JournalRead.events` holds the records before it (what is still readable). Damage is
    only what contradicts fsynced records: a broken chain or an unreadable line before the last,
    a journal that is missing or ends before the watermark's seq, a record at that seq whose hash
    differs, or a missing watermark. A torn last line past the watermark is not damage. A journal
    or watermark that is a symlink, a FIFO or a folder is damage too (it cannot be read).

    The watermark is read first: an owner appending meanwhile only moves the journal past it.

    Raises
    ------
    NotFound
        The watermark says nothing was journaled yet (seq 0) and the journal does not exist.
    """
    try:
        found = read_watermark(mark)
    except StoreError as err:
        return JournalRead(events=[], torn=False, last_seq=0, damage=err.message)
    try:
        data = read_nofollow(path)
    except StoreError as err:  # a symlink, a FIFO, a folder in its place: the journal is gone
        why = f"{err.message}; the journal cannot be read" + (
            f" but seq {found.seq} was fsynced" if found and found.seq else ""
        )
        return JournalRead(events=[], torn=False, last_seq=0, damage=why)
    except FileNotFoundError:
        if found is None:
            why = f"journal {path} and its watermark {mark.name} are both missing"
            return JournalRead(events=[], torn=False, last_seq=0, damage=why)
        if found.seq == 0:  # being created (the journal comes last), or nothing journaled yet
            msg = f"journal {path} does not exist; was the run created?"
            raise NotFound(msg) from None
        why = f"journal {path} is missing but seq {found.seq} was fsynced (hash {found.h})"
        return JournalRead(events=[], torn=False, last_seq=0, damage=why)
    lines, torn = _split(data)
    checker = _SeqChecker(path, chained=True)
    events: list[dict[str, Any]] = []
    damage = None
    h_at_mark = ""
    for line in lines:
        try:
            record = checker.check_or_damage(line)
        except _Damage as err:
            damage = f"{path}:{err.line_no}: {err.why}"
            break
        if found is not None and record["seq"] == found.seq:
            h_at_mark = record["h"]
        if record["seq"] > after_seq:
            events.append(record)
    if damage is None:
        if found is None:
            damage = f"journal watermark {mark} is missing (it is written when the run is created), so a cut journal cannot be told from a whole one"
        elif checker.last_seq < found.seq:
            damage = f"journal {path} ends at seq {checker.last_seq} but seq {found.seq} was fsynced (hash {found.h})"
        elif found.seq and h_at_mark != found.h:
            damage = f"journal {path}: record seq {found.seq} has hash {h_at_mark or 'none'} but {found.h} was fsynced (the journal was rewritten)"
    return JournalRead(events=events, torn=torn and damage is None, last_seq=checker.last_seq, damage=damage)


# --------------------------------------------------------------------------- follower


async def _open_when_present(path: Path, *, poll_seconds: float, stop: Callable[[], bool] | None) -> int | None:
    """Open the journal for reading, waiting for it to appear; None if ``stop()`` came first."""
    while True:
        stopping = stop is not None and stop()
        try:
            return _open_nofollow(path, _READ_FLAGS)
        except FileNotFoundError:
            if stopping:
                return None
        await asyncio.sleep(poll_seconds)


class _Follower:
    """Reads the complete lines appended past ``offset``.

    ``offset`` always sits just after a newline: a line still being written is not consumed and
    is read again on the next drain. Re-reading from a line boundary also keeps the follower
    correct when :meth:`JournalWriter.open` cuts off a torn tail and appends after it.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.offset = 0
        self.checker = _SeqChecker(path)

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
    still being written is left in the file (and read again) until its newline arrives. Waits for the journal to be created. Ends
    when ``stop()`` returns True and everything written before that has been yielded; without
    ``stop`` it follows until cancelled.

    Raises
    ------
    StoreError
        If the journal is a symlink, damaged, or shrinks below what was already read.
    """
    fd = await _open_when_present(path, poll_seconds=poll_seconds, stop=stop)
    if fd is None:
        return
    try:
        follower = _Follower(path, fd)
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
