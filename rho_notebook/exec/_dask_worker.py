"""One remote attempt, as it runs on a Dask worker (the owner side is :mod:`rho_notebook.exec.dask`).

:func:`run_attempt` is the function the owner submits. It runs in one of the worker's task threads,
hands the launch to the worker process's launch loop and waits for it, and does, in this order:

1. **Claim.** The owner put the attempt's token into a ``distributed.Queue`` named by the attempt
   ID before it submitted the task. The worker takes it (the scheduler hands a queue item to one
   getter only). A second execution of the same task (Dask re-runs a task whose worker died,
   whatever ``retries`` says) finds the queue empty and returns ``claimed=False`` having launched
   nothing; so does an execution that starts after the owner gave the attempt up (it takes the
   token back). At most one launch per attempt.
2. **Cancel before launch.** The attempt's ``distributed.Event`` (``rho-cancel-<attempt ID>``) set
   already: nothing is launched, the result is ``cancelled``. It is looked at in the same round trip
   as the claim (the two requests travel together; a worker's round trips go through its busy
   event loop, so they are the worker's largest fixed cost per attempt).
3. **Verify on this worker.** Paths are mapped (``path_map``: owner prefix -> worker prefix). The
   executable, its ``#!`` interpreters and (Python nodes) the interpreter are verified by content
   digest only: inode identity cannot match across hosts. Digests are cached per worker process by
   :mod:`rho_notebook.exec.verify` keyed by (dev, inode, size, mtime_ns, ctime_ns), only for files
   settled for :data:`~rho_notebook.exec.verify.SETTLED_SECONDS`, exactly like local launches.
   Python nodes: the module sources and the harness travel with the attempt and are checked
   against their frozen digests; the distributions installed on the frozen ``sys.path`` (mapped),
   as the verified interpreter lists them (:func:`~rho_notebook.planning.python.probe_interpreter`,
   cached per worker process while those folders are unchanged), must equal the frozen list. Any difference fails closed with ``reason = "worker_verification"``: nothing runs.
4. **Launch** through :func:`~rho_notebook.exec.process.run_process`, the same verified-descriptor
   path as a local launch (``/proc/self/fd`` of the verified handles, new process group, bounded
   output, timeout), on the worker process's one launch loop (:class:`_LaunchLoop`). A Python
   attempt is forked from the worker's fork server for its interpreter, harness and environment
   (:mod:`~rho_notebook.exec.python_forks`: started by the first such attempt, the interpreter's
   descriptor re-verified before each fork, every module imported from bytes of the plan's digest);
   where no server can serve, it launches cold as before. The launch polls the cancel Event
   every :data:`CANCEL_POLL_SECONDS` while the process runs and stops the group when it is set
   (``future.cancel()`` alone would not stop a running task).
5. **Answer** with a :class:`RemoteOutcome`: the process result, the retained stdout/stderr and,
   for Python nodes, the bytes of ``result.json`` (bounded by the node's ``max_output_bytes``).
   The owner writes the attempt folder and journals the result; nothing here touches the run store.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rho_notebook.errors import PlanError, RhoError, VerificationError
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.exec.process import ProcessSpec, Starter, run_process
from rho_notebook.exec.python import module_path, read_result
from rho_notebook.exec.python_forks import ForkJob, ForkServers
from rho_notebook.exec.verify import open_verified, resolve_path
from rho_notebook.model.graph import FrozenExecutable, FrozenFile, PythonModule
from rho_notebook.planning.python import probe_interpreter
from rho_notebook.store.layout import REQUEST_FILE, RESULT_FILE
from rho_notebook.store.reuse import value_file_sha256

__all__ = [
    "CANCEL_POLL_SECONDS",
    "RemoteAttempt",
    "RemoteOutcome",
    "RemotePython",
    "cancel_event_name",
    "claim_queue_name",
    "map_path",
    "run_attempt",
]

CANCEL_POLL_SECONDS = 0.25
"""How often a running attempt asks whether its cancel Event is set: a remote cancel reaches the
process within this (plus a round trip), well inside the cancel bound."""


def claim_queue_name(attempt_id: str) -> str:
    return f"rho-claim-{attempt_id}"


def cancel_event_name(attempt_id: str) -> str:
    return f"rho-cancel-{attempt_id}"


def map_path(path: str, path_map: tuple[tuple[str, str], ...]) -> str:
    """``path`` with the longest matching owner prefix replaced by its worker prefix (a prefix
    matches whole components only: ``/srv/ws`` maps ``/srv/ws/a``, not ``/srv/wsx``)."""
    best: tuple[str, str] | None = None
    for owner, worker in path_map:
        owner = owner.rstrip("/") or "/"
        if path == owner or path.startswith(owner if owner == "/" else owner + "/"):
            if best is None or len(owner) > len(best[0]):
                best = (owner, worker.rstrip("/") or "/")
    if best is None:
        return path
    rest = path[len(best[0]) :].lstrip("/")
    return str(Path(best[1]) / rest) if rest else best[1]


@dataclass(frozen=True)
class RemotePython:
    """What a Python node's attempt carries: its frozen sources, the harness and the request."""

    modules: tuple[PythonModule, ...]
    """The modules the node may import (``PythonNode.modules``), text and digest."""
    harness_text: str
    harness_sha256: str
    request: dict[str, Any]
    """``request.json`` as the owner wrote it (module, function, rendered args, sys_path, site_dirs)."""
    distributions: tuple[tuple[str, str], ...]
    """The frozen installed distributions, compared with the worker interpreter's."""


