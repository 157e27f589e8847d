"""The journal's bytes are a contract: lines, chain hashes, watermark and ``at`` stamps stay as written before.

The writer builds lines in one loop (store/_journal_lines.py ``stamp_lines``), the watermark with an
f-string (``mark_line``) and ``now_iso`` from a per-second prefix; each is checked here against the
straightforward encoding it replaces and against bytes written by the code before it.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rho_notebook.model import events as events_module
from rho_notebook.model.events import now_iso
from rho_notebook.model.state import NodeState
from rho_notebook.store._journal_lines import stamp_lines
from rho_notebook.store.journal import JournalWriter, Watermark, check_journal, write_watermark
from rho_notebook.store.journal_integrity import mark_bytes

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

RECORDS: list[dict[str, Any]] = [
    {
        "run_id": "20261205T125000Z-abcdef123456",
        "at": "2026-12-05T12:52:29.123+00:00",
        "kind": "node_launched",
        "node": "m0001",
        "attempt": 1,
    },
    {
        "run_id": "20261205T125000Z-abcdef123456",
        "at": "2026-12-05T12:52:29.124+00:00",
        "kind": "node_finished",
        "node": "m0001",
        "attempt": 1,
        "state": "succeeded",
        "exit": 0,
        "message": "ok",
    },
    {},
    {
        "kind": "note",
        "text": 'é ☃ \u2028 "quoted" back\\slash \x00\x1f\n\t',
        "nested": {"a": [1, 2.5, None, True, False, {"b": []}]},
        "big": 2**70,
        "neg": -3,
        "f": 1e-7,
    },
    {"kind": "run_completed", "emoji": "\U0001f600"},
]
# sha256 of the journals the writer wrote for RECORDS before stamp_lines (batches 1, 3, 0, 1 / 2, 3).
CHAINED_SHA256 = "a7071a11bedb9bb6b5031a123e080a5cd67efd681fabbf8500aafc35ec4f8871"
PLAIN_SHA256 = "22e43dbeb754b0e49a89056ef3b5472d4ee30ee541c26baae1376504b9766571"


def _reference(records: list[dict[str, Any]], *, chained: bool) -> bytes:
    """The journal as the format describes it: ENCODER of {"seq": n, **record}, then ``h`` last."""
    out, prev = [], ""
    for seq, record in enumerate(records, 1):
        body = _ENCODER.encode({"seq": seq, **record})
        if chained:
            prev = hashlib.sha256(prev.encode() + b"\n" + body.encode()).hexdigest()[:16]
            body = body[:-1] + ',"h":"' + prev + '"}'
        out.append(body + "\n")
    return "".join(out).encode()


def _write(tmp_path: Path, *, chained: bool) -> tuple[bytes, list[dict[str, Any]]]:
    journal_path, mark = tmp_path / "events.jsonl", tmp_path / "journal.mark"
    if chained:
        write_watermark(mark, Watermark(seq=0, h=""))
    originals = json.loads(json.dumps(RECORDS))
    batches = [RECORDS[:1], RECORDS[1:4], [], RECORDS[4:]] if chained else [RECORDS[:2], RECORDS[2:]]
    stamped: list[dict[str, Any]] = []
    with JournalWriter.open(journal_path, mark=mark if chained else None) as journal:
        for batch in batches:
            stamped += journal.append(batch)
        assert journal.last_seq == len(RECORDS)
    assert json.loads(json.dumps(RECORDS)) == originals  # the input records are not modified
    return journal_path.read_bytes(), stamped


@pytest.mark.parametrize("chained", [True, False])
def test_journal_bytes_are_the_encoding_of_seq_then_the_record_then_h(tmp_path: Path, chained: bool) -> None:
    data, stamped = _write(tmp_path, chained=chained)
    assert data == _reference(RECORDS, chained=chained)
    assert hashlib.sha256(data).hexdigest() == (CHAINED_SHA256 if chained else PLAIN_SHA256)
    for seq, (record, new) in enumerate(zip(RECORDS, stamped, strict=True), 1):
        assert new is not record
        assert list(new) == ["seq", *record, *(["h"] if chained else [])]  # seq first, h last
        assert {k: v for k, v in new.items() if k not in ("seq", "h")} == record and new["seq"] == seq
    if chained:
        assert [r["h"] for r in stamped] == [json.loads(line)["h"] for line in data.splitlines()]
        read = check_journal(tmp_path / "events.jsonl", mark=tmp_path / "journal.mark")
        assert read.damage is None and read.events == stamped


def test_a_record_carrying_seq_or_a_value_json_cannot_hold_writes_nothing(tmp_path: Path) -> None:
    journal_path, mark = tmp_path / "events.jsonl", tmp_path / "journal.mark"
    write_watermark(mark, Watermark(seq=0, h=""))
    with JournalWriter.open(journal_path, mark=mark) as journal:
        journal.append(RECORDS[:1])
        with pytest.raises(ValueError, match="must not carry 'seq'"):
            journal.append([RECORDS[1], {"seq": 9}])
        with pytest.raises(ValueError):
            journal.append([RECORDS[1], {"x": float("nan")}])
        with pytest.raises(TypeError):
            journal.append([RECORDS[1], {"x": object()}])
        journal.append(RECORDS[1:])
    assert journal_path.read_bytes() == _reference(RECORDS, chained=True)


def _old_mark_bytes(seq: int, h: str) -> bytes:
    c = hashlib.sha256(f"{seq}:{h}".encode()).hexdigest()[:8]
    return _ENCODER.encode({"seq": seq, "h": h, "c": c}).ljust(127).encode() + b"\n"


@pytest.mark.parametrize(
    ("seq", "h"),
    [(0, ""), (1, "0123456789abcdef"), (2**63, "ffffffffffffffff"), (7, "ABC"), (3, 'a"b\\c'), (4, "é\n")],
)
def test_the_watermark_bytes_are_the_encoding_of_seq_h_and_c(seq: int, h: str) -> None:
    assert mark_bytes(Watermark(seq=seq, h=h)) == _old_mark_bytes(seq, h)


def test_the_watermark_bytes_are_pinned(tmp_path: Path) -> None:
    assert mark_bytes(Watermark(seq=0, h="")) == b'{"seq":0,"h":"","c":"ba768b33"}'.ljust(127) + b"\n"
    line = b'{"seq":123456789,"h":"0123456789abcdef","c":"2fabb5f1"}'.ljust(127) + b"\n"
    assert mark_bytes(Watermark(seq=123456789, h="0123456789abcdef")) == line
    _write(tmp_path, chained=True)  # the writer's own watermark (written in place at close)
    assert (tmp_path / "journal.mark").read_bytes() == b'{"seq":5,"h":"2d4d4adb1e34498a","c":"740be08e"}'.ljust(
        127
    ) + b"\n"


def _ms(text: str) -> int:
    return (datetime.fromisoformat(text) - _EPOCH) // timedelta(milliseconds=1)


def test_now_iso_is_isoformat_to_the_millisecond_across_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    edges = [
        "1970-01-01T00:00:00+00:00",
        "2026-12-05T12:52:29+00:00",
        "2026-12-05T12:59:59+00:00",  # minute and hour
        "2026-12-05T23:59:59+00:00",  # day
        "2026-12-31T23:59:59+00:00",  # year
        "2028-02-28T23:59:59+00:00",  # leap day
        "2028-02-29T23:59:59+00:00",
        "1999-12-31T23:59:59+00:00",
        "9999-12-31T23:59:57+00:00",  # the last year datetime holds
    ]
    values: list[int] = []
    for edge in edges:
        start = _ms(edge)
        values += range(start - 3, start + 2004)  # every ms across two second boundaries
        values += [start + 1500, start + 500, start - 1000 + 500, start + 500, start + 500]  # back, forth, repeats
    values += [-1, -999, -1000, -1001, 0, 5, -995, 1, 10**9 * 1000 + 999]  # before the epoch too
    clock = iter(values)
    monkeypatch.setattr(events_module, "time", SimpleNamespace(time_ns=lambda: next(clock) * 1_000_000 + 999_999))
    for ms in values:
        assert now_iso() == (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds"), ms


_LEAVES = st.one_of(
    st.text(),  # every code point but lone surrogates, which no record can hold as UTF-8
    st.integers(min_value=-(2**70), max_value=2**70),  # past 64 bits: the json path
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),  # a float: the json path
)
_VALUES = st.recursive(
    _LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=12
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.text().filter(lambda k: k != "seq"), _VALUES, max_size=6), max_size=5))
def test_every_record_is_written_as_the_reference_encoding_whichever_encoder_writes_it(
    records: list[dict[str, Any]],
) -> None:
    """Plain records go through orjson, others through json (stamp_lines): the bytes never differ."""
    for prev in ("", "0123456789abcdef", None):
        data, stamped, last = stamp_lines(records, first_seq=1, prev=prev)
        if prev == "":
            assert data == _reference(records, chained=True)
        assert [json.loads(line) for line in data.splitlines()] == stamped
        assert last == (stamped[-1]["h"] if stamped and prev is not None else prev or "")


def test_plain_records_take_the_fast_encoder_and_others_the_reference_one(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = orjson.dumps

    def counting(value: object) -> bytes:
        calls.append(value)
        return real(value)

    monkeypatch.setattr(orjson, "dumps", counting)
    stamp_lines([RECORDS[0], RECORDS[1]], first_seq=1, prev="")
    assert len(calls) == 2
    stamp_lines([RECORDS[3], {"x": 1.5}, {"x": NodeState.SUCCESS}], first_seq=1, prev="")
    assert len(calls) == 2  # a float, an integer past 64 bits, a str subclass: json writes them
