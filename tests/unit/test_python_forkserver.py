"""Python attempts forked from a run's fork server (rho_notebook.exec.python_forks and
rho_notebook/source/_py_forkserver.py): what a forked attempt sees, its cancel and timeout, the
digest check of frozen modules, the fallbacks to a cold launch, verification failing closed, and
the server's lifetime (the run's end, its owner's death).

Real interpreters, real forks and signals. Attempts are started with
:func:`~rho_notebook.exec.process.run_process` and a :class:`ForkServers` starter, as the Python
executor does, or through a whole run (``execute_run``) for the executor's own wiring.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import VerificationError
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.exec.process import ProcessResult, ProcessSpec, run_process
from rho_notebook.exec.python_forks import ForkJob, ForkServers
from rho_notebook.model.graph import FrozenExecutable, FrozenFile
from rho_notebook.source.pymodules import HARNESS_PATH
from tests.conftest import Project
from tests.processes import alive, wait_gone
from tests.unit.test_python_exec import _attempt, _interpreter_path, _module, _node, _run

PATH_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "RHO_NODE": "n"}


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Job:
    """A run's ``python/`` folder made by hand: frozen modules, the harness copy, one request."""

    root: Path
    interpreter: Path
    modules: dict[str, str] = field(default_factory=dict)
    """relpath -> source"""

    def __post_init__(self) -> None:
        (self.root / "modules").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HARNESS_PATH, self.root / "_rho_harness.py")
        for relative, text in self.modules.items():
            path = self.root / "modules" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    def request(self, module: str, function: str, **args: Any) -> None:
        sys_path, site_dirs = _interpreter_path()
        request = {"module": module, "function": function, "args": args, "sys_path": sys_path, "site_dirs": site_dirs}
        (self.root / "request.json").write_text(json.dumps(request))

    @property
    def argv(self) -> tuple[str, ...]:
        return (
            str(self.interpreter), "-I", str(self.root / "_rho_harness.py"), str(self.root / "modules"),
            str(self.root / "request.json"), str(self.root / "result.json"),
        )  # fmt: skip

    def spec(self, cwd: Path, **overrides: Any) -> ProcessSpec:
        fields: dict[str, Any] = {
            "argv": self.argv,
            "executable": FrozenExecutable(
                file=FrozenFile(
                    path=str(self.interpreter), in_workspace=False, sha256=sha(self.interpreter.read_bytes())
                )
            ),
            "cwd": cwd,
            "env": dict(PATH_ENV),
            "timeout_seconds": 30.0,
            "max_output_bytes": 64 * 1024,
            "workspace": cwd,
            "kill_grace_seconds": 1.0,
        }
        fields.update(overrides)
        return ProcessSpec(**fields)

    def fork_job(self) -> ForkJob:
        digests = {relative: sha(text.encode()) for relative, text in self.modules.items()}
        return ForkJob(argv=self.argv[2:], modules_dir=str(self.root / "modules"), modules=digests)

    def result(self) -> Any:
        return json.loads((self.root / "result.json").read_text())


@dataclass
class Outcome:
    result: ProcessResult
    stdout: bytes
    stderr: bytes
    pid: int | None


async def attempt(
    spec: ProcessSpec,
    *,
    servers: ForkServers | None,
    job: Job,
    handles: VerifiedHandles | None = None,
    cancel: asyncio.Event | None = None,
    harness: Path | None = None,
) -> Outcome:
    out: list[bytes] = []
    err: list[bytes] = []
    pid: list[int] = []

    async def to_out(chunk: bytes) -> None:
        out.append(chunk)

    async def to_err(chunk: bytes) -> None:
        err.append(chunk)

    async def started(number: int) -> None:
        pid.append(number)

    start = None
    if servers is not None:
        harness_copy = harness or job.root / "_rho_harness.py"
        start = servers.starter(job.fork_job(), harness=harness_copy, harness_sha256=sha(HARNESS_PATH.read_bytes()))
    result = await run_process(
        spec,
        stdout_sink=to_out,
        stderr_sink=to_err,
        cancel=cancel or asyncio.Event(),
        on_started=started,
        handles=handles,
        start=start,
    )
    return Outcome(result, b"".join(out), b"".join(err), pid[0] if pid else None)