@dataclass(frozen=True)
class RemoteAttempt:
    """The frozen facts of one attempt, everything a worker needs and nothing it may choose."""

    attempt_id: str
    """``<run>.<node>.<attempt>``: names the claim queue and the cancel Event."""
    token: str
    """What the owner put into the claim queue."""
    executable: FrozenExecutable
    """The program (Python nodes: the interpreter), with the plan's digests."""
    argv: tuple[str, ...]
    """The rendered argv (Python nodes: empty; the worker builds it around its own temp folder)."""
    workspace: str
    """The owner's workspace root; ``//`` paths resolve against it after ``path_map``."""
    cwd: str
    """``//``-relative working directory."""
    env: dict[str, str]
    """The node's environment (the frozen policy applied on the owner, plus RHO_RUN_ID/RHO_NODE)."""
    timeout_seconds: float
    max_output_bytes: int
    kill_grace_seconds: float
    path_map: tuple[tuple[str, str], ...] = ()
    python: RemotePython | None = None


@dataclass
class RemoteOutcome:
    """What came back from a worker."""

    claimed: bool
    """False: another execution had taken the token; nothing was launched by this one."""
    worker: str = ""
    """Address of the worker that ran it."""
    process: dict[str, Any] | None = None
    """``ProcessResult.model_dump()``; None when nothing was launched."""
    stdout: bytes = b""
    stderr: bytes = b""
    result: bytes | int | None = None
    """Python nodes: ``result.json`` bytes, its size when over the bound, None when absent."""
    failure: str = ""
    """Why nothing was launched (verification or preparation); empty when it was."""
    verification: str = ""
    """The :class:`~rho_notebook.errors.VerificationError` reason of a failed verification."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What was verified on the worker (mapped paths), for the attempt's record."""


