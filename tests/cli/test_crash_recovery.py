"""kill -9 of the owner at many points: status stays readable, the journal parses, resume with
--recover-uncertain finishes the run, and no node journaled as success ever runs twice (each node
appends a line to its own side-effect file, so a second run of it would show).

The owner is a process of its own (``rho-notebook run`` follows it): a failpoint kills the owner,
and the CLI that followed it says the run needs recovery and exits 1 (0 when the owner died after
the run completed)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rho_notebook.store.journal import read_journal
from tests.cli.runhelp import kill_owner, only_run_id, owner_ended_its_run, start_run, status, wait_for_event
from tests.conftest import Project, star

NODES = ["a", "b", "c", "d", "e"]


def effect(name: str, needs: list[str], extra: str = "") -> str:
    return (
        f'shell(name = "{name}", executable = "sh", arguments = ["-c"], '
        f'command = "{extra}echo ran >> effects/{name}.log", needs = {json.dumps(needs)}, '
        "timeout_seconds = 30, max_output_bytes = 1000)"
    )


WORKFLOW = star(
    'return workflow(name = "crash", nodes = [\n    '
    + ",\n    ".join(
        [
            effect("a", []),
            effect("b", ["a"]),
            effect("c", ["a"], "sleep 0.2; "),
            effect("d", ["b", "c"]),
            effect("e", ["d"]),
        ]
    )
    + '\n], concurrency = {"total": 2, "command": 2})'
)


def counts(project: Project) -> dict[str, int]:
    found = {}
    for name in NODES:
        path = project.root / "effects" / f"{name}.log"
        found[name] = len(path.read_text().splitlines()) if path.exists() else 0
    return found


def _check_recovery(project: Project, run_id: str) -> None:
    before = status(project, run_id)  # readable after the crash
    read = read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl")
    assert read.events, "journal parses and is not empty"
    events = project.cli("events", run_id)
    assert events.returncode == 0
    succeeded = {name for name, node in before["nodes"].items() if node["state"] == "success"}
    effects_before = counts(project)
    if before["lifecycle"] == "completed":
        assert before["outcome"] == "success"
        return
    assert before["lifecycle"] == "needs_recovery", before
    resumed = project.cli("resume", run_id, "--yes", "--recover-uncertain", "--output", "jsonl", timeout=60)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    after = status(project, run_id)
    assert after["outcome"] == "success", after
    assert all(node["state"] == "success" for node in after["nodes"].values())
    effects_after = counts(project)
    for name in succeeded:
        assert effects_after[name] == effects_before[name], f"{name} was journaled as success and ran again"
    for name in NODES:
        assert effects_after[name] >= 1


POINTS = [
    ("before_launch_sync", 1),
    ("before_launch_sync", 2),
    ("before_launch_sync", 3),
    ("after_launch_sync", 1),
    ("after_launch_sync", 2),
    ("after_launch_sync", 4),
    ("after_process_started", 1),
    ("after_process_started", 2),
    ("after_process_started", 3),
    ("after_process_started", 5),
    ("after_finished_append", 1),
    ("after_finished_append", 2),
    ("after_finished_append", 3),
    ("after_finished_append", 4),
    ("after_decisions_append", 1),
    ("after_decisions_append", 2),
    ("after_decisions_append", 3),
    ("before_snapshot", 1),
    ("before_snapshot", 2),
    ("after_snapshot", 1),
    ("before_completed", 1),
    ("after_completed", 1),
]


@pytest.mark.parametrize(("point", "count"), POINTS, ids=[f"{p}-{n}" for p, n in POINTS])
def test_kill9_at_failpoint(project: Project, point: str, count: int) -> None:
    (project.root / "effects").mkdir()
    project.write("wf.star", WORKFLOW)
    proc = start_run(project, env={"RHO_NOTEBOOK_FAILPOINT": f"{point}:{count}"})
    _, stderr = proc.communicate(timeout=60)
    run_id = only_run_id(project)
    assert not owner_ended_its_run(project, run_id), f"failpoint {point}:{count} was not reached"
    if status(project, run_id)["lifecycle"] == "completed":  # the owner died after the run's last record
        assert proc.returncode == 0, stderr
    else:
        assert proc.returncode == 1 and "stopped before the run ended" in stderr, stderr
    _check_recovery(project, run_id)


@pytest.mark.parametrize("node", ["c", "d"])
def test_kill9_while_a_command_runs(project: Project, node: str) -> None:
    (project.root / "effects").mkdir()
    project.write(
        "wf.star",
        WORKFLOW.replace(
            f'command = "echo ran >> effects/{node}.log"', f'command = "sleep 0.5; echo ran >> effects/{node}.log"'
        ),
    )
    proc = start_run(project)
    run_id, started = wait_for_event(proc, lambda e: e["kind"] == "process_started" and e["node"] == node)
    kill_owner(project, run_id)
    assert proc.wait(timeout=10) == 1  # the CLI followed the owner: it says the run needs recovery
    child = started["pid"]
    _check_recovery(project, run_id)
    # the orphaned command tree was stopped (or had finished) before the node was rerun
    assert not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"


def test_resume_refuses_uncertain_without_flag(project: Project) -> None:
    (project.root / "effects").mkdir()
    project.write("wf.star", WORKFLOW)
    proc = start_run(project, env={"RHO_NOTEBOOK_FAILPOINT": "after_process_started:1"})
    proc.communicate(timeout=60)
    run_id = only_run_id(project)
    refused = project.cli("resume", run_id, "--yes")
    assert refused.returncode == 3
    assert "--recover-uncertain" in refused.stderr and "needs recovery" in refused.stderr
    data = status(project, run_id)
    assert data["lifecycle"] == "needs_recovery"
    assert data["nodes"]["a"]["uncertain"] is True


def test_torn_journal_line_is_tolerated(project: Project) -> None:
    (project.root / "effects").mkdir()
    project.write("wf.star", WORKFLOW)
    proc = start_run(project, env={"RHO_NOTEBOOK_FAILPOINT": "after_finished_append:2"})
    proc.communicate(timeout=60)
    run_id = only_run_id(project)
    journal = project.home / "workflows" / "runs" / run_id / "events.jsonl"
    with open(journal, "a") as handle:
        handle.write('{"seq": 999, "kind": "node_fin')  # an owner died mid-write
    assert read_journal(journal).torn
    events = project.cli("events", run_id)
    assert events.returncode == 0 and "torn" in events.stderr
    assert status(project, run_id)["lifecycle"] == "needs_recovery"
    resumed = project.cli("resume", run_id, "--yes", "--recover-uncertain", "--output", "jsonl")
    assert resumed.returncode == 0, resumed.stderr
    kinds = [json.loads(line)["kind"] for line in resumed.stdout.splitlines()]
    assert "journal_repaired" in kinds
    assert status(project, run_id)["outcome"] == "success"


def test_second_owner_is_refused_while_first_lives(project: Project) -> None:
    project.write(
        "wf.star",
        star(
            'return workflow(name = "w", nodes = [command(name = "s", argv = ["sleep", "30"], timeout_seconds = 60, max_output_bytes = 10)])'
        ),
    )
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "process_started")
    second = project.cli("resume", run_id, "--yes")
    assert second.returncode == 3 and "owned by another live process" in second.stderr
    project.cli("cancel", run_id)
    proc.wait(timeout=30)
    assert time.monotonic() > 0
