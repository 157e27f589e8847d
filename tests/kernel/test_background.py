"""The background runner and run handles, without IPython: one loop thread, listeners, state
copies, a busy caller thread that does not stall runs, cancel, recovery, awaiting, the owner
process a handle starts and follows, and attaching to a run started elsewhere."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from typing import Any

import pytest

from rho_notebook.errors import NeedsRecovery
from rho_notebook.model.plan import Plan
from rho_notebook.service import Consent, Service, StartRun
from rho_notebook.service.background import BackgroundRunner, default_runner
from rho_notebook.store.journal import read_journal
from tests.conftest import REPO, Project, star
from tests.kernel.helpers import C, owner_pid, wait_until

STEPS = star(
    f"""
return workflow(name = "steps", nodes = [
    shell(name = "a", executable = "sh", arguments = ["-c"], command = "sleep 0.3", {C}),
    shell(name = "b", executable = "sh", arguments = ["-c"], command = "sleep 0.3", needs = ["a"], {C}),
    shell(name = "c", executable = "sh", arguments = ["-c"], command = "sleep 0.3", needs = ["b"], {C}),
    command(name = "d", argv = ["echo", "{{\\"done\\": true}}"], needs = ["c"],
            output = schema.stdout_json(schema.record({{"done": schema.bool()}})), {C}),
    command(name = "e", argv = ["true"], needs = ["d"], when = condition.equals(output("d", ["done"]), False), {C}),
])
"""
)

LONG = star(
    f"""