@pytest.fixture
def interpreter() -> Path:
    return Path(os.path.realpath(sys.executable))


PROBE = """\
import os, sys

def probe():
    return {
        "ppid": os.getppid(), "sid": os.getsid(0), "pgid": os.getpgid(0), "pid": os.getpid(),
        "cwd": os.getcwd(), "env": dict(os.environ), "argv": sys.argv, "isolated": sys.flags.isolated,
        "path0": sys.path[0], "executable": sys.executable,
        "stdin": os.read(0, 10).decode(), "encoding": sys.stdout.encoding,
    }
"""


def test_a_forked_attempt_sees_what_a_cold_launch_sees(tmp_path: Path, interpreter: Path) -> None:
    job = Job(tmp_path / "py", interpreter, {"nodes/probe.py": PROBE})
    job.request("nodes.probe", "probe")
    cwd = tmp_path / "work"
    cwd.mkdir()

    async def both() -> tuple[Any, Any, int]:
        servers = ForkServers(log=tmp_path / "log")
        try:
            forked = await attempt(job.spec(cwd), servers=servers, job=job)
            assert forked.result.kind == "exit" and forked.result.exit_code == 0, forked.stderr
            warm = job.result()
            server = await servers.server(
                job.spec(cwd),
                handles=None,
                harness=job.root / "_rho_harness.py",
                harness_sha256=sha(HARNESS_PATH.read_bytes()),
            )
            assert server is not None
            cold = await attempt(job.spec(cwd), servers=None, job=job)
            assert cold.result.kind == "exit" and cold.result.exit_code == 0, cold.stderr
            assert forked.pid == warm["pid"] and forked.result.pid == warm["pid"]
            return warm, job.result(), server.pid
        finally:
            servers.close()

    warm, cold, server_pid = asyncio.run(both())
    assert warm["ppid"] == server_pid != os.getpid()
    assert cold["ppid"] == os.getpid()
    assert warm["sid"] == warm["pgid"] == warm["pid"], "the attempt leads its own session and group"
    for key in ("cwd", "env", "argv", "isolated", "path0", "executable", "stdin", "encoding"):
        assert warm[key] == cold[key], key
    assert warm["env"] == PATH_ENV and warm["cwd"] == str(cwd)
    assert wait_gone(server_pid), "close() stops the server"


def test_each_attempt_of_one_server_sees_exactly_its_own_environment(tmp_path: Path, interpreter: Path) -> None:
    """The server's start environment is the first attempt's; a later attempt that drops a variable,
    adds one and changes one sees exactly its own (the server's key only covers the locale)."""
    job = Job(tmp_path / "py", interpreter, {"nodes/probe.py": PROBE})
    job.request("nodes.probe", "probe")
    cwd = tmp_path / "work"
    cwd.mkdir()
    first = {**PATH_ENV, "DROPPED": "1", "CHANGED": "before"}
    second = {**PATH_ENV, "RHO_NODE": "m", "ADDED": "2", "CHANGED": "after"}

    async def two() -> tuple[Any, Any]:
        servers = ForkServers(log=tmp_path / "log")
        try:
            seen = []
            for env in (first, second):
                outcome = await attempt(job.spec(cwd, env=env), servers=servers, job=job)
                assert outcome.result.kind == "exit" and outcome.result.exit_code == 0, outcome.stderr
                seen.append(job.result())
            return seen[0], seen[1]
        finally:
            servers.close()

    one, other = asyncio.run(two())
    assert one["ppid"] == other["ppid"] != os.getpid(), "both were forked from one server"
    assert one["env"] == first
    assert other["env"] == second


def test_exit_status_atexit_threads_and_output_end_as_in_a_cold_interpreter(tmp_path: Path, interpreter: Path) -> None:
    module = textwrap.dedent(
        """
        import atexit, sys, threading, time

        def leave(code):
            atexit.register(lambda: print("atexit ran", flush=False))
            worker = threading.Thread(target=lambda: (time.sleep(0.2), print("thread done")))
            worker.start()
            print("unflushed", end="")
            sys.exit(code)
        """
    )
    job = Job(tmp_path / "py", interpreter, {"nodes/leave.py": module})
    job.request("nodes.leave", "leave", code=5)

    async def both() -> tuple[Outcome, Outcome]:
        servers = ForkServers()
        try:
            return await attempt(job.spec(tmp_path), servers=servers, job=job), await attempt(
                job.spec(tmp_path), servers=None, job=job
            )
        finally:
            servers.close()

    forked, cold = asyncio.run(both())
    assert forked.result.exit_code == cold.result.exit_code == 5
    assert forked.stdout == cold.stdout
    assert b"unflushed" in forked.stdout and b"thread done" in forked.stdout and b"atexit ran" in forked.stdout


