"""Running workflow work in the background of an interactive process (a Jupyter kernel, a REPL).

:class:`BackgroundRunner` owns ONE daemon thread per process, started lazily on first use (never
at import), that runs its own asyncio event loop. Everything long-lived happens there: awaiting
the planning worker, and executing runs as their owner. The caller's thread (the kernel's main
thread, whose own event loop serves the notebook) is never used for that work, so a cell that
blocks (``time.sleep``, heavy computation) does not stall launches, timeouts or cancel
acknowledgements: the runner thread gets the GIL at every switch interval and its blocking calls
are short (fsync, ``os.write``, ``Popen``).

:class:`RunHandle` is the caller's view of one run executing on the runner:

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
they finish, and every handle it started, so nothing is garbage collected mid-flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import logging
import os
import threading
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from rho_notebook.errors import RhoError
from rho_notebook.model.run_state import RunState, apply
from rho_notebook.model.state import NodeState
from rho_notebook.runtime.cancel import CancelResult, request_cancel
from rho_notebook.runtime.status import load_state
from rho_notebook.service.results import RunResult, run_result
from rho_notebook.store.journal import read_journal
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import RunStore

__all__ = [
    "BackgroundRunner",
    "RunHandle",
    "RunOutputs",
    "Listener",
    "default_runner",
    "wait_for",
    "run_outputs",
]

T = TypeVar("T")
Listener = Callable[[dict[str, Any]], None]
"""Receives one event dict; called on the runner thread."""

_log = logging.getLogger(__name__)


class RunService(Protocol):
    """What the runner needs of :class:`~rho_notebook.service.Service` (kept structural so that
    this layer does not import the service above it)."""

    layout: StoreLayout

    def execute(
        self,
        run_id: str,
        *,
        resume: bool = ...,
        recover_uncertain: bool = ...,
        on_event: Callable[[dict[str, Any]], None] | None = ...,
        responder: Callable[[Any], None] | None = ...,
        approval_timeout: float = ...,
        decisions: Mapping[str, str] | None = ...,
        executor: str | None = ...,
    ) -> Coroutine[Any, Any, RunState]: ...


_START_TIMEOUT = 60.0
"""How long start_run waits for the owner's run_started (recovery may first stop old processes)."""


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
        approval_timeout: float = 0.0,
        listeners: Sequence[Listener] = (),
        wait_started: bool = True,
        decisions: Mapping[str, str] | None = None,
        executor: str | None = None,
    ) -> RunHandle:
        """Execute (or resume) ``run_id`` as its owner on the runner thread; returns at once.

        Parameters
        ----------
        service
            The :class:`~rho_notebook.service.Service` whose store holds the run.
        run_id
            Full run ID.
        resume, recover_uncertain
            As ``rho-notebook resume [--recover-uncertain]``.
        approval_timeout
            Passed to the driver; unused while a responder is present (a handle always offers one:
            the notebook decides through the run widget, ``%workflow approve`` or the CLI).
        listeners
            Attached before the owner starts, so they see every event of this execution.
        wait_started
            Wait (on this thread) until the owner has journaled ``run_started`` or failed, so that
            refusals (owned elsewhere, needs recovery) raise here instead of later.
        decisions
            A script run's ``resume --decide STEP=rerun|skip`` (each authorises one call).
        executor
            ``local``, ``dask`` or ``dask=ADDRESS`` for this execution (None: the run's recorded one).

        Raises
        ------
        RunRefused, NeedsRecovery
            With ``wait_started``, when the owner refuses to start.
        """
        layout: StoreLayout = service.layout
        handle = RunHandle(runner=self, layout=layout, run_id=run_id, initial=load_state(layout, run_id))
        for listener in listeners:
            handle.add_listener(listener)
        coro = service.execute(
            run_id,
            resume=resume,
            recover_uncertain=recover_uncertain,
            on_event=handle._on_event,
            responder=handle._on_approval_request,
            approval_timeout=approval_timeout,
            decisions=decisions,
            executor=executor,
        )
        with self._lock:
            self._handles[run_id] = handle
        future = self.submit(coro)
        handle._attach(future)
        if wait_started:
            handle._wait_started(_START_TIMEOUT)
        return handle

    def handles(self) -> list[RunHandle]:
        """Every run this process started or resumed, oldest first."""
        with self._lock:
            return list(self._handles.values())

    def handle(self, run_id: str) -> RunHandle | None:
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


