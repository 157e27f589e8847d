"""The warm planning worker of a long-lived process (issue 31): one worker process serves one plan
after another, each with fresh Starlark state and the same budgets, and is replaced when a budget
ran out, it crashed or its call broke off. Without the switch (the CLI) every plan starts a fresh
worker. Also: the worker's fast mode (constructor arguments crossing as one JSON text) answers
exactly what the exact mode answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import LimitError, SourceError
from rho_notebook.service.planning import use_warm_planner
from rho_notebook.source.evaluate import WorkerChannel, forget_evaluations, talk_to_worker
from rho_notebook.source.limits import load_limits
from rho_notebook.source.warm import warm_pool
from tests.conftest import Project, star
from tests.unit.budget_sources import ENDLESS, HUGE_STRING

OK = star(
    'return workflow(name = "ok", nodes = [command(name = "a", argv = ["true"], timeout_seconds = 5, max_output_bytes = 10)])'
)

COUNTER = """
seen = []

def build(inputs):
    seen.append("one more")
    return workflow(name = "count", nodes = [
        command(name = "a", argv = ["echo", str(len(seen))], timeout_seconds = 5, max_output_bytes = 10),
    ])

WORKFLOW = define(inputs = {}, build = build)
LEAKED = "from the first source"
"""

READS_LEAKED = star(
    'return workflow(name = "leak", nodes = [command(name = "a", argv = [LEAKED], timeout_seconds = 5, max_output_bytes = 10)])'
)


@pytest.fixture
def warm() -> Iterator[None]:
    use_warm_planner()
    try:
        yield
    finally:
        use_warm_planner(False)
        forget_evaluations()


def _edit(project: Project, name: str, source: str, n: int) -> None:
    """Write ``source`` with a comment ``n`` at its end: the same graph from a changed text, so
    the warm process evaluates it again instead of reusing the evaluation it kept."""
    project.write(name, f"{source}\n# edit {n}\n")


def _idle_pid() -> int:
    pool = warm_pool()
    if pool is None:
        raise AssertionError("the warm switch is off")
    pids = pool.idle_pids()
    assert len(pids) == 1, pids
    return pids[0]


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie not yet reaped counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _wait_gone(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not _gone(pid):
        assert time.monotonic() < deadline, f"worker {pid} still runs"
        time.sleep(0.01)


def _is_warm_worker(pid: int) -> bool:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return any(arg.endswith(b"_worker.py") for arg in argv) and b"--warm" in argv


def test_the_warm_worker_serves_one_plan_after_another(project: Project, warm: None) -> None:
    project.write("wf.star", OK)
    first = project.plan("wf.star", store=False)  # each plan runs in its own event loop (asyncio.run)
    pid = _idle_pid()
    assert _is_warm_worker(pid)
    _edit(project, "wf.star", OK, 1)
    second = project.plan("wf.star")
    assert _idle_pid() == pid
    assert first.manifest.graph_digest == second.manifest.graph_digest


def test_globals_do_not_outlive_their_request(project: Project, warm: None) -> None:
    project.write("leak.star", READS_LEAKED)
    for n in range(3):
        _edit(project, "count.star", COUNTER, n)
        node = project.plan("count.star", store=False).graph.nodes[0]
        assert tuple(node.model_dump()["argv"]) == ("echo", "1")  # `seen` starts empty every time
    pid = _idle_pid()
    with pytest.raises(SourceError, match="LEAKED"):
        project.plan("leak.star", store=False)
    assert _idle_pid() == pid  # an error in the source is an answer, not a reason to replace it


def test_a_budget_overrun_replaces_the_worker(project: Project, warm: None) -> None:
    project.write("ok.star", OK)
    project.write("endless.star", ENDLESS)
    project.plan("ok.star", store=False)
    pid = _idle_pid()
    with pytest.raises(LimitError) as caught:
        project.plan("endless.star", store=False)
    assert caught.value.budget in {"evaluator_ticks", "evaluator_wall_ms"}
    _wait_gone(pid)
    assert warm_pool().idle_pids() == []  # type: ignore[union-attr]
    _edit(project, "ok.star", OK, 1)
    assert project.plan("ok.star").manifest.workflow == "ok"
    assert _idle_pid() != pid


def test_the_same_budgets_hold_on_a_warm_worker(project: Project, warm: None) -> None:
    project.write("huge.star", HUGE_STRING)
    for n in range(2):  # the second time on a worker that has served a plan already
        _edit(project, "ok.star", OK, n)
        project.plan("ok.star", store=False)
        with pytest.raises(LimitError) as caught:
            project.plan("huge.star", store=False)
        assert caught.value.budget in {"evaluator_address_space", "string_bytes"}
        assert caught.value.limit == load_limits().limit(caught.value.budget)


def test_the_cpu_limit_is_re_armed_for_every_request(project: Project, warm: None) -> None:
    """The warm worker's CPU time adds up over its requests; each gets the whole CPU budget again."""
    cpu = (load_limits().limit("evaluator_wall_ms") + 999) // 1000 + 1
    for n in range(3):
        _edit(project, "ok.star", OK, n)
        project.plan("ok.star", store=False)
        pid = _idle_pid()
        limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
        soft = int(next(line for line in limits if line.startswith("Max cpu time")).split()[3])
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        used = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
        assert cpu - 1 <= soft - used <= cpu + 1


