"""Concurrent and late decisions through real CLI processes: exactly one caller is told it decided
(exit 0); every other one, identical decisions included, exits 3 naming who decided and when
(docs/approvals.md, "Who may decide"; issue 28, finding 4)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rho_notebook.errors import AlreadyDecided
from tests.cli.runhelp import start_run, status, wait_for_event
from tests.cli.test_approvals import GATE
from tests.cli.test_item_graph_cli import ASK, start
from tests.conftest import REPO, Project


def _at_once(project: Project, *calls: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """Start every call before waiting on any, so that they race for the decision file."""
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "rho_notebook", *call],
            cwd=project.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for call in calls
    ]
    done = []
    for proc, call in zip(procs, calls, strict=True):
        out, err = proc.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(list(call), proc.returncode, out, err))
    return done


def test_four_concurrent_answers_one_is_told_it_answered(project: Project) -> None:
    project.write("ask.graph.yaml", ASK)
    proc = start(project, "run", "ask.graph.yaml", "--input", "score=5")
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    same = ("answer", run_id, "review", 'level="low"')
    done = _at_once(project, same, ("answer", run_id, "review", 'level="high"'), same, ("answer", run_id, "review"))
    codes = [d.returncode for d in done]
    # the fourth answer lacks a field: told so when it is checked before anyone answered (exit 1),
    # else told who answered (exit 3, as a late one is below); it never decides
    assert sorted(codes[:3]) == [0, 3, 3] and codes[3] in (1, 3), [(d.returncode, d.stderr) for d in done]
    assert codes[3] == 3 or "missing required field 'level'" in done[3].stderr, done[3].stderr
    for lost in (d for d in done if d.returncode == 3):
        assert lost.stderr.count("\n") == 1 and "was already answered" in lost.stderr and " by " in lost.stderr
        assert "your answer was not recorded" in lost.stderr and "Traceback" not in lost.stderr
    proc.wait(timeout=30)
    events = [json.loads(line) for line in project.cli("events", run_id).stdout.splitlines()]
    assert len([e for e in events if e["kind"] == "approval_decided"]) == 1

    decided = next(e for e in events if e["kind"] == "approval_decided")
    for late_fields in (['level="high"'], []):  # a late answer is told who answered, complete or not
        late = project.cli("answer", run_id, "review", *late_fields)
        assert late.returncode == 3, late.stderr
        assert "step review of run" in late.stderr and "was already answered" in late.stderr
        assert decided["by"] in late.stderr and decided["decided_at"] in late.stderr


def test_two_identical_concurrent_denials_one_is_told_it_denied(project: Project) -> None:
    project.write("wf.star", GATE)
    proc = start_run(project)
    run_id, asked = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    deny = ("approve", run_id, asked["request_id"][:13], "--deny")
    done = _at_once(project, deny, deny)
    assert sorted(d.returncode for d in done) == [0, 3], [(d.returncode, d.stderr) for d in done]
    lost = next(d for d in done if d.returncode == 3)
    assert "was already decided: deny by" in lost.stderr and "your decision was not recorded" in lost.stderr
    proc.wait(timeout=30)
    assert status(project, run_id)["nodes"]["ok"]["state"] == "denial"


def test_answers_racing_past_the_lookup_one_is_recorded(project: Project) -> None:
    """Four callers that all found the step waiting (the lookup is done) answer at once, from
    threads: the decision file decides, and only its writer is told it answered."""
    project.write("ask.graph.yaml", ASK)
    proc = start(project, "run", "ask.graph.yaml", "--input", "score=5")
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "approval_requested")
    service = project.service
    request = asyncio.run(service.form_request(run_id, "review"))
    barrier = threading.Barrier(4)
    told: list[str] = []

    def answer(level: str) -> None:
        barrier.wait()
        try:
            asyncio.run(service.answer(request, {"level": level}, via="cli"))
        except AlreadyDecided as err:
            told.append(f"refused: {err.message}")
        except Exception as err:  # noqa: BLE001 - any other end fails the assertions below
            told.append(f"error: {err!r}")
        else:
            told.append("recorded")

    threads = [threading.Thread(target=answer, args=(level,)) for level in ("low", "low", "high", "low")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(told)[0] == "recorded" and told.count("recorded") == 1, told
    assert all("was already answered" in t for t in told if t != "recorded")
    proc.wait(timeout=30)


def test_requests_are_never_read_or_written_through_a_planted_symlink(tmp_path: Path) -> None:
    from rho_notebook.errors import StoreError
    from rho_notebook.policy.approvals import (
        ApprovalDecision,
        ApprovalRequest,
        list_requests,
        read_decision,
        write_decision,
        write_request,
    )

    run = tmp_path / "runs" / "run-1"
    run.mkdir(parents=True, mode=0o700)
    outside = tmp_path / "outside"
    outside.mkdir()
    request = ApprovalRequest(
        request_id="r1",
        run_id="run-1",
        node="n",
        attempt=1,
        kind="launch",
        facts={},
        facts_sha256="sha256:0",
        requested_at=0.0,
    )
    write_request(outside, request)  # what an attacker would like the run to read
    (run / "requests").symlink_to(outside)
    decision = ApprovalDecision(
        request_id="r1", decision="approve", by="ann", at="now", via="cli", facts_sha256="sha256:0"
    )
    for call in (
        lambda: list_requests(run / "requests"),
        lambda: read_decision(run / "requests", "r1"),
        lambda: write_decision(run / "requests", decision),
        lambda: write_request(run / "requests", request),
    ):
        with pytest.raises(StoreError, match="symlink"):
            call()
    assert sorted(p.name for p in outside.iterdir()) == ["approval-r1.json"]  # nothing written there
