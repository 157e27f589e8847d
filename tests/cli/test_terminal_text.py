"""What the terminal says about a run, as text (issue 30, item 4), through real processes.

The progress of a followed run without a TTY: a heartbeat for a node that runs longer than 10 s,
the last lines of a failed node's stderr (bounded, stripped of escape sequences), a reused node
printed once, a failed script run's reason. ``status``: the reason of a failed run, where it ran
(``executor``, the Dask worker of each attempt), the live owner's pid and what to do next for a
run that waits for a person or needs recovery. ``cancel`` in words (JSON with ``--output json``),
``runs`` and ``plans`` with a header row and the owner's pid of a live run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.cli.followhelp import driver_command, run_id_of
from tests.cli.runhelp import plan_id, start_run, status, wait_for_event
from tests.conftest import Project, star

C = "timeout_seconds = 60, max_output_bytes = 100000"

NOISY_FAILURE = star(
    f"""
    slow = command(name = "slow", argv = ["sleep", "10.6"], {C})
    noisy = command(name = "noisy", argv = ["sh", "-c", "for i in $(seq 1 50); do echo err-$i >&2; done; printf 'last \\\\033[31mred\\\\033[0m\\\\n' >&2; exit 4"], needs = ["slow"], {C})
    return workflow(name = "noisy", nodes = [slow, noisy])
    """
)

STEPS = """\
def step(tag):
    return {"size": len(tag)}
"""

REUSED = star(
    f"""
    R = schema.record({{"size": schema.integer()}})
    a = python(name = "a", module = "//nodes/steps.py", function = "step", args = {{"tag": "abc"}}, output = R, access = "read_only", reuse = True, {C})
    b = command(name = "b", argv = ["false"], needs = ["a"], {C})
    return workflow(name = "reused", nodes = [a, b])
    """
)

SLOW = star(f'return workflow(name = "slow", nodes = [command(name = "slow", argv = ["sleep", "30"], {C})])')

UNTIL_GO = star(
    f"""
    wait = command(name = "slow", argv = ["sh", "-c", "while [ ! -e go ]; do sleep 0.05; done"], {C})
    return workflow(name = "until", nodes = [wait])
    """
)

GATE = star(
    f"""
    ok = approval(name = "ok", prompt = "Ship?", {C})
    after = command(name = "after", argv = ["true"], needs = ["ok"], {C})
    return workflow(name = "gate", nodes = [ok, after])
    """
)

ASK = """\
name: ask
steps:
  - id: review
    kind: human
    params:
      question: "Escalate?"
      fields:
        level: {type: enum, choices: [low, high]}
  - {id: done, kind: output}
edges:
  - {from: review, to: done}
"""

BAD_SCRIPT = """\
from rho_notebook.script import emit_output

