"""A journal that is missing, empty, cut short or edited never makes finished work run again.

The matrix: damage kinds x {a completed run, a run whose owner was killed (SIGKILL) while its
last node ran}. Every node appends a line to its own side-effect file, so a node that ran twice
shows. Each command's exit code and message is the one docs/running.md documents: a damaged run
reads as ``damaged`` in status and runs, `resume` refuses it (3) naming what is missing, `events`
prints the readable part and exits 1, `prune` skips it unless `--include-damaged`, `delete`
removes it. A torn last line past the watermark (what a power cut leaves) stays the repaired,
normal case.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.runhelp import kill_owner, start_run, status, wait_for_event
from tests.conftest import Project, star

NODES = ["a", "b", "c"]


def _effect(name: str, needs: list[str], before: str = "") -> str:
    return (
        f'shell(name = "{name}", executable = "sh", arguments = ["-c"], '
        f'command = "{before}echo ran >> effects/{name}.log", needs = {json.dumps(needs)}, '
        "timeout_seconds = 60, max_output_bytes = 1000)"
    )


def _workflow(slow_c: bool) -> str:
    c = _effect("c", ["b"], "sleep 3; " if slow_c else "")
    return star(
        'return workflow(name = "dmg", nodes = [' + ", ".join([_effect("a", []), _effect("b", ["a"]), c]) + "])"
    )


def _counts(project: Project) -> dict[str, int]:
    found = {}
    for name in NODES:
        path = project.root / "effects" / f"{name}.log"
        found[name] = len(path.read_text().splitlines()) if path.exists() else 0
    return found


def _folder(project: Project, run_id: str) -> Path:
    return project.home / "workflows" / "runs" / run_id


def _completed(project: Project) -> str:
    project.write("wf.star", _workflow(slow_c=False))
    proc = start_run(project)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    run_id = str(json.loads(out.splitlines()[0])["run_id"])
    assert status(project, run_id)["outcome"] == "success"
    return run_id


def _interrupted(project: Project) -> str:
    project.write("wf.star", _workflow(slow_c=True))
    proc = start_run(project)
    run_id, started = wait_for_event(proc, lambda e: e["kind"] == "process_started" and e["node"] == "c")
    kill_owner(project, run_id)
    proc.wait(timeout=10)
    try:
        os.killpg(started["pid"], signal.SIGKILL)  # the orphaned `sleep 3` of c
    except ProcessLookupError:
        pass
    assert status(project, run_id)["lifecycle"] == "needs_recovery"
    return run_id


def _delete(events: Path) -> None:
    events.unlink()


def _empty(events: Path) -> None:
    events.write_bytes(b"")


def _torn_tail(events: Path) -> None:
    with open(events, "ab") as handle:  # an unsynced write cut by a power cut: past the watermark
        handle.write(b'{"seq":999,"kind":"node_fin')


def _cut_mid_file(events: Path) -> None:
    data = events.read_bytes()
    half = len(data) // 2
    if data[half - 1 : half] == b"\n":
        half -= 1
    events.write_bytes(data[:half])


def _edit(events: Path) -> None:
    data = events.read_bytes()
    assert b'"state":"success"' in data
    events.write_bytes(data.replace(b'"state":"success"', b'"state":"failure"', 1))


def _delete_mark(events: Path) -> None:
    (events.parent / "journal.mark").unlink()


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "deleted": (_delete, "is missing but seq"),
    "emptied": (_empty, "ends at seq 0 but seq"),
    "cut_mid_file": (_cut_mid_file, "was fsynced (hash"),
    "edited": (_edit, "does not match its chain hash"),
    "mark_deleted": (_delete_mark, "watermark"),
}
RUNS = {"completed": _completed, "interrupted": _interrupted}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
@pytest.mark.parametrize("run", sorted(RUNS))
def test_damaged_journal_never_reruns_finished_work(project: Project, run: str, kind: str) -> None:
    (project.root / "effects").mkdir()
    run_id = RUNS[run](project)
    before = _counts(project)
    damage, message = DAMAGE[kind]
    damage(_folder(project, run_id) / "events.jsonl")

    shown = project.cli("status", run_id, "--output", "json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["lifecycle"] == "damaged" and message in data["damage"], data
    text = project.cli("status", run_id)
    assert text.returncode == 0 and "damaged" in text.stdout and "damage " in text.stdout

    for flags in ([], ["--recover-uncertain"]):
        resumed = project.cli("resume", run_id, "--yes", *flags)
        assert resumed.returncode == 3, resumed.stdout + resumed.stderr
        assert "is damaged" in resumed.stderr and message in resumed.stderr
        assert _counts(project) == before, f"resume {flags} ran nodes again"

    events = project.cli("events", run_id)
    assert events.returncode == 1 and "damaged" in events.stderr

    listed = project.cli("runs", "--output", "json")
    assert listed.returncode == 0, listed.stderr
    assert [row["lifecycle"] for row in json.loads(listed.stdout)] == ["damaged"]
    only = project.cli("runs", "--state", "damaged", "--output", "json")
    assert [row["run_id"] for row in json.loads(only.stdout)] == [run_id]

    skipped = project.cli("prune", "--older-than", "0", "--yes")
    assert skipped.returncode == 0 and "nothing to prune" in skipped.stdout
    assert _folder(project, run_id).is_dir()
    refused = project.cli("delete", run_id)  # no terminal to confirm on
    assert refused.returncode == 3 and _folder(project, run_id).is_dir()
    if kind == "edited":
        deleted = project.cli("delete", run_id, "--yes")
        assert deleted.returncode == 0, deleted.stderr
    else:
        deleted = project.cli("prune", "--older-than", "0", "--include-damaged", "--yes")
        assert deleted.returncode == 0 and f"deleted run {run_id}" in deleted.stdout, deleted.stdout + deleted.stderr
    assert not _folder(project, run_id).exists()
    assert _counts(project) == before


@pytest.mark.parametrize("run", sorted(RUNS))
def test_torn_tail_past_the_watermark_is_repaired_not_damage(project: Project, run: str) -> None:
    (project.root / "effects").mkdir()
    run_id = RUNS[run](project)
    before = _counts(project)
    _torn_tail(_folder(project, run_id) / "events.jsonl")
    data = status(project, run_id)
    assert "damage" not in data
    events = project.cli("events", run_id)
    assert events.returncode == 0 and "torn" in events.stderr
    if run == "completed":
        assert data["lifecycle"] == "completed"
        resumed = project.cli("resume", run_id, "--yes")
        assert resumed.returncode == 3 and "nothing to resume" in resumed.stderr
        assert _counts(project) == before
        return
    assert data["lifecycle"] == "needs_recovery"
    resumed = project.cli("resume", run_id, "--yes", "--recover-uncertain", "--output", "jsonl", timeout=90)
    assert resumed.returncode == 0, resumed.stderr
    assert "journal_repaired" in [json.loads(line)["kind"] for line in resumed.stdout.splitlines()]
    assert status(project, run_id)["outcome"] == "success"
    assert _counts(project) == {"a": 1, "b": 1, "c": 1}  # c was killed before its echo; a, b never rerun


def _cut_last_line(events: Path) -> None:
    data = events.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    events.write_bytes(data[: start + (len(data) - start) // 2])


@pytest.mark.parametrize("run", sorted(RUNS))
def test_last_line_cut_mid_line_is_torn_only_past_the_watermark(project: Project, run: str) -> None:
    """The killed owner's last record (process_started of c) was never fsynced: cutting it is a
    torn tail. The completed run's last record (run_completed) was: cutting it is damage."""
    (project.root / "effects").mkdir()
    run_id = RUNS[run](project)
    before = _counts(project)
    _cut_last_line(_folder(project, run_id) / "events.jsonl")
    data = status(project, run_id)
    if run == "completed":
        assert data["lifecycle"] == "damaged" and "but seq" in data["damage"] and "was fsynced" in data["damage"]
        resumed = project.cli("resume", run_id, "--yes", "--recover-uncertain")
        assert resumed.returncode == 3 and "is damaged" in resumed.stderr
        assert _counts(project) == before
        return
    assert data["lifecycle"] == "needs_recovery" and "damage" not in data
    resumed = project.cli("resume", run_id, "--yes", "--recover-uncertain", "--output", "jsonl", timeout=90)
    assert resumed.returncode == 0, resumed.stderr
    assert status(project, run_id)["outcome"] == "success"
    assert _counts(project) == {"a": 1, "b": 1, "c": 1}


