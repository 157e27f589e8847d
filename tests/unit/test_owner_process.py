"""The run's owner is a process of its own; followers only follow (runtime/detached.py, follow.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest

from rho_notebook.runtime.detached import OwnerOptions, start_owner
from rho_notebook.runtime.follow import RunFollower
from rho_notebook.store.run_locks import FollowLock, OwnerLock
from rho_notebook.store.runs import RunStore
from tests.conftest import Project, star

SLOW = star(
    """
    first = command(name = "first", argv = ["sh", "-c", "echo one; sleep 0.3; echo two >&2"], timeout_seconds = 30, max_output_bytes = 10000)
    second = command(name = "second", argv = ["sh", "-c", "echo second >> marks"], needs = ["first"], timeout_seconds = 30, max_output_bytes = 10000)
    return workflow(name = "slow", nodes = [first, second])
    """
)


def _created(project: Project) -> str:
    project.write("wf.star", SLOW)
    return project.create_run(project.plan("wf.star"))


@pytest.mark.parametrize("fork", [True, False], ids=["fork", "spawn"])
def test_the_owner_runs_the_run_in_a_process_of_its_own_and_the_follower_sees_every_record(
    project: Project, fork: bool
) -> None:
    run_id = _created(project)
    layout = project.service.layout
    pid = start_owner(layout, run_id, fork=fork)
    assert pid != os.getpid()
    assert os.getsid(pid) == pid or os.getsid(pid) != os.getsid(0)  # not in the caller's session
    assert OwnerLock.holder(RunStore(layout).folder(run_id).lock) == pid
    seen: list[dict[str, Any]] = []
    final = asyncio.run(RunFollower(layout, run_id).follow(seen.append))
    assert final.lifecycle.value == "completed" and final.outcome == "success"
    kinds = [r["kind"] for r in seen]
    assert kinds[0] == "run_created" and kinds[-1] == "run_completed"
    assert [r["seq"] for r in seen if "seq" in r] == list(range(1, final.last_seq + 1))
    chunks = {(r["node"], r["stream"]) for r in seen if r["kind"] == "output_chunk"}
    assert ("first", "stdout") in chunks and ("first", "stderr") in chunks
    assert (project.root / "marks").read_text() == "second\n"
    assert OwnerLock.holder(RunStore(layout).folder(run_id).lock) is None


def test_a_follower_that_stops_leaves_the_run_going(project: Project) -> None:
    run_id = _created(project)
    layout = project.service.layout
    start_owner(layout, run_id, fork=True)
    state = asyncio.run(RunFollower(layout, run_id).follow(lambda r: None, stop=lambda: True))
    assert state.lifecycle.value in ("running", "completed")
    deadline = time.monotonic() + 30
    while OwnerLock.is_held(RunStore(layout).folder(run_id).lock) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert project.status(run_id).outcome == "success"


def test_the_owner_survives_the_death_of_its_starter_process_group(project: Project) -> None:
    run_id = _created(project)
    layout = project.service.layout
    pid = start_owner(layout, run_id, fork=False)
    assert os.getpgid(pid) != os.getpgid(0)
    with pytest.raises(ProcessLookupError):
        os.killpg(os.getpgid(0) + 10**7, signal.SIGTERM)  # nothing shared: the owner is its own group
    final = asyncio.run(RunFollower(layout, run_id).follow(lambda r: None))
    assert final.outcome == "success"


def test_a_refusal_is_raised_to_the_starter(project: Project) -> None:
    run_id = _created(project)
    layout = project.service.layout
    start_owner(layout, run_id, fork=True)
    asyncio.run(RunFollower(layout, run_id).follow(lambda r: None))
    with pytest.raises(Exception, match="already"):
        start_owner(layout, run_id, OwnerOptions(resume=True), fork=True)


def test_follow_lock_is_seen_by_the_owner_probe(tmp_path: Any) -> None:
    assert FollowLock.attended(tmp_path) is False
    lock = FollowLock(tmp_path)
    lock.hold()
    other = FollowLock(tmp_path)
    other.hold()  # shared: a second follower never waits
    assert FollowLock.attended(tmp_path) is True
    lock.release()
    assert FollowLock.attended(tmp_path) is True
    other.release()
    assert FollowLock.attended(tmp_path) is False
