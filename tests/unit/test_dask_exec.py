"""Remote attempts on a real Dask ``LocalCluster`` (worker processes, 2 workers): planned Starlark
workflows executed by the real owner with ``executor="dask=<address>"`` (exec/dask.py on the owner,
exec/_dask_worker.py on the workers). One cluster serves the module; each test's run connects and
disconnects its own client. No mocks: workers are killed with SIGKILL and futures are cancelled
from a second client."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pytest
from distributed import Client, Event, Future, LocalCluster, Queue

from rho_notebook.errors import NeedsRecovery
from rho_notebook.exec._dask_worker import (
    RemoteAttempt,
    RemotePython,
    cancel_event_name,
    claim_queue_name,
    run_attempt,
)
from rho_notebook.model.graph import FrozenExecutable, FrozenFile, PythonModule
from rho_notebook.model.plan import Plan
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.runtime.cancel import request_cancel
from rho_notebook.runtime.owner import create_run, execute_run
from rho_notebook.source.pymodules import HARNESS_PATH
from rho_notebook.store.ids import new_id
from rho_notebook.store.layout import StoreLayout
from tests.conftest import Project, journal_of, journaled, star

BUDGET = "timeout_seconds = 120, max_output_bytes = 100000"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=2, dashboard_address=":0") as made:
        yield made


def _dask(cluster: LocalCluster) -> str:
    return f"dask={cluster.scheduler_address}"


def _plan(project: Project, body: str) -> Plan:
    project.write("wf.star", star(body))
    return project.plan("wf.star")


async def _execute(project: Project, run_id: str, executor: str, **kwargs: Any) -> RunState:
    layout = StoreLayout(home=project.home)
    return await execute_run(layout, run_id, executor=executor, **kwargs)


def _run(project: Project, plan: Plan, executor: str) -> tuple[str, RunState]:
    run_id = create_run(StoreLayout(home=project.home), plan)
    return run_id, asyncio.run(_execute(project, run_id, executor, resume=False))


def _journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    lines = journal_of(project.home, run_id).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _kinds_per_node(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {}
    for record in records:
        if "node" in record:
            kinds.setdefault(record["node"], []).append(record["kind"])
    return kinds


def _finished(records: list[dict[str, Any]], node: str) -> dict[str, Any]:
    return next(r for r in records if r["kind"] == "node_finished" and r["node"] == node)


async def _file_written(path: Path, *, timeout: float = 60.0) -> str:
    """The content of ``path`` once a remote process has written a line to it (nothing in the
    journal says so while the attempt runs: its process_started comes with the answer)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} was not written within {timeout} s")


def _scheduler_objects_of(cluster: LocalCluster, run_id: str, *, timeout: float = 10.0) -> list[str]:
    """Claim queues and cancel events of ``run_id`` still on the scheduler, once they are gone or
    ``timeout`` passed (the owner's release of its claim queue travels on its batched stream)."""

    def names(dask_scheduler: Any) -> list[str]:
        held = [*dask_scheduler.extensions["queues"].queues, *dask_scheduler.extensions["events"]._events]
        return [name for name in held if run_id in name]

    with Client(cluster.scheduler_address) as client:
        deadline = time.monotonic() + timeout
        while (left := client.run_on_scheduler(names)) and time.monotonic() < deadline:
            time.sleep(0.05)
    return list(left)


# -- the fan-out ------------------------------------------------------------------------------------


def test_a_fan_out_of_50_commands_runs_on_both_workers_with_the_journal_of_a_local_run(
    project: Project, cluster: LocalCluster
) -> None:
    nodes = ",\n    ".join(
        f'command(name = "n{i:02d}", argv = ["sh", "-c", "echo $RHO_NODE"], {BUDGET})' for i in range(50)
    )
    plan = _plan(project, f'return workflow(name = "fan", checkout = "shared", nodes = [\n    {nodes},\n])')
    local_id, local = _run(project, plan, "local")
    remote_id, remote = _run(project, plan, _dask(cluster))
    assert local.outcome == remote.outcome == "success"
    local_records, remote_records = _journal(project, local_id), _journal(project, remote_id)
    assert _kinds_per_node(remote_records) == _kinds_per_node(local_records)
    assert _kinds_per_node(remote_records)["n07"] == ["node_ready", "node_launched", "process_started", "node_finished"]
    workers = {_finished(remote_records, f"n{i:02d}")["exit"]["worker"] for i in range(50)}
    assert workers == set(cluster.scheduler_info["workers"])
    attempt = StoreLayout(home=project.home).run_dir(remote_id) / "nodes" / "n07" / "attempts" / "1"
    assert (attempt / "stdout").read_text() == "n07\n"
    assert _scheduler_objects_of(cluster, remote_id) == []  # claim queues and cancel events went with their attempts
    assert (attempt / "exit.json").exists()