def test_the_server_row_cache_sees_damage(project: Project) -> None:
    """The server lists runs through a row cache keyed by the journal's and the watermark's
    stat: damage done after a row was cached is still seen, and a deleted journal still lists."""
    import asyncio

    from rho_notebook.service import RowCache

    (project.root / "effects").mkdir()
    run_id = _completed(project)
    cache = RowCache()

    def lifecycles() -> list[str]:
        return [row["lifecycle"] for row in asyncio.run(project.service.run_rows(cache=cache))]

    assert lifecycles() == ["completed"]
    _delete_mark(_folder(project, run_id) / "events.jsonl")
    assert lifecycles() == ["damaged"]
    _delete(_folder(project, run_id) / "events.jsonl")
    assert lifecycles() == ["damaged"]


def _delete_snapshot(folder: Path) -> None:
    (folder / "state.json").unlink(missing_ok=True)


def _delete_graph(folder: Path) -> None:
    (folder / "graph.json").unlink()


def _fifo_journal(folder: Path) -> None:
    (folder / "events.jsonl").unlink()
    os.mkfifo(folder / "events.jsonl")


def _fifo_lock(folder: Path) -> None:
    (folder / "mutation.lock").unlink(missing_ok=True)
    os.mkfifo(folder / "mutation.lock")