class _NotLaunched(Exception):
    """The worker refused to launch the attempt: a carried source or the environment failed its check.

    ``reason`` is the :class:`~rho_notebook.errors.VerificationError` reason the owner reports."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


def _mapped_file(frozen: FrozenFile, attempt: RemoteAttempt) -> FrozenFile:
    if frozen.path.startswith("//"):
        return frozen
    return frozen.model_copy(update={"path": map_path(frozen.path, attempt.path_map)})


def _mapped_executable(attempt: RemoteAttempt) -> FrozenExecutable:
    exe = attempt.executable
    return exe.model_copy(
        update={
            "file": _mapped_file(exe.file, attempt),
            "interpreters": tuple(_mapped_file(i, attempt) for i in exe.interpreters),
        }
    )


def _verify_interpreter(exe: FrozenExecutable, workspace: Path) -> Path:
    """The verified interpreter's path on this worker (its digest checked, the descriptor closed:
    the launch verifies it again through the cached digest and launches the descriptor)."""
    path = resolve_path(exe.file.path, workspace)
    os.close(open_verified(path, sha256=exe.file.sha256, identity=None))
    return path


def _prepare_python(attempt: RemoteAttempt, exe: FrozenExecutable, workspace: Path, folder: Path) -> tuple[str, ...]:
    """Check the carried sources and the environment, write them to ``folder``; the argv."""
    python = attempt.python
    if python is None:
        msg = "a Python attempt without its sources"
        raise _NotLaunched(msg, reason="invalid")
    if value_file_sha256(python.harness_text.encode("utf-8")) != python.harness_sha256:
        msg = "the Python harness that travelled with the attempt does not match its frozen digest"
        raise _NotLaunched(msg, reason="content")
    modules = folder / "modules"
    modules.mkdir(mode=0o700)
    for module in python.modules:
        data = module.text.encode("utf-8")
        if value_file_sha256(data) != module.sha256:
            msg = f"module {module.label} does not match its frozen digest {module.sha256}"
            raise _NotLaunched(msg, reason="content")
        path = module_path(modules, module.label)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_bytes(data)
    interpreter = _verify_interpreter(exe, workspace)
    sys_path = tuple(map_path(p, attempt.path_map) for p in python.request.get("sys_path", []))
    try:
        facts = probe_interpreter(interpreter, sha256=exe.file.sha256, sys_path=sys_path)
    except PlanError as err:
        raise _NotLaunched(err.message, reason="environment") from err
    if facts.distributions != python.distributions:
        frozen, found = set(python.distributions), set(facts.distributions)
        missing = sorted(f"{n}=={v}" for n, v in frozen - found)
        extra = sorted(f"{n}=={v}" for n, v in found - frozen)
        msg = (
            f"the installed distributions of {interpreter} differ from the plan "
            f"(missing or other version: {', '.join(missing[:5]) or 'none'}; "
            f"not in the plan: {', '.join(extra[:5]) or 'none'}); install the same environment on the worker"
        )
        raise _NotLaunched(msg, reason="environment")
    request = dict(python.request)
    request["sys_path"] = [map_path(p, attempt.path_map) for p in request.get("sys_path", [])]
    request["site_dirs"] = [map_path(p, attempt.path_map) for p in request.get("site_dirs", [])]
    (folder / REQUEST_FILE).write_text(json.dumps(request))
    (folder / "_rho_harness.py").write_text(python.harness_text)
    return (
        exe.file.path,
        "-I",
        str(folder / "_rho_harness.py"),
        str(modules),
        str(folder / REQUEST_FILE),
        str(folder / RESULT_FILE),
    )


class _LaunchLoop:
    """This worker process's launch loop: one event loop thread that supervises every attempt's
    process, and the fork servers Python attempts are forked from (one per interpreter, harness and
    environment: :func:`~rho_notebook.exec.python_forks.server_key`). A fork server answers on the
    loop it was started on, so the attempts of both task threads run here rather than each on a
    loop of its own; the servers end with the worker process (their socket closes)."""

    _made: dict[int, _LaunchLoop] = {}
    """pid -> the loop of that process (a process forked from a worker makes its own)."""
    _lock = threading.Lock()

    def __init__(self, log: Path | None) -> None:
        self.loop = asyncio.new_event_loop()
        self.forks = ForkServers(log=log)
        threading.Thread(target=self.loop.run_forever, name="rho-launch", daemon=True).start()

    @classmethod
    def here(cls, log: Path | None) -> _LaunchLoop:
        with cls._lock:
            made = cls._made.get(os.getpid())
            if made is None:
                made = cls._made[os.getpid()] = cls(log)
            return made

    def run(self, attempt: Any) -> Any:
        """Run the coroutine ``attempt`` on the launch loop and wait for its result here."""
        return asyncio.run_coroutine_threadsafe(attempt, self.loop).result()


def _fork_starter(forks: ForkServers, attempt: RemoteAttempt, argv: tuple[str, ...]) -> Starter | None:
    """The worker's fork server for this Python attempt (argv: the cold launch's), or None for a
    command. The server is keyed by the mapped environment the attempt was verified against."""
    python = attempt.python
    if python is None:
        return None
    request = python.request
    runtime = json.dumps([request.get("sys_path", []), request.get("site_dirs", []), python.distributions])
    digests = {module.label.removeprefix("//"): module.sha256 for module in python.modules}
    job = ForkJob(argv=argv[2:], modules_dir=argv[3], modules=digests)
    return forks.starter(
        job,
        harness=Path(argv[2]),
        harness_sha256=python.harness_sha256,
        runtime=hashlib.sha256(runtime.encode()).hexdigest(),
    )


async def _watch_cancel(event: Any, cancel: CancelSignal) -> None:
    """Poll the attempt's cancel Event every :data:`CANCEL_POLL_SECONDS` while the process runs;
    set ``cancel`` when it is set. A poll, not a long-poll: the watcher ends with its attempt (no
    thread and no scheduler waiter outlive it), and a short attempt asks nothing (the claim already
    looked at the Event just before the launch)."""
    while True:
        await asyncio.sleep(CANCEL_POLL_SECONDS)
        try:
            if await asyncio.to_thread(event.is_set):
                cancel.set()
                return
        except Exception:  # the scheduler went away: the owner sees the lost future itself
            return


async def _launch(
    spec: ProcessSpec, event: Any, outcome: RemoteOutcome, *, cancelled: bool, start: Starter | None
) -> dict[str, Any]:
    cancel = CancelSignal()
    stdout, stderr = bytearray(), bytearray()

    async def keep_stdout(chunk: bytes) -> None:
        stdout.extend(chunk)

    async def keep_stderr(chunk: bytes) -> None:
        stderr.extend(chunk)

    if cancelled:  # cancelled before launch: run_process launches nothing and says so
        cancel.set()
    watcher = asyncio.ensure_future(_watch_cancel(event, cancel))
    try:
        result = await run_process(spec, stdout_sink=keep_stdout, stderr_sink=keep_stderr, cancel=cancel, start=start)
    finally:
        watcher.cancel()
    outcome.stdout, outcome.stderr = bytes(stdout), bytes(stderr)
    return result.model_dump(mode="json")


async def _take_and_look(client: Any, queue_name: str, event_name: str) -> tuple[list[Any], bool]:
    """On the worker's loop, in one hop from the task thread: hold the claim queue (the scheduler
    deletes a queue once nobody holds it), take everything it holds and look at the cancel Event
    (those two requests travel together), and let go of the queue again."""
    scheduler = client.scheduler
    await scheduler.queue_create(name=queue_name, maxsize=0)
    try:
        records, cancelled = await asyncio.gather(
            scheduler.queue_get(name=queue_name, batch=True), scheduler.event_is_set(name=event_name)
        )
    finally:
        # exactly what ``distributed.Queue.close`` does (a Queue object would cost a hop of its own
        # to create): the release travels on the client's stream, buffered while it connects
        client._send_to_scheduler({"op": "queue_release", "name": queue_name})  # noqa: SLF001
    return [record.get("value") for record in records], bool(cancelled)


def _claim(client: Any, attempt: RemoteAttempt) -> tuple[bool, bool]:
    """(claimed, cancelled before launch): the token taken from the claim queue (step 1) and the
    cancel Event looked at (step 2). All the queue holds is taken, without waiting: the owner put
    the token before it submitted, so an empty queue is a second execution (a get that timed out
    would be an error the scheduler logs with a traceback). A worker's requests go through its
    busy event loop, so they are its largest fixed cost per attempt: one hop here."""
    name = claim_queue_name(attempt.attempt_id)
    found, cancelled = client.sync(_take_and_look, client, name, cancel_event_name(attempt.attempt_id))
    return attempt.token in found, cancelled


def run_attempt(attempt: RemoteAttempt) -> RemoteOutcome:
    """Claim, verify, launch and supervise one attempt on this worker; see the module docstring."""
    dist: Any = importlib.import_module("distributed")  # typed Any: distributed ships no annotations
    client = dist.get_client()
    outcome = RemoteOutcome(claimed=False, worker=dist.get_worker().address)
    claimed, cancelled = _claim(client, attempt)
    if not claimed:
        return outcome
    outcome.claimed = True
    event = dist.Event(cancel_event_name(attempt.attempt_id), client=client)
    workspace = Path(map_path(attempt.workspace, attempt.path_map))
    exe = _mapped_executable(attempt)
    # a Python attempt's sources, request and result live in a private folder of its own; a command
    # needs none (on a busy filesystem making and removing it costs more than the claim)
    folder = Path(tempfile.mkdtemp(prefix="rho-attempt-")) if attempt.python is not None else None
    try:
        argv = attempt.argv
        if folder is not None:
            argv = _prepare_python(attempt, exe, workspace, folder)
        outcome.facts = {"executable": exe.file.path, "workspace": str(workspace)}
        spec = ProcessSpec(
            argv=argv,
            executable=exe,
            cwd=workspace / attempt.cwd[2:] if attempt.cwd != "//" else workspace,
            env=attempt.env,
            timeout_seconds=attempt.timeout_seconds,
            max_output_bytes=attempt.max_output_bytes,
            workspace=workspace,
            kill_grace_seconds=attempt.kill_grace_seconds,
        )
        launcher = _LaunchLoop.here(Path(dist.get_worker().local_directory) / "rho-forkserver.log")
        start = _fork_starter(launcher.forks, attempt, argv)
        outcome.process = launcher.run(_launch(spec, event, outcome, cancelled=cancelled, start=start))
        if folder is not None:
            outcome.result = read_result(folder / RESULT_FILE, attempt.max_output_bytes)
    except VerificationError as err:
        outcome.failure, outcome.verification = err.message, err.reason
    except _NotLaunched as err:
        outcome.failure, outcome.verification = err.message, err.reason
    except (RhoError, OSError, ValueError) as err:
        outcome.failure = err.message if isinstance(err, RhoError) else f"{type(err).__name__}: {err}"
        outcome.verification = "not_started"
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return outcome
