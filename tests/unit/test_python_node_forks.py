"""What a forked Python attempt is spared (issue 31): the site directories' ``.pth`` files, read
once in the fork server and replayed in each fork whose environment is the server's, and the
request file, sent with the fork request and read from memory.

Real interpreters, real forks; the scaffolding is tests/unit/test_python_forkserver.py's.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from rho_notebook.exec.python_forks import ForkJob, ForkServers
from rho_notebook.source.pymodules import HARNESS_PATH
from tests.conftest import Project
from tests.unit.test_python_exec import _attempt, _interpreter_path, _module, _node, _run
from tests.unit.test_python_forkserver import PATH_ENV, Job, Outcome, sha

SITE_PROBE = """\
import sys

def probe():
    import extra_mod
    return {"path": sys.path, "extra": extra_mod.VALUE, "argv": sys.argv}
"""


def _site(tmp_path: Path) -> tuple[Path, Path]:
    """A site directory whose ``.pth`` adds a folder (holding ``extra_mod``) and logs each reading."""
    site, extra = tmp_path / "site", tmp_path / "extra"
    site.mkdir()
    extra.mkdir()
    (extra / "extra_mod.py").write_text("VALUE = 7\n")
    (site / "a_extra.pth").write_text(
        f"{extra}\nimport os; open(os.environ['PTH_LOG'], 'a').write(os.environ.get('RHO_NODE', '') + chr(10))\n"
    )
    return site, extra


def _site_job(job: Job, site: Path, *, request: bytes | None = None) -> tuple[ForkJob, bytes]:
    """The fork job and request of ``job`` with ``site`` added to the interpreter's site directories."""
    sys_path, site_dirs = _interpreter_path()
    body = {
        "module": "nodes.probe", "function": "probe", "args": {}, "sys_path": sys_path,
        "site_dirs": [*site_dirs, str(site)],
    }  # fmt: skip
    text = json.dumps(body).encode()
    modules_dir = str(job.root / "modules")
    fork = ForkJob(
        argv=job.argv[2:],
        modules_dir=modules_dir,
        modules={relative: sha(source.encode()) for relative, source in job.modules.items()},
        paths=(modules_dir, *sys_path),
        site_dirs=(*site_dirs, str(site)),
        request=request,
    )
    return fork, text


async def _attempt_with(spec: Any, start: Any) -> Outcome:
    from rho_notebook.exec.process import run_process

    out: list[bytes] = []
    err: list[bytes] = []

    async def to_out(chunk: bytes) -> None:
        out.append(chunk)

    async def to_err(chunk: bytes) -> None:
        err.append(chunk)

    result = await run_process(spec, stdout_sink=to_out, stderr_sink=to_err, cancel=asyncio.Event(), start=start)
    return Outcome(result, b"".join(out), b"".join(err), result.pid)


def test_pth_files_are_read_once_in_the_server_and_each_fork_gets_their_path(tmp_path: Path) -> None:
    interpreter = Path(os.path.realpath(sys.executable))
    site, extra = _site(tmp_path)
    job = Job(tmp_path / "py", interpreter, {"nodes/probe.py": SITE_PROBE})
    fork_job, request = _site_job(job, site)
    (job.root / "request.json").write_bytes(request)
    logs = {name: tmp_path / f"{name}.log" for name in ("server", "other", "cold")}

    def spec(log: str, node: str) -> Any:
        return job.spec(tmp_path, env={**PATH_ENV, "PTH_LOG": str(logs[log]), "RHO_NODE": node})

    async def go() -> list[Any]:
        servers = ForkServers(log=tmp_path / "forkserver.log")
        start = servers.starter(
            fork_job, harness=job.root / "_rho_harness.py", harness_sha256=sha(HARNESS_PATH.read_bytes())
        )
        results = []
        try:
            for log, node, starter in (
                ("server", "a", start), ("server", "b", start), ("other", "c", start), ("cold", "d", None),
            ):  # fmt: skip
                outcome = await _attempt_with(spec(log, node), starter)
                assert outcome.result.kind == "exit" and outcome.result.exit_code == 0, outcome.stderr
                results.append(job.result())
        finally:
            servers.close()
        return results

    first, second, other, cold = asyncio.run(go())
    assert str(extra) in cold["path"] and cold["extra"] == 7
    assert first == second == other == cold, "every fork's sys.path is the cold interpreter's"
    assert logs["server"].read_text() == "a\n", "read once, by the server (started for node a), not per fork"
    assert logs["other"].read_text() == "c\n", "a fork in another environment reads the .pth files itself"
    assert logs["cold"].read_text() == "d\n"


