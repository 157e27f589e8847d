"""Worker processes (``_worker.py``) and the parent's end of their framed JSON channel.

A worker is a plain :class:`subprocess.Popen` whose pipes are read and written without blocking,
through whichever event loop the current call runs on (``loop.add_reader``): a warm worker outlives
the loop of one call (a sync facade runs each call in its own loop), so nothing here is bound to a
loop. :func:`rho_notebook.source.evaluate.talk_to_worker` is the one way to use a worker: a fresh
one per request (:func:`start_worker`), or the warm one of :mod:`rho_notebook.source.warm`.

What the worker writes to stderr during a request is kept (the first 16 KiB): when it dies, that
text says why (:func:`death_diagnostic`: an allocation that failed, the CPU limit, a crash), and
the channel raises :class:`~rho_notebook.errors.WorkerStopped` with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from rho_notebook.errors import RhoError, WorkerStopped

__all__ = [
    "WORKER_PATH",
    "PipeChannel",
    "Worker",
    "death_diagnostic",
    "start_worker",
    "stop_worker",
    "wall_diagnostic",
]

WORKER_PATH = Path(__file__).with_name("_worker.py")
_HEADER = struct.Struct(">I")
_STDERR_KEEP = 16_384
_READ_SIZE = 1 << 20
_WORKER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
_TERMINAL = frozenset({"result", "code_result", "error", "done"})
"""The frames that end a request (``_worker.py``); after one the worker waits for the next."""


class PipeChannel:
    """The parent's end of one worker's channel: length-prefixed JSON frames on its stdin and
    stdout, its stderr drained (and the first 16 KiB kept) while a call is under way."""

    def __init__(self, process: subprocess.Popen[bytes], worker_limits: dict[str, int]) -> None:
        if process.stdin is None or process.stdout is None or process.stderr is None:
            raise RhoError("planning worker was started without its pipes")
        self.process = process
        self.worker_limits = worker_limits
        self._fds = (process.stdin.fileno(), process.stdout.fileno(), process.stderr.fileno())
        for fd in self._fds:
            os.set_blocking(fd, False)
        self._buffer = bytearray()
        self.stderr = bytearray()
        self.at_rest = True
        """No request is under way: the last frame received ended one (or none was sent)."""
        self.overran = False
        """The last request ended with a budget's diagnostic: the worker must not serve another."""

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode()
        self.at_rest = False
        view = memoryview(_HEADER.pack(len(data)) + data)
        while view:
            try:
                view = view[os.write(self._fds[0], view) :]
            except BlockingIOError:
                await _ready(self._fds[0], write=True)
            except BrokenPipeError:
                await self._died()

    async def receive(self) -> dict[str, Any]:
        """The next frame.

        Raises
        ------
        WorkerStopped
            The worker closed its channel: it exited, by a limit or a crash (:func:`death_diagnostic`).
        """
        (size,) = _HEADER.unpack(await self._read_exactly(_HEADER.size))
        message: dict[str, Any] = json.loads(await self._read_exactly(size))
        if message.get("op") in _TERMINAL:
            self.at_rest = True
            self.overran = message["op"] == "error" and "budget" in message.get("diagnostic", {})
        return message

    def open_call(self) -> None:
        """Start draining stderr on this loop, dropping what an earlier call left unread."""
        self._drain_stderr()
        self.stderr.clear()
        asyncio.get_running_loop().add_reader(self._fds[2], self._drain_stderr)

    def close_call(self) -> None:
        with contextlib.suppress(ValueError, OSError):  # the loop may be closing, the pipe closed
            asyncio.get_running_loop().remove_reader(self._fds[2])

    async def _read_exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            try:
                chunk = os.read(self._fds[1], max(_READ_SIZE, size - len(self._buffer)))
            except BlockingIOError:
                await _ready(self._fds[1])
                continue
            if not chunk:
                await self._died()
            self._buffer += chunk
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def _died(self) -> NoReturn:
        """Wait for the worker to exit (its channel is closed) and say why it did."""
        while self.process.poll() is None:
            await asyncio.sleep(0.002)
        self._drain_stderr()
        raise WorkerStopped(death_diagnostic(self.process.returncode, bytes(self.stderr), self.worker_limits))

    def _drain_stderr(self) -> None:
        while True:
            try:
                chunk = os.read(self._fds[2], 65536)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                self.close_call()
                return
            if len(self.stderr) < _STDERR_KEEP:
                self.stderr += chunk[: _STDERR_KEEP - len(self.stderr)]