# -- verification on the worker ---------------------------------------------------------------------


def test_an_executable_that_differs_on_the_worker_fails_closed(project: Project, cluster: LocalCluster) -> None:
    project.write("tool.sh", "#!/bin/sh\necho planned\n", mode=0o755)
    elsewhere = project.root.parent / "worker-copy"
    elsewhere.mkdir()
    (elsewhere / "tool.sh").write_text("#!/bin/sh\necho something else\n")
    (elsewhere / "tool.sh").chmod(0o755)
    project.home.mkdir(parents=True, exist_ok=True)
    (project.home / "settings.json").write_text(json.dumps({"dask_path_map": {str(project.root): str(elsewhere)}}))
    plan = _plan(project, f'return workflow(name = "v", nodes = [command(name = "t", argv = ["./tool.sh"], {BUDGET})])')
    run_id, state = _run(project, plan, _dask(cluster))
    assert state.nodes["t"].state is NodeState.FAILURE
    record = _finished(_journal(project, run_id), "t")
    assert record["exit"]["kind"] == "not_started"
    assert record["exit"]["reason"] == "worker_verification"
    assert record["exit"]["verification"] == "content"
    assert "content digest differs" in record["message"] and str(elsewhere) in record["message"]


def test_a_python_node_value_comes_back_typed(project: Project, cluster: LocalCluster) -> None:
    project.write(
        "nodes/stats.py",
        """
        def stats(values):
            print("counting", len(values))
            return {"mean": sum(values) // len(values), "count": len(values), "ok": True}
        """,
    )
    plan = _plan(
        project,
        f"""
        return workflow(name = "py", nodes = [
            python(name = "stats", module = "//nodes/stats.py", function = "stats", args = {{"values": [1, 2, 6]}},
                   access = "read_only",
                   output = schema.record({{"mean": schema.integer(), "count": schema.integer(), "ok": schema.bool()}}),
                   {BUDGET}),
        ])
        """,
    )
    run_id, state = _run(project, plan, _dask(cluster))
    assert state.nodes["stats"].state is NodeState.SUCCESS, state.nodes["stats"].reason
    attempt = StoreLayout(home=project.home).run_dir(run_id) / "nodes" / "stats" / "attempts" / "1"
    assert json.loads((attempt / "value.json").read_text()) == {"mean": 3, "count": 3, "ok": True}
    assert (attempt / "stdout").read_text() == "counting 3\n"
    assert json.loads((attempt / "request.json").read_text())["args"] == {"values": [1, 2, 6]}
    assert _finished(_journal(project, run_id), "stats")["exit"]["worker"] in cluster.scheduler_info["workers"]


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_python_attempts_fork_from_one_server_per_worker_and_interpreter(
    project: Project, cluster: LocalCluster
) -> None:
    project.write(
        "nodes/who.py",
        """
        import os

        def who(i):
            return {"pid": os.getpid(), "parent": os.getppid(), "group": os.getpgid(0), "i": i}
        """,
    )
    nodes = ",\n    ".join(
        f'python(name = "w{i:02d}", module = "//nodes/who.py", function = "who", args = {{"i": {i}}}, '
        f'access = "read_only", {BUDGET})'
        for i in range(12)
    )
    plan = _plan(project, f'return workflow(name = "who", nodes = [\n    {nodes},\n])')
    run_id, state = _run(project, plan, _dask(cluster))
    assert state.outcome == "success", {n: s.reason for n, s in state.nodes.items()}
    folder = StoreLayout(home=project.home).run_dir(run_id) / "nodes"
    seen = [json.loads((folder / f"w{i:02d}" / "attempts" / "1" / "value.json").read_text()) for i in range(12)]
    assert [value["i"] for value in seen] == list(range(12))
    assert all(value["group"] == value["pid"] for value in seen)  # each attempt leads its own group
    workers = _worker_pids(cluster)
    servers = {value["parent"] for value in seen}
    assert not servers & workers  # not launched by the worker itself: forked by a server
    assert {_parent_of(server) for server in servers} <= workers  # ... that the worker started
    assert len(servers) <= len(workers)  # one per worker for this interpreter, reused


