"""End-to-end runs through the CLI: every node state, every workflow outcome, and the rules that
decide them (skipped/blocked propagation, blocked beats skipped, allow_failure, typed outputs)."""

from __future__ import annotations

import json

from tests.cli.runhelp import plan_id, run, start_run, status, wait_for_event
from tests.conftest import Project, star

C = "timeout_seconds = 30, max_output_bytes = 4096"

ALL_STATES = star(f"""
return workflow(name = "states", nodes = [
    command(name = "ok", argv = ["true"], {C}),
    command(name = "bad", argv = ["false"], allow_failure = True, {C}),
    command(name = "gated", argv = ["true"], needs = ["ok"], when = condition.equals(exit_code("ok"), 1), {C}),
    command(name = "after-bad", argv = ["true"], needs = ["bad"], allow_failure = True, {C}),
    command(name = "after-skip", argv = ["true"], needs = ["gated"], {C}),
    command(name = "mixed", argv = ["true"], needs = ["after-bad", "gated"], allow_failure = True, {C}),
    command(name = "on-fail", argv = ["true"], needs = ["bad"], when = condition.is_one_of(status("bad"), ["failure"]), {C}),
    command(name = "typed", argv = ["echo", "{{\\"n\\": 7, \\"tags\\": [\\"a\\"]}}"],
            output = schema.stdout_json(schema.record({{"n": schema.integer(), "tags": schema.list(schema.string())}})), {C}),
    command(name = "use-typed", argv = ["sh", "-c", "test \\"$1\\" = 7", "sh", output("typed", ["n"])], needs = ["typed"],
            when = condition.equals(output("typed", ["n"]), 7), {C}),
    command(name = "unavailable", argv = ["true"], needs = ["bad", "typed"], allow_failure = True,
            when = condition.equals(exit_code("on-fail-missing"), 0) if False else condition.equals(output("typed", ["tags", 5]), "x"), {C}),
])
""")


FAILS_THEN_BLOCKS = star(f"""return workflow(name = "fb", nodes = [
    command(name = "a", argv = ["false"], {C}),
    command(name = "b", argv = ["true"], needs = ["a"], {C}),
])""")


def test_every_decided_state(project: Project) -> None:
    project.write("wf.star", ALL_STATES)
    result, data = run(project)
    nodes = {name: node["state"] for name, node in data["nodes"].items()}
    assert nodes == {
        "ok": "success",
        "bad": "failure",
        "gated": "skipped",
        "after-bad": "blocked",
        "after-skip": "skipped",
        "mixed": "blocked",  # a blocked need beats a skipped one
        "on-fail": "success",  # status conditions still see failure under allow_failure
        "typed": "success",
        "use-typed": "success",  # the typed value reached argv as one element
        "unavailable": "blocked",  # the condition needs a value that can never exist
    }
    assert data["outcome"] == "success"  # every non-success node allows failure or is skipped
    assert result.returncode == 0
    assert data["nodes"]["bad"]["exit_code"] == 1


def test_outcome_failure_and_exit_code(project: Project) -> None:
    project.write("wf.star", star(f'return workflow(name = "f", nodes = [command(name = "a", argv = ["false"], {C})])'))
    result, data = run(project)
    assert data["outcome"] == "failure" and result.returncode == 1


def test_outcome_blocked(project: Project) -> None:
    project.write(
        "wf.star",
        star(f"""return workflow(name = "b", nodes = [
        command(name = "a", argv = ["false"], allow_failure = True, {C}),
        command(name = "b", argv = ["true"], needs = ["a"], {C}),
    ])"""),
    )
    _, data = run(project)
    assert data["nodes"]["b"]["state"] == "blocked"
    assert data["outcome"] == "blocked"


def test_failure_beats_blocked(project: Project) -> None:
    project.write("wf.star", FAILS_THEN_BLOCKS)
    _, data = run(project)
    assert data["outcome"] == "failure"