def test_a_changed_module_is_not_imported(tmp_path: Path, interpreter: Path) -> None:
    """The digest of every frozen module is checked on the bytes that are then executed."""
    marker = tmp_path / "tampered-code-ran"
    job = Job(
        tmp_path / "py",
        interpreter,
        {
            "nodes/main.py": "from nodes.helper import value\n\ndef f():\n    return value()\n",
            "nodes/helper.py": "def value():\n    return 1\n",
        },
    )
    job.request("nodes.main", "f")
    fork_job = job.fork_job()
    (job.root / "modules" / "nodes" / "helper.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n\ndef value():\n    return 2\n"
    )
    (job.root / "modules" / "nodes" / "extra.py").write_text(f"open({str(marker)!r}, 'w').close()\n")

    async def go(module: str) -> Outcome:
        job.request(module, "f")
        servers = ForkServers()
        try:
            start = servers.starter(
                fork_job, harness=job.root / "_rho_harness.py", harness_sha256=sha(HARNESS_PATH.read_bytes())
            )

            async def drop(chunk: bytes) -> None:
                errors.append(chunk)

            errors: list[bytes] = []
            result = await run_process(
                job.spec(tmp_path), stdout_sink=drop, stderr_sink=drop, cancel=asyncio.Event(), start=start
            )
            return Outcome(result, b"", b"".join(errors), result.pid)
        finally:
            servers.close()

    changed = asyncio.run(go("nodes.main"))
    assert changed.result.exit_code == 1
    last = changed.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("ImportError: //nodes/helper.py (at ") and "does not match the plan" in last
    unfrozen = asyncio.run(go("nodes.extra"))
    assert unfrozen.result.exit_code == 1
    assert "is not a module the plan froze" in unfrozen.stderr.decode()
    assert not marker.exists()
    assert not (job.root / "result.json").exists()


def test_a_changed_module_fails_the_node_in_a_run(project: Project) -> None:
    """Through the executor: node ``a`` rewrites node ``b``'s module in the run folder; ``b`` fails."""
    writer = _module(
        "//nodes/a.py",
        """
        import os

        def f():
            with open(os.path.join(os.path.dirname(__file__), "b.py"), "a") as handle:
                handle.write("\\nX = 1\\n")
            return 1
        """,
    )
    victim = _module("//nodes/b.py", "def g(x):\n    return x + 1\n")
    from rho_notebook.model.reference import OutputRef

    nodes = [_node("a", "//nodes/a.py", "f"), _node("b", "//nodes/b.py", "g", x=OutputRef(node="a", path=()))]
    state, run = _run(project, nodes, [writer, victim])
    assert state.nodes["a"].state.value == "success", state.nodes["a"].reason
    b = state.nodes["b"]
    assert b.state.value == "failure"
    assert b.reason.startswith("exited with code 1: ImportError: //nodes/b.py (at ")
    assert "does not match the plan" in b.reason
    assert not (_attempt(run, "b") / "value.json").exists()


def test_nodes_of_a_run_share_one_server_that_ends_with_the_run(project: Project) -> None:
    probe = _module(
        "//nodes/probe.py", "import os\n\ndef f(i):\n    return [os.getppid(), os.getsid(0), os.getpid()]\n"
    )
    nodes = [_node(f"n{i}", "//nodes/probe.py", "f", i=i) for i in range(3)]
    state, run = _run(project, nodes, [probe])
    values = [json.loads((_attempt(run, f"n{i}") / "value.json").read_text()) for i in range(3)]
    parents = {ppid for ppid, _, _ in values}
    assert len(parents) == 1 and os.getpid() not in parents, "forked from one server, not started by the owner"
    assert all(sid == pid for _, sid, pid in values)
    assert not alive(parents.pop()), "the server stopped when the run ended"
    log = run / "python" / "forkserver.log"
    assert log.stat().st_mode & 0o777 == 0o600
    assert "Traceback" not in log.read_text(), "the server ends quietly when the run closes its socket"


