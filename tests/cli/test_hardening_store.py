"""Damaged or unsafe store entries give one line and the documented exit code (issue 28,
findings 2 and 6): real ``rho-notebook`` processes, each bounded by a timeout.

- a journal that cannot be read (a FIFO, a folder or a symlink in place of ``events.jsonl``) is a
  damaged journal: ``status`` shows it (0), ``events`` prints the reason (1), ``resume`` refuses
  (3) and ``runs`` lists it;
- ``requests`` replaced by a plain file: ``resume`` refuses (3) before anything is journaled;
- an attempt's ``value.json`` that is not JSON: ``result`` (both forms) exits 1 naming the file;
- a store folder others can write (``workflows``, ``workflows/runs``, ``workflows/plans``, a run
  folder) is refused with exit 3 naming its mode and the ``chmod`` that fixes it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.runhelp import plan_id, run
from tests.conftest import Project, star

QUICK = 30.0
"""Seconds a refusal may take; a hang is caught by the subprocess timeout."""

WF = star(
    'return workflow(name = "h", nodes = [shell(name = "a", executable = "sh", arguments = ["-c"], '
    'command = "echo 7", output = schema.stdout_json(schema.integer()), timeout_seconds = 30, max_output_bytes = 100)])'
)


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a refusal prints on stderr (never a traceback)."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _completed(project: Project) -> tuple[str, Path]:
    project.write("wf.star", WF)
    result, data = run(project)
    assert result.returncode == 0 and data["outcome"] == "success", result.stderr
    run_id = str(data["run_id"])
    return run_id, project.home / "workflows" / "runs" / run_id


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path, 0o600)


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _symlink(path: Path) -> None:
    copy = path.parent.parent.parent.parent / "copied-journal"
    path.rename(copy)
    path.symlink_to(copy)


JOURNAL_DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (_fifo, "FIFO"),
    "folder": (_folder, "a directory"),
    "symlink": (_symlink, "symlink"),
}


@pytest.mark.parametrize("kind", sorted(JOURNAL_DAMAGE))
def test_a_journal_that_cannot_be_read_is_a_damaged_journal(project: Project, kind: str) -> None:
    run_id, folder = _completed(project)
    damage, named = JOURNAL_DAMAGE[kind]
    damage(folder / "events.jsonl")
    shown = project.cli("status", run_id, "--output", "json", timeout=QUICK)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["lifecycle"] == "damaged" and "events.jsonl" in data["damage"] and named in data["damage"], data
    events = project.cli("events", run_id, timeout=QUICK)
    assert events.returncode == 1 and "damaged" in _one_line(events)
    resumed = project.cli("resume", run_id, "--yes", timeout=QUICK)
    assert resumed.returncode == 3 and "is damaged" in _one_line(resumed)
    listed = project.cli("runs", "--output", "json", timeout=QUICK)
    assert listed.returncode == 0, listed.stderr
    assert [row["lifecycle"] for row in json.loads(listed.stdout)] == ["damaged"]


def test_requests_replaced_by_a_file_is_refused_before_anything_is_journaled(project: Project) -> None:
    project.write("wf.star", WF)
    run_id = project.create_run(project.plan("wf.star"))
    folder = project.home / "workflows" / "runs" / run_id
    (folder / "requests").rmdir()
    (folder / "requests").write_text("not a folder")
    journal = (folder / "events.jsonl").read_bytes()
    resumed = project.cli("resume", run_id, "--yes", timeout=QUICK)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    assert "requests should be a directory" in _one_line(resumed)
    assert (folder / "events.jsonl").read_bytes() == journal  # nothing was journaled, nothing ran
    cancelled = project.cli("cancel", run_id, "--wait", "0", timeout=QUICK)
    assert cancelled.returncode == 3 and "requests" in _one_line(cancelled)


@pytest.mark.parametrize("form", ["text", "json"])
def test_a_value_that_is_not_json_is_named_not_a_traceback(project: Project, form: str) -> None:
    run_id, folder = _completed(project)
    (folder / "nodes" / "a" / "attempts" / "1" / "value.json").write_text("{not json")
    shown = project.cli("result", run_id, "--output", form, timeout=QUICK)
    assert shown.returncode == 1
    line = _one_line(shown)
    assert "value.json is not valid JSON" in line and "damaged" in line, line


@pytest.mark.parametrize("where", ["workflows", "workflows/runs", "workflows/plans", "run"])
def test_a_store_folder_others_can_write_is_refused_naming_the_fix(project: Project, where: str) -> None:
    run_id, run_folder = _completed(project)
    plan = plan_id(project)
    folder = run_folder if where == "run" else project.home / where
    folder.chmod(0o777)
    verbs = {
        "workflows": [["runs"], ["status", run_id], ["run", plan, "--yes"]],
        "workflows/runs": [["runs"], ["status", run_id], ["run", plan, "--yes"]],
        "workflows/plans": [["plan", "wf.star"], ["plans"]],
        "run": [["status", run_id], ["result", run_id], ["resume", run_id, "--yes"]],
    }[where]
    for argv in verbs:
        done = project.cli(*argv, timeout=QUICK)
        assert done.returncode == 3, (argv, done.returncode, done.stdout, done.stderr)
        line = _one_line(done)
        assert f"{folder} is group- and world-writable (mode 0777)" in line and f"chmod 700 {folder}" in line, line
    folder.chmod(0o700)
    assert project.cli("status", run_id, timeout=QUICK).returncode == 0


def test_runs_reports_a_run_folder_others_can_write_and_lists_the_others(project: Project) -> None:
    run_id, folder = _completed(project)
    other, _ = _completed(project)
    folder.chmod(0o707)
    listed = project.cli("runs", "--output", "json", timeout=QUICK)
    assert listed.returncode == 0
    assert [row["run_id"] for row in json.loads(listed.stdout)] == [other]
    line = _one_line(listed)
    assert line.startswith(f"rho-notebook: warning: run {run_id} refused:") and f"chmod 700 {folder}" in line, line
