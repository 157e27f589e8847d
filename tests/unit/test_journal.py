"""The run journal: seq assignment, torn-tail repair, damage detection, following, fsync counting."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import StoreError
from rho_notebook.store.journal import JournalRead, JournalWriter, follow_journal, read_journal


def ev(kind: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, **extra}


def seqs(records: list[dict[str, Any]]) -> list[int]:
    return [r["seq"] for r in records]


def append_raw(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "events.jsonl"


# --------------------------------------------------------------------------- writing


def test_append_assigns_seq_first_and_writes_compact_lines(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        written = writer.append([ev("run_started", note="héllo"), ev("node_ready", node="a")])
        assert writer.last_seq == 2
    assert seqs(written) == [1, 2]
    assert list(written[0]) == ["seq", "kind", "note"]
    assert journal.read_bytes().decode() == (
        '{"seq":1,"kind":"run_started","note":"héllo"}\n{"seq":2,"kind":"node_ready","node":"a"}\n'
    )


def test_append_copies_records(journal: Path) -> None:
    record = ev("node_ready")
    with JournalWriter.open(journal) as writer:
        writer.append([record])
    assert record == {"kind": "node_ready"}


def test_journal_file_is_private(journal: Path) -> None:
    JournalWriter.open(journal).close()
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600


def test_seq_is_monotonic_across_reopen(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        writer.append([ev("a"), ev("b")])
    with JournalWriter.open(journal) as writer:
        assert writer.last_seq == 2
        assert writer.repaired_bytes == 0
        assert seqs(writer.append([ev("c")])) == [3]
    with JournalWriter.open(journal) as writer:
        assert seqs(writer.append([ev("d"), ev("e")])) == [4, 5]
    assert seqs(read_journal(journal).events) == [1, 2, 3, 4, 5]


def test_empty_append_writes_nothing(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        assert writer.append([]) == []
        writer.sync()
        assert writer.fsync_count == 0
    assert journal.read_bytes() == b""


def test_records_must_not_carry_seq(journal: Path) -> None:
    with JournalWriter.open(journal) as writer, pytest.raises(ValueError, match="seq"):
        writer.append([{"seq": 9, "kind": "x"}])


def test_unencodable_batch_writes_nothing(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        writer.append([ev("a")])
        with pytest.raises(ValueError):
            writer.append([ev("b"), ev("c", value=float("nan"))])
        with pytest.raises(TypeError):
            writer.append([ev("d", value=object())])
        assert seqs(writer.append([ev("e")])) == [2]
    assert [e["kind"] for e in read_journal(journal).events] == ["a", "e"]


def test_closed_writer_refuses_appends(journal: Path) -> None:
    writer = JournalWriter.open(journal)
    writer.close()
    writer.close()
    with pytest.raises(StoreError, match="closed"):
        writer.append([ev("a")])


def test_missing_directory_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="directory does not exist"):
        JournalWriter.open(tmp_path / "nope" / "events.jsonl")


def test_lines_appended_later_are_written_with_the_next_write(journal: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[bytes] = []
    real_write = os.write

    def write(fd: int, data: Any) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    with JournalWriter.open(journal) as writer:
        held = writer.append([ev("finished")], later=True)
        assert seqs(held) == [1] and writer.last_seq == 1
        assert journal.read_bytes() == b"" and writes == []
        assert seqs(writer.append([ev("ready"), ev("launched")], later=True)) == [2, 3]
        assert seqs(writer.append([ev("started")])) == [4]  # one write: the held lines, then this one
        assert len(writes) == 1
        assert [e["kind"] for e in read_journal(journal).events] == ["finished", "ready", "launched", "started"]


def test_flush_and_sync_write_held_lines(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        writer.flush()  # nothing held: nothing written
        assert journal.read_bytes() == b""
        writer.append([ev("a")], later=True)
        writer.flush()
        assert read_journal(journal).last_seq == 1
        writer.append([ev("b")], later=True)
        writer.sync()
        assert read_journal(journal).last_seq == 2 and writer.fsync_count == 1
        writer.append([ev("c")], later=True)
    assert [e["kind"] for e in read_journal(journal).events] == ["a", "b", "c"]  # close writes and syncs


def test_a_failed_write_of_held_lines_closes_the_writer(journal: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = JournalWriter.open(journal)
    writer.append([ev("a")])
    writer.append([ev("b")], later=True)

    def full(fd: int, data: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(StoreError, match="No space left"):
        writer.append([ev("c")])
    monkeypatch.undo()
    assert writer.closed  # record b was handed out as seq 2: nothing may be written after it
    with pytest.raises(StoreError, match="closed"):
        writer.append([ev("d")])
    assert [e["kind"] for e in read_journal(journal).events] == ["a"]


# --------------------------------------------------------------------------- fsync counting


def test_sync_fsyncs_only_after_writes(journal: Path) -> None:
    writer = JournalWriter.open(journal)
    writer.sync()
    assert writer.fsync_count == 0
    writer.append([ev("a")])
    writer.append([ev("b")])
    assert writer.fsync_count == 0
    writer.sync()
    writer.sync()
    assert writer.fsync_count == 1
    writer.append([ev("c")])
    writer.close()
    assert writer.fsync_count == 2


def test_many_appends_then_one_sync(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        for index in range(3000):
            writer.append([ev("output_chunk", node=f"n{index % 750}", bytes=index)])
        writer.sync()
        assert writer.fsync_count == 1
        assert writer.last_seq == 3000
    assert read_journal(journal).last_seq == 3000


# --------------------------------------------------------------------------- torn tails


def test_torn_last_line_is_reported_and_repaired(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        writer.append([ev("a"), ev("b")])
    half = b'{"seq":3,"kind":"c","no'
    append_raw(journal, half)

    read = read_journal(journal)
    assert read == JournalRead(events=read.events, torn=True, last_seq=2)
    assert seqs(read.events) == [1, 2]

    with JournalWriter.open(journal) as writer:
        assert writer.repaired_bytes == len(half)
        assert writer.last_seq == 2
        assert seqs(writer.append([ev("journal_repaired", bytes=writer.repaired_bytes)])) == [3]
    repaired = read_journal(journal)
    assert not repaired.torn
    assert seqs(repaired.events) == [1, 2, 3]
    assert repaired.events[-1]["kind"] == "journal_repaired"


def test_complete_but_invalid_last_line_counts_as_torn(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        writer.append([ev("a")])
    append_raw(journal, b"\x00\x00\x00\n")
    assert read_journal(journal).torn
    with JournalWriter.open(journal) as writer:
        assert writer.repaired_bytes == 4
        assert seqs(writer.append([ev("b")])) == [2]


def test_unterminated_valid_json_is_still_torn(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        writer.append([ev("a")])
    append_raw(journal, b'{"seq":2,"kind":"b"}')
    read = read_journal(journal)
    assert read.torn and read.last_seq == 1
    with JournalWriter.open(journal) as writer:
        assert writer.last_seq == 1


def test_torn_only_line(journal: Path) -> None:
    append_raw(journal, b'{"se')
    assert read_journal(journal) == JournalRead(events=[], torn=True, last_seq=0)
    with JournalWriter.open(journal) as writer:
        assert writer.repaired_bytes == 4
        assert seqs(writer.append([ev("a")])) == [1]


def test_repair_counts_as_unsynced(journal: Path) -> None:
    append_raw(journal, b"partial")
    with JournalWriter.open(journal) as writer:
        writer.sync()
        assert writer.fsync_count == 1


@pytest.mark.parametrize("big_last", [False, True])
def test_reopen_of_a_long_journal_scans_the_tail(journal: Path, big_last: bool) -> None:
    with JournalWriter.open(journal) as writer:
        writer.append([ev("output_chunk", pad="x" * 100) for _ in range(2000)])
        if big_last:
            writer.append([ev("big", pad="y" * 300_000)])
    append_raw(journal, b'{"seq":99')
    with JournalWriter.open(journal) as writer:
        expected = 2001 if big_last else 2000
        assert writer.last_seq == expected
        assert writer.repaired_bytes == len(b'{"seq":99')
        assert seqs(writer.append([ev("z")])) == [expected + 1]
    assert read_journal(journal).last_seq == expected + 1


# --------------------------------------------------------------------------- damage


def test_corrupt_middle_line_raises_with_line_number(journal: Path) -> None:
    journal.write_bytes(b'{"seq":1,"kind":"a"}\nnot json\n{"seq":3,"kind":"c"}\n')
    with pytest.raises(StoreError, match=r"events\.jsonl:2:"):
        read_journal(journal)


def test_corrupt_line_before_torn_tail_raises_everywhere(journal: Path) -> None:
    journal.write_bytes(b'{"seq":1,"kind":"a"}\nnot json\n{"seq":3,"ki')
    with pytest.raises(StoreError, match=r":2:"):
        read_journal(journal)
    with pytest.raises(StoreError, match=r":2:"):
        JournalWriter.open(journal)


def test_corrupt_line_before_invalid_last_line_raises(journal: Path) -> None:
    journal.write_bytes(b'{"seq":1,"kind":"a"}\n[]\n\x00\n')
    with pytest.raises(StoreError, match=r":2:"):
        read_journal(journal)
    with pytest.raises(StoreError, match=r":2:"):
        JournalWriter.open(journal)


def test_seq_going_backwards_raises(journal: Path) -> None:
    journal.write_bytes(b'{"seq":1}\n{"seq":3}\n{"seq":2}\n{"seq":4}\n')
    with pytest.raises(StoreError, match=r":3: seq 2 does not follow seq 3"):
        read_journal(journal)


def test_record_without_integer_seq_is_invalid(journal: Path) -> None:
    journal.write_bytes(b'{"seq":true}\n{"seq":2}\n')
    with pytest.raises(StoreError, match=r":1:"):
        read_journal(journal)


# --------------------------------------------------------------------------- reading


def test_read_after_seq(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        writer.append([ev(k) for k in "abcde"])
    read = read_journal(journal, after_seq=3)
    assert seqs(read.events) == [4, 5]
    assert read.last_seq == 5
    assert not read.torn
    assert read_journal(journal, after_seq=5).events == []


def test_read_missing_journal(journal: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        read_journal(journal)


def test_read_empty_journal(journal: Path) -> None:
    journal.write_bytes(b"")
    assert read_journal(journal) == JournalRead(events=[], torn=False, last_seq=0)


def test_symlinked_journal_is_refused(tmp_path: Path, journal: Path) -> None:
    real = tmp_path / "real.jsonl"
    real.write_bytes(b'{"seq":1}\n')
    journal.symlink_to(real)
    with pytest.raises(StoreError, match="symlink"):
        read_journal(journal)
    with pytest.raises(StoreError, match="symlink"):
        JournalWriter.open(journal)
    with pytest.raises(StoreError, match="symlink"):
        asyncio.run(collect(journal, stop=lambda: True))
    assert real.read_bytes() == b'{"seq":1}\n'


def test_dangling_symlink_is_not_created_through(tmp_path: Path, journal: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    journal.symlink_to(target)
    with pytest.raises(StoreError, match="symlink"):
        JournalWriter.open(journal)
    assert not target.exists()


# --------------------------------------------------------------------------- following


async def collect(path: Path, *, stop: Callable[[], bool], after_seq: int = 0) -> list[dict[str, Any]]:
    return [e async for e in follow_journal(path, after_seq=after_seq, poll_seconds=0.001, stop=stop)]


async def wait_for(condition: Callable[[], bool], *, timeout: float = 5.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), timeout)


class Follow:
    """Runs follow_journal in a task, collecting what it yields until ``finish()``."""

    def __init__(self, path: Path, *, after_seq: int = 0) -> None:
        self.seen: list[dict[str, Any]] = []
        self.done = False
        self.task = asyncio.ensure_future(self._run(path, after_seq))

    async def _run(self, path: Path, after_seq: int) -> None:
        async for record in follow_journal(path, after_seq=after_seq, poll_seconds=0.001, stop=lambda: self.done):
            self.seen.append(record)

    async def finish(self) -> list[dict[str, Any]]:
        self.done = True
        await asyncio.wait_for(self.task, 5)
        return self.seen


def test_follow_sees_events_from_another_writer(journal: Path) -> None:
    async def scenario() -> list[dict[str, Any]]:
        follow = Follow(journal)
        await asyncio.sleep(0.005)  # the journal does not exist yet: the follower waits for it
        with JournalWriter.open(journal) as writer:
            writer.append([ev("a"), ev("b")])
            await wait_for(lambda: len(follow.seen) == 2)
            writer.append([ev("c")])
            await wait_for(lambda: len(follow.seen) == 3)
            writer.append([ev("d")])
        return await follow.finish()

    assert seqs(asyncio.run(scenario())) == [1, 2, 3, 4]


def test_follow_waits_for_the_newline(journal: Path) -> None:
    journal.write_bytes(b'{"seq":1,"kind":"a"}\n')

    async def scenario() -> list[dict[str, Any]]:
        follow = Follow(journal)
        await wait_for(lambda: len(follow.seen) == 1)
        append_raw(journal, b'{"seq":2,"kind":"b","text":"fir')
        for _ in range(20):  # many polls: the half line must not be yielded
            await asyncio.sleep(0.001)
        assert len(follow.seen) == 1
        append_raw(journal, b'st half, second half"}\n')
        await wait_for(lambda: len(follow.seen) == 2)
        return await follow.finish()

    seen = asyncio.run(scenario())
    assert seen[1] == {"seq": 2, "kind": "b", "text": "first half, second half"}


def test_follow_after_seq_and_stop_drains_first(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        writer.append([ev(k) for k in "abcd"])
    assert seqs(asyncio.run(collect(journal, stop=lambda: True, after_seq=2))) == [3, 4]


def test_follow_stops_without_a_journal(journal: Path) -> None:
    assert asyncio.run(collect(journal, stop=lambda: True)) == []


def test_follow_survives_torn_tail_repair(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        writer.append([ev("a")])
    append_raw(journal, b'{"seq":2,"kind":"lost')  # the owner crashed mid-write

    async def scenario() -> list[dict[str, Any]]:
        follow = Follow(journal)
        await wait_for(lambda: len(follow.seen) == 1)
        with JournalWriter.open(journal) as writer:
            writer.append([ev("journal_repaired", bytes=writer.repaired_bytes)])
        await wait_for(lambda: len(follow.seen) == 2)
        return await follow.finish()

    seen = asyncio.run(scenario())
    assert [(e["seq"], e["kind"]) for e in seen] == [(1, "a"), (2, "journal_repaired")]


def test_follow_reports_damage(journal: Path) -> None:
    journal.write_bytes(b'{"seq":1}\ngarbage\n')
    with pytest.raises(StoreError, match=r":2:"):
        asyncio.run(collect(journal, stop=lambda: True))


def test_follow_reports_a_rewritten_journal(journal: Path) -> None:
    with JournalWriter.open(journal) as writer:
        writer.append([ev("a"), ev("b")])

    async def scenario() -> None:
        follow = Follow(journal)
        await wait_for(lambda: len(follow.seen) == 2)
        os.truncate(journal, 0)
        await follow.finish()

    with pytest.raises(StoreError, match="shrank"):
        asyncio.run(scenario())


def test_follow_reads_only_new_bytes(journal: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, length: int, offset: int) -> bytes:
        sizes.append(length)
        return real_pread(fd, length, offset)

    monkeypatch.setattr(os, "pread", counting_pread)
    with JournalWriter.open(journal) as writer:
        writer.append([ev("a", pad="x" * 1000)])

    async def scenario() -> None:
        follow = Follow(journal)
        await wait_for(lambda: len(follow.seen) == 1)
        with JournalWriter.open(journal) as again:
            sizes.clear()
            again.append([ev("b")])
        await wait_for(lambda: len(follow.seen) == 2)
        await follow.finish()

    asyncio.run(scenario())
    assert sizes and max(sizes) == len(json.dumps({"seq": 2, "kind": "b"}, separators=(",", ":"))) + 1