def test_resume_of_a_failed_run_with_nothing_cancelled_is_refused_and_changes_nothing(project: Project) -> None:
    """A graph resume never starts a failed node again: resuming such a run (a budget raise with it)
    is refused before a digest is confirmed or anything is journaled, naming the fork that would."""
    project.write("wf.star", FAILS_THEN_BLOCKS)
    _, data = run(project)
    run_id = data["run_id"]
    journal = project.cli("events", run_id).stdout
    for args in ((), ("--yes", "--raise-budget", "tokens=5"), ("--yes", "--detach")):
        refused = project.cli("resume", run_id, *args)
        assert refused.returncode == 3, refused.stderr
        assert "has nothing to resume" in refused.stderr and "without confirmation" not in refused.stderr
        assert f"rho-notebook fork {run_id[:13]} --at a" in refused.stderr
    assert project.cli("events", run_id).stdout == journal  # no budget, no owner, no record
    assert project.cli("fork", run_id, "--at", "a", "--yes").returncode == 1  # what it names works (a fails again)


def test_outcome_denial_in_plan_mode(project: Project) -> None:
    project.write(
        "wf.star",
        star(f"""return workflow(name = "d", nodes = [
        command(name = "a", argv = ["touch", "should-not-exist"], {C}),
        command(name = "b", argv = ["true"], needs = ["a"], {C}),
    ])"""),
    )
    result, data = run(project, "wf.star", "--mode", "plan")
    assert data["nodes"]["a"]["state"] == "denial"
    assert data["nodes"]["b"]["state"] == "blocked"
    assert data["outcome"] == "denial" and result.returncode == 1
    assert not (project.root / "should-not-exist").exists()


def test_outcome_cancellation_and_resume(project: Project) -> None:
    project.write(
        "wf.star",
        star(f"""return workflow(name = "c", nodes = [
        shell(name = "slow", executable = "sh", arguments = ["-c"], command = "test -f go || sleep 60", {C}),
        command(name = "after", argv = ["true"], needs = ["slow"], {C}),
    ])"""),
    )
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "process_started")
    live = status(project, run_id)
    assert live["lifecycle"] == "running" and live["nodes"]["slow"]["state"] == "running"
    assert live["nodes"]["after"]["state"] == "pending"
    cancel = project.cli("cancel", run_id, "--output", "json")
    answer = json.loads(cancel.stdout)
    assert answer["cancellation_state"] == "acknowledged" and answer["request_id"]
    assert proc.wait(timeout=30) == 1
    data = status(project, run_id)
    assert data["outcome"] == "cancellation"
    assert data["nodes"]["slow"]["state"] == "cancellation"
    assert data["nodes"]["after"]["state"] == "blocked"  # its need ended in cancellation
    # a second cancel of a completed run does not reuse the old acknowledgement
    again = json.loads(project.cli("cancel", run_id, "--output", "json").stdout)
    assert again["cancellation_state"] == "already_completed" and again["request_id"] is None
    (project.root / "go").touch()
    resumed = project.cli("resume", run_id, "--yes", "--output", "jsonl")
    assert resumed.returncode == 0, resumed.stderr
    data = status(project, run_id)
    assert data["outcome"] == "success"
    assert data["nodes"]["slow"]["attempt"] == 2 and data["nodes"]["after"]["attempt"] == 1


def test_timeout_is_failure(project: Project) -> None:
    project.write(
        "wf.star",
        star(
            'return workflow(name = "t", nodes = [command(name = "a", argv = ["sleep", "30"], timeout_seconds = 1, max_output_bytes = 10)])'
        ),
    )
    _, data = run(project)
    assert data["nodes"]["a"]["state"] == "failure"
    assert "timed out" in data["nodes"]["a"]["reason"]


def test_stdout_json_mismatch_and_invalid_are_node_failures(project: Project) -> None:
    project.write(
        "wf.star",
        star(f"""return workflow(name = "j", nodes = [
        command(name = "notjson", argv = ["echo", "hello"], output = schema.stdout_json(schema.string()), allow_failure = True, {C}),
        command(name = "mismatch", argv = ["echo", "{{\\"a\\": 1}}"], output = schema.stdout_json(schema.record({{"a": schema.string()}})), allow_failure = True, {C}),
    ])"""),
    )
    _, data = run(project)
    assert data["nodes"]["notjson"]["state"] == "failure" and "not one JSON value" in data["nodes"]["notjson"]["reason"]
    assert data["nodes"]["mismatch"]["state"] == "failure" and "expected string" in data["nodes"]["mismatch"]["reason"]


