"""Live run views: a controller that feeds run events into a :class:`DagWidget`, batched.

Threads: a handle calls the listener on the *runner* thread (a ``RunHandle`` follows the run's
owner process there). The listener only folds the event
into a :class:`RunTracker` under the widget lock (microseconds) and pokes a :class:`Throttle`;
flushes run on the shared pump thread, at most one per ``interval`` (0.1 s: ~10 messages a
second), and send one custom message with only the changed node views (plus new output of the
selected running node). Traits are never assigned off the main thread (see ``_dag.py``).

Human steps of an item graph wait for a person with a ``form`` request: the controller keeps the
run's pending form requests in the widget's ``forms`` (re-read from the store when a request is
made or decided), and a form submitted in the widget is answered through
:meth:`Service.answer` (``via="notebook"``) on the kernel's thread; a refused answer (a value of
the wrong type, a missing field) is shown on the form, which stays pending.

:class:`JournalWatch` gives the same handle interface for a run this kernel does not follow (a
finished run, one created but not started yet, or a widget built without a runner): it polls the
run's journal without taking ownership. A live run is followed through the ``RunHandle`` that
``rho.attach`` gives (``%workflow show`` does so).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from rho_notebook.errors import RhoError
from rho_notebook.model.events import now_iso
from rho_notebook.model.run_state import NodeRecord, RunState, apply
from rho_notebook.service import (
    ApprovalRequest,
    Consent,
    ResumeRun,
    Service,
    StateMirror,
    StoreLayout,
    default_runner,
)
from rho_notebook.service.wire import LIVE_LIFECYCLES
from rho_notebook.views.dag import (
    PANE_BYTES,
    Detail,
    RunTracker,
    StreamTail,
    dag_view,
    node_detail,
    reused_source_dir,
    run_times,
)
from rho_notebook.widgets._call import call
from rho_notebook.widgets._dag import DagWidget
from rho_notebook.widgets._throttle import DEFAULT_INTERVAL, Throttle, Timer, pump

__all__ = ["RunHandleLike", "RunController", "JournalWatch", "form_view"]

Listener = Callable[[dict[str, Any]], None]
_LIVE = tuple(lifecycle.value for lifecycle in LIVE_LIFECYCLES)
_WATCHED = (*_LIVE, "planned")
_STOPPED = ("completed", "needs_decision")
"""Lifecycles in which the run has stopped: the saved snapshot is refreshed."""
_PLANNED_PATIENCE = 30.0
"""Seconds a watch keeps polling a created run that no owner has started."""
_FORM_EVENTS = ("approval_requested", "approval_decided", "run_completed")
"""Events after which the pending form requests are read again."""


def form_view(request: ApprovalRequest, *, error: str | None = None) -> dict[str, Any]:
    """What the widget shows of a human step's pending form request: the question and the typed
    fields (``facts["form"]``), with the message of the last refused answer."""
    facts = request.facts
    view: dict[str, Any] = {
        "request_id": request.request_id,
        "node": request.node,
        "step": str(facts.get("step", request.node)),
        "prompt": str(facts.get("prompt", "")),
        "form": copy.deepcopy(facts.get("form") or {}),
    }
    if error:
        view["error"] = error
    return view


@runtime_checkable
class RunHandleLike(Protocol):
    """What :func:`rho_notebook.widgets.run_view` needs of a run handle.

    ``rho_notebook.service.RunHandle`` satisfies it; so does :class:`JournalWatch`.
    Optional attributes used when present: ``service`` (a :class:`Service`) or ``layout`` (a
    :class:`StoreLayout`) naming the store the run lives in (default ``Service.default()``).
    """

    run_id: str

    def add_listener(self, callback: Listener) -> None:
        """Call ``callback(event)`` for every journal event (any thread)."""

    def state(self) -> RunState:
        """A thread-safe copy of the run's current state."""

    def done(self) -> bool: ...

    def cancel(self) -> Any: ...


Resume = Callable[[str, str], Any]
"""(run ID, confirmed graph digest) -> the handle of the resumed run; raises when refused."""


