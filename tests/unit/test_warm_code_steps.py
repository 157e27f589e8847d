"""Code steps in a warm Starlark worker (issue 31, item 4): the process that runs a run's steps (its
owner) starts one worker at the first code step and reuses it; every step starts from fresh
Starlark globals under the same budgets, and a worker whose step ran out of a budget, crashed or
was cancelled is killed and replaced. The worker ends with the owner's loop, and a killed owner
leaves none behind (end of file on its pipe ends it). Real worker processes throughout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import CodeStepError, InvalidWorkflow
from rho_notebook.exec.code import CodeOperation, code_workers, run_code
from rho_notebook.runtime.detached import start_owner
from rho_notebook.source.code_step import run_code_step
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.warm import WorkerPool
from tests.conftest import Project, journaled
from tests.processes import alive, wait_gone

BUSY = """
def run(item):
    n = 0
    for i in range(2147483647):
        for j in range(2147483647):
            n += 1
    return item
"""

COUNTS = """
seen = []
LEAK = "from an earlier step"

def run(item):
    seen.append(1)
    return dict(item, seen = len(seen))
"""

READS_LEAK = "def run(item):\n    return dict(item, leak = LEAK)\n"
PLUS_ONE = 'def run(item):\n    return dict(item, n = item["n"] + 1)\n'


def with_budgets(**limits: int) -> Limits:
    base = load_limits()
    budgets = dict(base.budgets)
    for name, limit in limits.items():
        budgets[name] = budgets[name].model_copy(update={"limit": limit})
    return base.model_copy(update={"budgets": budgets})


def workers_of(parent: int) -> set[int]:
    """Live planning-worker processes whose parent is ``parent``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == parent and fields[0] not in ("Z", "X") and b"_worker.py" in cmdline:
            found.add(int(entry.name))
    return found


async def step(source: str, item: dict[str, Any], cancel: asyncio.Event | None = None) -> dict[str, Any] | None:
    return await run_code(CodeOperation(step="s", source=source), item, cancel=cancel or asyncio.Event())


async def idle_worker() -> int:
    (pid,) = (await code_workers()).idle_pids()
    return pid


def test_steps_share_one_worker_and_each_starts_from_fresh_globals() -> None:
    async def scenario() -> tuple[list[Any], int]:
        first = await step(COUNTS, {"n": 1})
        pid = await idle_worker()
        second = await step(COUNTS, {"n": 2})
        assert await idle_worker() == pid  # the same warm worker served both steps
        with pytest.raises(CodeStepError) as caught:
            await step(READS_LEAK, {"n": 3})
        assert caught.value.rule == "code.error" and "LEAK" in str(caught.value)
        assert await idle_worker() == pid  # an error in the source is an answer, not a reason to replace it
        return [first, second], pid

    (first, second), pid = asyncio.run(scenario())
    assert first == {"n": 1, "seen": 1}
    assert second == {"n": 2, "seen": 1}  # `seen` started empty again: nothing of the first step is left
    # the loop ended: its idle worker was stopped
    assert wait_gone(pid, 60), f"worker {pid} still runs"
    assert workers_of(os.getpid()) == set()


def test_a_closed_pool_keeps_workers_again_and_a_retired_one_does_not() -> None:
    """close() empties a pool that stays in use (a bench empties the owner's between samples);
    retire() is planning's switch-off: a worker given back afterwards is stopped."""

    async def scenario() -> tuple[list[int], list[int], list[int]]:
        pool = WorkerPool(max_idle=1)
        await run_code_step(COUNTS, {"n": 1}, step="s", pool=pool)
        first = pool.idle_pids()
        pool.close()
        await run_code_step(COUNTS, {"n": 2}, step="s", pool=pool)
        again = pool.idle_pids()
        pool.retire()
        await run_code_step(COUNTS, {"n": 3}, step="s", pool=pool)
        return first, again, pool.idle_pids()

    first, again, retired = asyncio.run(scenario())
    assert len(first) == 1 and len(again) == 1 and again != first
    assert retired == []
    for pid in first + again:
        assert wait_gone(pid, 60), f"worker {pid} still runs"


