"""The executor for Python nodes: call a frozen module's function in a verified interpreter process.

Per run, the first Python attempt writes the run's ``python/`` folder (mode 0700, files 0600):
``modules/`` holds every module frozen in the graph at its label path (``//nodes/calc.py`` ->
``modules/nodes/calc.py``, importable as ``nodes.calc``), and ``_rho_harness.py`` is a copy of
:mod:`rho_notebook.source._py_harness`, made only when its digest is the one frozen in the plan
(a harness changed by an upgrade fails every Python node closed: plan again).

Per attempt: the arguments are rendered (literals as they are, output references walked to their
values), ``request.json`` goes into the attempt folder (for a fork, see below, while it runs), and
the frozen interpreter is launched
exactly like a command node's executable (verified against its digest and identity, node cwd and
environment policy, timeout, bounded output, cancel, process group)::

    INTERPRETER -I <run>/python/_rho_harness.py <run>/python/modules <attempt>/request.json <attempt>/result.json

argv[0] is the interpreter's frozen path, so that the interpreter finds its standard library
and ``sys.executable`` names it. Within a run the attempt is not a fresh interpreter but a fork of
the run's fork server (:mod:`rho_notebook.exec.python_forks`): the same interpreter, launched the
same way once, at the run's first Python attempt, and stopped with the run's verified handles; each
fork gets this argv, the node's cwd, environment, output pipes, timeout and cancel, and imports
the frozen modules only after checking their digests. A fork gets the request's bytes with its
fork request and reads them from memory (``request.json`` is written meanwhile, the same bytes;
one over ``_SENT_REQUEST_BYTES`` is written first and read from the file), and the server has
added the site directories once (their ``.pth`` files are not read per fork). Where no server can
serve (it failed to start, the interpreter was replaced, no verified handles) the attempt launches
cold as above; ``<run>/python/forkserver.log`` holds the server's stderr and why it did not start.

The harness writes the JSON-encoded return value to ``result.json``; it is read back (bounded by
``max_output_bytes``), validated against the node's schema and stored as ``value.json`` (durably;
a small value is journaled with the attempt's end instead, see :data:`JOURNALED_VALUE_BYTES`). Without
a schema the value is stored as well, so ``result`` shows what the function returned. A fork
writes it to a memory file of this process instead (:class:`_ForkStart`), and ``result.json`` is
a copy written by the attempt's writer: a fork that got its request needs no attempt folder
before it starts, so making one (three directories, on a slow disk a millisecond or more) is not
in the way of the attempt. stdout and stderr are the node's logs, as for commands.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

from rho_notebook.errors import PlanError, RhoError, UnavailableValue
from rho_notebook.exec.base import JOURNALED_VALUE_BYTES, AttemptContext, AttemptResult, output_value
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.exec.launch import ProcessSpec
from rho_notebook.exec.process import Child, Starter
from rho_notebook.exec.python_forks import ForkJob, ForkServers
from rho_notebook.exec.supervised import Ended, ProcessOperation, supervise
from rho_notebook.model.graph import Graph, PythonNode, PythonRuntime
from rho_notebook.model.schema import validate_value
from rho_notebook.model.state import NodeState
from rho_notebook.oshelpers import read_fd
from rho_notebook.source.pymodules import HARNESS_PATH
from rho_notebook.store.files import atomic_write, atomic_write_json, ensure_private_dir, json_bytes, open_regular
from rho_notebook.store.layout import REQUEST_FILE, RESULT_FILE, VALUE_FILE

__all__ = [
    "JOURNALED_VALUE_BYTES",
    "PythonExecutor",
    "checked_result",
    "frozen_runtime",
    "journaled_value",
    "materialise",
    "module_path",
    "node_request",
    "python_facts",
    "read_memory_result",
    "read_result",
    "render_args",
    "store_result",
    "store_small_result",
    "verified_harness",
]

"""What a Python attempt asks its harness to call (module, function, arguments, paths); the store's
layout names the other attempt files, this one belongs to the Python operation."""
_LAST_LINE_CHARS = 500
"""A stderr line longer than this is left out of the failure message (it is in the stderr log)."""
_SENT_REQUEST_BYTES = 32 * 1024
"""A request up to this size goes to a forked attempt with the fork (its file is written meanwhile);
a larger one is written first and read from the file (a fork request is one socket message, and
escaped as a JSON string it may take three times its size)."""


def render_args(node: PythonNode, outputs: Any) -> dict[str, Any]:
    """The keyword arguments the node's function is called with: literals as frozen, references
    replaced by the upstream values. Raises :class:`UnavailableValue` like ``render_template``."""
    return {arg.name: arg.value if arg.ref is None else output_value(arg.ref, outputs) for arg in node.args}


def frozen_runtime(graph: Graph) -> PythonRuntime:
    """The interpreter and modules the plan froze for its Python nodes (PlanError when it froze none)."""
    if graph.python is None:
        msg = f"workflow {graph.name!r} has Python nodes but its plan froze no interpreter; plan again"
        raise PlanError(msg)
    return graph.python


def python_facts(node: PythonNode, graph: Graph, outputs: Any) -> dict[str, Any]:
    """The launch facts a person or a hook decides on: interpreter and digest, module and digest,
    function, rendered arguments and working directory."""
    runtime = frozen_runtime(graph)
    return {
        "interpreter": runtime.interpreter.file.path,
        "sha256": runtime.interpreter.file.sha256,
        "module": node.module,
        "module_sha256": graph.python_module(node.module).sha256,
        "function": node.function,
        "args": render_args(node, outputs),
        "cwd": node.cwd,
    }


def node_request(node: PythonNode, graph: Graph, args: dict[str, Any]) -> dict[str, Any]:
    """The harness's ``request.json`` of one attempt: module, function, rendered ``args`` and the
    frozen ``sys.path`` (raises PlanError without a frozen interpreter, KeyError for an unknown module)."""
    runtime = frozen_runtime(graph)
    return {
        "module": graph.python_module(node.module).name,
        "function": node.function,
        "args": args,
        "sys_path": list(runtime.sys_path),
        "site_dirs": list(runtime.site_dirs),
    }


def module_path(modules: Path, label: str) -> Path:
    """Where the frozen module ``//a/b.py`` is written below ``modules`` (a label that would leave
    the folder is refused)."""
    parts = PurePosixPath(label.removeprefix("//")).parts
    if not label.startswith("//") or not parts or any(p in ("", ".", "..", "/") for p in parts):
        msg = f"Python module label {label!r} is not a workspace path; the plan is inconsistent, plan again"
        raise PlanError(msg)
    return modules.joinpath(*parts)


def verified_harness(runtime: PythonRuntime) -> bytes:
    """The installed harness, when its digest is the one frozen in the plan (else PlanError)."""
    harness = HARNESS_PATH.read_bytes()
    digest = "sha256:" + hashlib.sha256(harness).hexdigest()
    if digest != runtime.harness_sha256:
        msg = (
            f"the rho_notebook Python harness changed since this plan was made (sha256 {digest} now, "
            f"{runtime.harness_sha256} in the plan); plan again"
        )
        raise PlanError(msg)
    return harness


def materialise(run: Path, graph: Graph) -> Path:
    """Write ``<run>/python/`` (frozen modules and the verified harness); returns that folder."""
    harness = verified_harness(frozen_runtime(graph))
    folder = ensure_private_dir(run / "python", below=run)
    modules = ensure_private_dir(folder / "modules", below=run)
    for module in graph.python_modules:
        path = module_path(modules, module.label)
        ensure_private_dir(path.parent, below=run)
        atomic_write(path, module.text.encode("utf-8"), durable=False)
    atomic_write(folder / "_rho_harness.py", harness, durable=False)
    return folder


def read_result(path: Path, limit: int) -> bytes | int | None:
    """The result file's bytes; its size when that is over ``limit``; None when it is absent."""
    try:
        fd, info = open_regular(path)
    except FileNotFoundError:
        return None
    try:
        return info.st_size if info.st_size > limit else read_fd(fd)
    finally:
        os.close(fd)


