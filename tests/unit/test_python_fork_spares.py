"""The fork server offers spare children ahead of requests, and an attempt starts in one without a
round trip through the server (issue 31): an attempt starts while the server cannot run at all,
a spare that died unused is replaced, and closing the server leaves no spare behind.

Real interpreters, forks and signals (the helpers of tests/unit/test_python_forkserver.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from rho_notebook.exec.process import ProcessResult, run_process
from rho_notebook.exec.python_forks import ForkServer, ForkServers
from tests.processes import alive, wait_gone
from tests.unit.test_python_forkserver import PROBE, Job, sha

INTERPRETER = Path(os.path.realpath(sys.executable))


async def _discard(chunk: bytes) -> None:
    pass


async def _offered(server: ForkServer, seconds: float = 30.0) -> list[int]:
    """The pids of the spares ``server`` offered, once it offered one."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not server._spares:  # noqa: SLF001 - what the server offered is what this test is about
        assert asyncio.get_running_loop().time() < deadline, "no spare was offered"
        await asyncio.sleep(0.01)
    return [spare.pid for spare in server._spares]  # noqa: SLF001


def _job(tmp_path: Path) -> Job:
    job = Job(tmp_path / "py", INTERPRETER, {"nodes/probe.py": PROBE})
    job.request("nodes.probe", "probe")
    return job


async def _server(servers: ForkServers, job: Job, cwd: Path) -> ForkServer:
    harness = job.root / "_rho_harness.py"
    server = await servers.server(
        job.spec(cwd), handles=None, harness=harness, harness_sha256=sha(harness.read_bytes())
    )
    assert server is not None
    return server


async def _run(servers: ForkServers, job: Job, cwd: Path, pids: list[int]) -> ProcessResult:
    async def started(pid: int) -> None:
        pids.append(pid)

    harness = job.root / "_rho_harness.py"
    start = servers.starter(job.fork_job(), harness=harness, harness_sha256=sha(harness.read_bytes()))
    return await run_process(
        job.spec(cwd), stdout_sink=_discard, stderr_sink=_discard, cancel=asyncio.Event(), on_started=started,
        start=start,
    )  # fmt: skip


def test_an_attempt_starts_in_an_offered_spare_while_the_server_is_stopped(tmp_path: Path) -> None:
    job = _job(tmp_path)

    async def go() -> tuple[list[int], list[int], ProcessResult, int]:
        servers = ForkServers(log=tmp_path / "log")
        try:
            server = await _server(servers, job, tmp_path)
            offered = await _offered(server)
            os.kill(server.pid, signal.SIGSTOP)  # the server can neither answer nor fork now
            try:
                pids: list[int] = []
                running = asyncio.ensure_future(_run(servers, job, tmp_path, pids))
                for _ in range(3000):  # started without the server: the spare has the request
                    if pids and (job.root / "result.json").exists():
                        break
                    await asyncio.sleep(0.01)
                assert pids, "the attempt did not start while the server was stopped"
            finally:
                os.kill(server.pid, signal.SIGCONT)  # it reaps the child and reports its exit
            result = await asyncio.wait_for(running, 30)
            return offered, pids, result, server.pid
        finally:
            servers.close()

    offered, pids, result, server_pid = asyncio.run(go())
    assert result.kind == "exit" and result.exit_code == 0
    assert pids == offered[:1], "the attempt ran in the spare the server had offered"
    assert Path(job.root / "result.json").read_text().count(f'"ppid": {server_pid}') == 1, "forked by the server"