return workflow(name = "long", nodes = [
    shell(name = "long", executable = "sh", arguments = ["-c"], command = "sleep 30", {C}),
    command(name = "after", argv = ["true"], needs = ["long"], {C}),
])
"""
)


def _create(service: Service, plan: Plan, **kwargs: Any) -> str:
    return asyncio.run(service.create_run_of(plan, StartRun(plan=plan.plan_id, consent=Consent(yes=True), **kwargs)))


def _start(project: Project, source: str, runner: BackgroundRunner, **kwargs: Any) -> Any:
    project.write("wf.star", source)
    plan = project.plan("wf.star")
    service = project.service
    run_id = _create(service, plan, origin="notebook")
    return runner.start_run(service, run_id, **kwargs)


def _when(stamp: str | None) -> float:
    assert stamp is not None
    return datetime.fromisoformat(stamp).timestamp()


def test_the_thread_starts_on_first_use_and_is_one_per_runner() -> None:
    code = "import threading, rho_notebook as rho, rho_notebook.notebook.api, rho_notebook.service.background as b; rho.validate; print(threading.active_count(), b._default)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    assert out.stdout.split() == ["1", "None"]  # importing starts nothing
    runner = BackgroundRunner(name="test-runner")
    assert runner.thread is None

    async def where() -> str:
        return threading.current_thread().name

    assert runner.call(where()) == "test-runner"
    assert runner.call(where()) == "test-runner"
    thread = runner.thread
    assert thread is not None and thread.daemon
    assert default_runner() is default_runner()


def test_call_from_the_runner_thread_refuses_instead_of_deadlocking() -> None:
    runner = BackgroundRunner()

    async def nested() -> None:
        async def inner() -> int:
            return 1

        runner.call(inner())

    with pytest.raises(RuntimeError, match="deadlock"):
        runner.call(nested())


def test_listeners_get_every_journal_event_on_the_runner_thread(project: Project) -> None:
    runner = BackgroundRunner(name="listener-runner")
    seen: list[dict[str, Any]] = []
    threads: set[str] = set()

    def listen(record: dict[str, Any]) -> None:
        seen.append(record)
        threads.add(threading.current_thread().name)

    handle = _start(project, STEPS, runner, listeners=[listen])
    final = handle.wait(30)
    assert final.outcome == "success"
    journal = read_journal(project.service.run_store.folder(handle.run_id).events).events
    created = [r for r in journal if r["kind"] == "run_created"]
    assert [r["seq"] for r in seen if "seq" in r] == [r["seq"] for r in journal if r not in created]
    assert any(r["kind"] == "output_chunk" for r in seen)  # live-only records come too
    assert threads == {"listener-runner"}
    assert handle.outputs["d"] == {"done": True}
    with pytest.raises(KeyError, match="state skipped"):
        handle.outputs["e"]
    result = handle.result()
    assert result.nodes["d"].output == {"done": True} and result.nodes["e"].state == "skipped"
    assert "stdout" in result.nodes["d"].artifacts


def test_a_busy_caller_thread_does_not_stall_the_run(project: Project) -> None:
    handle = _start(project, STEPS, BackgroundRunner())
    begin = time.time()
    deadline = time.monotonic() + 2.5
    spins = 0
    while time.monotonic() < deadline:  # pure Python work holding the GIL between switches
        spins += sum(range(200))
    end = time.time()
    state = handle.state()
    assert state.lifecycle.value == "completed", state.lifecycle
    ends = [_when(state.nodes[n].current.ended_at) for n in "abc"]  # type: ignore[union-attr]
    assert all(begin <= t <= end for t in ends), (begin, ends, end)


def test_state_is_a_copy_and_safe_to_read_from_many_threads(project: Project) -> None:
    handle = _start(project, STEPS, BackgroundRunner())
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not handle.done():
                snapshot = handle.state()
                snapshot.nodes.clear()
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    readers = [threading.Thread(target=reader) for _ in range(4)]
    for thread in readers:
        thread.start()
    handle.wait(30)
    for thread in readers:
        thread.join(5)
    assert not errors
    assert set(handle.state().nodes) == {"a", "b", "c", "d", "e"}


def test_a_raising_listener_is_logged_and_the_run_goes_on(project: Project, caplog: pytest.LogCaptureFixture) -> None:
    def broken(record: dict[str, Any]) -> None:
        raise ValueError("listener bug")

    with caplog.at_level(logging.ERROR, logger="rho_notebook.service.background"):
        handle = _start(project, STEPS, BackgroundRunner(), listeners=[broken])
        assert handle.wait(30).outcome == "success"
    assert "a run listener raised" in caplog.text and "listener bug" in caplog.text


def test_cancel_from_the_handle_and_from_a_listener(project: Project) -> None:
    handle = _start(project, LONG, BackgroundRunner())
    wait_until(lambda: handle.state().nodes["long"].state.value == "running")
    answer = handle.cancel()
    assert answer.cancellation_state == "acknowledged"
    assert handle.wait(10).outcome == "cancellation"
    answers: list[Any] = []

    def cancel_when_running(record: dict[str, Any]) -> None:
        if record["kind"] == "process_started" and not answers:
            answers.append(again.cancel())  # on the runner thread: records the request, does not wait

    project.write("wf.star", LONG)
    plan = project.plan("wf.star")
    runner = BackgroundRunner()
    again = runner.start_run(project.service, _create(project.service, plan), wait_started=False)
    again.add_listener(cancel_when_running)
    assert again.wait(15).outcome == "cancellation"
    assert answers and answers[0].cancellation_state == "pending"


def test_awaiting_and_abandoning_an_await_leave_the_run_alone(project: Project) -> None:
    handle = _start(project, LONG, BackgroundRunner())
    wait_until(lambda: handle.state().nodes["long"].state.value == "running")

    async def impatient() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(handle, timeout=0.2)  # cancels the await, not the run

    asyncio.run(impatient())
    assert not handle.done()
    handle.cancel()

    async def patient() -> str | None:
        final = await handle
        return final.outcome

    assert asyncio.run(patient()) == "cancellation"


def test_awaiting_a_stopped_run_waits_for_its_views_to_show_the_end(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A view held on the handle (a notebook's run view drawing its final picture on a thread of
    its own) is waited for after the run stops, by ``await`` and ``wait()`` alike; a view that never
    catches up delays them by at most VIEW_PATIENCE seconds."""
    from rho_notebook.service import run_handle

    handle = _start(project, STEPS, BackgroundRunner())
    drawn = threading.Event()
    asked: list[float] = []

    def shown(timeout: float) -> bool:
        asked.append(timeout)
        return drawn.wait(timeout)

    handle.hold_await(shown)
    finished: list[str | None] = []

    async def awaiting() -> None:
        final = await handle
        finished.append(final.outcome)

    waiter = threading.Thread(target=lambda: asyncio.run(awaiting()))
    waiter.start()
    wait_until(handle.done, timeout=60)
    waiter.join(0.5)
    assert waiter.is_alive() and not finished, "the await returned before the view showed the end"
    drawn.set()
    waiter.join(10)
    assert finished == ["success"] and asked[0] == 0  # asked at once first, then waited on a thread

    stuck = threading.Event()  # three more views that never draw: the wait is bounded, once for all
    for _ in range(3):
        handle.hold_await(stuck.wait)
    monkeypatch.setattr(run_handle, "VIEW_PATIENCE", 0.5)
    started = time.monotonic()
    assert handle.wait(timeout=5).outcome == "success"
    assert 0.5 <= time.monotonic() - started < 1.25  # one patience, not one per view (1.5 s)