def test_output_truncation_is_recorded_not_an_error(project: Project) -> None:
    project.write(
        "wf.star",
        star(
            'return workflow(name = "o", nodes = [command(name = "a", argv = ["seq", "1", "10000"], timeout_seconds = 10, max_output_bytes = 100)])'
        ),
    )
    result, data = run(project)
    assert data["nodes"]["a"]["state"] == "success"
    res = json.loads(project.cli("result", data["run_id"], "--output", "json").stdout)
    node = res["nodes"]["a"]
    assert node["exit"]["stdout_truncated"] is True and node["exit"]["stdout_bytes"] > 100
    assert len(open(node["artifacts"]["stdout"], "rb").read()) == 100


def test_command_environment_is_the_frozen_policy(project: Project) -> None:
    project.write("wf.star", star(f'return workflow(name = "e", nodes = [command(name = "env", argv = ["env"], {C})])'))
    result = project.cli("plan", "wf.star", "--output", "json")
    pid = json.loads(result.stdout)["plan_id"]
    out = project.cli("run", pid, "--yes", "--output", "jsonl", env={"SECRET_TOKEN": "hunter2"})
    run_id = json.loads(out.stdout.splitlines()[0])["run_id"]
    logs = project.cli("logs", run_id, "env", "--stream", "stdout").stdout
    names = {line.split("=", 1)[0] for line in logs.splitlines()}
    assert "SECRET_TOKEN" not in names
    assert {"RHO_RUN_ID", "RHO_NODE", "PATH"} <= names
    assert f"RHO_RUN_ID={run_id}" in logs and "RHO_NODE=env" in logs


def test_run_refuses_without_confirmation(project: Project) -> None:
    project.write("wf.star", star(f'return workflow(name = "n", nodes = [command(name = "a", argv = ["true"], {C})])'))
    pid = plan_id(project)
    result = project.cli("run", pid)
    assert result.returncode == 3 and "--yes" in result.stderr
    assert not (project.home / "workflows" / "runs").exists() or not list(
        (project.home / "workflows" / "runs").iterdir()
    )


def test_runs_filter_and_prefix(project: Project) -> None:
    project.write("wf.star", star(f'return workflow(name = "n", nodes = [command(name = "a", argv = ["true"], {C})])'))
    _, data = run(project)
    listed = json.loads(project.cli("runs", "--state", "completed", "--output", "json").stdout)
    assert [r["run_id"] for r in listed] == [data["run_id"]]
    assert json.loads(project.cli("runs", "--state", "running", "--output", "json").stdout) == []
    assert status(project, data["run_id"][:10])["run_id"] == data["run_id"]


def test_a_resume_waits_for_an_owner_that_has_stopped_and_reads_as_going_on_once_it_answers(project: Project) -> None:
    """An owner journals the run's end, then lets go of its lock: `resume` asked in between waits
    for it (it was refused: owned by another live process), and `resume --detach` answers only
    once the new owner has started the run (before, `status` right after it still read the
    cancelled run: the new owner journals its node resets first). One rule for every front end
    (service.maintenance.owner_lets_go, the owner's start report)."""
    import threading

    from rho_notebook.store.run_locks import OwnerLock
    from tests.conftest import cancelled_gated_run

    _, run_id = cancelled_gated_run(project)

    lock = OwnerLock(project.service.run_store.folder(run_id).lock)
    assert lock.try_acquire()  # the exiting owner, a moment before it lets go
    letting_go = threading.Timer(0.5, lock.release)
    letting_go.start()
    try:
        resumed = project.cli("resume", run_id, "--yes", "--detach", "--output", "json")
    finally:
        letting_go.join()
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["state"] == "running"
    assert status(project, run_id)["lifecycle"] == "running"
    (project.root / "go").write_text("")
    waited = project.cli("wait", run_id, "--timeout", "30")
    assert waited.returncode == 0, waited.stdout + waited.stderr