def read_memory_result(fd: int, limit: int) -> bytes | int | None:
    """:func:`read_result` of a memory file a forked child wrote its result to: nothing written
    (no JSON text is empty) is an absent result."""
    size = os.fstat(fd).st_size
    if size == 0:
        return None
    if size > limit:
        return size
    os.lseek(fd, 0, os.SEEK_SET)  # the child wrote through the same open file: its position is at the end
    return read_fd(fd)


def checked_result(node: PythonNode, raw: bytes | int | None) -> tuple[str, Any, bool]:
    """What the harness wrote (:func:`read_result`), checked: one JSON value of at most
    ``max_output_bytes`` that matches the node's schema. Returns (why the attempt fails, "" when it
    succeeds; the value; whether there is a result file to keep)."""
    if raw is None:
        return f"exited with code 0 before {node.function}() returned (did it call sys.exit?)", None, False
    if isinstance(raw, int):
        return (
            f"the return value of {node.function}() is {raw} bytes as JSON, "
            f"more than max_output_bytes={node.max_output_bytes}", None, False,
        )  # fmt: skip
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"{RESULT_FILE} is not one JSON value ({err})", None, True
    if node.output is not None:
        problems = validate_value(node.output, value)
        if problems:
            return "output does not match the schema: " + "; ".join(problems[:5]), None, True
    return "", value, True