# -- outputs and results -----------------------------------------------------------------------------


class RunOutputs(dict[str, Any]):
    """node name -> validated output value; a missing key says why the node has none."""

    def __init__(self, values: Mapping[str, Any], *, state: RunState) -> None:
        super().__init__(values)
        self._states = {name: record.state.value for name, record in state.nodes.items()}
        self._run_id = state.run_id

    def __missing__(self, key: str) -> Any:
        if key not in self._states:
            msg = f"run {self._run_id} has no node {key!r}; its nodes: {', '.join(sorted(self._states))}"
        else:
            msg = f"node {key!r} has no validated output (state {self._states[key]}); only successful nodes with an output schema have one"
        raise KeyError(msg)


def run_outputs(layout: StoreLayout, state: RunState) -> RunOutputs:
    """Validated output values of the successful nodes of ``state``, read from the run store."""
    return RunOutputs(RunStore(layout).folder(state.run_id).output_values_at(state.value_sources()), state=state)


# -- the handle ----------------------------------------------------------------------------------------


class RunHandle:
    """A run executing on the :class:`BackgroundRunner` (created by ``start_run``).

    Thread-safety: every method may be called from any thread. Listeners run on the runner thread.
    """

    def __init__(self, *, runner: BackgroundRunner, layout: StoreLayout, run_id: str, initial: RunState) -> None:
        self._runner = runner
        self._layout = layout
        self._run_id = run_id
        self._lock = threading.Lock()
        self._state = initial
        self._listeners: list[Listener] = []
        self._future: concurrent.futures.Future[RunState] | None = None
        self._started = threading.Event()
        self._settled = threading.Event()
        """Set once the owner stopped and the mirror holds the final durable state."""
        self._settle_callbacks: list[Callable[[], None]] = []
        self._approvals: dict[str, Any] = {}

    # -- identity ---------------------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def plan_id(self) -> str:
        return self._state.plan_id

    @property
    def workflow(self) -> str:
        return self._state.workflow

    @property
    def graph_digest(self) -> str:
        return self._state.graph_digest

    @property
    def layout(self) -> StoreLayout:
        return self._layout

    # -- events (runner thread) ----------------------------------------------------------------------

    def add_listener(self, callback: Listener) -> Callable[[], None]:
        """Call ``callback(event)`` for every later event, on the runner thread; returns a remover.

        To combine a snapshot with the stream without a gap: add the listener first, then take
        :meth:`state`; events whose ``seq`` is at most ``state().last_seq`` are already in it.
        Exceptions raised by a callback are logged (``rho_notebook.service.background``) and do not
        affect the run.
        """
        with self._lock:
            self._listeners.append(callback)

        def remove() -> None:
            self.remove_listener(callback)

        return remove

    def remove_listener(self, callback: Listener) -> None:
        with self._lock:
            if callback in self._listeners:
                self._listeners.remove(callback)

    def _on_event(self, record: dict[str, Any]) -> None:
        with self._lock:
            if "seq" in record and int(record["seq"]) > self._state.last_seq:
                apply(self._state, record)
            listeners = list(self._listeners)
        if record.get("kind") == "run_started":
            self._started.set()
        self._deliver(listeners, record)

    @staticmethod
    def _deliver(listeners: list[Listener], record: dict[str, Any]) -> None:
        for callback in listeners:
            try:
                callback(record)
            except Exception:
                _log.exception("a run listener raised while handling %s", record.get("kind"))

    def _on_approval_request(self, request: Any) -> None:
        with self._lock:
            self._approvals[request.request_id] = request

    def _attach(self, future: concurrent.futures.Future[RunState]) -> None:
        self._future = future
        future.add_done_callback(self._finished)

    def _finished(self, future: concurrent.futures.Future[RunState]) -> None:
        """Runs on the runner thread: settle the mirror and deliver records written past on_event."""
        try:
            final = load_state(self._layout, self._run_id)
        except (RhoError, OSError):
            final = None
        with self._lock:
            seen = self._state.last_seq
        try:
            missed = read_journal(RunStore(self._layout).folder(self._run_id).events, after_seq=seen).events
        except (RhoError, OSError):
            missed = []
        for record in missed:  # e.g. needs_recovery, journaled by a refusing owner without on_event
            self._on_event(record)
        with self._lock:
            if final is not None:
                self._state = final
            self._settled.set()
            callbacks, self._settle_callbacks = self._settle_callbacks, []
        self._started.set()
        for callback in callbacks:
            callback()

    def _when_settled(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if not self._settled.is_set():
                self._settle_callbacks.append(callback)
                return
        callback()

    def _wait_started(self, timeout: float) -> None:
        self._started.wait(timeout)
        future = self._future
        if future is not None and future.done():
            error = future.exception()
            if error is not None:
                raise error

    # -- reading ----------------------------------------------------------------------------------------

    def state(self) -> RunState:
        """A consistent copy of the live state (folded from the owner's journal records)."""
        with self._lock:
            return copy.deepcopy(self._state)

    def status(self) -> RunState:
        """The durable snapshot, exactly what ``rho-notebook status`` reads from the store."""
        return load_state(self._layout, self._run_id)

    def done(self) -> bool:
        """Whether the owner has stopped (completed, cancelled, refused or failed)."""
        return self._settled.is_set()

    def exception(self) -> BaseException | None:
        """The error that stopped the owner (e.g. NeedsRecovery), once done; else None."""
        if self._future is None or not self._settled.is_set():
            return None
        return self._future.exception()

    def wait(self, timeout: float | None = None) -> RunState:
        """Block this thread until the run stops; returns the final state (raises its error).

        Raises
        ------
        TimeoutError
            When ``timeout`` seconds pass first (the run goes on).
        """
        if self._future is None:
            msg = f"run {self._run_id} was never started"
            raise RuntimeError(msg)
        if not self._settled.wait(timeout):
            msg = f"run {self._run_id} is still {self.state().lifecycle.value} after {timeout} s"
            raise TimeoutError(msg)
        error = self._future.exception()
        if error is not None:
            raise error
        return self.state()

    async def until(self, node: str, state: NodeState | str) -> RunState:
        """Wait until ``node`` is in ``state`` or the run has ended, whichever comes first.

        ``await run.until("slow", "running")`` replaces a polling loop: it is woken by the run's
        own journal events (a listener on the runner thread), never by a timer, and it cannot hang
        on a run that ended first (``prepare`` failed, the run was cancelled). Check the answer to
        see which happened::

            state = await run.until("slow", "running")
            if state.nodes["slow"].state.value != "running":
                ...  # the run ended first; state is its final state

        Cancelling the await (an interrupted cell) stops the wait, never the run.

        Parameters
        ----------
        node
            A node of the run.
        state
            A :class:`~rho_notebook.model.state.NodeState` or its value (``"running"``).

        Returns
        -------
        RunState
            A copy of the run state taken when ``node`` was first seen in ``state`` (the node
            may have moved on since), or the final state when the run ended first.

        Raises
        ------
        KeyError
            The run has no node ``node``.
        ValueError
            ``state`` is not a node state.
        RunRefused, NeedsRecovery
            The owner stopped with that error before ``node`` reached ``state`` (as ``await run``).
        """
        waiter = self._until(node, state)
        return await asyncio.wrap_future(waiter)

    def wait_until(self, node: str, state: NodeState | str, *, timeout: float | None = None) -> RunState:
        """Block this thread until ``node`` is in ``state`` or the run has ended: the blocking
        twin of :meth:`until` (same answer, same errors).

        Raises
        ------
        TimeoutError
            When ``timeout`` seconds pass first (the run goes on).
        RuntimeError
            When called from the runner thread (a listener), which would wait on itself.
        """
        if self._runner.in_runner_thread():
            msg = "RunHandle.wait_until() from the runner thread would deadlock; use a listener instead"
            raise RuntimeError(msg)
        waiter = self._until(node, state)
        try:
            return waiter.result(timeout)
        except concurrent.futures.TimeoutError:
            waiter.cancel()
            target = NodeState(state).value
            now = self.state()
            msg = (
                f"node {node!r} of run {self._run_id} is still {now.nodes[node].state.value}, not {target}, "
                f"after {timeout} s (the run is {now.lifecycle.value})"
            )
            raise TimeoutError(msg) from None

    def _until(self, node: str, state: NodeState | str) -> concurrent.futures.Future[RunState]:
        """A private future answered on the runner thread by a listener (the node reached
        ``state``) or by the settle callback (the run ended); cancelling it only stops watching."""
        if self._future is None:
            msg = f"run {self._run_id} was never started"
            raise RuntimeError(msg)
        try:
            target = NodeState(state)
        except ValueError:
            known = ", ".join(s.value for s in NodeState)
            msg = f"{state!r} is not a node state; use one of: {known}"
            raise ValueError(msg) from None
        with self._lock:
            if node not in self._state.nodes:
                msg = f"run {self._run_id} has no node {node!r}; its nodes: {', '.join(sorted(self._state.nodes))}"
                raise KeyError(msg)
        waiter: concurrent.futures.Future[RunState] = concurrent.futures.Future()
        owner = self._future

        def answer(snapshot: RunState | None, error: BaseException | None) -> None:
            if not waiter.set_running_or_notify_cancel():  # cancelled, or already answered
                return
            if error is not None:
                waiter.set_exception(error)
            elif snapshot is not None:
                waiter.set_result(snapshot)

        def reached() -> RunState | None:
            with self._lock:
                if self._state.nodes[node].state is target:
                    return copy.deepcopy(self._state)
            return None

        def listen(_record: dict[str, Any]) -> None:
            if waiter.done():
                return
            snapshot = reached()  # the record is already folded into the mirror
            if snapshot is not None:
                answer(snapshot, None)

        def ended() -> None:
            if waiter.done():
                return
            snapshot = reached()
            error = None if snapshot is not None else owner.exception()
            answer(snapshot if snapshot is not None else self.state(), error)

        remove = self.add_listener(listen)
        waiter.add_done_callback(lambda _done: remove())
        # listener first, then the snapshot: a change in between is seen by one or the other
        snapshot = reached()
        if snapshot is not None:
            answer(snapshot, None)
        else:
            self._when_settled(ended)
        return waiter

    @property
    def outputs(self) -> RunOutputs:
        """node name -> validated output value (Python values), for nodes that succeeded."""
        return run_outputs(self._layout, self.state())

    def result(self) -> RunResult:
        """Per node: state, attempts, exit, output and artifact paths (``rho-notebook result``)."""
        return run_result(RunStore(self._layout).folder(self._run_id), self.state())

    def pending_approvals(self) -> list[Any]:
        """Approval requests the owner is waiting on (approval nodes, supervised launches)."""
        state = self.state()
        waiting = set(state.waiting_requests().values())
        with self._lock:
            return [r for rid, r in sorted(self._approvals.items()) if rid in waiting]

    # -- acting -----------------------------------------------------------------------------------------

    def cancel(self, *, wait_seconds: float = 2.0) -> CancelResult:
        """Durably request cancellation (the CLI's mechanism) and wait for the acknowledgement.

        From a listener (the runner thread) the request is recorded without waiting, because the
        owner that acknowledges it runs on that same thread.
        """
        if self._runner.in_runner_thread():
            wait_seconds = 0.0
        return request_cancel(self._layout, self._run_id, wait_seconds=wait_seconds)

    def __await__(self) -> Generator[Any, None, RunState]:
        if self._future is None:
            msg = f"run {self._run_id} was never started"
            raise RuntimeError(msg)
        # a private proxy: cancelling the awaiting task (an interrupted cell) must not touch the run
        proxy: concurrent.futures.Future[RunState] = concurrent.futures.Future()

        future = self._future

        def copy_result() -> None:
            if not proxy.set_running_or_notify_cancel():
                return
            error = future.exception()
            if error is not None:
                proxy.set_exception(error)
            else:
                proxy.set_result(self.state())

        self._when_settled(copy_result)
        yield from asyncio.wrap_future(proxy).__await__()
        return self.state()

    # -- display ----------------------------------------------------------------------------------------

    def summary(self) -> str:
        state = self.state()
        counts: dict[str, int] = {}
        for record in state.nodes.values():
            counts[record.state.value] = counts.get(record.state.value, 0) + 1
        shown = ", ".join(f"{counts[s.value]} {s.value}" for s in NodeState if s.value in counts)
        outcome = f" outcome {state.outcome}" if state.outcome else ""
        return f"run {state.run_id} of {state.workflow}: {state.lifecycle.value}{outcome} ({shown})"

    def __repr__(self) -> str:
        return f"<RunHandle {self.summary()}>"
