"""Permission modes, approval nodes, supervised launches, hooks, trust and plan approval, through
real CLI processes."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tests.cli.runhelp import kill_owner, only_run_id, plan_id, run, start_run, status, wait_for_event
from tests.conftest import Project, star

C = "timeout_seconds = 30, max_output_bytes = 1000"

GATE = star(f"""
return workflow(name = "gate", nodes = [
    approval(name = "ok", prompt = template(["Ship version ", "1.2", "?"]), timeout_seconds = 60, max_output_bytes = 1000),
    command(name = "ship", argv = ["sh", "-c", "echo \\"$1\\" > shipped.txt", "sh", output("ok", ["by"])], needs = ["ok"], {C}),
    command(name = "denied-path", argv = ["touch", "on-deny.txt"], needs = ["ok"], when = condition.equals(status("ok"), "denial"), {C}),
])
""")

LAUNCH = star(f"""
return workflow(name = "launch", nodes = [
    command(name = "write", argv = ["touch", "written.txt"], {C}),
    shell(name = "sh", executable = "sh", arguments = ["-c"], command = "touch shell.txt", needs = ["write"], {C}),
])
""")


def approve(
    project: Project, run_id: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pending = project.cli("approve", run_id)
        if "request " in pending.stdout:
            request_id = pending.stdout.split("request ", 1)[1].split()[0]
            return project.cli("approve", run_id, request_id[:13], *extra, env=env)
        time.sleep(0.05)
    raise AssertionError("no pending approval appeared")


def test_approval_node_approved_from_another_process(project: Project) -> None:
    project.write("wf.star", GATE)
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    assert status(project, run_id)["lifecycle"] == "waiting"
    decided = approve(project, run_id, "--comment", "ship it")
    assert decided.returncode == 0, decided.stderr
    assert "Ship version 1.2?" in decided.stdout  # it printed what was decided first
    proc.wait(timeout=30)
    data = status(project, run_id)
    assert data["outcome"] == "success"
    assert data["nodes"]["denied-path"]["state"] == "skipped"
    from rho_notebook.policy.approvals import who_am_i

    assert (project.root / "shipped.txt").read_text().strip() == who_am_i()  # output("ok", ["by"]) reached argv
    events = [json.loads(line) for line in project.cli("events", run_id).stdout.splitlines()]
    decided_event = next(e for e in events if e["kind"] == "approval_decided")
    assert (
        decided_event["decision"] == "approve"
        and decided_event["comment"] == "ship it"
        and decided_event["via"] == "cli"
    )
    assert decided_event["by"] and decided_event["decided_at"] and decided_event["facts_sha256"].startswith("sha256:")
    result = json.loads(project.cli("result", run_id, "--output", "json").stdout)
    assert result["nodes"]["ok"]["output"]["comment"] == "ship it"


def test_approval_node_denied(project: Project) -> None:
    project.write("wf.star", GATE)
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    unknown = project.cli("approve", run_id, "ffff", "--deny")  # the way to list them is `approve RUN`
    assert unknown.returncode == 1, unknown.stdout + unknown.stderr
    assert f"no approval request matches 'ffff'; list them with `rho-notebook approve {run_id}`" in unknown.stderr
    assert approve(project, run_id, "--deny", "--comment", "not today").returncode == 0
    proc.wait(timeout=30)
    data = status(project, run_id)
    assert data["nodes"]["ok"]["state"] == "denial"
    assert data["nodes"]["ship"]["state"] == "blocked"
    assert data["nodes"]["denied-path"]["state"] == "success"  # status() reads the denial
    assert data["outcome"] == "denial"
    assert not (project.root / "shipped.txt").exists()


def test_approval_node_times_out_as_failure(project: Project) -> None:
    project.write(
        "wf.star",
        star(
            'return workflow(name = "t", nodes = [approval(name = "ok", prompt = "go?", timeout_seconds = 1, max_output_bytes = 100)])'
        ),
    )
    _, data = run(project)
    assert data["nodes"]["ok"]["state"] == "failure" and "nobody decided" in data["nodes"]["ok"]["reason"]


def test_approval_nodes_ask_a_person_even_in_plan_mode(project: Project) -> None:
    project.write("wf.star", GATE)
    proc = start_run(project, "wf.star", "--mode", "plan")
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    approve(project, run_id)
    proc.wait(timeout=30)
    data = status(project, run_id)
    assert data["nodes"]["ok"]["state"] == "success"
    assert data["nodes"]["ship"]["state"] == "denial"  # the plan mode still denies the command


def test_approval_survives_kill9_of_the_owner(project: Project) -> None:
    project.write("wf.star", GATE)
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    kill_owner(project, run_id)
    assert proc.wait(timeout=10) == 1  # the CLI that followed says the run needs recovery
    assert status(project, run_id)["lifecycle"] == "needs_recovery"
    # a person decides while no owner is alive: the decision is durable
    decided = approve(project, run_id, "--comment", "decided while the owner was down")
    assert decided.returncode == 0, decided.stderr
    resumed = project.cli("resume", run_id, "--yes", "--output", "jsonl")  # no --recover-uncertain needed
    assert resumed.returncode == 0, resumed.stderr
    data = status(project, run_id)
    assert data["outcome"] == "success" and data["nodes"]["ok"]["attempt"] == 1
    kinds = [json.loads(line)["kind"] for line in resumed.stdout.splitlines()]
    assert "approval_decided" in kinds and "attempt_uncertain" not in kinds


def test_pending_approval_survives_kill9_and_is_decided_after_resume(project: Project) -> None:
    project.write("wf.star", GATE)
    proc = start_run(project)
    run_id, first = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    kill_owner(project, run_id)
    proc.wait(timeout=10)
    resumed = start_resume(project, run_id)
    wait_for_event(resumed, lambda e: e["kind"] == "run_started")
    approve(project, run_id)
    resumed.wait(timeout=30)
    data = status(project, run_id)
    assert data["outcome"] == "success"
    events = [json.loads(line) for line in project.cli("events", run_id).stdout.splitlines()]
    assert [e["request_id"] for e in events if e["kind"] == "approval_requested"] == [first["request_id"]]


def start_resume(project: Project, run_id: str) -> subprocess.Popen[str]:
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "resume", run_id, "--yes", "--output", "jsonl"],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


# -- modes -------------------------------------------------------------------------------------------


def test_auto_mode_runs_command_and_shell(project: Project) -> None:
    project.write("wf.star", LAUNCH)
    _, data = run(project, "wf.star", "--mode", "auto")
    assert data["outcome"] == "success"
    assert (project.root / "written.txt").exists() and (project.root / "shell.txt").exists()


def test_plan_mode_denies_command_and_shell(project: Project) -> None:
    project.write("wf.star", LAUNCH.replace('needs = ["write"], ', ""))
    _, data = run(project, "wf.star", "--mode", "plan")
    assert data["nodes"]["write"]["state"] == "denial" and data["nodes"]["sh"]["state"] == "denial"
    assert not (project.root / "written.txt").exists() and not (project.root / "shell.txt").exists()


def test_headless_supervised_run_fails_closed_within_its_bound(project: Project) -> None:
    project.write("wf.star", LAUNCH)
    started = time.monotonic()
    _, data = run(project, "wf.star", "--mode", "supervised", "--approval-timeout", "1")
    elapsed = time.monotonic() - started
    assert data["nodes"]["write"]["state"] == "denial"
    assert "fails closed" in data["nodes"]["write"]["reason"]
    assert data["outcome"] == "denial"
    assert not (project.root / "written.txt").exists()
    assert elapsed < 15


def test_supervised_launch_approved_from_a_second_process(project: Project) -> None:
    project.write("wf.star", LAUNCH)
    proc = start_run(project, "wf.star", "--mode", "supervised", "--approval-timeout", "60")
    run_id, requested = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    assert requested["approval"] == "launch"
    facts = requested["facts"]
    assert facts["executable"].endswith("/touch") and facts["argv"] == ["touch", "written.txt"] and facts["cwd"] == "//"
    shown = approve(project, run_id)
    assert facts["executable"] in shown.stdout and '["touch", "written.txt"]' in shown.stdout
    _, second = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    assert second["node"] == "sh"
    approve(project, run_id, "--deny", "--comment", "no shells today")
    proc.wait(timeout=30)
    data = status(project, run_id)
    assert data["nodes"]["write"]["state"] == "success" and data["nodes"]["sh"]["state"] == "denial"
    assert (project.root / "written.txt").exists() and not (project.root / "shell.txt").exists()


def test_approve_refuses_inside_a_run(project: Project) -> None:
    project.write("wf.star", GATE)
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    refused = approve(project, run_id, env={"RHO_RUN_ID": run_id})
    assert refused.returncode == 1 and "inside a workflow run" in refused.stderr
    assert status(project, run_id)["lifecycle"] == "waiting"
    project.cli("cancel", run_id)
    proc.wait(timeout=30)
    assert status(project, run_id)["nodes"]["ok"]["state"] == "cancellation"


def test_a_decision_cannot_be_overwritten(project: Project) -> None:
    project.write("wf.star", GATE)
    proc = start_run(project)
    run_id, req = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    assert approve(project, run_id, "--deny").returncode == 0
    second = project.cli("approve", run_id, req["request_id"])
    assert second.returncode == 3 and "already decided" in second.stderr
    proc.wait(timeout=30)
    assert status(project, run_id)["nodes"]["ok"]["state"] == "denial"


# -- hooks ---------------------------------------------------------------------------------------------


def write_hook(project: Project, name: str, body: str) -> Path:
    path = project.home / "hooks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env python3\nimport json, sys, time\npayload = json.load(sys.stdin)\n" + body)
    path.chmod(0o755)
    return path


def settings(project: Project, data: dict, *, where: Path | None = None) -> None:
    target = where or project.home / "settings.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data))


def test_before_hook_denies(project: Project) -> None:
    hook = write_hook(
        project,
        "deny.py",
        'print(json.dumps({"decision": "deny" if "written.txt" in payload["facts"]["argv"] else "continue", "reason": "no writes"}))\n',
    )
    settings(project, {"hooks": {"before_tool_use": [{"command": [str(hook)]}]}})
    project.write("wf.star", LAUNCH.replace('needs = ["write"], ', ""))
    _, data = run(project)
    assert data["nodes"]["write"]["state"] == "denial" and "no writes" in data["nodes"]["write"]["reason"]
    assert data["nodes"]["sh"]["state"] == "success"  # the hook ran even though policy allowed, and continued
    assert not (project.root / "written.txt").exists()


def test_hook_timeout_fails_closed(project: Project) -> None:
    hook = write_hook(project, "slow.py", "time.sleep(30)\n")
    settings(project, {"hooks": {"before_tool_use": [{"command": [str(hook)], "timeout_seconds": 0.5}]}})
    project.write("wf.star", LAUNCH)
    _, data = run(project)
    assert data["nodes"]["write"]["state"] == "denial"
    assert "did not answer" in data["nodes"]["write"]["reason"] and "failing closed" in data["nodes"]["write"]["reason"]


def test_hook_cannot_widen_authority(project: Project) -> None:
    hook = write_hook(
        project,
        "widen.py",
        'print(json.dumps({"decision": "allow", "approve": True, "argv": ["rm", "-rf", "/"], "schedule": ["x"]}))\n',
    )
    settings(project, {"hooks": {"before_tool_use": [{"command": [str(hook)]}]}})
    project.write("wf.star", LAUNCH)
    proc = start_run(project, "wf.star", "--mode", "supervised", "--approval-timeout", "0")
    out, _ = proc.communicate(timeout=60)
    events = [json.loads(line) for line in out.splitlines()]
    ignored = [e for e in events if e["kind"] == "hook_ignored"]
    assert ignored and {"approve", "argv", "schedule", "decision=allow"} <= set(ignored[0]["keys"])
    data = status(project, only_run_id(project))
    assert data["nodes"]["write"]["state"] == "denial"  # "allow" did not skip the supervised approval
    assert not (project.root / "written.txt").exists()


def test_after_hook_failure_fails_the_node(project: Project) -> None:
    hook = write_hook(project, "after.py", 'sys.exit(0 if payload["result"]["state"] != "success" else 4)\n')
    settings(project, {"hooks": {"after_tool_use": [{"command": [str(hook)]}]}})
    project.write("wf.star", star(f'return workflow(name = "a", nodes = [command(name = "x", argv = ["true"], {C})])'))
    _, data = run(project)
    assert data["nodes"]["x"]["state"] == "failure" and "after_tool_use" in data["nodes"]["x"]["reason"]


def test_project_hooks_apply_only_when_trusted(project: Project) -> None:
    hook = write_hook(project, "deny-all.py", 'print(json.dumps({"decision": "deny", "reason": "project says no"}))\n')
    settings(
        project,
        {"hooks": {"before_tool_use": [{"command": [str(hook)]}]}},
        where=project.root / ".rho" / "settings.json",
    )
    project.write("wf.star", LAUNCH)
    _, data = run(project)
    assert data["outcome"] == "success"  # untrusted: project hooks ignored
    plan = json.loads(project.cli("plan", "wf.star", "--output", "json").stdout)
    assert plan["workspace"]["trusted"] is False
    trusted = project.cli("trust")
    assert trusted.returncode == 0 and str(project.root) in trusted.stdout
    assert json.loads(project.cli("plan", "wf.star", "--output", "json").stdout)["workspace"]["trusted"] is True
    (project.root / "written.txt").unlink()
    _, data = run(project)
    assert data["nodes"]["write"]["state"] == "denial" and "project says no" in data["nodes"]["write"]["reason"]
    project.cli("untrust")
    _, data = run(project)
    assert data["outcome"] == "success"


# -- plan approval ---------------------------------------------------------------------------------------


def test_plan_approval_enforced_by_environment(project: Project) -> None:
    project.write("wf.star", LAUNCH)
    pid = plan_id(project)
    digest = json.loads(project.cli("plan", "wf.star", "--output", "json").stdout)["graph_digest"]
    env = {"RHO_NOTEBOOK_REQUIRE_PLAN_APPROVAL": "1"}
    refused = project.cli("run", pid, "--yes", env=env)
    assert refused.returncode == 1 and digest in refused.stderr and "approve-plan" in refused.stderr
    first = project.cli("approve-plan", pid[:13])
    assert first.returncode == 0 and "approved by" in first.stdout
    again = project.cli("approve-plan", digest)
    assert "already approved" in again.stdout
    # re-planning the same graph hands back the same plan (one plan per graph), still approved
    replanned = plan_id(project)
    assert replanned == pid
    ok = project.cli("run", replanned, "--yes", "--output", "jsonl", env=env)
    assert ok.returncode == 0, ok.stderr
    kinds = [json.loads(line)["kind"] for line in ok.stdout.splitlines()]
    assert "run_started" in kinds
    events = [
        json.loads(line)
        for line in project.cli("events", json.loads(ok.stdout.splitlines()[0])["run_id"]).stdout.splitlines()
    ]
    assert any(e["kind"] == "plan_approval" and e["graph_digest"] == digest for e in events)


def test_approve_plan_refuses_what_is_not_a_graph_digest(project: Project) -> None:
    """`approve-plan sha256:../../x` wrote its record outside the store (the digest was a file
    name), and `sha256:abc` was approved as given: only sha256: and 64 hex digits are taken."""
    for given in ("sha256:../../escaped", "sha256:abc", "sha256:" + "A" * 64):
        refused = project.cli("approve-plan", given)
        assert refused.returncode == 2 and "is not a graph digest" in refused.stderr, refused.stderr
    assert not (project.home.parent / "escaped.json").exists() and not (project.home / "escaped.json").exists()
    approvals = project.home / "plan-approvals"
    assert not approvals.exists() or not any(approvals.iterdir())


def test_environment_cannot_turn_plan_approval_off(project: Project) -> None:
    settings(project, {"require_plan_approval": True})
    project.write("wf.star", LAUNCH)
    pid = plan_id(project)
    refused = project.cli("run", pid, "--yes", env={"RHO_NOTEBOOK_REQUIRE_PLAN_APPROVAL": "0"})
    assert refused.returncode == 1 and "plan approval is required" in refused.stderr


def test_a_supervised_run_nobody_can_answer_says_so_before_its_launches_are_denied(project: Project) -> None:
    """Without a terminal (or with --detach or --wait) and --approval-timeout 0, a supervised launch
    is denied at once: the CLI warns before the owner starts, naming the option and the verb that
    would let a person decide; a run in another mode, or with a bound, stays quiet."""
    project.write("wf.star", LAUNCH)
    ran = project.cli("run", "wf.star", "--yes", "--mode", "supervised")
    assert ran.returncode == 1 and "outcome denial" in ran.stdout, ran.stdout + ran.stderr
    assert "nobody here can answer this supervised run's launches (standard input is not a terminal)" in ran.stderr
    assert "give --approval-timeout SECONDS and decide with `rho-notebook approve " in ran.stderr
    waited = project.cli("run", "wf.star", "--yes", "--mode", "supervised", "--wait")
    assert "nobody here can answer this supervised run's launches (--wait)" in waited.stderr, waited.stderr
    for quiet in (["--yes"], ["--yes", "--mode", "supervised", "--approval-timeout", "0.5"]):
        assert "nobody here can answer" not in project.cli("run", "wf.star", *quiet).stderr