def journaled_value(value: Any, raw: bytes, *, journal: bool) -> bool:
    """Whether a value is journaled with the attempt's end (its ``value.json`` then a copy): with
    ``journal``, one of at most :data:`JOURNALED_VALUE_BYTES` as JSON that is not null."""
    return journal and value is not None and len(raw) <= JOURNALED_VALUE_BYTES


def store_result(folder: Path, node: PythonNode, *, journal: bool = False) -> tuple[str, Any, bool, bool]:
    """Read the attempt's ``result.json``, check it (:func:`checked_result`) and store the value
    as ``value.json``; one worker-thread job for all of it. With ``journal``, a value of at most
    :data:`JOURNALED_VALUE_BYTES` (not null) is to be journaled with the attempt's end, and its
    ``value.json`` is a copy written without an fsync; any other value is written durably.
    Returns (why the attempt fails, "" when it succeeds; the value; whether ``result.json`` was
    there to keep; whether the value is to be journaled)."""
    stored = _store(folder, node, read_result(folder / RESULT_FILE, node.max_output_bytes), journal=journal)
    return stored if stored is not None else ("", None, True, False)  # (not reached: None only if quick)


def store_small_result(folder: Path, node: PythonNode) -> tuple[str, Any, bool, bool] | None:
    """:func:`store_result` with ``journal`` on the event loop: None, having written nothing,
    when that would mean reading more than :data:`JOURNALED_VALUE_BYTES` or an fsync (call
    :func:`store_result` in a thread then)."""
    raw = read_result(folder / RESULT_FILE, min(node.max_output_bytes, JOURNALED_VALUE_BYTES))
    return None if isinstance(raw, int) else _store(folder, node, raw, journal=True, quick=True)


def _store(
    folder: Path, node: PythonNode, raw: bytes | int | None, *, journal: bool, quick: bool = False
) -> tuple[str, Any, bool, bool] | None:
    problem, value, returned = checked_result(node, raw)
    if problem:
        return problem, None, returned, False
    assert isinstance(raw, bytes)  # checked_result fails every other reading
    journaled = journaled_value(value, raw, journal=journal)
    if quick and not journaled:
        return None
    atomic_write_json(folder / VALUE_FILE, value, durable=not journaled)
    return "", value, True, journaled


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1] if lines and len(lines[-1]) <= _LAST_LINE_CHARS else ""


class _ForkStart:
    """A fork starter that sees to the attempt's files.

    ``request.json``: written before a cold launch or a fork that reads it; written later (by the
    attempt's writer, in order with its other files) when the fork got its bytes, or when nothing
    was started. The result: a fork writes it to the memory file ``result_fd`` (the attempt
    closes it, :meth:`close`), so a fork that got its request needs no attempt folder before it
    starts; a cold launch (no server could serve) writes ``result.json`` into the folder, made
    before it starts."""

    def __init__(self, ctx: AttemptContext, fork: Starter, request: bytes, *, sent: bool, result_fd: int) -> None:
        self.ctx = ctx
        self.fork = fork
        self.request = request
        self.sent = sent
        self.result_fd = result_fd
        self.written = False
        self.forked = False
        """Whether a fork started (its result is then in ``result_fd``, not in ``result.json``)."""

    async def write(self) -> None:
        folder = await self.ctx.directory()
        await asyncio.to_thread(atomic_write, folder / REQUEST_FILE, self.request, durable=False)
        self.written = True

    def write_later(self) -> None:
        """Make sure the file will be there (at the latest when the attempt's files are written)."""
        if not self.written:
            self.ctx.write_later(REQUEST_FILE, self.request)
            self.written = True

    def close(self) -> None:
        os.close(self.result_fd)

    async def __call__(
        self, spec: ProcessSpec, handles: VerifiedHandles | None, stdout_fd: int, stderr_fd: int
    ) -> Child | None:
        if not self.sent:
            await self.write()
        try:
            child = await self.fork(spec, handles, stdout_fd, stderr_fd)
        except BaseException:
            self.write_later()
            raise
        if child is None:  # a cold launch follows, which reads the file and writes result.json
            if not self.written:
                await self.write()
        else:
            self.forked = True
            self.write_later()
        return child