class RunController:
    """Wires one run handle to one :class:`DagWidget`; see the module docstring for threading."""

    def __init__(
        self,
        handle: RunHandleLike,
        *,
        service: Service | None = None,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        timer: Timer | None = None,
        resume: Resume | None = None,
    ) -> None:
        if service is None:
            service = getattr(handle, "service", None)
        if service is None:
            layout = getattr(handle, "layout", None)
            service = Service(layout=layout) if isinstance(layout, StoreLayout) else Service.default()
        if not isinstance(service, Service):
            msg = f"handle.service must be a rho_notebook Service, not {type(service).__name__}"
            raise TypeError(msg)
        self.service = service
        self.handle = handle
        self.run_id = handle.run_id
        self._resume_run: Resume = resume or self._resume_in_background
        self.graph_digest = call(service.manifest(self.run_id)).graph_digest
        self.graph = call(service.run_graph(self.run_id))
        self.lock = threading.RLock()
        self._early: list[dict[str, Any]] = []
        self.tracker: RunTracker | None = None
        self._tails: dict[str, StreamTail] = {}
        self._tail_key: tuple[str, int] | None = None
        self._finished = False
        self._forms_dirty = False
        self._form_errors: dict[str, str] = {}
        """The message of each request's last refused answer, shown on its form."""
        self.listener_calls = 0
        self.throttle = Throttle(self._flush, interval=interval, clock=clock, timer=timer)
        # listen first, then take the state: events in between are replayed (seq filters repeats)
        handle.add_listener(self._listen)
        tracker = self._make_tracker(handle.state())
        view = dag_view(
            self.graph,
            tracker.state,
            started_at=tracker.started_at,
            ended_at=tracker.ended_at,
            digest=self.graph_digest,
        )
        self.widget = DagWidget(
            view, on_select=self._detail, on_action=self._action, on_answer=self._answer, lock=self.lock
        )
        self.widget.on_close = self.close
        self.widget.forms = self._pending_forms()
        with self.lock:
            for event in self._early:
                tracker.feed(event)
            self._early.clear()
            self.tracker = tracker
        self.throttle.poke()

    def close(self) -> None:
        """Stop listening and flushing (the widget was closed)."""
        self.throttle.close()
        remove = getattr(self.handle, "remove_listener", None)
        if callable(remove):
            remove(self._listen)

    def _make_tracker(self, state: RunState) -> RunTracker:
        started, ended = run_times(call(self.service.journal(self.run_id)).events)
        return RunTracker(state, started_at=started, ended_at=ended, graph=self.graph)

    # -- runner thread ----------------------------------------------------------------------------

    def _listen(self, event: dict[str, Any]) -> None:
        """The handle's listener: fold under the lock, poke the throttle. Nothing else."""
        with self.lock:
            self.listener_calls += 1
            forms = event.get("kind") in _FORM_EVENTS
            self._forms_dirty = self._forms_dirty or forms
            if self.tracker is None:
                self._early.append(event)
                return
            changed = self.tracker.feed(event)
        if changed or forms or event.get("kind") == "output_chunk":
            self.throttle.poke()

    # -- pump thread ------------------------------------------------------------------------------

    def _flush(self) -> None:
        tracker = self.tracker
        if tracker is None:
            return
        patch, selected, nodes, output_dirty, lifecycle = self._take_changes(tracker)
        if selected:
            patch.update(self._selected_patch(selected, nodes, output_dirty))
        if patch:
            patch["now"] = now_iso()
            self.widget.send_patch(patch)
        if lifecycle in _STOPPED and not self._finished:
            self._finished = True
            self.widget.refresh_static()

    def _take_changes(self, tracker: RunTracker) -> tuple[dict[str, Any], Any, dict[str, Any], set[str], Any]:
        """Apply what changed since the last flush to the widget: (the patch to send, the selected
        node, the changed node views, the nodes with new output, the run's lifecycle)."""
        widget = self.widget
        with widget.lock:
            forms_dirty, self._forms_dirty = self._forms_dirty, False
        forms = self._pending_forms() if forms_dirty else None
        with widget.lock:
            if forms is not None and forms != widget.forms:
                widget.forms[:] = forms
            else:
                forms = None
            layout = tracker.take_layout(digest=self.graph_digest)
            nodes, run = tracker.take()
            output_dirty, tracker.output_dirty = tracker.output_dirty, set()
            grown = widget.grow(layout) if layout is not None else None
            if nodes:
                widget.nodes.update(nodes)
            if run:
                widget.run.update(run)
            selected = widget.selected
            lifecycle = widget.run.get("lifecycle")
        found = {"layout": grown, "nodes": nodes or None, "run": run or None, "forms": forms}
        patch: dict[str, Any] = {key: value for key, value in found.items() if value is not None}
        return patch, selected, nodes, output_dirty, lifecycle

    def _selected_patch(self, selected: str, nodes: dict[str, Any], output_dirty: set[str]) -> dict[str, Any]:
        """The selected node's pane when its view changed, else its new output when it has some."""
        widget = self.widget
        if selected in nodes:
            detail = self._detail(selected)
            with widget.lock:
                if widget.selected == selected:
                    widget.detail.clear()
                    widget.detail.update(detail)
                    return {"detail": detail}
        elif selected in output_dirty:
            output = self._tail(selected)
            if output:
                return {"output": output}
        return {}

    def _tail(self, name: str) -> list[dict[str, Any]]:
        """New bytes of the selected running node's streams, applied to the pane in place."""
        widget = self.widget
        with widget.lock:
            attempt = int(widget.nodes.get(name, {}).get("attempt", 0))
            if self._tail_key != (name, attempt):
                return []
        found = []
        for stream, tail in self._tails.items():
            start, text = tail.read(limit=PANE_BYTES)
            if not text:
                continue
            found.append(
                {"node": name, "attempt": attempt, "stream": stream, "start": start, "end": tail.offset, "text": text}
            )
            with widget.lock:
                pane = widget.detail.get(stream)
                if widget.detail.get("node") != name:
                    continue
                if not isinstance(pane, dict):
                    pane = {"text": "", "bytes": 0, "start": start, "end": start, "truncated": False, "limit": 0}
                    widget.detail[stream] = pane
                joined = pane["text"] + text
                if len(joined) > PANE_BYTES:
                    joined = joined[-PANE_BYTES:]
                    pane["start"] = tail.offset - len(joined.encode())
                pane["text"] = joined
                pane["end"] = pane["bytes"] = tail.offset
        return found

    # -- main thread (front-end messages) ---------------------------------------------------------

    def _detail(self, name: str) -> dict[str, Any]:
        tracker = self.tracker
        if tracker is None:
            return {}
        with self.widget.lock:
            record = tracker.state.nodes.get(name)
            record = None if record is None else _copy_record(record)
            view = tracker.nodes.get(name)
            halted = view.get("halted") if view is not None else None
        if record is None:
            return {}
        attempt_dir = self.service.attempt_dir(self.run_id, name, record.attempt) if record.attempt else None
        reused = record.current is not None and record.current.reused_from is not None
        source_dir = call(reused_source_dir(self.service, record)) if reused else None
        detail: Detail = node_detail(
            self.graph,
            name,
            record,
            attempt_dir=attempt_dir,
            source_dir=source_dir,
            halted=halted,
        )
        if detail.get("live") and attempt_dir is not None:
            tails = {}
            for stream in ("stdout", "stderr"):
                pane = detail.get(stream)
                start = pane["end"] if isinstance(pane, dict) else 0
                tails[stream] = StreamTail(attempt_dir / stream, start=start)
            self._tails, self._tail_key = tails, (name, record.attempt)
        elif self._tail_key is not None and self._tail_key[0] == name:
            self._tails, self._tail_key = {}, None
        return dict(detail)

    def _pending_forms(self) -> list[dict[str, Any]]:
        """The run's pending form requests (none once the run has stopped: nobody waits)."""
        if self.handle.done():
            return []
        pending = [r for r in call(self.service.pending_approvals(self.run_id)) if r.kind == "form"]
        pending.sort(key=lambda r: (r.requested_at, r.request_id))
        return [form_view(r, error=self._form_errors.get(r.request_id)) for r in pending]

    def _answer(self, request_id: str, values: dict[str, Any] | None) -> None:
        """A form submitted (``values``) or declined (None) in the widget: record it as the person
        at this kernel (``via="notebook"``); a refusal is shown on the form, which stays pending."""
        try:
            request = call(self.service.approval_request(self.run_id, request_id))
            if request.kind != "form":
                msg = f"request {request_id} of run {self.run_id} is not a human step's form"
                raise ValueError(msg)
            if values is None:
                call(self.service.decide(request, approve=False, comment=None, via="notebook"))
            else:
                call(self.service.answer(request, values, via="notebook"))
        except (RhoError, ValueError) as err:  # refused (wrong value, gone, ...): said on the form
            self._form_errors[request_id] = str(err)
        else:
            self._form_errors.pop(request_id, None)
        forms = self._pending_forms()
        with self.widget.lock:
            self.widget.forms[:] = forms
        self.widget.send_patch({"forms": forms, "now": now_iso()})

    def _note(self, message: str) -> None:
        tracker = self.tracker
        if tracker is None:
            return
        with self.widget.lock:
            tracker.version += 1
            tracker.run["message"] = message
            tracker.run["v"] = tracker.version
            tracker.run_dirty = True
        self.throttle.poke()

    def _action(self, action: str) -> None:
        if action == "cancel":
            self._note("cancel requested…")
            threading.Thread(target=self._cancel, name=f"rho-cancel-{self.run_id[:8]}", daemon=True).start()
        elif action == "resume":
            self._resume()

    def _cancel(self) -> None:
        try:
            result = self.handle.cancel()
        except Exception as err:  # shown in the view; the run is unchanged
            self._note(f"cancel failed: {type(err).__name__}: {err}")
            return
        state = getattr(result, "cancellation_state", None)
        self._note(f"cancel {state}" if state else "cancel requested")

    def _resume(self) -> None:
        """The Resume button is the confirmation of this run's graph digest (shown on it)."""
        with self.lock:
            lifecycle = self.widget.run.get("lifecycle")
        if lifecycle == "needs_recovery":
            self._note(
                "needs recovery: inspect the uncertain attempts, make sure no earlier process remains, then "
                f"`%workflow resume {self.run_id[:13]} --recover-uncertain --yes`"
            )
            return
        if lifecycle == "needs_decision":
            halted = self.widget.run.get("halted") or []
            decide = " ".join(f"--decide {h.get('step')}=rerun|skip" for h in halted) or "--decide STEP=rerun|skip"
            self._note(
                "needs a decision: "
                + "; ".join(f"{h.get('step')} ({h.get('why')})" for h in halted)
                + f": `rho-notebook resume {self.run_id} {decide}`"
            )
            return
        digest = self.graph_digest
        try:
            handle = self._resume_run(self.run_id, digest)
        except Exception as err:  # RunRefused, NeedsRecovery, ...: say why in the view
            self._note(f"resume refused: {getattr(err, 'message', None) or err}")
            return
        if handle is not None and hasattr(handle, "add_listener"):
            self.attach(handle)
        self._note(f"resumed (confirmed {digest[:19]}…)")

    def _resume_in_background(self, run_id: str, digest: str) -> Any:
        """Resume on this process's background runner, the Resume button's click being the
        confirmation of ``digest`` (the digest shown on the button)."""
        request = ResumeRun(run=run_id, consent=Consent(digest=digest))
        full = call(self.service.check_resume(request))
        return default_runner().start_run(self.service, full, resume=True)

    def attach(self, handle: RunHandleLike) -> None:
        """Follow a new handle of the same run (after resume)."""
        if handle.run_id != self.run_id:
            msg = f"cannot attach run {handle.run_id} to the view of run {self.run_id}"
            raise ValueError(msg)
        self.handle = handle
        self._finished = False
        handle.add_listener(self._listen)
        with self.lock:
            after = self.tracker.state.last_seq if self.tracker is not None else 0
        missed = call(self.service.journal(self.run_id, after_seq=after)).events
        with self.lock:
            if self.tracker is not None:
                for event in missed:
                    self.tracker.feed(event)
        self.throttle.poke()