def test_cancel_reaches_a_running_forked_python_attempt(project: Project, cluster: LocalCluster) -> None:
    project.write(
        "nodes/slow.py",
        """
        import os, time

        def slow():
            with open("up.txt", "w") as out:
                out.write(f"{os.getpid()}\\n")
            time.sleep(60)
        """,
    )
    plan = _plan(
        project,
        f'return workflow(name = "c", nodes = [python(name = "slow", module = "//nodes/slow.py", function = "slow", {BUDGET})])',
    )
    run_id = create_run(StoreLayout(home=project.home), plan)

    async def scenario() -> RunState:
        run = asyncio.ensure_future(_execute(project, run_id, _dask(cluster), resume=False))
        await _file_written(project.root / "up.txt")
        await asyncio.to_thread(request_cancel, StoreLayout(home=project.home), run_id)
        return await run

    state = asyncio.run(scenario())
    assert state.nodes["slow"].state is NodeState.CANCELLATION
    assert _finished(_journal(project, run_id), "slow")["exit"]["kind"] == "cancelled"
    pid = int((project.root / "up.txt").read_text())
    with pytest.raises(ProcessLookupError):  # its group was stopped and reaped before the answer
        os.kill(pid, 0)


# -- placement and resources ------------------------------------------------------------------------