class PythonExecutor:
    """Runs Python nodes as verified, supervised interpreter processes."""

    def __init__(
        self, *, kill_grace_seconds: float = 2.0, fork_server: bool = True, journal_values: bool = True
    ) -> None:
        self.kill_grace_seconds = kill_grace_seconds
        self.fork_server = fork_server
        """Fork attempts from the run's fork server (False: a fresh interpreter per attempt)."""
        self.journal_values = journal_values
        """Journal small values with the attempt's end (False: every ``value.json`` durable first)."""
        self._folders: dict[Path, asyncio.Future[Path]] = {}
        self._forks: dict[Path, tuple[ForkServers, dict[str, str], str]] = {}
        """Run folder -> its fork servers, the frozen modules' digests and the runtime's key."""

    def _starter(
        self, ctx: AttemptContext, graph: Graph, folder: Path, argv: tuple[str, ...], request: bytes
    ) -> _ForkStart | None:
        """The run's fork server as a starter of this attempt; None (launch cold) without one.

        The attempt's ``request.json`` (``request``) is written by the starter: before a cold launch
        (which reads it), while a fork runs (the fork gets the bytes with its request); a fork
        writes its result to a memory file of the starter's (:class:`_ForkStart`)."""
        if not self.fork_server or ctx.verified is None:
            return None
        run = folder.parent
        forks = self._forks.get(run)
        if forks is None:
            servers = ForkServers(log=folder / "forkserver.log")
            if not ctx.verified.on_close(functools.partial(self._end_run, run)):
                return None
            runtime = frozen_runtime(graph)
            digests = {module.label.removeprefix("//"): module.sha256 for module in graph.python_modules}
            key = json.dumps([runtime.version, runtime.sys_path, runtime.site_dirs, runtime.distributions])
            forks = self._forks[run] = (servers, digests, hashlib.sha256(key.encode()).hexdigest())
        servers, digests, key = forks
        modules_dir = str(folder / "modules")
        paths = (modules_dir, *frozen_runtime(graph).sys_path)
        sent = len(request) <= _SENT_REQUEST_BYTES
        result_fd = os.memfd_create(RESULT_FILE, os.MFD_CLOEXEC)
        job = ForkJob(
            argv=argv[2:], modules_dir=modules_dir, modules=digests, paths=paths,
            site_dirs=frozen_runtime(graph).site_dirs, request=request if sent else None, result_fd=result_fd,
        )  # fmt: skip
        fork = servers.starter(
            job, harness=folder / "_rho_harness.py", harness_sha256=frozen_runtime(graph).harness_sha256, runtime=key
        )
        return _ForkStart(ctx, fork, request, sent=sent, result_fd=result_fd)

    def _end_run(self, run: Path) -> None:
        """The run's verified handles closed (its end): stop its fork servers."""
        forks = self._forks.pop(run, None)
        self._folders.pop(run, None)
        if forks is not None:
            forks[0].close()

    async def _python_folder(self, ctx: AttemptContext, graph: Graph) -> Path:
        """The run's ``python/`` folder, written once per run by this executor."""
        run = ctx.attempt_dir.parents[3]  # RunFolder.attempt_dir: <run>/nodes/<node>/attempts/<n>
        made = self._folders.get(run)
        if made is None:
            made = self._folders[run] = asyncio.ensure_future(asyncio.to_thread(materialise, run, graph))
        return await asyncio.shield(made)

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        node, graph = ctx.node, ctx.graph
        if not isinstance(node, PythonNode):
            msg = f"PythonExecutor cannot run a {node.kind} node"
            raise TypeError(msg)
        if graph is None:
            msg = "PythonExecutor needs the run's graph in the attempt context"
            raise TypeError(msg)
        try:
            args = render_args(node, ctx.outputs)
        except UnavailableValue as err:
            return AttemptResult(state=NodeState.FAILURE, message=f"cannot render args: {err}")
        start: _ForkStart | None = None
        try:
            runtime = frozen_runtime(graph)
            request = node_request(node, graph, args)
            folder = await self._python_folder(ctx, graph)
            attempt = ctx.attempt_dir  # made before a launch that needs it (_ForkStart), else while it runs
            argv = (
                runtime.interpreter.file.path,
                "-I",
                str(folder / "_rho_harness.py"),
                str(folder / "modules"),
                str(attempt / REQUEST_FILE),
                str(attempt / RESULT_FILE),
            )
            request_bytes = json_bytes(request)  # what atomic_write_json writes
            start = self._starter(ctx, graph, folder, argv, request_bytes)
            if start is None:
                attempt = await ctx.directory()
                await asyncio.to_thread(atomic_write, attempt / REQUEST_FILE, request_bytes, durable=False)
        except (RhoError, KeyError, OSError) as err:
            if start is not None:
                start.close()
            if isinstance(err, OSError):
                message = f"cannot prepare the Python node's files: {err}"
            else:
                message = err.message if isinstance(err, RhoError) else str(err.args[0])
            record = {"kind": "not_started", "code": None, "signal": None, "detail": message}
            return AttemptResult(state=NodeState.FAILURE, message=message, exit=record)
        operation = ProcessOperation(
            name=node.name,
            executable=runtime.interpreter,
            argv=argv,
            cwd=node.cwd,
            timeout_seconds=node.timeout_seconds,
            max_output_bytes=node.max_output_bytes,
            output=node.output,
        )
        judge = self.judge if start is None else functools.partial(self.judge, forked=start)
        try:
            result = await supervise(
                ctx, operation, judge=judge, kill_grace_seconds=self.kill_grace_seconds, start=start
            )
        finally:
            if start is not None:
                start.close()
        if start is not None:  # (a run cancelled before the launch never called it)
            start.write_later()
        result.artifacts["request"] = REQUEST_FILE
        return result

    async def judge(self, ended: Ended, *, forked: _ForkStart | None = None) -> AttemptResult:
        """The attempt's result from its exit and what it returned: ``result.json`` in its folder,
        or the memory file of ``forked`` when a fork ran it (copied to ``result.json`` then)."""
        ctx = ended.ctx
        if not isinstance(ctx, AttemptContext) or not isinstance(ctx.node, PythonNode):
            msg = "PythonExecutor judges Python nodes only"
            raise TypeError(msg)
        node = ctx.node
        code = ended.result.exit_code
        if code != 0:
            last = _last_line(ended.stderr.tail)
            return ended.failure(f"exited with code {code}" + (f": {last}" if last else ""))
        if forked is not None and forked.forked:
            raw = read_memory_result(forked.result_fd, node.max_output_bytes)
            problem, value, returned, journaled = await self._store_memory(ctx, node, raw)
        else:
            folder = await ctx.directory()
            stored = store_small_result(folder, node) if self.journal_values else None  # no thread for a small value
            if stored is None:
                stored = await asyncio.to_thread(store_result, folder, node, journal=self.journal_values)
            problem, value, returned, journaled = stored
        if returned:
            ended.artifacts["result"] = RESULT_FILE
        if problem:
            return ended.failure(problem)
        ended.artifacts["value"] = VALUE_FILE
        success = ended.success(value)
        success.journal_value = journaled
        return success

    async def _store_memory(
        self, ctx: AttemptContext, node: PythonNode, raw: bytes | int | None
    ) -> tuple[str, Any, bool, bool]:
        """:func:`store_result` of a result read from memory: ``result.json`` and a journaled
        value's ``value.json`` are copies handed to the attempt's writer; any other value is
        written durably before the attempt ends."""
        problem, value, returned = checked_result(node, raw)
        if returned:
            assert isinstance(raw, bytes)
            ctx.write_later(RESULT_FILE, raw)
        if problem:
            return problem, None, returned, False
        assert isinstance(raw, bytes)
        journaled = journaled_value(value, raw, journal=self.journal_values)
        if journaled:
            ctx.write_later(VALUE_FILE, json_bytes(value))
        else:
            folder = await ctx.directory()
            await asyncio.to_thread(atomic_write_json, folder / VALUE_FILE, value)
        return "", value, True, journaled
