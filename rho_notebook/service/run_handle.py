"""The caller's view of one run, followed on the :class:`~rho_notebook.service.background.BackgroundRunner`.

A run's owner is a process of its own (:mod:`rho_notebook.runtime.detached`): the handle starts it
(or attaches to a run another process owns) and follows it with a
:class:`~rho_notebook.runtime.follow.RunFollower` on the runner's loop. :class:`RunHandle` mirrors
the run's state from the journal records the owner writes (a :class:`StateMirror`, which other
read-only handles share), delivers them, and the follower's live ``output_chunk`` records, to
listeners on the runner thread, waits for a node to reach a state without polling
(:meth:`RunHandle.until`), and reads the run's outputs and result from the store. Nothing the
handle's process does (an interrupted await, a kernel restart or crash, a server shutdown) stops
the run: only :meth:`RunHandle.cancel` does. See :mod:`rho_notebook.service.background` for the
threading rules.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import logging
import threading
import time
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any

from rho_notebook.errors import RhoError
from rho_notebook.model.events import EventKind
from rho_notebook.model.node_names import no_node
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.policy.approvals import ApprovalRequest
from rho_notebook.runtime.cancel import CancelResult, request_cancel
from rho_notebook.runtime.detached import OwnerOptions
from rho_notebook.runtime.status import load_state
from rho_notebook.service.decisions import pending_approvals
from rho_notebook.service.results import RunResult, run_result
from rho_notebook.store.journal import read_journal
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import RunStore

if TYPE_CHECKING:
    from rho_notebook.service.background import BackgroundRunner, RunService

__all__ = ["Listener", "RunHandle", "RunOutputs", "StateMirror", "run_outputs"]

Listener = Callable[[dict[str, Any]], None]
"""Receives one event dict; called on the runner thread."""

_log = logging.getLogger("rho_notebook.service.background")
"""The runner's log: a listener that raises is reported there."""

_START_TIMEOUT = 75.0
"""How long start_run waits for the owner process to hold the run (recovery may first stop old
processes; :func:`~rho_notebook.runtime.detached.start_owner` itself gives up after 60 s)."""

VIEW_PATIENCE = 5.0
"""How long awaiting a stopped run waits at most for a view of it to show the end (see
:meth:`RunHandle.hold_await`): a view that fails to draw delays the await, never hangs it."""

ViewShown = Callable[[float], bool]
"""Blocks up to the given seconds until a view shows the run as it stands; True once it does."""


class StateMirror:
    """A run's state folded from its journal records, and the listeners those records go to.

    The base of every run handle (this one, and the front ends' read-only handles): ``state()``
    is a consistent copy, safe to take from any thread.
    """

    def __init__(self, state: RunState) -> None:
        self._lock = threading.Lock()
        self._state = state
        self._listeners: list[Listener] = []

    def remove_listener(self, callback: Listener) -> None:
        with self._lock:
            if callback in self._listeners:
                self._listeners.remove(callback)

    def state(self) -> RunState:
        """A consistent copy of the live state (folded from the owner's journal records)."""
        with self._lock:
            return copy.deepcopy(self._state)

    def copy_if(self, test: Callable[[RunState], bool]) -> RunState | None:
        """A copy of the live state when ``test(state)`` holds (checked under the lock), else None."""
        with self._lock:
            return copy.deepcopy(self._state) if test(self._state) else None


class RunOutputs(dict[str, Any]):
    """node name -> validated output value; a missing key says why the node has none."""

    def __init__(self, values: Mapping[str, Any], *, state: RunState) -> None:
        super().__init__(values)
        self._states = {name: record.state.value for name, record in state.nodes.items()}
        self._run_id = state.run_id

    def __missing__(self, key: str) -> Any:
        if key not in self._states:
            msg = no_node(f"run {self._run_id}", key, self._states)
        else:
            msg = f"node {key!r} has no validated output (state {self._states[key]}); only successful nodes with an output schema have one"
        raise KeyError(msg)


def run_outputs(layout: StoreLayout, state: RunState) -> RunOutputs:
    """Validated output values of the successful nodes of ``state``, read from the run store."""
    return RunOutputs(RunStore(layout).folder(state.run_id).output_values_at(state.value_sources()), state=state)


