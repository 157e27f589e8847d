"""A forked Python attempt hands its result back in a memory file of the owner's (issue 31): the
attempt's folder need not exist before the fork, a server whose harness cannot write there serves
no job that asks for it, and a run keeps the same ``result.json``/``value.json`` copies as before.

Real interpreters and forks (the helpers of tests/unit/test_python_forkserver.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from rho_notebook.exec.process import ProcessResult, run_process
from rho_notebook.exec.python import read_memory_result
from rho_notebook.exec.python_forks import ForkJob, ForkServers
from rho_notebook.store.journal_reader import read_journal
from tests.conftest import Project
from tests.unit.test_python_exec import _attempt, _module, _node, _run
from tests.unit.test_python_forkserver import PROBE, Job, sha

INTERPRETER = Path(os.path.realpath(sys.executable))


async def _discard(chunk: bytes) -> None:
    pass


def test_a_fork_writes_its_result_to_the_owners_memory_file(tmp_path: Path) -> None:
    job = Job(tmp_path / "py", INTERPRETER, {"nodes/probe.py": PROBE})
    job.request("nodes.probe", "probe")
    missing = tmp_path / "attempt-not-made-yet" / "result.json"
    argv = (*job.argv[:5], str(missing))
    memory = os.memfd_create("result.json", os.MFD_CLOEXEC)
    fork_job = ForkJob(
        argv=argv[2:], modules_dir=str(job.root / "modules"), modules=job.fork_job().modules, result_fd=memory
    )
    pids: list[int] = []

    async def started(pid: int) -> None:
        pids.append(pid)

    async def go() -> ProcessResult:
        servers = ForkServers(log=tmp_path / "log")
        try:
            harness = job.root / "_rho_harness.py"
            start = servers.starter(fork_job, harness=harness, harness_sha256=sha(harness.read_bytes()))
            return await run_process(
                job.spec(tmp_path, argv=argv), stdout_sink=_discard, stderr_sink=_discard,
                cancel=asyncio.Event(), on_started=started, start=start,
            )  # fmt: skip
        finally:
            servers.close()

    try:
        result = asyncio.run(go())
        assert result.kind == "exit" and result.exit_code == 0
        raw = read_memory_result(memory, 64 * 1024)
        assert isinstance(raw, bytes)
        probe = json.loads(raw)
        assert probe["pid"] == pids[0] and probe["ppid"] != os.getpid(), "a forked child wrote it"
        assert probe["argv"][-1] == str(missing), "argv is what a cold launch gets"
        assert read_memory_result(memory, 10) == len(raw), "over the bound: its size, not its bytes"
        assert not missing.parent.exists(), "nothing was written where argv names the result file"
    finally:
        os.close(memory)
    empty = os.memfd_create("result.json", os.MFD_CLOEXEC)
    try:
        assert read_memory_result(empty, 100) is None, "nothing written: no result (the function did not return)"
    finally:
        os.close(empty)


NO_MEMORY_HARNESS = """\
import json, sys

def main(argv):
    with open(argv[3], "w") as handle:
        json.dump("from the file", handle)
    return 0
"""


def test_a_server_whose_harness_cannot_write_to_memory_serves_no_job_that_asks(tmp_path: Path) -> None:
    job = Job(tmp_path / "py", INTERPRETER, {"nodes/probe.py": PROBE})
    job.request("nodes.probe", "probe")
    harness = tmp_path / "older_harness.py"
    harness.write_text(NO_MEMORY_HARNESS)
    memory = os.memfd_create("result.json", os.MFD_CLOEXEC)
    asking = ForkJob(argv=job.argv[2:], modules_dir=str(job.root / "modules"), modules={}, result_fd=memory)

    async def go() -> tuple[bool, bool, bool]:
        servers = ForkServers(log=tmp_path / "log")
        try:
            server = await servers.server(
                job.spec(tmp_path), handles=None, harness=harness, harness_sha256=sha(harness.read_bytes())
            )
            assert server is not None and server.failure is None
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            try:
                spec = job.spec(tmp_path)
                refused = await server.launch(spec, asking, handles=None, stdout_fd=out_w, stderr_fd=err_w) is None
                plain = ForkJob(argv=job.argv[2:], modules_dir=str(job.root / "modules"), modules={})
                served = await server.launch(spec, plain, handles=None, stdout_fd=out_w, stderr_fd=err_w)
                assert served is not None
                await served.exited
                served.release()
            finally:
                for fd in (out_r, out_w, err_r, err_w):
                    os.close(fd)
            return server.memory_results, refused, served.exit_code == 0
        finally:
            servers.close()

    try:
        memory_results, refused, ran = asyncio.run(go())
    finally:
        os.close(memory)
    assert memory_results is False and refused, "the job that asks for a memory result launches cold instead"
    assert ran and json.loads((job.root / "result.json").read_text()) == "from the file"


def test_a_run_keeps_the_result_and_value_files_of_small_and_large_values(project: Project) -> None:
    module = _module(
        "//nodes/values.py",
        """
        def small():
            return {"n": 1}

        def large():
            return "x" * 10000
        """,
    )
    nodes = [_node("small", "//nodes/values.py", "small"), _node("large", "//nodes/values.py", "large")]
    state, run = _run(project, nodes, [module])
    assert {state.nodes[n].state.value for n in ("small", "large")} == {"success"}
    finished = {e["node"]: e for e in read_journal(run / "events.jsonl").events if e["kind"] == "node_finished"}
    assert finished["small"]["step_value"] == {"n": 1}, "a small value travels with node_finished"
    assert "step_value" not in finished["large"], "a large one is written durably instead"
    for name, value in (("small", {"n": 1}), ("large", "x" * 10000)):
        folder = _attempt(run, name)
        assert json.loads((folder / "result.json").read_text()) == value
        assert json.loads((folder / "value.json").read_text()) == value
        assert json.loads((folder / "request.json").read_text())["function"] == name
        assert json.loads((folder / "exit.json").read_text())["code"] == 0
