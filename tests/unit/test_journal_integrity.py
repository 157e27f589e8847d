"""The chained journal format and its watermark (rho_notebook.store.journal, chained-v1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rho_notebook.errors import StoreError
from rho_notebook.store.journal import (
    JournalWriter,
    Watermark,
    check_journal,
    read_journal,
    read_watermark,
    write_watermark,
)


def _chained(tmp_path: Path, records: int = 5) -> tuple[Path, Path]:
    events, mark = tmp_path / "events.jsonl", tmp_path / "journal.mark"
    write_watermark(mark, Watermark(seq=0, h=""))
    with JournalWriter.open(events, mark=mark) as journal:
        for i in range(records):
            journal.append([{"kind": "node_finished", "node": f"n{i}", "state": "success"}])
            journal.sync()
    return events, mark


def test_every_record_carries_a_chain_hash_and_the_mark_follows_the_last_sync(tmp_path: Path) -> None:
    events, mark = _chained(tmp_path)
    lines = events.read_bytes().splitlines()
    records = [json.loads(line) for line in lines]
    assert all(line.endswith(f',"h":"{r["h"]}"}}'.encode()) for line, r in zip(lines, records, strict=True))
    assert len({r["h"] for r in records}) == 5
    assert read_watermark(mark) == Watermark(seq=5, h=records[-1]["h"])
    read = check_journal(events, mark=mark)
    assert read.damage is None and [r["seq"] for r in read.events] == [1, 2, 3, 4, 5]


def test_appends_after_reopen_continue_the_chain(tmp_path: Path) -> None:
    events, mark = _chained(tmp_path, records=2)
    with JournalWriter.open(events, mark=mark) as journal:
        journal.append([{"kind": "run_completed", "outcome": "success"}])
    read = check_journal(events, mark=mark)
    assert read.damage is None and read.last_seq == 3
    assert read_watermark(mark) == Watermark(seq=3, h=read.events[-1]["h"])


def test_an_edited_record_breaks_the_chain_at_its_line(tmp_path: Path) -> None:
    events, mark = _chained(tmp_path)
    data = events.read_bytes()
    events.write_bytes(data.replace(b'"node":"n2","state":"success"', b'"node":"n2","state":"failure"'))
    read = check_journal(events, mark=mark)
    assert read.damage is not None and ":3: record seq 3 does not match its chain hash" in read.damage
    assert [r["seq"] for r in read.events] == [1, 2]  # the readable part before it
    assert len(read_journal(events).events) == 5  # the unchecked reader still parses it


def test_a_removed_record_or_an_unchained_one_is_damage(tmp_path: Path) -> None:
    events, mark = _chained(tmp_path)
    lines = events.read_bytes().splitlines(keepends=True)
    events.write_bytes(b"".join(lines[:2] + lines[3:]))
    damage = check_journal(events, mark=mark).damage
    assert damage is not None and "seq 4 does not match its chain hash" in damage
    events.write_bytes(b"".join(lines[:4]) + b'{"seq":5,"kind":"node_finished"}\n')
    damage = check_journal(events, mark=mark).damage
    assert damage is not None and "carries no chain hash" in damage


@pytest.mark.parametrize("cut", [0, 2])
def test_a_journal_shorter_than_the_mark_is_damage(tmp_path: Path, cut: int) -> None:
    events, mark = _chained(tmp_path)
    lines = events.read_bytes().splitlines(keepends=True)
    events.write_bytes(b"".join(lines[:cut]))
    damage = check_journal(events, mark=mark).damage
    assert damage is not None and f"ends at seq {cut} but seq 5 was fsynced (hash " in damage


def test_a_missing_journal_or_mark_is_damage_once_anything_was_fsynced(tmp_path: Path) -> None:
    events, mark = _chained(tmp_path)
    mark.rename(tmp_path / "saved.mark")
    damage = check_journal(events, mark=mark).damage
    assert damage is not None and "watermark" in damage and "missing" in damage
    (tmp_path / "saved.mark").rename(mark)
    events.unlink()
    damage = check_journal(events, mark=mark).damage
    assert damage is not None and "is missing but seq 5 was fsynced" in damage


def test_a_torn_line_past_the_mark_is_not_damage(tmp_path: Path) -> None:
    events, mark = _chained(tmp_path)
    with open(events, "ab") as handle:
        handle.write(b'{"seq":6,"kind":"node_fin')
    read = check_journal(events, mark=mark)
    assert read.damage is None and read.torn and read.last_seq == 5
    with JournalWriter.open(events, mark=mark) as journal:
        assert journal.repaired_bytes > 0
        journal.append([{"kind": "journal_repaired"}])
    read = check_journal(events, mark=mark)
    assert read.damage is None and not read.torn and read.last_seq == 6


def test_unsynced_records_past_the_mark_may_be_lost_without_damage(tmp_path: Path) -> None:
    events, mark = _chained(tmp_path, records=2)
    journal = JournalWriter.open(events, mark=mark)
    journal.append([{"kind": "node_launched", "node": "x"}])  # written, never fsynced
    assert read_watermark(mark) == Watermark(seq=2, h=check_journal(events, mark=mark).events[1]["h"])
    lines = events.read_bytes().splitlines(keepends=True)
    events.write_bytes(b"".join(lines[:2]))  # what a power cut may leave
    assert check_journal(events, mark=mark).damage is None
    journal.close()


def test_a_watermark_that_fails_its_check_is_damage(tmp_path: Path) -> None:
    events, mark = _chained(tmp_path)
    mark.write_text(mark.read_text().replace('"seq":5', '"seq":4'))
    with pytest.raises(StoreError, match="is not a watermark"):
        read_watermark(mark)
    damage = check_journal(events, mark=mark).damage
    assert damage is not None and "not a watermark" in damage


def test_a_writer_without_mark_writes_the_old_format(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    with JournalWriter.open(events) as journal:
        journal.append([{"kind": "run_created"}])
    assert events.read_text() == '{"seq":1,"kind":"run_created"}\n'


def test_runs_created_before_read_as_unchained() -> None:
    from rho_notebook.store.runs import RunManifest

    old = {
        "format": "rho-notebook/run/v1",
        "run_id": "r",
        "plan_id": "p",
        "graph_digest": "sha256:0",
        "workflow": "w",
        "created_at": "2026-01-01T00:00:00Z",
        "workspace_root": "/w",
        "workspace_key": "k",
        "identities": {},
    }
    assert not RunManifest.model_validate(old).chained
    assert RunManifest.model_validate({**old, "journal_format": "chained-v1"}).chained