def test_a_fork_reads_its_request_from_memory_and_sees_the_files_argv(tmp_path: Path) -> None:
    interpreter = Path(os.path.realpath(sys.executable))
    site, _ = _site(tmp_path)
    job = Job(tmp_path / "py", interpreter, {"nodes/probe.py": SITE_PROBE})
    _, request = _site_job(job, site)
    fork_job, _ = _site_job(job, site, request=request)
    assert not (job.root / "request.json").exists()

    async def go() -> Outcome:
        servers = ForkServers()
        start = servers.starter(
            fork_job, harness=job.root / "_rho_harness.py", harness_sha256=sha(HARNESS_PATH.read_bytes())
        )
        try:
            return await _attempt_with(job.spec(tmp_path, env={**PATH_ENV, "PTH_LOG": str(tmp_path / "log")}), start)
        finally:
            servers.close()

    outcome = asyncio.run(go())
    assert outcome.result.exit_code == 0, outcome.stderr
    assert job.result()["argv"] == list(job.argv[2:]), "sys.argv names the request file, as in a cold launch"
    assert job.result()["extra"] == 7
    assert not (job.root / "request.json").exists(), "the attempt did not need the file"


BIG = """\
import sys

def size(text, n):
    return [len(text), n, sys.argv[2]]
"""


def test_small_and_large_requests_run_and_leave_the_same_request_file(project: Project) -> None:
    """A request over the size sent with the fork is read from its file; both leave ``request.json``."""
    big = "x" * (100 * 1024)
    nodes = [
        _node("small", "//nodes/big.py", "size", text="abc", n=1),
        _node("large", "//nodes/big.py", "size", text=big, n=2),
    ]
    state, run = _run(project, nodes, [_module("//nodes/big.py", BIG)])
    for name, text, n in (("small", "abc", 1), ("large", big, 2)):
        assert state.nodes[name].state.value == "success", state.nodes[name].reason
        folder = _attempt(run, name)
        length, number, argv_request = json.loads((folder / "value.json").read_text())
        assert (length, number) == (len(text), n)
        assert argv_request == str(folder / "request.json")
        request = json.loads((folder / "request.json").read_text())
        assert request["args"] == {"text": text, "n": n} and request["function"] == "size"
        assert (folder / "request.json").stat().st_mode & 0o777 == 0o600


MEMO_PROBE = """\
import site
import sys

def probe():
    return [getattr(site.addsitedir, "active", None), sys.path]
"""


def test_the_forks_of_a_run_take_the_site_directories_from_their_server(project: Project) -> None:
    """The executor hands the frozen site directories to the run's server: its forks replay them."""
    nodes = [_node(f"p{i}", "//nodes/memo.py", "probe") for i in range(2)]
    state, run = _run(project, nodes, [_module("//nodes/memo.py", MEMO_PROBE)])
    sys_path, site_dirs = _interpreter_path()
    assert site_dirs, "the test interpreter has a site directory"
    for i in range(2):
        assert state.nodes[f"p{i}"].state.value == "success", state.nodes[f"p{i}"].reason
        active, path = json.loads((_attempt(run, f"p{i}") / "value.json").read_text())
        assert active is True, "the fork replayed the server's site directories"
        assert path[0] == str(run / "python" / "modules") and path[1 : len(sys_path) + 1] == sys_path