async def _ready(fd: int, *, write: bool = False) -> None:
    """Wait until ``fd`` can be read (or written) on the running loop."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    (loop.add_writer if write else loop.add_reader)(fd, wake)
    try:
        await ready
    finally:
        (loop.remove_writer if write else loop.remove_reader)(fd)


@dataclass
class Worker:
    """One worker process and its channel."""

    process: subprocess.Popen[bytes]
    channel: PipeChannel
    warm: bool
    """Started with ``--warm``: it serves requests until its channel is closed."""
    limits: tuple[tuple[str, int], ...]
    """The limits it was started for (a warm worker's address-space limit cannot be raised)."""
    uses: int = 0


def start_worker(worker_limits: dict[str, int], *, warm: bool) -> Worker:
    """Start a worker process (isolated interpreter, bare environment, its own session)."""
    process = subprocess.Popen(
        [sys.executable, "-I", str(WORKER_PATH), *(["--warm"] if warm else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_WORKER_ENV,
        start_new_session=True,
        close_fds=True,
    )
    return Worker(process, PipeChannel(process, worker_limits), warm, tuple(sorted(worker_limits.items())))


async def stop_worker(worker: Worker) -> None:
    """Kill the worker if it still runs and reap it (also when the awaiting task is cancelled)."""
    process = worker.process
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    try:
        while process.poll() is None:
            await asyncio.sleep(0.001)
    finally:
        close_pipes(worker)


def close_pipes(worker: Worker) -> None:
    for stream in (worker.process.stdin, worker.process.stdout, worker.process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def wall_diagnostic(worker_limits: dict[str, int], measured_ms: int) -> dict[str, Any]:
    """The diagnostic of a worker stopped by its parent at the wall budget (plus start-up)."""
    return {
        "rule": "limit.evaluator_wall_ms",
        "budget": "evaluator_wall_ms",
        "limit": worker_limits["evaluator_wall_ms"],
        "measured": measured_ms,
        "message": "the planning worker was stopped",
    }


_ALLOC = re.compile(rb"memory allocation of (\d+) bytes failed")


def death_diagnostic(returncode: int | None, stderr: bytes, worker_limits: dict[str, int]) -> dict[str, Any]:
    """Why a worker died, as a worker diagnostic: a memory or CPU budget, or a crash."""
    alloc = _ALLOC.search(stderr)
    if alloc or b"MemoryError" in stderr:
        limit = worker_limits["evaluator_address_space"]
        requested = int(alloc.group(1)) if alloc else 0
        return {
            "rule": "limit.evaluator_address_space",
            "budget": "evaluator_address_space",
            "limit": limit,
            "measured": limit + requested,
            "message": f"the planning worker's address space reached its limit and a further {requested}-byte request failed",
        }
    if returncode is not None and returncode in (-24, -9):  # SIGXCPU, or the kernel's kill at the hard limit
        return {
            "rule": "limit.evaluator_wall_ms",
            "budget": "evaluator_wall_ms",
            "limit": worker_limits["evaluator_wall_ms"],
            "measured": worker_limits["evaluator_wall_ms"],
            "message": "the planning worker hit its CPU-time limit",
        }
    tail = stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
    return {
        "rule": "worker.crashed",
        "message": f"the planning worker exited unexpectedly (code {returncode}): {' | '.join(tail)}",
    }