emit_output(None + 1)
"""


def _lines_of(node: str, text: str) -> list[str]:
    """The progress lines of ``node`` (``[  0.05s] NODE  ...``)."""
    return [line for line in text.splitlines() if re.match(rf"\[\s*\d+\.\d+s\] {re.escape(node)}\s", line)]


# -- progress without a TTY ------------------------------------------------------------------------


def test_a_long_node_gets_a_heartbeat_and_a_failed_node_shows_the_end_of_its_stderr(project: Project) -> None:
    project.write("wf.star", NOISY_FAILURE)
    argv, env = driver_command(project, plan_id(project), live=False)
    done = subprocess.run(argv, cwd=project.root, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    run_id = run_id_of(out)
    slow = _lines_of("slow", out)
    assert any(re.search(r"still running \(1[01] s\)$", line) for line in slow), out
    assert not any("still running" in line for line in _lines_of("noisy", out))  # it ran for a moment only
    assert "\x1b" not in out  # plain lines: no redraw, and the node's colour codes are removed
    lines = out.splitlines()
    failed = next(i for i, line in enumerate(lines) if re.search(r"\] noisy\s+failure  exited with code 4", line))
    head = lines[failed + 1]
    assert head.strip() == (
        f"last lines of its stderr (all of it: rho-notebook logs {run_id[:13]} noisy --stream stderr):"
    )
    shown = [line.strip() for line in lines[failed + 2 : failed + 12]]
    assert shown == [f"err-{i}" for i in range(42, 51)] + ["last red"]  # the last 10 lines, no more
    assert "err-41" not in out
    assert "outcome failure" in out


def test_a_reused_node_is_printed_once_and_a_failed_script_run_says_why(project: Project) -> None:
    project.write("nodes/steps.py", STEPS)
    project.write("wf.star", REUSED)
    pid = plan_id(project)
    first = project.cli("run", pid, "--yes")
    assert first.returncode == 1, first.stderr
    second = project.cli("run", pid, "--yes")
    assert second.returncode == 1, second.stderr
    reused = _lines_of("a", second.stdout)
    assert len(reused) == 1, second.stdout
    assert re.search(r"\] a\s+success  reused from run [0-9a-f-]{36} \(node a, attempt 1\)$", reused[0])

    project.write("bad.py", BAD_SCRIPT)
    script = project.cli("run", "bad.py", "--yes")
    assert script.returncode == 1, script.stderr
    assert re.search(
        r"run completed: failure  the script exited with code 1: TypeError: unsupported operand", script.stdout
    ), script.stdout
    run_id = re.search(r"run ([0-9a-f-]{36})", script.stdout)
    assert run_id is not None
    shown = project.cli("status", run_id.group(1)).stdout
    assert "\nreason     the script exited with code 1: TypeError: unsupported operand" in shown, shown
    assert re.search(r"\nreason     .*'NoneType' and 'int' \(at //bad\.py:3\)\n", shown), shown  # the line that raised
    project.write(
        "budget.py",
        "from rho_notebook.script import run_model\n\nrun_model([{'role': 'user', 'content': 'hi'}], provider='p', model='m', budget={'token': 5})\n",
    )
    said = project.cli("run", "budget.py", "--yes").stdout
    assert said.count("//budget.py:3") == 1, said  # the shim's own '(step call at ...)' is not said twice


# -- status ----------------------------------------------------------------------------------------


def test_status_of_a_failed_graph_run_names_the_node_and_where_it_ran(project: Project) -> None:
    project.write("nodes/steps.py", STEPS)
    project.write("wf.star", REUSED)
    done = project.cli("run", plan_id(project), "--yes", "--output", "jsonl")
    run_id = json.loads(done.stdout.splitlines()[0])["run_id"]
    shown = project.cli("status", run_id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "reason     node b failed: exited with code 1" in lines
    assert "executor   local" in lines
    assert not any(line.startswith(("owner", "next")) for line in lines)  # not live, nothing to do
    assert lines.index("reason     node b failed: exited with code 1") < lines.index("executor   local")


def _owner(project: Project, run_id: str) -> int:
    [row] = [r for r in json.loads(project.cli("runs", "--output", "json").stdout) if r["run_id"] == run_id]
    return int(row["owner_pid"])


def test_a_waiting_run_names_its_owner_and_the_command_that_answers_it(project: Project) -> None:
    project.write("wf.star", GATE)
    proc = start_run(project)
    try:
        run_id, asked = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
        request = asked["request_id"]
        owner = _owner(project, run_id)
        os.kill(owner, 0)  # a live process
        shown = project.cli("status", run_id).stdout.splitlines()
        assert "lifecycle  waiting" in shown
        assert f"owner      pid {owner}" in shown
        hint = f"next       ok waits for a person: rho-notebook approve {run_id[:13]} {request[:13]}  (or add --deny)"
        assert hint in shown, shown
        listed = project.cli("runs").stdout.splitlines()
        assert listed[0].split() == ["RUN", "WORKFLOW", "LIFECYCLE", "OUTCOME", "OWNER", "UPDATED"]
        [row] = [line.split() for line in listed[1:] if line.startswith(run_id)]
        assert row[1:4] == ["gate", "waiting", str(owner)]  # no outcome yet: the owner's pid follows
        shown_command = hint.split(": ", 1)[1].split("  (or")[0]  # rho-notebook approve RUN REQUEST
        approved = project.cli(*shown_command.split()[1:])
        assert approved.returncode == 0, approved.stderr
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert status(project, run_id)["outcome"] == "success"
    [row] = [line.split() for line in project.cli("runs").stdout.splitlines() if line.startswith(run_id)]
    assert row[1:5] == ["gate", "completed", "success", "-"]  # no owner once it ended


def test_a_human_step_waiting_for_a_form_names_the_answer_command(project: Project) -> None:
    project.write("ask.graph.yaml", ASK)
    proc = start_run(project, "ask.graph.yaml")
    try:
        run_id, asked = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
        shown = project.cli("status", run_id).stdout.splitlines()
        deny = f"rho-notebook approve {run_id[:13]} {asked['request_id'][:13]} --deny"
        hint = f"next       review waits for a person: rho-notebook answer {run_id[:13]} review FIELD=VALUE...  (or {deny})"
        assert hint in shown, shown
        answered = project.cli("answer", run_id[:13], "review", 'level="low"')
        assert answered.returncode == 0, answered.stderr
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_run_whose_owner_was_killed_says_how_to_recover_and_the_command_works(project: Project) -> None:
    project.write("wf.star", UNTIL_GO)
    proc = start_run(project)
    try:
        run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "process_started")
        os.kill(_owner(project, run_id), signal.SIGKILL)
        deadline = time.monotonic() + 30
        while status(project, run_id)["lifecycle"] != "needs_recovery" and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    shown = project.cli("status", run_id).stdout.splitlines()
    assert "lifecycle  needs_recovery" in shown
    assert "next       its owner stopped while slow ran: no result is recorded" in shown, shown
    check = f"           check what ran and that no process of it remains (rho-notebook logs {run_id[:13]} slow),"
    assert check in shown
    command = f"rho-notebook resume {run_id} --recover-uncertain"
    assert f"           then go on with: {command}" in shown
    assert not any(line.startswith("owner") for line in shown)
    (project.root / "go").touch()
    resumed = project.cli(*command.split()[1:], "--yes", "--output", "jsonl", timeout=120)  # the command shown
    assert resumed.returncode == 0, resumed.stderr
    assert status(project, run_id)["outcome"] == "success"


# -- cancel, runs, plans ---------------------------------------------------------------------------


def test_cancel_says_in_words_what_happened_and_json_on_request(project: Project) -> None:
    project.write("wf.star", SLOW)
    proc = start_run(project)
    try:
        run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "process_started")
        cancelled = project.cli("cancel", run_id, "--wait", "20")
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout == (
            f"cancel requested for run {run_id}: acknowledged by the owner; the run is now completed\n"
        )
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    again = project.cli("cancel", run_id)
    assert again.stdout == f"run {run_id} has already completed: nothing to cancel\n"
    answer = json.loads(project.cli("cancel", run_id, "--output", "json").stdout)
    assert answer == {
        "run_id": run_id,
        "request_id": None,
        "cancellation_state": "already_completed",
        "lifecycle": "completed",
    }
    assert "reason     the run was cancelled (rho-notebook cancel)" in project.cli("status", run_id).stdout

    created = project.create_run(project.plan("wf.star"))  # never started: no owner to acknowledge
    pending = project.cli("cancel", created, "--wait", "0")
    assert pending.stdout == (
        f"cancel requested for run {created}: no owner runs it (planned); it is applied when an owner next "
        f"opens the run (rho-notebook resume {created[:13]})\n"
    )


def test_runs_and_plans_have_a_header_row(project: Project) -> None:
    assert project.cli("runs").stdout == "no runs\n"
    assert project.cli("plans").stdout == "no saved plans\n"
    project.write(
        "wf.star", star(f'return workflow(name = "quick", nodes = [command(name = "q", argv = ["true"], {C})])')
    )
    pid = plan_id(project)
    plans = project.cli("plans").stdout.splitlines()
    assert plans[0].split() == ["PLAN", "WORKFLOW", "DIGEST", "CREATED"]
    assert plans[1].split()[:2] == [pid, "quick"]
    assert plans[0].index("WORKFLOW") == plans[1].index("quick")  # the header stands over its column
    assert project.cli("run", pid, "--yes").returncode == 0
    runs = project.cli("runs").stdout.splitlines()
    assert runs[0].split() == ["RUN", "WORKFLOW", "LIFECYCLE", "OUTCOME", "OWNER", "UPDATED"]
    assert len(runs) == 2
    row = runs[1].split()
    assert row[1:5] == ["quick", "completed", "success", "-"]
    for column in ("WORKFLOW", "LIFECYCLE", "OUTCOME", "OWNER"):
        assert runs[1][runs[0].index(column)] != " "  # each value starts under its header


# -- where a Dask run ran --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """The address of a real LocalCluster (one worker process)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        yield str(cluster.scheduler_address)


def test_status_of_a_dask_run_names_the_scheduler_and_the_worker_of_each_attempt(
    project: Project, scheduler: str
) -> None:
    project.write(
        "wf.star", star(f'return workflow(name = "far", nodes = [command(name = "far", argv = ["true"], {C})])')
    )
    done = project.cli(
        "run", plan_id(project), "--yes", "--output", "jsonl", "--executor", f"dask={scheduler}", timeout=120
    )
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout.splitlines()[0])["run_id"]
    shown = project.cli("status", run_id).stdout.splitlines()
    assert f"executor   dask {scheduler}" in shown
    [far] = [line for line in shown if line.startswith("  far ")]
    worker = re.search(r"on worker (\S+)", far)
    assert worker is not None and worker.group(1).startswith("tcp://"), far
    assert worker.group(1) != scheduler  # the worker, not the scheduler
