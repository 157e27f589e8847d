"""Item graphs through real `rho-notebook` processes: `run FILE.graph.yaml`, the exit code of a
stalled run, and human steps answered with `answer RUN STEP field=JSON` while the run waits and
after the owner was killed (docs/graphs.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tests.cli.runhelp import kill_owner, status, wait_for_event
from tests.conftest import REPO, Project
from tests.unit.test_item_graph_runs import TRIAGE

ASK = """\
name: ask
inputs:
  score: {type: integer}
steps:
  - {id: start, kind: set, params: {fields: {label: "=ticket {{ $json.score }}"}}}
  - id: review
    kind: human
    params:
      question: "=Escalate {{ $json.label }}?"
      fields:
        level: {type: enum, choices: [low, high]}
        count: {type: integer, default: 1}
  - {id: done, kind: output}
edges:
  - {from: start, to: review}
  - {from: review, to: done}
"""


def result(project: Project, run_id: str) -> dict[str, Any]:
    found = project.cli("result", run_id, "--output", "json")
    assert found.returncode == 0, found.stderr
    data: dict[str, Any] = json.loads(found.stdout)
    return data


def start(project: Project, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", *args, "--yes", "--output", "jsonl"],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_run_a_graph_file_ends_with_the_result_item(project: Project) -> None:
    project.write("triage.graph.yaml", TRIAGE)
    for score in (70, 10):
        ran = project.cli("run", "triage.graph.yaml", "--input", f"score={score}", "--yes")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "item graph triage.graph.yaml" in ran.stdout and "outcome success" in ran.stdout
    runs = json.loads(project.cli("runs", "--output", "json").stdout)
    outputs = sorted(
        (result(project, row["run_id"])["output"]["label"], result(project, row["run_id"])["output"]["level"])
        for row in runs
    )
    assert outputs == [("ticket 10", "low"), ("ticket 70", "high")]
    text = project.cli("result", runs[0]["run_id"]).stdout
    assert "output of the run: {" in text and "output of the script" not in text  # not a script's emit_output


def test_a_refused_mapping_stops_the_run_before_it_starts(project: Project) -> None:
    project.write("triage.graph.yaml", TRIAGE.replace('"=ticket {{', '"ticket {{'))
    ran = project.cli("run", "triage.graph.yaml", "--input", "score=70", "--yes")
    assert ran.returncode == 1
    assert "triage.graph.yaml:5:" in ran.stderr and "step 'start', field 'params.fields.label'" in ran.stderr
    assert json.loads(project.cli("runs", "--output", "json").stdout) == []


def test_a_stalled_run_exits_1(project: Project) -> None:
    project.write(
        "stuck.graph.yaml",
        """\
name: stuck
steps:
  - {id: s, kind: set, params: {fields: {x: 1}}}
  - {id: out, kind: output}
edges:
  - {from: s, to: out, when: {field: x, op: gt, value: 5}}
""",
    )
    ran = project.cli("run", "stuck.graph.yaml", "--yes")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "outcome stalled" in ran.stdout


def test_a_human_step_waits_and_is_answered_from_the_cli(project: Project) -> None:
    project.write("ask.graph.yaml", ASK)
    proc = start(project, "run", "ask.graph.yaml", "--input", "score=70")
    run_id, asked = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    assert asked["approval"] == "form" and asked["facts"]["prompt"] == "Escalate ticket 70?"
    assert status(project, run_id)["lifecycle"] == "waiting"

    wrong = project.cli("answer", run_id, "review", 'level="loud"')
    assert wrong.returncode != 0 and "level" in wrong.stderr and "loud" in wrong.stderr
    approve = project.cli("approve", run_id, asked["request_id"][:13])
    assert approve.returncode != 0 and "rho-notebook answer" in approve.stderr
    missing = project.cli("answer", run_id, "nosuch", 'level="high"')
    assert missing.returncode != 0 and "review" in missing.stderr  # names the step that waits
    bare = project.cli("answer", run_id, "review", 'level="high"', "count=three")
    assert bare.returncode != 0 and "give an integer as JSON, e.g. count=3" in bare.stderr, bare.stderr
    split = project.cli("answer", run_id, "review", "level=very", "high")  # the shell split an unquoted value
    assert split.returncode != 0
    assert "answer RUN STEP 'high' must have the form KEY=VALUE" in split.stderr, split.stderr
    assert "--input" not in split.stderr  # answer takes FIELD=VALUE arguments, not --input

    answered = project.cli("answer", run_id, "review", 'level="high"', "--comment", "on call")
    assert answered.returncode == 0, answered.stderr
    assert "Escalate ticket 70?" in answered.stdout  # what was answered is shown first
    proc.wait(timeout=30)
    data = result(project, run_id)
    assert data["outcome"] == "success"
    assert data["output"] == {"score": 70, "label": "ticket 70", "level": "high", "count": 1}
    events = [json.loads(line) for line in project.cli("events", run_id).stdout.splitlines()]
    decided = next(e for e in events if e["kind"] == "approval_decided")
    assert decided["answer"] == {"level": "high", "count": 1} and decided["via"] == "cli" and decided["by"]

    again = project.cli("answer", run_id, "review", 'level="low"')
    assert again.returncode != 0  # nothing waits any more


def test_a_human_step_waits_again_after_kill9_and_resume(project: Project) -> None:
    project.write("ask.graph.yaml", ASK)
    proc = start(project, "run", "ask.graph.yaml", "--input", "score=3")
    run_id, first = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    kill_owner(project, run_id)
    assert proc.wait(timeout=10) == 1  # the CLI that followed the owner says the run needs recovery
    assert status(project, run_id)["lifecycle"] == "needs_recovery"

    resumed = start(project, "resume", run_id)
    _, again = wait_for_event(resumed, lambda e: e["kind"] == "approval_requested")
    assert again["request_id"] == first["request_id"] and again["rejoined"] is True and "seq" not in again
    assert status(project, run_id)["lifecycle"] == "waiting"  # not "running": a person is asked again
    answered = project.cli("answer", run_id, "review", 'level="low"', "count=2")
    assert answered.returncode == 0, answered.stderr
    resumed.wait(timeout=30)
    data = result(project, run_id)
    assert data["outcome"] == "success"
    assert data["output"] == {"score": 3, "label": "ticket 3", "level": "low", "count": 2}
    assert data["nodes"]["review"]["attempts"][-1]["number"] == 1  # the same attempt waited again
    events = [json.loads(line) for line in project.cli("events", run_id).stdout.splitlines()]
    assert [e["request_id"] for e in events if e["kind"] == "approval_requested"] == [first["request_id"]]


def test_declining_a_human_step_is_a_denial(project: Project) -> None:
    project.write("ask.graph.yaml", ASK)
    proc = start(project, "run", "ask.graph.yaml", "--input", "score=3")
    run_id, asked = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    declined = project.cli("approve", run_id, asked["request_id"][:13], "--deny", "--comment", "not mine")
    assert declined.returncode == 0, declined.stderr
    proc.wait(timeout=30)
    data = result(project, run_id)
    assert data["outcome"] == "denial"
    assert data["nodes"]["done"]["state"] == "blocked"


def test_command_steps_obey_the_permission_mode(project: Project) -> None:
    project.write(
        "cmd.graph.yaml",
        """\
