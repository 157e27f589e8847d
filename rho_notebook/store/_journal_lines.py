"""The journal's line format, shared by its writer, reader and integrity check (private to store).

One compact JSON object per line whose ``seq`` is a positive integer; in a ``chained-v1``
journal each line ends with ``"h"``, its chain hash (:mod:`rho_notebook.store.journal` describes
the format). Here: encoding and parsing one line, the chain hash, opening the file without
following symlinks, and checking lines in order (:class:`SeqChecker`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Sequence
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from rho_notebook.errors import NotRegularFile, StoreError
from rho_notebook.oshelpers import open_regular_nofollow
from rho_notebook.store._plain_json import plain_values

ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_C_ENCODE = (
    None
    if c_make_encoder is None
    else c_make_encoder(None, ENCODER.default, encode_basestring, None, ":", ",", False, False, False)
)
"""ENCODER's C encoder made once (``ENCODER.encode`` builds one per call: 40% of a record's
encoding); the same bytes. Without the circular-reference check: a record is a tree of plain values."""
WRITE_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC

_H_PREFIX = b',"h":"'
_H_LEN = 16
_H_SUFFIX_LEN = len(_H_PREFIX) + _H_LEN + 2  # ,"h":"<16 hex>"}


def parse_record(line: bytes) -> dict[str, Any] | None:
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


def h_of(record: dict[str, Any]) -> str:
    """The chain hash ``record`` carries ("" if none)."""
    h = record.get("h")
    return h if isinstance(h, str) else ""


def chain(prev: str, body: bytes) -> str:
    """The ``h`` of a record whose line without ``h`` is ``body``, after a record whose ``h`` is ``prev``."""
    return hashlib.sha256(prev.encode() + b"\n" + body).hexdigest()[:_H_LEN]


def stamp_lines(
    records: Sequence[dict[str, Any]], *, first_seq: int, prev: str | None
) -> tuple[bytes, list[dict[str, Any]], str]:
    """``records`` numbered from ``first_seq`` and encoded as journal lines (the writer's hot path).

    Returns (the lines, each ending in a newline; the records as new dicts with ``seq`` as their
    first key and, chained, ``h`` as their last; the last ``h``). ``prev`` is the ``h`` the first
    record chains to, or None for an unchained journal. A line is ``ENCODER.encode`` of the
    stamped record, UTF-8; chained, with ``h`` appended as its last key (:func:`chain` of the line
    without it). A record made only of strings, integers, booleans, None, lists and dicts with
    string keys (what the runner journals per node) is encoded by orjson, which writes exactly
    those bytes for exactly those values in a tenth of the time; any other value (a float, whose
    spelling may differ, an integer past 64 bits, a type json refuses) goes through ``ENCODER``.
    The input records are not modified.

    Raises
    ------
    ValueError
        A record carries ``seq``.
    ValueError, TypeError
        A value JSON cannot hold (nothing is returned: the caller writes all lines or none).
    """
    import orjson  # here, not at the top: only a writer needs it, and it imports uuid and platform

    c_encode, sha256, dumps = _C_ENCODE, hashlib.sha256, orjson.dumps
    lines: list[bytes] = []
    stamped: list[dict[str, Any]] = []
    seq = first_seq
    for record in records:
        if "seq" in record:
            msg = "journal records must not carry 'seq'; the journal assigns it"
            raise ValueError(msg)
        new = {"seq": seq, **record}
        body: bytes | None = None
        if plain_values(record):
            try:
                body = dumps(new)
            except orjson.JSONEncodeError:  # an integer past 64 bits
                body = None
        if body is None:
            body = ("".join(c_encode(new, 0)) if c_encode is not None else ENCODER.encode(new)).encode()
        if prev is not None:
            prev = sha256(b"%b\n%b" % (prev.encode(), body)).hexdigest()[:_H_LEN]  # chain(prev, body)
            body = b'%b,"h":"%b"}' % (body[:-1], prev.encode())
            new["h"] = prev
        lines.append(body)
        stamped.append(new)
        seq += 1
    lines.append(b"")  # so that the join ends the last line with its newline too
    return b"\n".join(lines), stamped, prev or ""


def verify_chain(line: bytes, record: dict[str, Any], prev: str) -> str | None:
    """Why ``line`` does not chain to ``prev`` (None if it does)."""
    h = record.get("h")
    if not isinstance(h, str) or line[-_H_SUFFIX_LEN : -_H_LEN - 2] != _H_PREFIX or not line.endswith(b'"}'):
        return f"record seq {record['seq']} carries no chain hash in a chained journal"
    body = line[:-_H_SUFFIX_LEN] + b"}"
    if chain(prev, body) != h or line[-_H_LEN - 2 : -2].decode("ascii", "replace") != h:
        return f"record seq {record['seq']} does not match its chain hash (it was edited, or a record before it was removed)"
    return None


def open_nofollow(path: Path, flags: int, mode: int = 0o600) -> int:
    """Open ``path`` without following a final symlink and check it is a regular file."""
    try:
        fd, _ = open_regular_nofollow(path, flags, mode)
    except NotRegularFile:
        msg = f"journal {path} is not a regular file"
        raise StoreError(msg) from None
    except OSError as err:
        if err.errno == errno.ELOOP or os.path.islink(path):
            msg = f"journal {path} is a symlink; the store rejects symlinked entries (remove it)"
            raise StoreError(msg) from None
        if isinstance(err, FileNotFoundError):
            raise
        msg = f"cannot open journal {path}: {err.strerror}"
        raise StoreError(msg) from None
    return fd


def damaged(path: Path, line_no: int, why: str) -> StoreError:
    msg = (
        f"{path}:{line_no}: {why}; only the last journal line may be torn, so the journal is "
        "damaged (restore it from a backup or remove the run)"
    )
    return StoreError(msg)


class _Damage(Exception):
    """A line that breaks the journal: its 1-based number and why."""

    def __init__(self, line_no: int, why: str) -> None:
        super().__init__(why)
        self.line_no = line_no
        self.why = why


class SeqChecker:
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
            raise damaged(self.path, err.line_no, err.why) from None

    def check_or_damage(self, line: bytes) -> dict[str, Any]:
        """:meth:`check`, raising :class:`_Damage` (line and reason) instead of a StoreError."""
        self.line_no += 1
        record = parse_record(line)
        if record is None:
            raise _Damage(self.line_no, "line is not a valid journal record")
        if record["seq"] <= self.last_seq:
            raise _Damage(self.line_no, f"seq {record['seq']} does not follow seq {self.last_seq}")
        if self.chained:
            why = verify_chain(line, record, self.last_h)
            if why is not None:
                raise _Damage(self.line_no, why)
            self.last_h = record["h"]
        self.last_seq = record["seq"]
        return record


def split_lines(data: bytes) -> tuple[list[bytes], bool]:
    """The complete lines of a journal and whether a torn last line was dropped."""
    lines = data.split(b"\n")
    final = lines.pop()  # b"" when the file ends with a newline
    torn = final != b""
    if not torn and lines and parse_record(lines[-1]) is None:
        lines.pop()
        torn = True
    return lines, torn