# -- the handle ----------------------------------------------------------------------------------------


class RunHandle(StateMirror):
    """A run followed on the :class:`BackgroundRunner` (created by ``start_run``, which starts its
    owner process, or by ``attach``, which follows a run some process already owns).

    Thread-safety: every method may be called from any thread. Listeners run on the runner thread.
    """

    def __init__(self, *, runner: BackgroundRunner, layout: StoreLayout, run_id: str, initial: RunState) -> None:
        super().__init__(initial)
        self._runner = runner
        self._layout = layout
        self._run_id = run_id
        self._future: concurrent.futures.Future[RunState] | None = None
        self._started = threading.Event()
        self._settled = threading.Event()
        """Set once the owner stopped and the mirror holds the final durable state."""
        self._settle_callbacks: list[Callable[[], None]] = []
        self._views: list[ViewShown] = []

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

    def begin(self, service: RunService, options: OwnerOptions | None, *, wait_started: bool) -> None:
        """Start the run's owner process with ``options`` and follow it on the runner; with
        ``options`` None, only follow (the run's owner is some other process, or it has ended).
        With ``wait_started``, wait until ``run_started`` is in the mirror (the owner holds the
        run, and has journaled what a resume settles first) or the owner refused (then raise).
        :meth:`BackgroundRunner.start_run` says what the options mean."""
        self._future = future = self._runner.submit(self._own(service, options))
        future.add_done_callback(self._finished)
        if wait_started:
            self._wait_started(_START_TIMEOUT)

    async def _own(self, service: RunService, options: OwnerOptions | None) -> RunState:
        """On the runner: start the owner (from the fork server: this process has threads) in a worker thread,
        then follow the run from the records after the initial snapshot until its owner stops."""
        with self._lock:
            after = self._state.last_seq
        if options is not None:
            await asyncio.to_thread(service.start_owner, self._run_id, options, fork=False)
        else:
            self._started.set()  # nothing to start; a started run's run_started record sets it
        follower = service.follower(self._run_id, after_seq=after, answers=True)
        return await follower.follow(self._on_event)

    def _finished(self, future: concurrent.futures.Future[RunState]) -> None:
        """Runs on the runner thread: deliver the records the follower did not (a refused start),
        say so when the owner died mid-run, and settle the mirror on the durable state."""
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
        for record in missed:  # e.g. needs_recovery, journaled by a refusing owner
            self._on_event(record)
        with self._lock:
            lost = final is not None and final.lifecycle is Lifecycle.NEEDS_RECOVERY
            lost = lost and self._state.lifecycle is not Lifecycle.NEEDS_RECOVERY
            uncertain = self._state.uncertain_nodes()
        if lost:  # the owner died without a word: listeners hear what status now says
            self._on_event({"kind": EventKind.NEEDS_RECOVERY.value, "run_id": self._run_id, "nodes": uncertain})
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

    def hold_await(self, shown: ViewShown) -> Callable[[], None]:
        """Make awaiting this handle (or :meth:`wait`) return only once ``shown`` says a view of
        the run shows its end (at most :data:`VIEW_PATIENCE` seconds after the run stopped); returns
        a remover. A run view in a notebook draws its final picture on a thread of its own; without
        this, the cell that awaits the run could finish first, and ``jupyter nbconvert --execute``
        (which saves what a cell's messages say, until its end) would keep the running picture."""
        with self._lock:
            self._views.append(shown)

        def remove() -> None:
            with self._lock:
                if shown in self._views:
                    self._views.remove(shown)

        return remove

    def _held_views(self) -> list[ViewShown]:
        """A copy of the held views, taken under the lock (a view may remove itself meanwhile)."""
        with self._lock:
            return list(self._views)

    def _views_drawn(self) -> bool:
        """Block until every held view shows the run's end, :data:`VIEW_PATIENCE` seconds in all
        at most; whether they all do."""
        deadline = time.monotonic() + VIEW_PATIENCE
        return all(shown(max(0.0, deadline - time.monotonic())) for shown in self._held_views())

    async def _views_shown(self) -> None:
        # a view behind: wait in a worker thread, not on this loop
        if not all(shown(0) for shown in self._held_views()):
            await asyncio.to_thread(self._views_drawn)

    def _wait_started(self, timeout: float) -> None:
        self._started.wait(timeout)
        future = self._future
        if future is not None and future.done():
            error = future.exception()
            if error is not None:
                raise error

    # -- reading ----------------------------------------------------------------------------------------

    def status(self) -> RunState:
        """The durable snapshot, exactly what ``rho-notebook status`` reads from the store."""
        return load_state(self._layout, self._run_id)

    def done(self) -> bool:
        """Whether the owner has stopped (completed, cancelled, halted, refused the start or
        died) and :meth:`state` is the final durable state."""
        return self._settled.is_set()

    def exception(self) -> BaseException | None:
        """Once done, the error that kept the owner from starting (e.g. NeedsRecovery, or
        RunRefused when another process owns the run); None for a run that ran, whatever its
        outcome (an owner that died mid-run leaves the state ``needs_recovery``)."""
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
        self._views_drawn()
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
        target = _node_state(state)
        with self._lock:
            if node not in self._state.nodes:
                msg = no_node(f"run {self._run_id}", node, self._state.nodes)
                raise KeyError(msg)
        wait = _NodeWait(self, node, target, owner=self._future)
        remove = self.add_listener(wait.listen)
        wait.future.add_done_callback(lambda _done: remove())
        # listener first, then the snapshot: a change in between is seen by one or the other
        snapshot = wait.reached()
        if snapshot is not None:
            wait.answer(snapshot, None)
        else:
            self._when_settled(wait.ended)
        return wait.future

    @property
    def outputs(self) -> RunOutputs:
        """node name -> validated output value (Python values), for nodes that succeeded."""
        return run_outputs(self._layout, self.state())

    def result(self) -> RunResult:
        """Per node: state, attempts, exit, output and artifact paths (``rho-notebook result``)."""
        return run_result(RunStore(self._layout).folder(self._run_id), self.state())

    def pending_approvals(self) -> list[ApprovalRequest]:
        """Approval requests the owner is waiting on (approval nodes, supervised launches): the
        requests the journal says are waiting, read from the run's requests folder."""
        waiting = set(self.state().waiting_requests().values())
        if not waiting:
            return []
        found = pending_approvals(self._layout, self._run_id)
        return sorted((r for r in found if r.request_id in waiting), key=lambda r: r.request_id)

    # -- acting -----------------------------------------------------------------------------------------

    def cancel(self, *, wait_seconds: float = 2.0) -> CancelResult:
        """Durably request cancellation (the CLI's mechanism) and wait for the acknowledgement.

        From a listener (the runner thread) the request is recorded without waiting, so that the
        follower that delivers the owner's records is not held up.
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
        yield from self._views_shown().__await__()
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


def _node_state(state: NodeState | str) -> NodeState:
    try:
        return NodeState(state)
    except ValueError:
        known = ", ".join(s.value for s in NodeState)
        msg = f"{state!r} is not a node state; use one of: {known}"
        raise ValueError(msg) from None


class _NodeWait:
    """One :meth:`RunHandle.until`: a future answered once ``node`` is in ``target`` or the run ended."""

    def __init__(
        self, handle: RunHandle, node: str, target: NodeState, *, owner: concurrent.futures.Future[RunState]
    ) -> None:
        self.future: concurrent.futures.Future[RunState] = concurrent.futures.Future()
        self._handle = handle
        self._node = node
        self._target = target
        self._owner = owner

    def answer(self, snapshot: RunState | None, error: BaseException | None) -> None:
        if not self.future.set_running_or_notify_cancel():  # cancelled, or already answered
            return
        if error is not None:
            self.future.set_exception(error)
        elif snapshot is not None:
            self.future.set_result(snapshot)

    def reached(self) -> RunState | None:
        return self._handle.copy_if(lambda state: state.nodes[self._node].state is self._target)

    def listen(self, _record: dict[str, Any]) -> None:
        if self.future.done():
            return
        snapshot = self.reached()  # the record is already folded into the mirror
        if snapshot is not None:
            self.answer(snapshot, None)

    def ended(self) -> None:
        if self.future.done():
            return
        snapshot = self.reached()
        error = None if snapshot is not None else self._owner.exception()
        self.answer(snapshot if snapshot is not None else self._handle.state(), error)