def test_cancel_stops_the_whole_forked_group(tmp_path: Path, interpreter: Path) -> None:
    module = textwrap.dedent(
        """
        import subprocess, sys, time

        def f():
            child = subprocess.Popen(["sleep", "60"])
            print(child.pid, flush=True)
            time.sleep(60)
        """
    )
    job = Job(tmp_path / "py", interpreter, {"nodes/slow.py": module})
    job.request("nodes.slow", "f")

    async def go() -> tuple[Outcome, int]:
        servers = ForkServers()
        cancel = asyncio.Event()
        out: list[bytes] = []

        async def to_out(chunk: bytes) -> None:
            out.append(chunk)
            cancel.set()

        async def drop(chunk: bytes) -> None:
            pass

        start = servers.starter(
            job.fork_job(), harness=job.root / "_rho_harness.py", harness_sha256=sha(HARNESS_PATH.read_bytes())
        )
        try:
            result = await run_process(
                job.spec(tmp_path, kill_grace_seconds=0.5),
                stdout_sink=to_out,
                stderr_sink=drop,
                cancel=cancel,
                start=start,
            )
        finally:
            servers.close()
        return Outcome(result, b"".join(out), b"", result.pid), int(b"".join(out).split()[0])

    outcome, grandchild = asyncio.run(go())
    assert outcome.result.kind == "cancelled"
    assert outcome.pid is not None and not alive(outcome.pid)
    assert not alive(grandchild), "the sleep the node started was in its group and was stopped"


def test_timeout_stops_a_forked_attempt(tmp_path: Path, interpreter: Path) -> None:
    job = Job(tmp_path / "py", interpreter, {"nodes/slow.py": "import time\n\ndef f():\n    time.sleep(60)\n"})
    job.request("nodes.slow", "f")

    async def go() -> Outcome:
        servers = ForkServers()
        try:
            return await attempt(job.spec(tmp_path, timeout_seconds=0.5), servers=servers, job=job)
        finally:
            servers.close()

    outcome = asyncio.run(go())
    assert outcome.result.kind == "timeout"
    assert outcome.pid is not None and not alive(outcome.pid)


def test_a_server_that_cannot_start_leaves_attempts_to_a_cold_launch(tmp_path: Path, interpreter: Path) -> None:
    job = Job(tmp_path / "py", interpreter, {"nodes/probe.py": PROBE})
    job.request("nodes.probe", "probe")
    wrong = tmp_path / "other_harness.py"
    wrong.write_text("# not the plan's harness\n")
    log = tmp_path / "forkserver.log"

    async def go() -> Outcome:
        servers = ForkServers(log=log)
        try:
            return await attempt(job.spec(tmp_path), servers=servers, job=job, harness=wrong)
        finally:
            servers.close()

    outcome = asyncio.run(go())
    assert outcome.result.kind == "exit" and outcome.result.exit_code == 0
    assert job.result()["ppid"] == os.getpid(), "launched cold by this process"
    assert "fork server not started, Python attempts launch cold" in log.read_text()
    assert "the plan froze" in log.read_text()


def test_an_interpreter_replaced_by_an_identical_copy_is_launched_cold(tmp_path: Path) -> None:
    copy = tmp_path / "bin" / "python3"
    copy.parent.mkdir()
    shutil.copy2(os.path.realpath(sys.executable), copy)
    job = Job(tmp_path / "py", copy, {"nodes/probe.py": PROBE})
    job.request("nodes.probe", "probe")

    async def go() -> tuple[int, int]:
        servers = ForkServers()
        handles = VerifiedHandles(tmp_path)
        try:
            first = await attempt(job.spec(tmp_path), servers=servers, job=job, handles=handles)
            assert first.result.exit_code == 0, first.stderr
            warm = job.result()["ppid"]
            replacement = tmp_path / "replacement"
            shutil.copy2(copy, replacement)
            os.replace(replacement, copy)  # same bytes, another file: the server runs the old one
            second = await attempt(job.spec(tmp_path), servers=servers, job=job, handles=handles)
            assert second.result.exit_code == 0, second.stderr
            return warm, job.result()["ppid"]
        finally:
            servers.close()
            handles.close()

    warm, after = asyncio.run(go())
    assert warm != os.getpid()
    assert after == os.getpid()


