"""Running workflow work in the background of an interactive process (a Jupyter kernel, a REPL).

:class:`BackgroundRunner` owns ONE daemon thread per process, started lazily on first use (never
at import), that runs its own asyncio event loop. Everything long-lived happens there: awaiting
the planning worker, and following runs. The caller's thread (the kernel's main thread, whose own
event loop serves the notebook) is never used for that work, so a cell that blocks
(``time.sleep``, heavy computation) does not stall the delivery of a run's events.

A run's owner is never this process: :meth:`BackgroundRunner.start_run` starts it as a process of
its own (:mod:`rho_notebook.runtime.detached`, from its fork server: this process has threads) and then
follows it; :meth:`BackgroundRunner.attach` follows a run some other process owns (started by a
kernel since restarted, a terminal, the server). So a kernel restart or crash, or a server's
shutdown, stops only the following: the run goes on, and a new kernel attaches to it again.

:class:`~rho_notebook.service.run_handle.RunHandle` (in :mod:`.run_handle`) is the caller's view of
one run followed on the runner:

- ``state()`` is a consistent copy of the live :class:`~rho_notebook.model.run_state.RunState`, folded
  from the same journal records the owner writes; ``status()`` is the durable snapshot any other
  process sees (``rho-notebook status``).
- ``add_listener(callback)`` delivers every journal record (and the live-only ``output_chunk``
  records, which carry no ``seq``) **on the runner thread**. A callback must return quickly and
  must not block on the caller's event loop; UI code marshals to its own thread or loop.
- ``outputs`` maps node name -> validated output value, read from the run store.
- ``cancel()`` writes the same durable cancel request as ``rho-notebook cancel``.
- ``await handle`` (from any asyncio loop, e.g. a notebook cell) returns the final ``RunState``.
- ``await handle.until(node, state)`` (blocking twin ``wait_until``) returns once the node is in
  that state or the run has ended, woken by the journal events themselves: notebooks never poll.

Strong references: the runner keeps every task it created and every future it handed out until
they finish, and every handle it started or attached, so nothing is garbage collected mid-flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from rho_notebook.runtime.detached import OwnerOptions
from rho_notebook.runtime.follow import RunFollower
from rho_notebook.runtime.status import load_state
from rho_notebook.service.run_handle import Listener, RunHandle, RunOutputs, StateMirror, run_outputs
from rho_notebook.store.layout import StoreLayout

__all__ = [
    "BackgroundRunner",
    "RunHandle",
    "RunOutputs",
    "Listener",
    "default_runner",
    "wait_for",
    "run_outputs",
    "StateMirror",
]

T = TypeVar("T")


class RunService(Protocol):
    """What the runner needs of :class:`~rho_notebook.service.Service` (kept structural so that
    this layer does not import the service above it)."""

    layout: StoreLayout

    def start_owner(self, run_id: str, options: OwnerOptions | None = ..., *, fork: bool = ...) -> int: ...

    def follower(self, run_id: str, *, after_seq: int = ..., answers: bool = ...) -> RunFollower: ...


class BackgroundRunner:
    """A dedicated daemon thread running an asyncio loop, shared by everything in the process.

    Use :func:`default_runner` for the process-wide instance; create your own only in tests.
    """

    def __init__(self, *, name: str = "rho-notebook-runner") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._futures: set[concurrent.futures.Future[Any]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        """Touched only on the runner thread."""
        self._handles: dict[str, RunHandle] = {}

    # -- the loop -------------------------------------------------------------------------------------

    @property
    def thread(self) -> threading.Thread | None:
        """The runner thread, or None before first use."""
        return self._thread

    def in_runner_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is not None and self._thread is not None and self._thread.is_alive():
                return self._loop
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            thread = threading.Thread(target=self._main, args=(loop, ready), name=self._name, daemon=True)
            thread.start()
            ready.wait()
            self._loop, self._thread = loop, thread
            return loop

    @staticmethod
    def _main(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    # -- work ------------------------------------------------------------------------------------------

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the runner's loop; returns a thread-safe future of its result.

        The future cannot be cancelled once the coroutine has started (cancel a run with
        :meth:`RunHandle.cancel`, which goes through the durable request path).
        """
        loop = self._ensure_loop()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)
        loop.call_soon_threadsafe(self._spawn, coro, future)
        return future

    def call(self, coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
        """Run ``coro`` on the runner and wait for its result: the sync bridge for facades.

        Safe to call from a thread whose own event loop is running (a kernel cell): the work runs
        on the runner's loop, never on the caller's, and never through ``asyncio.run``.

        Raises
        ------
        RuntimeError
            When called from the runner thread itself (it would wait on itself forever).
        """
        if self.in_runner_thread():
            coro.close()
            msg = "BackgroundRunner.call() from the runner thread would deadlock; await the coroutine instead"
            raise RuntimeError(msg)
        return self.submit(coro).result(timeout)

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._futures.discard(future)

    def _spawn(self, coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T]) -> None:
        if not future.set_running_or_notify_cancel():
            coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._settle(done, future))

    def _settle(self, task: asyncio.Task[T], future: concurrent.futures.Future[T]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            future.set_exception(concurrent.futures.CancelledError())
            return
        error = task.exception()
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(task.result())

    # -- runs ------------------------------------------------------------------------------------------

    def start_run(
        self,
        service: RunService,
        run_id: str,
        *,
        resume: bool = False,
        recover_uncertain: bool = False,
        approval_timeout: float | None = None,
        listeners: Sequence[Listener] = (),
        wait_started: bool = True,
        decisions: Mapping[str, str] | None = None,
        executor: str | None = None,
    ) -> RunHandle:
        """Start (or resume) ``run_id`` in an owner process of its own and follow it on the runner
        thread; returns once the owner holds the run (at once without ``wait_started``).

        Parameters
        ----------
        service
            The :class:`~rho_notebook.service.Service` whose store holds the run.
        run_id
            Full run ID.
        resume, recover_uncertain
            As ``rho-notebook resume [--recover-uncertain]``.
        approval_timeout
            None (the default): a supervised launch waits for a person as long as its node allows,
            also while no process follows the run (the kernel was restarted: the person decides
            later, from the widget of a new kernel, the sidebar or ``rho-notebook approve``). Seconds:
            while nobody who can answer follows the run, it waits that long, then fails closed.
        listeners
            Attached before the owner starts, so they see every event of this execution.
        wait_started
            Wait (on this thread) until the owner holds the run or refused it, so that refusals
            (owned elsewhere, needs recovery) raise here instead of later.
        decisions
            A script run's ``resume --decide STEP=rerun|skip`` (each authorises one call).
        executor
            ``local``, ``dask`` or ``dask=ADDRESS`` for this execution (None: the run's recorded one).

        Raises
        ------
        RunRefused, NeedsRecovery
            With ``wait_started``, when the owner refuses to start (or could not be started).
        """
        options = OwnerOptions(
            resume=resume,
            recover_uncertain=recover_uncertain,
            decisions=dict(decisions or {}),
            approval_timeout=approval_timeout,
            executor=executor,
        )
        handle = self._handle(service, run_id, listeners)
        handle.begin(service, options, wait_started=wait_started)
        return handle

    def attach(self, service: RunService, run_id: str, *, listeners: Sequence[Listener] = ()) -> RunHandle:
        """A live handle of ``run_id`` (a full ID) that follows the run to its end, without ever
        starting an owner: this process's handle of it while that one is still following, else a
        new one (a run started by an earlier kernel, a terminal or the server). ``await`` it for
        the final state; on a run that has ended it settles at once."""
        with self._lock:
            known = self._handles.get(run_id)
        if known is not None and not known.done():
            for listener in listeners:
                known.add_listener(listener)
            return known
        handle = self._handle(service, run_id, listeners)
        handle.begin(service, None, wait_started=False)
        return handle

    def _handle(self, service: RunService, run_id: str, listeners: Sequence[Listener]) -> RunHandle:
        """A new handle of ``run_id`` from its durable state now, kept as this process's handle of it."""
        layout: StoreLayout = service.layout
        handle = RunHandle(runner=self, layout=layout, run_id=run_id, initial=load_state(layout, run_id))
        for listener in listeners:
            handle.add_listener(listener)
        with self._lock:
            self._handles[run_id] = handle
        return handle

    def handles(self) -> list[RunHandle]:
        """Every run this process started, resumed or attached to, oldest first."""
        with self._lock:
            return list(self._handles.values())

    def handle(self, run_id: str) -> RunHandle | None:
        """This process's latest handle of ``run_id``, if any (it may be done)."""
        with self._lock:
            return self._handles.get(run_id)


_default: BackgroundRunner | None = None
_default_lock = threading.Lock()
_fork_hook = False


def _reset_after_fork() -> None:
    global _default, _default_lock
    _default = None
    _default_lock = threading.Lock()


def default_runner() -> BackgroundRunner:
    """The process-wide runner (created on first call; a forked child gets a fresh one)."""
    global _default, _fork_hook
    with _default_lock:
        if _default is None:
            _default = BackgroundRunner()
            if not _fork_hook:
                os.register_at_fork(after_in_child=_reset_after_fork)
                _fork_hook = True
        return _default


def wait_for(coro: Coroutine[Any, Any, T]) -> T:
    """The one bridge for synchronous callers (the notebook API, magics, widgets): run a service
    coroutine on the process-wide runner's loop and return its result.

    Safe in a running kernel (the kernel's loop is never used, never ``asyncio.run`` on it). From
    the runner thread itself (a run listener), which cannot wait on its own loop, the coroutine runs
    on a short-lived loop in a helper thread instead.
    """
    runner = default_runner()
    if not runner.in_runner_thread():
        return runner.call(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rho-wait-for") as pool:
        return pool.submit(asyncio.run, coro).result()