def test_resources_route_to_a_worker_that_has_them_and_local_nodes_stay_local(
    project: Project, cluster: LocalCluster
) -> None:
    gpu = subprocess.Popen(
        [str(Path(sys.executable).parent / "dask"), "worker", cluster.scheduler_address,
         "--resources", "GPU=1", "--nthreads", "1", "--name", "gpu", "--no-dashboard"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with Client(cluster.scheduler_address) as client:
            client.wait_for_workers(3, timeout=60)
            gpu_address = next(
                address for address, info in client.scheduler_info()["workers"].items() if info["name"] == "gpu"
            )
        plan = _plan(
            project,
            f"""
            return workflow(name = "r", nodes = [
                command(name = "cuda", argv = ["true"], resources = {{"GPU": 1}}, {BUDGET}),
                command(name = "here", argv = ["true"], placement = "local", {BUDGET}),
            ])
            """,
        )
        run_id, state = _run(project, plan, _dask(cluster))
    finally:
        gpu.send_signal(signal.SIGTERM)
        gpu.wait(timeout=30)
    assert state.outcome == "success"
    records = _journal(project, run_id)
    assert _finished(records, "cuda")["exit"]["worker"] == gpu_address
    assert "worker" not in _finished(records, "here")["exit"]


# -- cancel and lost answers ------------------------------------------------------------------------


def test_cancel_reaches_a_running_remote_attempt(project: Project, cluster: LocalCluster) -> None:
    plan = _plan(
        project,
        f'return workflow(name = "c", nodes = [command(name = "slow", argv = ["sh", "-c", "echo up > up.txt; exec sleep 60"], {BUDGET})])',
    )
    run_id = create_run(StoreLayout(home=project.home), plan)

    async def scenario() -> tuple[RunState, str]:
        run = asyncio.ensure_future(_execute(project, run_id, _dask(cluster), resume=False))
        await _file_written(project.root / "up.txt")
        answer = await asyncio.to_thread(request_cancel, StoreLayout(home=project.home), run_id)
        return await run, answer.cancellation_state

    state, acknowledged = asyncio.run(scenario())
    assert acknowledged == "acknowledged"
    assert state.outcome == "cancellation"
    assert state.nodes["slow"].state is NodeState.CANCELLATION
    record = _finished(_journal(project, run_id), "slow")
    assert record["exit"]["kind"] == "cancelled" and record["exit"]["worker"]


def test_a_lost_future_without_a_dead_worker_makes_the_attempt_uncertain(
    project: Project, cluster: LocalCluster
) -> None:
    plan = _plan(
        project,
        f'return workflow(name = "l", nodes = [command(name = "slow", argv = ["sh", "-c", "echo up > up.txt; exec sleep 60"], {BUDGET})])',
    )
    run_id = create_run(StoreLayout(home=project.home), plan)

    async def scenario() -> RunState:
        run = asyncio.ensure_future(_execute(project, run_id, _dask(cluster), resume=False))
        await journaled(project.home, run_id, "node_launched", node="slow")
        await _file_written(project.root / "up.txt")

        def cancel_from_another_client() -> None:
            with Client(cluster.scheduler_address) as other:
                keys = other.run_on_scheduler(lambda dask_scheduler: [str(k) for k in dask_scheduler.tasks])
                ours = [k for k in keys if k.startswith(f"rho-attempt-{run_id}.slow.1-")]
                assert len(ours) == 1, keys
                other.cancel([Future(ours[0], client=other)], force=True)

        await asyncio.to_thread(cancel_from_another_client)
        return await run

    state = asyncio.run(scenario())
    assert state.lifecycle is Lifecycle.NEEDS_RECOVERY
    current = state.nodes["slow"].current
    assert current is not None and current.uncertain and current.state is None
    kinds = _kinds_per_node(_journal(project, run_id))["slow"]
    assert kinds == ["node_ready", "node_launched", "attempt_uncertain"]


def _worker_pids(cluster: LocalCluster) -> set[int]:
    with Client(cluster.scheduler_address) as client:
        return set(client.run(os.getpid).values())


def test_a_killed_worker_gives_one_launch_an_uncertain_attempt_and_recovery(
    project: Project, cluster: LocalCluster
) -> None:
    script = (
        'echo "$PPID" >> side.txt; '
        'if [ "$(wc -l < side.txt)" -lt 2 ]; then exec sleep 120; fi'
    )  # fmt: skip
    plan = _plan(
        project,
        f'return workflow(name = "k", nodes = [command(name = "once", argv = ["sh", "-c", {json.dumps(script)}], {BUDGET})])',
    )
    run_id = create_run(StoreLayout(home=project.home), plan)
    side = project.root / "side.txt"

    async def scenario() -> RunState:
        run = asyncio.ensure_future(_execute(project, run_id, _dask(cluster), resume=False))
        launcher = int((await _file_written(side)).split()[0])
        assert launcher in _worker_pids(cluster)  # the worker process itself launched it
        os.kill(launcher, signal.SIGKILL)
        return await run

    state = asyncio.run(scenario())
    assert state.lifecycle is Lifecycle.NEEDS_RECOVERY
    assert state.nodes["once"].current is not None and state.nodes["once"].current.uncertain
    assert len(side.read_text().splitlines()) == 1  # Dask ran the task again: it found the claim taken
    records = _journal(project, run_id)
    uncertain = next(r for r in records if r["kind"] == "attempt_uncertain")
    assert "claim taken" in uncertain["message"] or "KilledWorker" in uncertain["message"]
    with pytest.raises(NeedsRecovery):
        asyncio.run(_execute(project, run_id, _dask(cluster), resume=True))
    state = asyncio.run(_execute(project, run_id, _dask(cluster), resume=True, recover_uncertain=True))
    assert state.outcome == "success"
    assert state.nodes["once"].attempt == 2
    assert len(side.read_text().splitlines()) == 2
    assert any(r["kind"] == "orphan_stopped" for r in _journal(project, run_id))


# -- the worker side, called directly on the cluster ------------------------------------------------


def _attempt(project: Project, **changes: Any) -> RemoteAttempt:
    """A RemoteAttempt of ``true`` in the project's workspace, its token put into the claim queue."""
    true = os.path.realpath(shutil.which("true") or "/bin/true")
    digest = "sha256:" + hashlib.sha256(Path(true).read_bytes()).hexdigest()
    facts: dict[str, Any] = {
        "attempt_id": f"test.{new_id()}.1",
        "token": new_id(),
        "executable": FrozenExecutable(file=FrozenFile(path=true, in_workspace=False, sha256=digest)),
        "argv": ("true",),
        "workspace": str(project.root),
        "cwd": "//",
        "env": {"RHO_RUN_ID": "test", "RHO_NODE": "t"},
        "timeout_seconds": 60.0,
        "max_output_bytes": 1000,
        "kill_grace_seconds": 1.0,
    }
    facts.update(changes)
    return RemoteAttempt(**facts)


def _claimable(client: Client, attempt: RemoteAttempt) -> None:
    Queue(claim_queue_name(attempt.attempt_id), client=client).put(attempt.token)


def test_a_second_execution_of_an_attempt_finds_the_claim_taken(project: Project, cluster: LocalCluster) -> None:
    side = project.root / "side.txt"
    shell = os.path.realpath(shutil.which("sh") or "/bin/sh")
    attempt = _attempt(
        project,
        executable=FrozenExecutable(
            file=FrozenFile(
                path=shell, in_workspace=False, sha256="sha256:" + hashlib.sha256(Path(shell).read_bytes()).hexdigest()
            )
        ),
        argv=("sh", "-c", "echo launched >> side.txt"),
    )
    with Client(cluster.scheduler_address) as client:
        _claimable(client, attempt)
        first = client.submit(run_attempt, attempt, pure=False, retries=0).result()
        second = client.submit(run_attempt, attempt, pure=False, retries=0).result()
    assert first.claimed and first.process is not None and first.process["exit_code"] == 0
    assert not second.claimed and second.process is None
    assert side.read_text() == "launched\n"


def test_an_attempt_cancelled_before_its_task_runs_claims_and_launches_nothing(
    project: Project, cluster: LocalCluster
) -> None:
    side = project.root / "side.txt"
    shell = os.path.realpath(shutil.which("sh") or "/bin/sh")
    attempt = _attempt(
        project,
        executable=FrozenExecutable(
            file=FrozenFile(
                path=shell, in_workspace=False, sha256="sha256:" + hashlib.sha256(Path(shell).read_bytes()).hexdigest()
            )
        ),
        argv=("sh", "-c", "echo launched >> side.txt"),
    )
    with Client(cluster.scheduler_address) as client:
        _claimable(client, attempt)
        cancel = Event(cancel_event_name(attempt.attempt_id), client=client)
        cancel.set()  # as the owner does when the run is cancelled before the worker claimed
        try:
            outcome = client.submit(run_attempt, attempt, pure=False, retries=0).result()
        finally:
            cancel.clear()
    assert outcome.claimed and outcome.process is not None
    assert outcome.process["kind"] == "cancelled" and outcome.process["pid"] is None
    assert not side.exists()


def test_python_sources_are_checked_by_digest_on_the_worker(project: Project, cluster: LocalCluster) -> None:
    module = PythonModule(
        label="//m.py", name="m", sha256="sha256:" + hashlib.sha256(b"x = 1\n").hexdigest(), text="x = 2\n"
    )
    harness = HARNESS_PATH.read_text()
    python = RemotePython(
        modules=(module,),
        harness_text=harness,
        harness_sha256="sha256:" + hashlib.sha256(harness.encode()).hexdigest(),
        request={"module": "m", "function": "f", "args": {}, "sys_path": [], "site_dirs": []},
        distributions=(),
    )
    attempt = _attempt(project, argv=(), python=python)
    with Client(cluster.scheduler_address) as client:
        _claimable(client, attempt)
        outcome = client.submit(run_attempt, attempt, pure=False, retries=0).result()
    assert outcome.claimed and outcome.process is None
    assert outcome.verification == "content"
    assert "//m.py does not match its frozen digest" in outcome.failure


def test_a_python_environment_that_differs_on_the_worker_fails_closed(project: Project, cluster: LocalCluster) -> None:
    project.write("nodes/calc.py", "def calc():\n    return 1\n")
    plan = _plan(
        project,
        f'return workflow(name = "e", nodes = [python(name = "calc", module = "//nodes/calc.py", function = "calc", {BUDGET})])',
    )
    runtime = plan.graph.python
    assert runtime is not None and runtime.site_dirs
    empty = project.root.parent / "empty-site"
    empty.mkdir()
    project.home.mkdir(parents=True, exist_ok=True)
    (project.home / "settings.json").write_text(json.dumps({"dask_path_map": {runtime.site_dirs[0]: str(empty)}}))
    run_id, state = _run(project, plan, _dask(cluster))
    assert state.nodes["calc"].state is NodeState.FAILURE
    record = _finished(_journal(project, run_id), "calc")
    assert record["exit"]["reason"] == "worker_verification" and record["exit"]["verification"] == "environment"
    assert "installed distributions" in record["message"]


def test_without_an_address_the_run_starts_a_local_cluster_and_closes_it(
    project: Project, cluster: LocalCluster
) -> None:
    # eight nodes at once on fresh workers: their first claims race each worker client coming up
    nodes = ", ".join(f'command(name = "t{i}", argv = ["true"], {BUDGET})' for i in range(8))
    plan = _plan(project, f'return workflow(name = "o", checkout = "shared", nodes = [{nodes}])')
    run_id, state = _run(project, plan, "dask")
    assert state.outcome == "success", {n: s.reason for n, s in state.nodes.items()}
    worker = _finished(_journal(project, run_id), "t0")["exit"]["worker"]
    assert worker not in cluster.scheduler_info["workers"]  # not the module's cluster: its own
    host, port = worker.removeprefix("tcp://").rsplit(":", 1)
    with pytest.raises(OSError):  # the run closed its cluster: nothing listens there any more
        socket.create_connection((host, int(port)), timeout=5).close()


def test_an_unreachable_scheduler_fails_the_node_before_anything_is_submitted(project: Project) -> None:
    plan = _plan(project, f'return workflow(name = "u", nodes = [command(name = "t", argv = ["true"], {BUDGET})])')
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        run_id, state = _run(project, plan, "dask=tcp://127.0.0.1:9")
    assert state.nodes["t"].state is NodeState.FAILURE
    record = _finished(_journal(project, run_id), "t")
    assert record["exit"]["kind"] == "not_started"
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in record["message"]