OTHER_DAMAGE: dict[str, tuple[Callable[[Path], None], str | None]] = {
    "snapshot_deleted": (_delete_snapshot, None),
    "graph_deleted": (_delete_graph, "graph.json"),
    "fifo_journal": (_fifo_journal, "not a regular file"),
    "fifo_lock": (_fifo_lock, "not a regular file"),
}
"""Damage outside the journal: kind -> (how, what every refusing command names; None: not damage)."""


@pytest.mark.parametrize("kind", sorted(OTHER_DAMAGE))
@pytest.mark.parametrize("run", sorted(RUNS))
def test_other_damage_is_refused_clearly_and_repeats_nothing(project: Project, run: str, kind: str) -> None:
    (project.root / "effects").mkdir()
    run_id = RUNS[run](project)
    before = _counts(project)
    damage, message = OTHER_DAMAGE[kind]
    damage(_folder(project, run_id))

    for verb in (["status", run_id], ["result", run_id], ["resume", run_id, "--yes"], ["runs"]):
        done = project.cli(*verb, timeout=30)  # a FIFO must not hang any of them
        assert "Traceback" not in done.stderr, done.stderr
        if kind == "fifo_journal":  # a journal that cannot be read is a damaged journal (docs/running.md)
            assert done.returncode == (3 if verb[0] == "resume" else 0), (verb, done.returncode, done.stderr)
            if verb[0] in ("status", "resume"):
                assert message is not None and message in done.stdout + done.stderr, (verb, done.stdout)
            continue
        refuses = verb[0] == "resume" or (verb[0] != "runs" and kind != "fifo_lock")
        if message is not None and refuses:  # a lock FIFO only matters to whoever takes ownership
            assert done.returncode == 1 and message in done.stderr, (verb, done.returncode, done.stderr)
    assert _counts(project) == before, "a damaged run ran nodes again"
    if message is None:  # state.json is a cache: the journal is the truth
        shown = status(project, run_id)
        assert shown["lifecycle"] == ("completed" if run == "completed" else "needs_recovery")
        if run == "interrupted":
            recovered = project.cli("resume", run_id, "--yes", "--recover-uncertain")
            assert recovered.returncode == 0, recovered.stderr
            # c was journaled uncertain (killed mid-sleep, before its effect) and a person chose to recover
            assert _counts(project) == {"a": 1, "b": 1, "c": 1}