def test_a_killed_worker_is_replaced_and_the_next_plan_succeeds(project: Project, warm: None) -> None:
    project.write("ok.star", OK)
    project.plan("ok.star", store=False)
    pid = _idle_pid()
    os.kill(pid, signal.SIGKILL)
    _wait_gone(pid)
    _edit(project, "ok.star", OK, 1)
    assert project.plan("ok.star").manifest.workflow == "ok"
    assert _idle_pid() != pid


def test_concurrent_calls_never_share_a_worker(warm: None) -> None:
    limits = load_limits().worker_limits()

    async def pid_of(chan: WorkerChannel) -> int:
        await asyncio.sleep(0.2)  # both calls hold their worker at once
        return chan.process.pid

    async def both() -> list[int]:
        return list(await asyncio.gather(*(talk_to_worker(pid_of, worker_limits=limits) for _ in range(2))))

    first, second = asyncio.run(both())
    assert first != second
    kept = _idle_pid()  # one is kept, the other stopped
    other = second if kept == first else first
    assert kept in (first, second)
    _wait_gone(other)


def test_a_cancelled_call_stops_its_warm_worker(project: Project, warm: None) -> None:
    project.write("ok.star", OK)
    project.write("endless.star", ENDLESS)
    project.plan("ok.star", store=False)
    pid = _idle_pid()
    service = project.service
    request = service.request_for(project.root / "endless.star", inputs={}, workspace=project.workspace)

    async def cancel_it() -> None:
        task = asyncio.ensure_future(service.validate(request))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_it())
    _wait_gone(pid)
    _edit(project, "ok.star", OK, 1)
    assert project.plan("ok.star", store=False).manifest.workflow == "ok"


def test_without_the_switch_every_call_starts_a_fresh_worker() -> None:
    assert warm_pool() is None
    limits = load_limits().worker_limits()

    async def pid_of(chan: WorkerChannel) -> int:
        return chan.process.pid

    first = asyncio.run(talk_to_worker(pid_of, worker_limits=limits))
    second = asyncio.run(talk_to_worker(pid_of, worker_limits=limits))
    assert first != second
    _wait_gone(first)
    _wait_gone(second)


@pytest.mark.parametrize("kept", [True, False], ids=["warm", "fresh"])
def test_a_fast_mode_failure_is_answered_by_the_exact_mode(project: Project, kept: bool) -> None:
    """json.encode refuses a None key; the worker evaluates again value by value, and the parent
    answers the loads and the inputs of the second evaluation as it did the first's."""
    project.write("lib.star", "LIMITS = {None: 1}\n")
    project.write(
        "wf.star",
        'load("//lib.star", "LIMITS")\n'
        + star(
            'return workflow(name = "w", nodes = [command(name = "a", argv = ["true"], timeout_seconds = 5, max_output_bytes = 10, resources = LIMITS)])'
        ),
    )
    use_warm_planner(kept)
    try:
        for _ in range(2):
            with pytest.raises(SourceError) as caught:
                project.plan("wf.star", store=False)
            found = caught.value.diagnostics()[0]
            assert (found.rule, found.message) == (
                "value.dict_key",
                "command(): dictionary keys must be strings, got None",
            )
            assert (found.file, found.line) == ("wf.star", 3)
    finally:
        use_warm_planner(False)
        forget_evaluations()


# -- the fast mode answers what the exact mode answers -------------------------------------------

