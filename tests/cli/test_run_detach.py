"""The CLI's ``run``, ``resume`` and ``wait`` follow a run's owner, a process of its own: a signal or a
closed pipe stops following only, ``--detach`` returns at once, ``wait`` blocks on any run, ``--run-id``
announces the ID, ``run FILE.star`` runs in one step (issue 30).

Every run here has a node that waits for a ``go`` file the test creates only after checking what it
wants to see while the run is live, so nothing depends on how fast a machine is. Each node appends a
line to its own marker file: a node that ran twice would show.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.runhelp import only_run_id, owner_pid, status
from tests.conftest import REPO, Project, star

C = "timeout_seconds = 60, max_output_bytes = 10000"

GATED = star(
    f"""
    first = shell(name = "first", executable = "sh", arguments = ["-c"], command = "echo ran >> marks/first; while [ ! -e go ]; do sleep 0.02; done; echo first done", {C})
    second = shell(name = "second", executable = "sh", arguments = ["-c"], command = "echo ran >> marks/second", needs = ["first"], {C})
    return workflow(name = "gated", nodes = [first, second])
    """
)

FAILING = star(f'return workflow(name = "failing", nodes = [command(name = "boom", argv = ["false"], {C})])')

GATE_APPROVAL = star(
    f"""
    ok = approval(name = "ok", prompt = "Go on?", timeout_seconds = 120, max_output_bytes = 1000)
    after = shell(name = "after", executable = "sh", arguments = ["-c"], command = "echo ran >> marks/after", needs = ["ok"], {C})
    return workflow(name = "asks", nodes = [ok, after])
    """
)

EXIT_FOR = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


def _env(project: Project) -> dict[str, str]:
    return {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}


def _gated(project: Project, text: str = GATED) -> None:
    project.write("wf.star", text)
    (project.root / "marks").mkdir()


def _marks(project: Project, node: str) -> int:
    path = project.root / "marks" / node
    return len(path.read_text().splitlines()) if path.exists() else 0


def _until(predicate: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def _follow(project: Project, *args: str) -> subprocess.Popen[str]:
    """``rho-notebook ARGS`` in a session of its own (as a terminal's job), its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", *args],
        cwd=project.root,
        env=_env(project),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _finish(project: Project, run_id: str) -> None:
    """Let the gated node end, wait for the run, and check every node ran exactly once."""
    (project.root / "go").touch()
    waited = project.cli("wait", run_id, timeout=90)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert f"run {run_id}  outcome success" in waited.stdout
    data = status(project, run_id)
    assert data["lifecycle"] == "completed" and data["outcome"] == "success"
    assert all(node["attempt"] == 1 for node in data["nodes"].values()), data
    assert _marks(project, "first") == 1 and _marks(project, "second") == 1


# -- signals and a closed pipe stop following, never the run -----------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_to_a_following_run_detaches_and_the_run_goes_on(project: Project, sig: signal.Signals) -> None:
    _gated(project)
    proc = _follow(project, "run", "wf.star", "--yes")
    _until(lambda: _marks(project, "first") == 1, "the first node started")
    run_id = only_run_id(project)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == EXIT_FOR[sig], err
    assert f"stopped following run {run_id}; the run goes on" in err
    for command in (f"events {run_id} --follow", f"wait {run_id}", f"cancel {run_id}"):
        assert f"rho-notebook {command}" in err
    assert "Traceback" not in err
    assert any("first" in line and "running" in line for line in out.splitlines()), out  # it followed
    live = status(project, run_id)
    assert live["lifecycle"] == "running" and owner_pid(project, run_id) not in (None, 0, proc.pid)
    _finish(project, run_id)


def test_a_closed_pipe_stops_following_quietly_and_the_run_goes_on(project: Project) -> None:
    _gated(project)
    pipeline = subprocess.Popen(
        ["sh", "-c", f"{sys.executable} -m rho_notebook run wf.star --yes | head -1"],
        cwd=project.root,
        env=_env(project),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    _until(lambda: _marks(project, "first") == 1, "the first node started")
    run_id = only_run_id(project)
    os.killpg(pipeline.pid, signal.SIGINT)  # Ctrl-C at the terminal reaches the whole pipeline
    out, err = pipeline.communicate(timeout=30)
    assert out.startswith("entry wf.star  plan ") and len(out.splitlines()) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert status(project, run_id)["lifecycle"] == "running"
    _finish(project, run_id)


def test_ctrl_c_at_an_approval_prompt_detaches_without_deciding(project: Project) -> None:
    _gated(project, GATE_APPROVAL)
    primary, secondary = pty.openpty()  # a terminal: the CLI asks there
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rho_notebook", "run", "wf.star", "--yes", "--output", "jsonl"],
            cwd=project.root,
            env=_env(project),
            stdin=secondary,
            stdout=secondary,
            stderr=secondary,
            start_new_session=True,
        )
        seen = _read_until(primary, b"approve? [y/N")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
        seen += _read_until(primary, b"cancel it:")
    finally:
        os.close(secondary)
        os.close(primary)
    run_id = only_run_id(project)
    assert b"Go on?" in seen and f"stopped following run {run_id}".encode() in seen
    data = status(project, run_id)
    assert data["lifecycle"] == "waiting" and data["nodes"]["ok"]["state"] == "running"  # nobody decided
    pending = project.cli("approve", run_id)
    request_id = pending.stdout.split("request ", 1)[1].split()[0]
    assert project.cli("approve", run_id, request_id[:13]).returncode == 0
    waited = project.cli("wait", run_id, timeout=90)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert _marks(project, "after") == 1


def _read_until(fd: int, wanted: bytes, timeout: float = 60) -> bytes:
    """What a terminal showed until ``wanted`` appeared (or the other end closed)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{wanted!r} never shown; the terminal showed {seen.decode(errors='replace')}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: every process that had the terminal open is gone
            break
        if not chunk:
            break
        seen += chunk
    return seen


# -- --detach, wait, --run-id ------------------------------------------------------------------------


def test_detach_returns_while_the_run_goes_on_from_a_forked_owner(project: Project) -> None:
    _gated(project)
    started = project.cli("run", "wf.star", "--yes", "--detach")
    assert started.returncode == 0, started.stderr
    run_id = only_run_id(project)
    line = started.stdout.splitlines()[-1]
    assert line.startswith(f"run {run_id} started (owner pid ")
    pid = int(line.rsplit(" ", 1)[1].rstrip(")"))
    assert owner_pid(project, run_id) == pid  # the run is live, owned by that process
    assert status(project, run_id)["lifecycle"] == "running"
    # the CLI forked its owner (single-threaded at the start): the owner is a copy of the `run`
    # process, not the `python -m rho_notebook.runtime.detached` a threaded caller spawns
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"run" in argv and b"--detach" in argv and b"rho_notebook.runtime.detached" not in argv
    _finish(project, run_id)


def test_detach_with_json_output_prints_the_run_and_its_state(project: Project) -> None:
    _gated(project)
    started = project.cli("run", "wf.star", "--yes", "--detach", "--output", "json")
    assert started.returncode == 0, started.stderr
    answer = json.loads(started.stdout.splitlines()[-1])
    assert answer["run_id"] == only_run_id(project) and answer["state"] == "running"
    _finish(project, answer["run_id"])


def test_wait_exits_by_outcome_and_3_on_timeout(project: Project) -> None:
    _gated(project)
    assert project.cli("run", "wf.star", "--yes", "--detach").returncode == 0
    run_id = only_run_id(project)
    timed_out = project.cli("wait", run_id[:13], "--timeout", "0.2")
    assert timed_out.returncode == 3, timed_out.stderr
    assert timed_out.stdout.startswith(f"run {run_id}  running after 0.2 s; it goes on")
    as_json = project.cli("wait", run_id, "--timeout", "0", "--output", "json")
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["lifecycle"] == "running"
    _finish(project, run_id)
    again = project.cli("wait", run_id, "--output", "json")  # an ended run: at once
    assert again.returncode == 0 and json.loads(again.stdout)["outcome"] == "success"

    project.write("fail.star", FAILING)
    failed = project.cli("run", "fail.star", "--yes", "--detach", "--output", "json")
    failed_id = json.loads(failed.stdout.splitlines()[-1])["run_id"]
    waited = project.cli("wait", failed_id)
    assert waited.returncode == 1 and f"run {failed_id}  outcome failure" in waited.stdout


def test_wait_of_a_run_nobody_owns_says_so(project: Project) -> None:
    project.write("wf.star", FAILING)
    run_id = project.create_run(project.plan("wf.star"))  # created, never started
    waited = project.cli("wait", run_id)
    assert waited.returncode == 1 and f"run {run_id}  planned" in waited.stdout


def test_run_id_is_checked_announced_and_never_taken_twice(project: Project) -> None:
    project.write(
        "wf.star", star(f'return workflow(name = "one", nodes = [command(name = "a", argv = ["true"], {C})])')
    )
    for bad in ("not-a-uuid", "01A2425D-9955-791A-82E2-B58A97D87005", "0b1e3f4c-5d6e-4f70-8a9b-0c1d2e3f4a5b"):
        refused = project.cli("run", "wf.star", "--yes", "--run-id", bad)
        assert refused.returncode == 2, refused.stderr
        assert "--run-id" in refused.stderr and "canonical UUIDv7" in refused.stderr
    assert not (project.home / "workflows" / "runs").exists() or not any(
        (project.home / "workflows" / "runs").iterdir()
    )
    chosen = "01a2425d-9955-791a-82e2-b58a97d87005"
    ran = project.cli("run", "wf.star", "--yes", "--run-id", chosen)
    assert ran.returncode == 0, ran.stderr
    assert f"run {chosen}  outcome success" in ran.stdout and only_run_id(project) == chosen
    taken = project.cli("run", "wf.star", "--yes", "--run-id", chosen)
    assert taken.returncode == 3 and f"run ID {chosen} is taken" in taken.stderr
    assert status(project, chosen)["outcome"] == "success"


# -- run FILE.star, resume ---------------------------------------------------------------------------


def test_run_a_star_entry_in_one_step(project: Project) -> None:
    project.write(
        "wf.star", star(f'return workflow(name = "one", nodes = [command(name = "a", argv = ["true"], {C})])')
    )
    ran = project.cli("run", "wf.star", "--yes")
    assert ran.returncode == 0, ran.stderr
    first = ran.stdout.splitlines()[0]
    assert first.startswith("entry wf.star  plan ") and "workflow one  digest sha256:" in first
    assert f"run {only_run_id(project)}  outcome success" in ran.stdout
    again = project.cli("run", "wf.star", "--yes")
    assert again.returncode == 0 and len(project.stored_plans()) == 1  # one plan per graph
    project.write("notes.txt", "not a workflow")
    refused = project.cli("run", "notes.txt", "--yes")
    assert refused.returncode == 2
    assert all(form in refused.stderr for form in ("FILE.star", "SCRIPT.py", "FILE.graph.yaml", "NOTEBOOK.ipynb"))


def test_resume_after_cancel_goes_through_an_owner_process(project: Project) -> None:
    _gated(project)
    proc = _follow(project, "run", "wf.star", "--yes")
    _until(lambda: _marks(project, "first") == 1, "the first node started")
    run_id = only_run_id(project)
    cancelled = project.cli("cancel", run_id)
    assert cancelled.returncode == 0, cancelled.stderr
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1 and f"run {run_id}  outcome cancellation" in out
    (project.root / "go").touch()
    resumed = _follow(project, "resume", run_id, "--yes", "--wait")
    out, err = resumed.communicate(timeout=90)
    assert resumed.returncode == 0, err
    assert "running (attempt" not in out  # --wait: no progress lines
    assert f"run {run_id}  outcome success" in out
    data = status(project, run_id)
    assert data["outcome"] == "success"
    assert _marks(project, "first") == 2 and _marks(project, "second") == 1  # the cancelled attempt, then one more
    assert project.cli("resume", run_id, "--yes", "--detach").returncode == 3  # completed: refused
