"""Nothing hangs on a FIFO, nothing ends in a traceback, and the store root's own mode is checked
(issue 14, items 4-6): real ``rho-notebook`` processes, each bounded by a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, Project, star

WF = star(
    'return workflow(name = "t", nodes = [command(name = "s", argv = ["true"], timeout_seconds = 10, max_output_bytes = 100)])'
)

QUICK = 20.0
"""Seconds a refusal may take; a hang (the bug) is caught by the subprocess timeout."""


def two_runs(project: Project) -> tuple[str, str]:
    project.write("wf.star", WF)
    plan = project.plan("wf.star")
    return project.create_run(plan), project.create_run(plan)


def fifo_in_place_of(path: os.PathLike[str]) -> None:
    os.unlink(path)
    os.mkfifo(path, 0o600)


# -- item 4: FIFOs and devices -------------------------------------------------------------------


def test_fifo_entry_file_fails_fast_naming_it(project: Project) -> None:
    os.mkfifo(project.root / "wf.star", 0o600)
    out = project.cli("plan", "wf.star", timeout=QUICK)
    assert out.returncode != 0
    assert "wf.star" in out.stderr and "FIFO" in out.stderr
    assert "Traceback" not in out.stderr


def test_fifo_loaded_module_fails_fast_naming_it(project: Project) -> None:
    os.mkfifo(project.root / "lib.star", 0o600)
    project.write("wf.star", 'load("//lib.star", "x")\n' + WF)
    out = project.cli("plan", "wf.star", timeout=QUICK)
    assert out.returncode != 0
    assert "lib.star" in out.stderr and "FIFO" in out.stderr
    assert "Traceback" not in out.stderr


def test_fifo_journal_refused_quickly_and_runs_lists_the_others(project: Project) -> None:
    """A journal that cannot be read (a FIFO in its place) is a damaged journal, told as one:
    status shows it (0), events prints the reason (1), resume refuses (3); runs lists it."""
    bad, good = two_runs(project)
    fifo_in_place_of(project.home / "workflows" / "runs" / bad / "events.jsonl")
    shown = project.cli("status", bad, "--output", "json", timeout=QUICK)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    data = json.loads(shown.stdout)
    assert data["lifecycle"] == "damaged" and "events.jsonl" in data["damage"] and "FIFO" in data["damage"], data
    for verb, code in (("events", 1), ("resume", 3)):
        out = project.cli(verb, bad, *(["--yes"] if verb == "resume" else []), timeout=QUICK)
        assert "Traceback" not in out.stderr, out.stderr
        assert out.returncode == code, (verb, out.returncode, out.stderr)
        assert "events.jsonl" in out.stderr and "FIFO" in out.stderr, out.stderr
    listed = project.cli("runs", "--output", "json", timeout=QUICK)
    assert listed.returncode == 0, listed.stderr
    rows = {row["run_id"]: row for row in json.loads(listed.stdout)}
    assert good in rows
    assert rows[bad]["lifecycle"] == "damaged"  # never hidden behind a hang, nor left out


def test_fifo_graph_refused_quickly(project: Project) -> None:
    bad, _ = two_runs(project)
    fifo_in_place_of(project.home / "workflows" / "runs" / bad / "graph.json")
    out = project.cli("status", bad, timeout=QUICK)
    assert out.returncode != 0
    assert "graph.json" in out.stderr and "Traceback" not in out.stderr


def test_fifo_attempt_output_refused_quickly_by_logs(project: Project) -> None:
    project.write("echo.star", WF.replace('["true"]', '["echo", "hi"]'))
    plan = project.plan("echo.star")
    ran = project.cli("run", plan.plan_id, "--yes", "--output", "jsonl", timeout=60)
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    fifo_in_place_of(project.home / "workflows" / "runs" / run_id / "nodes" / "s" / "attempts" / "1" / "stdout")
    out = project.cli("logs", run_id, "s", timeout=QUICK)
    assert out.returncode != 0
    assert "stdout" in out.stderr and "FIFO" in out.stderr and "Traceback" not in out.stderr, out.stderr


# -- item 5: no traceback ------------------------------------------------------------------------


def test_deleted_graph_is_a_store_error_naming_the_file(project: Project) -> None:
    bad, _ = two_runs(project)
    os.unlink(project.home / "workflows" / "runs" / bad / "graph.json")
    for verb in ("status", "result"):
        out = project.cli(verb, bad, timeout=QUICK)
        assert out.returncode != 0
        assert "Traceback" not in out.stderr, out.stderr
        assert "graph.json" in out.stderr and "error[store" in out.stderr, out.stderr


def test_events_into_a_closed_pipe_exits_quietly(project: Project) -> None:
    run_id, _ = two_runs(project)
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    with subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "events", run_id],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # like `| head -0`: the reader is gone before anything is written
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=QUICK)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert code == 141, code  # 128 + SIGPIPE, as a shell reports a writer whose reader left


# -- item 6: the store root's own mode -----------------------------------------------------------


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_group_or_world_writable_home_is_refused_naming_the_fix(project: Project, mode: int) -> None:
    project.home.mkdir(mode=0o700)
    project.home.chmod(mode)
    project.write("wf.star", WF)
    out = project.cli("plan", "wf.star", timeout=QUICK)
    assert out.returncode != 0
    assert f"chmod 700 {project.home}" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (project.home / "workflows").exists()


def test_private_home_is_accepted(project: Project) -> None:
    project.home.mkdir(mode=0o750)  # group-readable is fine: only writable is refused
    project.home.chmod(0o750)
    project.write("wf.star", WF)
    out = project.cli("plan", "wf.star", timeout=QUICK)
    assert out.returncode == 0, out.stderr


def test_symlinked_run_directory_is_reported_not_hidden(project: Project) -> None:
    bad, good = two_runs(project)
    runs = project.home / "workflows" / "runs"
    os.rename(runs / bad, project.home / "elsewhere")
    os.symlink(project.home / "elsewhere", runs / bad)
    listed = project.cli("runs", timeout=QUICK)
    assert listed.returncode == 0, listed.stderr
    assert good in listed.stdout
    assert bad in listed.stderr and "symlink" in listed.stderr, listed.stderr
    assert "refused" in listed.stderr
