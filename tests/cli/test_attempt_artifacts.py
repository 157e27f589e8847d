"""What an attempt leaves in its folder, and when the folder exists at all.

The journal's node_finished holds every attempt's exit record. An attempt folder exists only when
the attempt wrote something the journal does not hold (output streams, a value, an answer); such
a folder also gets exit.json. Every file is in place once the run is seen completed.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from rho_notebook.errors import StoreError
from rho_notebook.runtime.cancel import write_cancel_request
from rho_notebook.runtime.driver import REQUEST_RESCAN_SECONDS
from rho_notebook.runtime.owner import execute_run
from rho_notebook.store.journal import read_journal
from tests.cli.runhelp import create_run, run
from tests.conftest import Project, star

C = "timeout_seconds = 30, max_output_bytes = 100000"


def _attempt(project: Project, run_id: str, node: str, number: int = 1) -> Path:
    return project.home / "workflows" / "runs" / run_id / "nodes" / node / "attempts" / str(number)


def test_silent_success_leaves_no_folder_and_the_journal_keeps_the_exit(project: Project) -> None:
    project.write(
        "wf.star", star(f'return workflow(name = "q", nodes = [command(name = "quiet", argv = ["true"], {C})])')
    )
    result, data = run(project)
    assert result.returncode == 0, result.stderr
    run_id = data["run_id"]
    assert not (project.home / "workflows" / "runs" / run_id / "nodes" / "quiet").exists()
    finished = [
        e
        for e in read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events
        if e["kind"] == "node_finished"
    ]
    assert finished[0]["exit"]["kind"] == "exit" and finished[0]["exit"]["code"] == 0
    shown = json.loads(project.cli("result", run_id, "--output", "json").stdout)
    assert shown["nodes"]["quiet"]["exit"]["code"] == 0 and shown["nodes"]["quiet"]["artifacts"] == {}


def test_output_gets_a_folder_with_streams_and_an_exit_copy(project: Project) -> None:
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "o", nodes = ['
            f'shell(name = "loud", executable = "sh", arguments = ["-c"], command = "echo out; echo err >&2; exit 3", allow_failure = True, {C}), '
            f'shell(name = "typed", executable = "sh", arguments = ["-c"], command = "echo 7", output = schema.stdout_json(schema.integer()), {C})])'
        ),
    )
    _, data = run(project)
    loud = _attempt(project, data["run_id"], "loud")
    assert (loud / "stdout").read_text() == "out\n" and (loud / "stderr").read_text() == "err\n"
    assert json.loads((loud / "exit.json").read_text())["code"] == 3
    assert (loud.stat().st_mode & 0o777) == 0o700
    typed = _attempt(project, data["run_id"], "typed")
    assert json.loads((typed / "value.json").read_text()) == 7
    assert json.loads((typed / "exit.json").read_text())["kind"] == "exit"


def test_planted_symlink_for_an_attempt_folder_fails_the_node_not_the_run(project: Project, tmp_path: Path) -> None:
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "s", nodes = [shell(name = "talk", executable = "sh", arguments = ["-c"], command = "echo hi", {C})])'
        ),
    )
    plan = project.plan("wf.star")
    service = project.service
    run_id = asyncio.run(create_run(service, plan))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    nodes = project.home / "workflows" / "runs" / run_id / "nodes"
    nodes.mkdir(mode=0o700, exist_ok=True)
    os.symlink(elsewhere, nodes / "talk")
    state = asyncio.run(execute_run(service.layout, run_id, resume=False))
    assert state.lifecycle.value == "completed" and state.nodes["talk"].state.value == "failure"
    assert "symlink" in state.nodes["talk"].reason and "stdout could not be stored" in state.nodes["talk"].reason
    assert state.nodes["talk"].current is not None and state.nodes["talk"].current.exit["kind"] == "abnormal"
    assert list(elsewhere.iterdir()) == []


def test_cancel_request_without_a_poke_is_still_applied(project: Project) -> None:
    """The owner re-reads its requests folder on a timer, so a lost poke only delays a cancel."""
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "c", nodes = [shell(name = "nap", executable = "sh", arguments = ["-c"], command = "sleep 20", {C})])'
        ),
    )
    plan = project.plan("wf.star")
    service = project.service
    run_id = asyncio.run(create_run(service, plan))
    requests = project.home / "workflows" / "runs" / run_id / "requests"

    async def go() -> tuple[float, str | None]:
        owner = asyncio.ensure_future(execute_run(service.layout, run_id, resume=False))
        events = project.home / "workflows" / "runs" / run_id / "events.jsonl"
        while not any(e["kind"] == "process_started" for e in read_journal(events).events):
            await asyncio.sleep(0.02)
        began = time.monotonic()
        write_cancel_request(requests, by="test, no poke")  # durable request; nobody pokes the owner
        state = await asyncio.wait_for(owner, timeout=15)
        return time.monotonic() - began, state.outcome

    elapsed, outcome = asyncio.run(go())
    assert outcome == "cancellation"
    assert elapsed < REQUEST_RESCAN_SECONDS + 5  # bounded by the rescan, far below the 20 s sleep


def test_writer_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    """A queued non-durable copy is dropped (and reported) when its folder could not be made."""
    from rho_notebook.store.artifacts import ArtifactWriter

    run_dir = tmp_path / "run"
    (run_dir / "nodes").mkdir(parents=True, mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "attempts" / "1").mkdir(parents=True)
    os.symlink(elsewhere, run_dir / "nodes" / "n")
    writer = ArtifactWriter(run_dir)
    files = writer.files(run_dir / "nodes" / "n" / "attempts" / "1")
    files.write_later("exit.json", b"{}\n")

    errors = asyncio.run(writer.drain())
    writer.close()
    assert len(errors) == 2 and all("symlink" in e for e in errors)  # the folder, then the copy
    assert list((elsewhere / "attempts" / "1").iterdir()) == []


def test_resume_refuses_a_damaged_output_value(project: Project) -> None:
    """Downstream conditions read stored values: a damaged one stops the resume, loudly."""
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "v", nodes = ['
            f'shell(name = "typed", executable = "sh", arguments = ["-c"], command = "echo 7", output = schema.stdout_json(schema.integer()), {C}), '
            f'shell(name = "nap", executable = "sh", arguments = ["-c"], command = "sleep 20", needs = ["typed"], {C})])'
        ),
    )
    plan = project.plan("wf.star")
    service = project.service
    run_id = asyncio.run(create_run(service, plan))
    run_dir = project.home / "workflows" / "runs" / run_id

    async def first() -> str | None:
        owner = asyncio.ensure_future(execute_run(service.layout, run_id, resume=False))
        while not any(
            e["kind"] == "process_started" and e["node"] == "nap" for e in read_journal(run_dir / "events.jsonl").events
        ):
            await asyncio.sleep(0.02)
        write_cancel_request(run_dir / "requests", by="test")
        return (await asyncio.wait_for(owner, timeout=15)).outcome

    assert asyncio.run(first()) == "cancellation"
    value = _attempt(project, run_id, "typed") / "value.json"
    assert json.loads(value.read_text()) == 7
    value.write_text("{not json")
    events_before = (run_dir / "events.jsonl").read_bytes()
    with pytest.raises(StoreError, match="value.json is not valid JSON"):
        asyncio.run(execute_run(service.layout, run_id, resume=True))
    assert (run_dir / "events.jsonl").read_bytes() == events_before  # refused before journaling anything