def test_resume_of_a_dead_owner_needs_recovery_then_recovers(project: Project) -> None:
    project.write("wf.star", STEPS)
    plan_id = project.cli("plan", "wf.star", "--output", "json")
    assert plan_id.returncode == 0, plan_id.stderr
    import json

    dead = project.cli(
        "run",
        json.loads(plan_id.stdout)["plan_id"],
        "--yes",
        "--output",
        "jsonl",
        env={"RHO_NOTEBOOK_FAILPOINT": "after_process_started:1"},
    )
    assert dead.returncode != 0
    run_id = json.loads(dead.stdout.splitlines()[0])["run_id"]
    assert asyncio.run(project.service.status(run_id)).lifecycle.value == "needs_recovery"
    runner = BackgroundRunner()
    seen: list[str] = []
    with pytest.raises(NeedsRecovery, match="--recover-uncertain"):
        runner.start_run(project.service, run_id, resume=True, listeners=[lambda r: seen.append(r["kind"])])
    assert "needs_recovery" in seen  # journaled by the refusing owner, delivered from the journal
    handle = runner.start_run(project.service, run_id, resume=True, recover_uncertain=True)
    final = handle.wait(30)
    assert final.outcome == "success"
    assert final.nodes["a"].attempt == 2


FAILS_FIRST = star(
    f"""
return workflow(name = "fails_first", nodes = [
    command(name = "prepare", argv = ["false"], {C}),
    shell(name = "slow", executable = "sh", arguments = ["-c"], command = "sleep 30", needs = ["prepare"], {C}),
])
"""
)


def test_until_returns_when_the_node_reaches_the_state(project: Project) -> None:
    handle = _start(project, LONG, BackgroundRunner())

    async def reached() -> Any:
        return await asyncio.wait_for(handle.until("long", "running"), timeout=15)

    state = asyncio.run(reached())
    assert state.nodes["long"].state.value == "running" and state.lifecycle.value == "running"
    again = handle.wait_until("long", "running", timeout=5)  # already there: answers at once
    assert again.nodes["long"].state.value == "running"
    handle.cancel()
    assert handle.wait(10).outcome == "cancellation"
    assert not handle._listeners  # every waiter removed its listener


def test_until_returns_promptly_when_the_run_ends_first(project: Project) -> None:
    handle = _start(project, FAILS_FIRST, BackgroundRunner())
    begin = time.monotonic()

    async def first() -> Any:
        return await asyncio.wait_for(handle.until("slow", "running"), timeout=15)

    state = asyncio.run(first())
    assert time.monotonic() - begin < 10
    assert state.lifecycle.value == "completed" and state.outcome == "failure"
    assert state.nodes["prepare"].state.value == "failure"
    assert state.nodes["slow"].state.value != "running"
    ended = handle.wait_until("slow", "running", timeout=5)  # after the end: the final state, at once
    assert ended.outcome == "failure"
    with pytest.raises(KeyError, match="no node 'nope'"):
        handle.wait_until("nope", "running")
    with pytest.raises(ValueError, match="not a node state"):
        handle.wait_until("slow", "sprinting")