name: cmd
steps:
  - {id: call, kind: command, params: {argv: [touch, "=made-{{ $json.n }}"], into: got}}
inputs:
  n: {type: integer}
""",
    )
    for mode in ("plan", "supervised"):  # supervised without anyone to ask fails closed
        ran = project.cli("run", "cmd.graph.yaml", "--input", "n=1", "--yes", "--mode", mode)
        assert ran.returncode == 1 and "outcome denial" in ran.stdout, ran.stdout + ran.stderr
    assert not (project.root / "made-1").exists()


def test_an_owner_killed_mid_step_resumes_without_recover_uncertain(project: Project) -> None:
    project.write("triage.graph.yaml", TRIAGE)
    plan = project.cli("plan", "triage.graph.yaml", "--input", "score=70", "--output", "json")
    assert plan.returncode == 0, plan.stderr
    # the owner SIGKILLs itself right after launching the second step (route); the CLI following it exits 1
    killed = project.cli(
        "run",
        json.loads(plan.stdout)["plan_id"],
        "--yes",
        "--output",
        "jsonl",
        env={"RHO_NOTEBOOK_FAILPOINT": "after_launch_sync:2"},
    )
    assert killed.returncode == 1 and "stopped before the run ended" in killed.stderr, killed.stderr
    run_id = json.loads(killed.stdout.splitlines()[0])["run_id"]
    assert status(project, run_id)["nodes"]["route"]["state"] == "running"
    resumed = project.cli("resume", run_id, "--yes", "--output", "jsonl")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert any(e["kind"] == "node_reset" and e["node"] == "route" for e in events)
    assert not any(e["kind"] == "attempt_uncertain" for e in events)
    assert result(project, run_id)["output"] == {"score": 70, "label": "ticket 70", "level": "high"}


def test_cancel_while_a_person_is_asked_then_resume_asks_again(project: Project) -> None:
    project.write("ask.graph.yaml", ASK)
    proc = start(project, "run", "ask.graph.yaml", "--input", "score=5")
    run_id, first = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    cancelled = project.cli("cancel", run_id)
    assert cancelled.returncode == 0, cancelled.stderr
    proc.wait(timeout=30)
    assert result(project, run_id)["outcome"] == "cancellation"

    resumed = start(project, "resume", run_id)
    _, again = wait_for_event(resumed, lambda e: e["kind"] == "approval_requested")
    old, new = first["request_id"], again["request_id"]
    # the cancelled attempt's request is nobody's to decide any more: not listed, and refused
    status_text = project.cli("status", run_id).stdout
    assert status_text.count("waits for a person") == 1 and new[:13] in status_text and old[:13] not in status_text
    listed = project.cli("approve", run_id).stdout
    assert new in listed and old not in listed
    late = project.cli("approve", run_id, old, "--deny")
    assert late.returncode == 1 and "no longer waits for a decision" in late.stderr, late.stderr
    assert "ended (cancellation)" in late.stderr and f"waits again as request {new}" in late.stderr
    assert project.cli("answer", run_id, "review", 'level="low"').returncode == 0
    resumed.wait(timeout=30)
    data = result(project, run_id)
    assert data["outcome"] == "success" and data["output"]["level"] == "low"
    assert [a["number"] for a in data["nodes"]["review"]["attempts"]] == [1, 2]