def test_an_interpreter_changed_after_the_server_started_fails_closed(tmp_path: Path) -> None:
    copy = tmp_path / "bin" / "python3"
    copy.parent.mkdir()
    shutil.copy2(os.path.realpath(sys.executable), copy)
    job = Job(tmp_path / "py", copy, {"nodes/probe.py": PROBE})
    job.request("nodes.probe", "probe")
    spec = job.spec(tmp_path)

    async def go() -> None:
        servers = ForkServers()
        handles = VerifiedHandles(tmp_path)
        try:
            first = await attempt(spec, servers=servers, job=job, handles=handles)
            assert first.result.exit_code == 0, first.stderr
            (job.root / "result.json").unlink()
            replacement = tmp_path / "replacement"
            shutil.copy2("/bin/sh", replacement)
            os.replace(replacement, copy)
            with pytest.raises(VerificationError, match=str(copy)):
                await attempt(spec, servers=servers, job=job, handles=handles)
        finally:
            servers.close()
            handles.close()

    asyncio.run(go())
    assert not (job.root / "result.json").exists()


OWNER = """
import asyncio, json, os, sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from rho_notebook.exec.python_forks import ForkJob, ForkServers
from rho_notebook.exec.process import ProcessSpec

async def main():
    spec = ProcessSpec.model_validate_json({spec!r})
    servers = ForkServers()
    server = await servers.server(spec, handles=None, harness=Path({harness!r}), harness_sha256={digest!r})
    print(server.pid, flush=True)
    time.sleep(60)

asyncio.run(main())
"""


def test_a_server_whose_owner_dies_exits(tmp_path: Path, interpreter: Path) -> None:
    job = Job(tmp_path / "py", interpreter)
    code = OWNER.format(
        repo=str(Path(__file__).resolve().parents[2]),
        spec=job.spec(tmp_path).model_dump_json(),
        harness=str(job.root / "_rho_harness.py"),
        digest=sha(HARNESS_PATH.read_bytes()),
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        server = int(owner.stdout.readline())
        assert alive(server)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert wait_gone(server), "end of file on its socket ends the server"


def test_handles_call_their_closers_once_even_if_one_raises(tmp_path: Path) -> None:
    handles = VerifiedHandles(tmp_path)
    calls: list[str] = []

    def failing() -> None:
        calls.append("failing")
        raise OSError("boom")

    assert handles.on_close(failing)
    assert handles.on_close(lambda: calls.append("second"))
    with pytest.raises(OSError, match="boom"):
        handles.close()
    assert calls == ["failing", "second"]
    handles.close()
    assert calls == ["failing", "second"]
    assert not handles.on_close(lambda: calls.append("late"))


def test_close_run_stops_only_that_runs_server(tmp_path: Path, interpreter: Path) -> None:
    """Servers are per run (``RHO_RUN_ID`` is part of their key); an owner of many runs stops one."""
    job = Job(tmp_path / "py", interpreter)
    harness, digest = job.root / "_rho_harness.py", sha(HARNESS_PATH.read_bytes())

    async def go() -> tuple[int, int, bool, bool]:
        servers = ForkServers()
        try:
            first = await servers.server(
                job.spec(tmp_path, env={**PATH_ENV, "RHO_RUN_ID": "r1"}),
                handles=None,
                harness=harness,
                harness_sha256=digest,
            )
            second = await servers.server(
                job.spec(tmp_path, env={**PATH_ENV, "RHO_RUN_ID": "r2"}),
                handles=None,
                harness=harness,
                harness_sha256=digest,
            )
            assert first is not None and second is not None and first.pid != second.pid
            servers.close_run("r1")
            return first.pid, second.pid, wait_gone(first.pid), alive(second.pid)
        finally:
            servers.close()

    first, second, first_gone, second_alive = asyncio.run(go())
    assert first_gone and second_alive
    assert wait_gone(second)