def test_wait_until_times_out_and_leaves_the_run_alone(project: Project) -> None:
    handle = _start(project, LONG, BackgroundRunner())
    begin = time.monotonic()
    with pytest.raises(TimeoutError, match="node .after. of run .* is still pending, not success, after 0.3 s"):
        handle.wait_until("after", "success", timeout=0.3)
    assert time.monotonic() - begin < 5
    assert not handle.done()
    handle.cancel()
    assert handle.wait(10).outcome == "cancellation"
    assert not handle._listeners


# -- the owner is a process of its own (issue 30) ----------------------------------------------------

GATE = star(
    """
return workflow(name = "gate", nodes = [
    approval(name = "ok", prompt = template(["Ship it?"]), timeout_seconds = 60, max_output_bytes = 1000),
    command(name = "ship", argv = ["true"], needs = ["ok"], timeout_seconds = 30, max_output_bytes = 1000),
])
"""
)


def test_the_owner_is_a_process_of_its_own_and_its_death_is_heard(project: Project) -> None:
    seen: list[str] = []
    runner = BackgroundRunner()
    handle = _start(project, LONG, runner, listeners=[lambda r: seen.append(r["kind"])])
    handle.wait_until("long", "running", timeout=30)
    owner = owner_pid(project.home, handle.run_id)
    assert owner and owner != os.getpid()  # not this process: nothing here can stop the run by accident
    os.kill(owner, signal.SIGKILL)
    final = handle.wait(30)  # the follower sees the owner lock freed: the end, as status says it
    assert final.lifecycle.value == "needs_recovery" and handle.done() and handle.exception() is None
    assert seen[-1] == "needs_recovery"  # listeners (the widget) hear it too
    again = runner.start_run(project.service, handle.run_id, resume=True, recover_uncertain=True)
    again.wait_until("long", "running", timeout=30)  # recovery stopped the orphaned attempt, relaunched it
    again.cancel()
    assert again.wait(30).outcome == "cancellation"


def test_attach_follows_a_run_started_elsewhere_to_its_end(project: Project) -> None:
    started = _start(project, LONG, BackgroundRunner())
    other = BackgroundRunner()  # another kernel: it never started the run
    seen: list[str] = []
    attached = other.attach(project.service, started.run_id, listeners=[lambda r: seen.append(r["kind"])])
    assert attached is not started and other.attach(project.service, started.run_id) is attached
    state = attached.wait_until("long", "running", timeout=30)
    assert state.nodes["long"].state.value == "running"
    assert attached.cancel().cancellation_state == "acknowledged"

    async def awaited() -> str | None:
        final = await attached
        return final.outcome

    assert asyncio.run(awaited()) == "cancellation"
    assert {"node_finished", "run_completed"} <= set(seen) and attached.exception() is None
    assert started.wait(30).outcome == "cancellation"
    ended = other.attach(project.service, started.run_id)  # a run that has ended: settles at once
    assert ended is not attached and ended.wait(10).outcome == "cancellation"


def test_pending_approvals_come_from_the_journal_and_the_requests_folder(project: Project) -> None:
    handle = _start(project, GATE, BackgroundRunner())
    wait_until(lambda: handle.state().lifecycle.value == "waiting")
    [request] = handle.pending_approvals()
    assert request.node == "ok" and request.facts["prompt"] == "Ship it?"
    asyncio.run(project.service.approve(handle.run_id, request.request_id, via="notebook"))
    assert handle.wait(30).outcome == "success"
    assert handle.pending_approvals() == []