_H = "def build(inputs):\n"
_T = "\nWORKFLOW = define(inputs = {}, build = build)\n"
_NODE = 'name = "a", argv = ["x"], timeout_seconds = 1, max_output_bytes = 1'
_CASES = {
    "plain": f"    return workflow(name = 'w', nodes = [command({_NODE}, resources = {{'z': 1, 'a': 2}})])",
    "none key": f"    return workflow(name = 'w', nodes = [command({_NODE}, resources = {{None: 1}})])",
    "int key": f"    return workflow(name = 'w', nodes = [command({_NODE}, resources = {{1: 1}})])",
    "tuple": "    return workflow(name = 'w', nodes = [command(name = 'a', argv = ('x', 'y'), timeout_seconds = 1, max_output_bytes = 1)])",
    "function": "    return workflow(name = 'w', nodes = [command(name = 'a', argv = [build], timeout_seconds = 1, max_output_bytes = 1)])",
    "struct": f"    return workflow(name = 'w', nodes = [command({_NODE}, resources = input)])",
    "aliased list": (
        "    needs, nodes = [], []\n    for i in range(3):\n"
        "        nodes.append(command(name = 'n' + str(i), argv = ['x'], needs = needs, timeout_seconds = 1, max_output_bytes = 1))\n"
        "        needs.append('n' + str(i))\n    return workflow(name = 'w', nodes = nodes)"
    ),
    "repr of values": (
        f"    n = command({_NODE}, resources = {{'z': 1, 'a': 2}})\n"
        "    w = workflow(name = 'w', nodes = [n], concurrency = {'total': 2, 'command': 1})\n"
        "    return workflow(name = 'w', nodes = [n, command(name = 'b', argv = [str(n), str(w)], timeout_seconds = 1, max_output_bytes = 1)])"
    ),
    "repr of nested values": (
        f"    a = command({_NODE}, resources = {{'z': 1, 'a': 2}})\n"
        "    b = command(name = 'b', argv = ['x'], needs = ['a'], when = condition.equals(status('a'), 'success'),\n"
        "                timeout_seconds = 1, max_output_bytes = 1,\n"
        "                output = schema.stdout_json(schema.record({'z': schema.string(), 'a': schema.integer()})))\n"
        "    p = python(name = 'p', module = '//m.py', function = 'f', args = {'z': [{'y': 1, 'b': 2}], 'a': {'q': 1, 'c': 2}},\n"
        "               timeout_seconds = 1, max_output_bytes = 1)\n"
        "    w = workflow(name = 'w', nodes = [a, b, p], concurrency = {'total': 2, 'command': 1})\n"
        "    c = command(name = 'c', argv = [str(a), str(b), str(p), str(w)], timeout_seconds = 1, max_output_bytes = 1)\n"
        "    return workflow(name = 'w', nodes = [a, b, p, c])"
    ),
    "changed node": f"    n = command({_NODE})\n    n['argv'].append('y')\n    n['x'] = 5\n    return workflow(name = 'w', nodes = [n])",
    "changed after": f"    w = workflow(name = 'w', nodes = [command({_NODE})])\n    w['nodes'][0]['x'] = {{1: 2}}\n    return w",
    "changed to None key": f"    w = workflow(name = 'w', nodes = [command({_NODE})])\n    w['nodes'][0]['x'] = {{None: 2}}\n    return w",
    "not a workflow": "    return (1, 2)",
    "schema and condition": (
        "    return workflow(name = 'w', nodes = [\n"
        "        command(name = 'a', argv = ['x'], timeout_seconds = 1, max_output_bytes = 1,\n"
        "                output = schema.stdout_json(schema.record({'b': schema.string(), 'a': schema.integer()}))),\n"
        "        command(name = 'b', argv = ['y'], needs = ['a'], when = condition.equals(status('a'), 'success'),\n"
        "                timeout_seconds = 1, max_output_bytes = 1)])"
    ),
}


class _Parent:
    """The parent's side of the worker's channel, in process: inputs are always accepted."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        self.frames.append(message)

    def send_text(self, text: str) -> None:
        self.frames.append(json.loads(text))

    def receive(self) -> dict[str, Any]:
        if self.frames[-1]["op"] == "declared":
            return {"op": "inputs", "values": {}}
        raise AssertionError(self.frames[-1])


def _answer(source: str, *, fast: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    from rho_notebook.source._starlark import serve, session

    exact = session.Session.__init__

    def only_exact(self: session.Session, *args: Any, **kwargs: Any) -> None:
        exact(self, *args, **{**kwargs, "fast": False})

    with monkeypatch.context() as patch:
        if not fast:
            patch.setattr(session.Session, "__init__", only_exact)
        parent = _Parent()
        request = {"op": "evaluate", "entry": "//wf.star", "text": source, "limits": load_limits().worker_limits()}
        serve.serve(parent, request)  # type: ignore[arg-type]
    answer = parent.frames[-1]
    answer.pop("stats", None)
    return json.dumps(answer)


@pytest.mark.parametrize("body", list(_CASES.values()), ids=list(_CASES))
def test_the_fast_mode_answers_exactly_what_the_exact_mode_answers(body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _H + body + _T
    assert _answer(source, fast=True, monkeypatch=monkeypatch) == _answer(source, fast=False, monkeypatch=monkeypatch)