def _copy_record(record: NodeRecord) -> NodeRecord:
    return copy.deepcopy(record)


class StoreRunHandle(StateMirror):
    """A run handle that acts through a :class:`Service`: ``cancel`` writes the durable request
    (the CLI's mechanism), whichever process owns the run."""

    def __init__(self, service: Service, run_id: str, state: RunState) -> None:
        super().__init__(state)
        self.service = service
        self.run_id = run_id

    def cancel(self) -> Any:
        return call(self.service.cancel(self.run_id))


class JournalWatch(StoreRunHandle):
    """A read-only run handle that polls the journal (never takes ownership of the run).

    Used to watch runs this kernel does not follow with a ``RunHandle`` (finished, or not
    started yet). Polls stop once the run is no longer live.
    """

    def __init__(self, service: Service, run_id: str, *, interval: float = 0.25) -> None:
        full = call(service.resolve_run(run_id))
        super().__init__(service, full, call(service.status(full)))
        self.interval = interval
        self._polling = False
        self._unowned_polls = 0

    def add_listener(self, callback: Listener) -> None:
        with self._lock:
            self._listeners.append(callback)
            start = not self._polling and self._state.lifecycle.value in _WATCHED
            self._polling = self._polling or start
        if start:
            pump().call_later(self.interval, self._poll)

    def done(self) -> bool:
        with self._lock:
            return self._state.lifecycle.value not in _LIVE

    def _poll(self) -> None:
        with self._lock:
            after = self._state.last_seq
        owned = self.service.is_owned(self.run_id)  # before reading: an owner writes, then unlocks
        events = call(self.service.journal(self.run_id, after_seq=after)).events
        with self._lock:
            for event in events:
                apply(self._state, event)
            if not owned and self._state.lifecycle.value in _LIVE:
                # the owner is gone without completing: report what status would say
                lost = {"kind": "needs_recovery", "nodes": self._state.uncertain_nodes()}
                apply(self._state, lost)
                events.append(lost)
            running = [(n, r.attempt) for n, r in self._state.nodes.items() if r.state.value == "running"]
            listeners = list(self._listeners)
            if self._state.lifecycle.value == "planned" and not owned:
                self._unowned_polls += 1
            live = self._state.lifecycle.value in _WATCHED and self._unowned_polls * self.interval < _PLANNED_PATIENCE
            self._polling = live
        for event in events:
            for listener in listeners:
                listener(event)
        for name, attempt in running:
            for listener in listeners:
                listener({"kind": "output_chunk", "node": name, "attempt": attempt})
        if live:
            pump().call_later(self.interval, self._poll)