HOARD = 'def run(item):\n    hoard = []\n    for i in range(2147483647):\n        hoard.append("x" * 1000000)\n    return item\n'


@pytest.mark.parametrize(
    ("source", "budgets", "rule", "said"),
    [
        (BUSY, {"evaluator_ticks": 1000}, "limit.evaluator_ticks", "'evaluator_ticks' exceeded: limit 1000 ticks"),
        (
            BUSY,
            {"evaluator_wall_ms": 200, "evaluator_ticks": 2**62},
            "limit.evaluator_wall_ms",
            "'evaluator_wall_ms' exceeded: limit 200 ms",
        ),
        (HOARD, {}, "limit.evaluator_address_space", "'evaluator_address_space' exceeded: limit"),
    ],
    ids=["ticks", "wall", "memory"],
)
def test_a_step_over_its_budget_fails_as_before_and_its_worker_is_replaced(
    source: str, budgets: dict[str, int], rule: str, said: str
) -> None:
    limits = with_budgets(**budgets)

    async def scenario() -> tuple[CodeStepError, int, int, Any]:
        pool = WorkerPool(max_idle=2)
        try:
            await run_code_step(PLUS_ONE, {"n": 1}, step="warm", limits=limits, pool=pool)
            (before,) = pool.idle_pids()
            with pytest.raises(CodeStepError) as caught:
                await run_code_step(source, {"n": 1}, step="spin", limits=limits, pool=pool)
            assert pool.idle_pids() == []
            after = await run_code_step(PLUS_ONE, {"n": 5}, step="next", limits=limits, pool=pool)
            (replacement,) = pool.idle_pids()
            return caught.value, before, replacement, after
        finally:
            pool.close()

    err, before, replacement, after = asyncio.run(scenario())
    assert (err.step, err.rule) == ("spin", rule)
    assert said in str(err) and "the step was stopped" in str(err)
    assert wait_gone(before, 60), f"worker {before} still runs"
    assert replacement != before and after == {"n": 6}


def test_a_crashed_worker_is_replaced_and_the_step_says_so() -> None:
    limits = with_budgets(evaluator_wall_ms=600_000, evaluator_ticks=2**62)

    async def scenario() -> tuple[int, CodeStepError, Any]:
        pool = WorkerPool()
        try:
            await run_code_step(PLUS_ONE, {"n": 1}, step="warm", limits=limits, pool=pool)
            (pid,) = pool.idle_pids()
            os.kill(pid, signal.SIGKILL)  # dies while idle: the next step gets a new worker
            while alive(pid):
                await asyncio.sleep(0.01)
            assert await run_code_step(PLUS_ONE, {"n": 1}, step="again", limits=limits, pool=pool) == {"n": 2}
            (pid,) = pool.idle_pids()
            task = asyncio.ensure_future(run_code_step(BUSY, {"n": 1}, step="spin", limits=limits, pool=pool))
            while pool.idle_pids():  # taken by the busy step
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            os.kill(pid, signal.SIGTERM)  # dies during the step (SIGKILL would read as the CPU limit's kill)
            with pytest.raises(CodeStepError) as caught:
                await task
            assert pool.idle_pids() == []
            return pid, caught.value, await run_code_step(PLUS_ONE, {"n": 7}, step="after", limits=limits, pool=pool)
        finally:
            pool.close()

    pid, err, after = asyncio.run(scenario())
    assert (err.step, err.rule) == ("spin", "code.error")
    assert "exited unexpectedly" in str(err)
    assert wait_gone(pid, 60), f"worker {pid} still runs"
    assert after == {"n": 8}