def test_a_spare_that_died_unused_is_replaced_and_close_leaves_none(tmp_path: Path) -> None:
    job = _job(tmp_path)

    async def go() -> tuple[int, list[int], ProcessResult, list[int]]:
        servers = ForkServers(log=tmp_path / "log")
        try:
            server = await _server(servers, job, tmp_path)
            (first,) = await _offered(server)
            os.kill(first, signal.SIGKILL)
            assert wait_gone(first)
            pids: list[int] = []
            result = await asyncio.wait_for(_run(servers, job, tmp_path, pids), 30)
            spares = await _offered(server)  # the next one, offered after the attempt took its spare
            return first, pids, result, spares
        finally:
            servers.close()

    first, pids, result, spares = asyncio.run(go())
    assert result.kind == "exit" and result.exit_code == 0
    assert pids and pids[0] != first
    assert all(wait_gone(pid) for pid in spares), "closing the server ends its unused spares"
    assert not any(alive(pid) for pid in (first, *pids))


def test_a_launch_cancelled_while_waiting_for_a_spare_leaves_it_to_the_next(tmp_path: Path) -> None:
    job = _job(tmp_path)

    async def go() -> tuple[ProcessResult, ProcessResult, list[int]]:
        servers = ForkServers(log=tmp_path / "log")
        try:
            server = await _server(servers, job, tmp_path)
            await _offered(server)
            os.kill(server.pid, signal.SIGSTOP)  # it can fork no next spare (nor report an exit) now
            try:
                taking: list[int] = []
                took = asyncio.ensure_future(_run(servers, job, tmp_path, taking))  # takes the offered spare
                while not taking:
                    await asyncio.sleep(0.01)
                waiting = asyncio.ensure_future(_run(servers, job, tmp_path, []))
                await asyncio.sleep(0.3)
                assert not waiting.done() and not server._spares, "it waits for a spare"  # noqa: SLF001
                waiting.cancel()
                await asyncio.gather(waiting, return_exceptions=True)
            finally:
                os.kill(server.pid, signal.SIGCONT)
            first = await asyncio.wait_for(took, 30)
            pids: list[int] = []
            second = await asyncio.wait_for(_run(servers, job, tmp_path, pids), 30)
            return first, second, pids
        finally:
            servers.close()

    first, second, pids = asyncio.run(go())
    assert first.kind == second.kind == "exit" and first.exit_code == second.exit_code == 0
    assert len(pids) == 1 and wait_gone(pids[0])


WAIT_FOR_GO = """\
import os, time

def wait(go):
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.path.exists(go)
"""


def _server_children(pid: int) -> set[int]:
    """The live children of ``pid`` (each /proc/N/stat's parent field; the process name may hold spaces)."""
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            children.add(int(stat.parent.name))
    return children


def test_the_next_spare_is_forked_when_the_running_attempt_ends_not_while_it_starts(tmp_path: Path) -> None:
    """A launch asks for the next spare through the server's demand counter, which does not wake
    it: the fork (and the new spare's first steps) happens when the attempt's exit wakes the
    server, not while the attempt starts beside it on a machine with few processors."""
    go = tmp_path / "go"
    job = Job(tmp_path / "py", INTERPRETER, {"nodes/wait.py": WAIT_FOR_GO})
    job.request("nodes.wait", "wait", go=str(go))

    async def main() -> tuple[list[int], set[int], int, ProcessResult, list[int]]:
        servers = ForkServers(log=tmp_path / "log")
        try:
            server = await _server(servers, job, tmp_path)
            await _offered(server)
            await asyncio.sleep(0.2)  # the server has read its (empty) demand and sleeps
            pids: list[int] = []
            running = asyncio.ensure_future(_run(servers, job, tmp_path, pids))
            while not pids:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.5)  # ample time to fork and offer a spare, had the launch woken it
            offered_meanwhile = len(server._spares)  # noqa: SLF001 - what the server offered is the point
            children = _server_children(server.pid)
            go.touch()
            result = await asyncio.wait_for(running, 30)
            after = await _offered(server)
            return pids, children, offered_meanwhile, result, after
        finally:
            servers.close()

    pids, children, offered_meanwhile, result, after = asyncio.run(main())
    assert result.kind == "exit" and result.exit_code == 0 and job.result() is True
    assert offered_meanwhile == 0 and children == set(pids), "no spare was forked while the attempt ran"
    assert after and after[0] not in pids, "the next spare came once the attempt ended"