def test_cancel_stops_a_running_step_and_its_worker() -> None:
    async def scenario() -> tuple[int, Any, Any]:
        await step(PLUS_ONE, {"n": 1})
        pid = await idle_worker()
        cancel = asyncio.Event()
        task = asyncio.ensure_future(step(BUSY, {"n": 1}, cancel))
        while (await code_workers()).idle_pids():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the step is under way in the worker
        cancel.set()
        # the default wall budget is far longer: only the cancel can end the step within this
        stopped = await asyncio.wait_for(task, timeout=60)
        assert not alive(pid)  # killed and reaped before run_code returned
        return pid, stopped, await step(PLUS_ONE, {"n": 1})

    pid, stopped, after = asyncio.run(scenario())
    assert stopped is None  # cancelled, not failed
    assert after == {"n": 2}  # a new worker took over
    assert not Path(f"/proc/{pid}").exists()


def test_a_run_in_process_leaves_no_worker(project: Project) -> None:
    from rho_notebook.service import Consent, StartRun

    project.write("g.graph.yaml", _graph(_DONE))
    plan = project.plan("g.graph.yaml", {"n": 1})
    state = asyncio.run(project.service.run(StartRun(plan=plan.plan_id, consent=Consent(yes=True))))
    assert state.outcome == "success" and state.output == {"n": 4}
    assert workers_of(os.getpid()) == set()


def test_a_killed_owner_leaves_no_worker(project: Project) -> None:
    project.write("g.graph.yaml", _graph(_HUMAN))
    run_id = project.create_run(project.plan("g.graph.yaml", {"n": 1}))
    owner = start_owner(project.service.layout, run_id)
    try:
        asyncio.run(journaled(project.home, run_id, "node_finished", node="c2", timeout=60))
        deadline = time.monotonic() + 60
        while not (found := workers_of(owner)):  # the code steps' warm worker, idle in the owner
            assert time.monotonic() < deadline, "the owner keeps no code worker"
            time.sleep(0.01)
        (worker,) = found
    finally:
        os.kill(owner, signal.SIGKILL)  # the owner dies while the run waits for a person
    assert wait_gone(worker, 60), (
        f"worker {worker} still runs"
    )  # its pipe was closed with the owner: end of file ended it


_CODE_STEP = """
  - id: c{i}
    kind: code
    params:
      source: |
        def run(item):
            return dict(item, n = item["n"] + 1)"""

_DONE = """
  - {id: done, kind: output}"""

_HUMAN = """
  - id: done
    kind: human
    params:
      question: "=Go on with {{ $json.n }}?"
      fields:
        ok: {type: bool, default: true}"""


def _graph(last: str) -> str:
    """Three code steps adding one to ``n`` each, then the step ``done`` (``last``)."""
    codes = "".join(_CODE_STEP.format(i=i) for i in range(3))
    edges = "  - {from: c0, to: c1}\n  - {from: c1, to: c2}\n  - {from: c2, to: done}\n"
    return f"name: codes\ninputs:\n  n: {{type: integer}}\nsteps:{codes}{last}\nedges:\n{edges}"


def test_planning_checks_every_code_step_in_one_worker_and_names_the_one_that_does_not_parse(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning parses each code step's source before the run; it did so in a fresh worker per
    step, all at once (100 steps: 100 processes, planning 2.3 s instead of 0.1). One worker now
    parses them in turn, and the error still points at its own step."""
    import rho_notebook.source.warm as warm

    started: list[bool] = []
    start = warm.start_worker

    def counted(worker_limits: dict[str, int], *, warm: bool) -> Any:
        started.append(warm)
        return start(worker_limits, warm=warm)

    monkeypatch.setattr(warm, "start_worker", counted)
    good = '"def run(item):\\n  return item"'
    steps = [f"  - {{id: c{i}, kind: code, params: {{source: {good}}}}}" for i in range(6)]
    steps[3] = '  - {id: c3, kind: code, params: {source: "def run(item)\\n  return item"}}'
    edges = "\n".join(f"  - {{from: c{i}, to: c{i + 1}}}" for i in range(5))
    project.write("codes.graph.yaml", "name: codes\nsteps:\n" + "\n".join(steps) + f"\nedges:\n{edges}\n")
    with pytest.raises(InvalidWorkflow) as refused:
        project.plan("codes.graph.yaml")
    [found] = refused.value.diagnostics()
    assert (found.rule, found.line) == ("code.error", 6) and "code step 'c3'" in found.message, found
    assert len(started) == 1, started
