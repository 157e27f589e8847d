"""Live run views: a controller that feeds run events into a :class:`DagWidget`, batched.

Threads: a handle calls the listener on the *runner* thread (a ``RunHandle`` follows the run's
owner process there). The listener only folds the event into a :class:`RunTracker` under the
widget lock (microseconds) and pokes a :class:`Throttle`; flushes run on the shared pump thread,
at most one per ``interval`` (0.1 s: ~10 messages a second), and send one custom message with
only the changed node views (plus new output of the selected running node). Traits are never
assigned off the main thread (see ``_dag.py``). When the run stops, a flush replaces the cell's
picture with the final DAG before it sends the patch that says so, and awaiting the handle the
view was made with returns only once that flush is done (:meth:`RunHandle.hold_await`): the cell
that awaits a run ends with the run's final picture, in JupyterLab and in ``nbconvert --execute``.

Human steps of an item graph wait for a person with a ``form`` request: the controller keeps the
run's pending form requests in the widget's ``forms`` (re-read from the store when a request is
made or decided), and a form submitted in the widget is answered through
:meth:`Service.answer` (``via="notebook"``) on the kernel's thread; a refused answer (a value of
the wrong type, a missing field) is shown on the form, which stays pending.

A view follows its *run*, not the handle it was made with: the controllers of a run listen to
the one :class:`~rho_notebook.widgets._feed.RunFeed` of that run in this process (``_feed.py``).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

from rho_notebook.errors import RhoError
from rho_notebook.model.budget import resume_flags
from rho_notebook.model.events import now_iso
from rho_notebook.model.run_state import RunState
from rho_notebook.service import Consent, ResumeRun, Service, StoreLayout, default_runner
from rho_notebook.service.usage import live_spend
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
from rho_notebook.views.timeline import TimelineJson, graph_needs, timeline_of
from rho_notebook.widgets._approvals import form_view
from rho_notebook.widgets._call import call
from rho_notebook.widgets._dag import DagWidget
from rho_notebook.widgets._feed import JournalWatch, RunFeed, RunHandleLike, follow_handle, join_feed, leave_feed
from rho_notebook.widgets._fork import ForkAction
from rho_notebook.widgets._throttle import DEFAULT_INTERVAL, Throttle, Timer

__all__ = ["RunHandleLike", "RunController", "JournalWatch", "RunFeed", "follow_handle", "form_view"]

_STOPPED = ("completed", "needs_decision")
"""Lifecycles in which the run has stopped: the saved snapshot is refreshed."""
_FORM_EVENTS = ("approval_requested", "approval_decided", "run_completed")
"""Events after which the pending form requests are read again."""


Resume = Callable[[str, str], Any]  # (run ID, confirmed digest) -> the resumed run's handle; raises if refused


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
        self._drawn = threading.Condition()
        self._asked = 0
        """Pokes so far (the listener's and the actions'), under :attr:`_drawn`."""
        self._flushed = 0
        """Pokes the widget has drawn: every one asked before the start of the last flush."""
        self._closed = False
        self.throttle = Throttle(self._flush, interval=interval, clock=clock, timer=timer)
        self.feed, state = join_feed(service, handle, self._listen)
        tracker = self._make_tracker(state)
        view = dag_view(
            self.graph,
            tracker.state,
            started_at=tracker.started_at,
            ended_at=tracker.ended_at,
            digest=self.graph_digest,
        )
        self._add_spend(tracker.state, view.nodes, view.run, known=None)
        self.widget = DagWidget(
            view, on_select=self._detail, on_action=self._action, on_answer=self._answer, lock=self.lock
        )
        self.widget.on_fork = ForkAction(service, self.run_id)  # "fork from here" (_fork.py)
        self.widget.on_close = self.close
        self.widget.forms = self._pending_forms()
        self._holds: list[Callable[[], object]] = []
        self._hold(handle)
        with self.lock:
            for event in self._early:
                tracker.feed(event)
            self._early.clear()
            self.tracker = tracker
        self._poke()

    def close(self) -> None:
        """Stop listening and flushing (the widget was closed)."""
        self.throttle.close()
        leave_feed(self.feed, self._listen)
        for release in self._holds:
            release()
        with self._drawn:
            self._closed = True
            self._drawn.notify_all()

    def shows_the_run(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until every change the view was told of is drawn (for
        a stopped run: its final picture too); True once it is, or once the view is closed."""
        with self._drawn:
            return self._drawn.wait_for(lambda: self._closed or self._flushed >= self._asked, timeout)

    def _hold(self, handle: RunHandleLike) -> None:
        """Awaiting ``handle`` (a RunHandle) returns once this view has drawn the run's end."""
        hold_await = getattr(handle, "hold_await", None)
        if callable(hold_await):
            self._holds.append(hold_await(self.shows_the_run))

    def _poke(self) -> None:
        with self._drawn:
            self._asked += 1
        self.throttle.poke()

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
            self._poke()

    # -- pump thread ------------------------------------------------------------------------------

    def _flush(self) -> None:
        with self._drawn:
            asked = self._asked
        try:
            self._draw()
        finally:
            with self._drawn:
                self._flushed = max(self._flushed, asked)
                self._drawn.notify_all()

    def _draw(self) -> None:
        tracker = self.tracker
        if tracker is None:
            return
        patch, selected, nodes, output_dirty, lifecycle = self._take_changes(tracker)
        if selected:
            patch.update(self._selected_patch(selected, nodes, output_dirty))
        # the final picture first: a front end that sees the run stop has the picture of its end
        if lifecycle in _STOPPED and not self._finished:
            self._finished = True
            self.widget.static_timeline = self.timeline()  # drawn under the final DAG (views/timeline_svg.py)
            self.widget.refresh_static()
        elif lifecycle not in _STOPPED:
            self._finished = False  # resumed (here or elsewhere): refresh again when it stops
        if patch:
            patch["now"] = now_iso()
            self.widget.send_patch(patch)

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
            if nodes:  # what the model calls spent (docs/usage.md): the changed nodes and the run
                run = self._add_spend(tracker.state, nodes, run, known=widget.run.get("usage"))
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

    def _add_spend(self, state: RunState, nodes: Any, run: Any, *, known: Any) -> Any:
        """Give changed node views their ``usage`` and the run view (the changed part ``run``, made
        when None, returned) the run's when it differs from ``known``, once a call was made or saved."""
        spent, total = live_spend(state, nodes, home=self.service.layout.home)
        for name, usage in spent.items():
            nodes[name] = {**nodes[name], "usage": usage}
        if total is not None and total != known:
            run = {} if run is None else run
            run["usage"] = total
        return run

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
            record = None if record is None else copy.deepcopy(record)
            view = tracker.nodes.get(name)
            halted = view.get("halted") if view is not None else None
        if record is None:
            return {}
        attempt_dir = self.service.attempt_dir(self.run_id, name, record.attempt) if record.attempt else None
        reused = record.current is not None and record.current.reused_from is not None
        source_dir = call(reused_source_dir(self.service, record, run_id=self.run_id)) if reused else None
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
        if not self.feed.live():
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
        self._poke()

    def _action(self, action: str) -> None:
        if action == "cancel":
            self._note("cancel requested…")
            threading.Thread(target=self._cancel, name=f"rho-cancel-{self.run_id[:8]}", daemon=True).start()
        elif action == "resume":
            self._resume()
        elif action == "timeline":  # the Timeline tab asks (js/src/timeline.ts)
            self.widget.send({"kind": "timeline", "timeline": dict(self.timeline())})

    def timeline(self) -> TimelineJson:
        """The run's timeline as its journal stands (:func:`rho_notebook.views.timeline.timeline_of`)."""
        events = call(self.service.journal(self.run_id)).events
        return timeline_of(self.run_id, events, needs=graph_needs(self.graph), live=self.service.is_owned(self.run_id))

    def _cancel(self) -> None:
        try:
            result = self.feed.cancel()
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
            decide = resume_flags(halted) or "--decide STEP=rerun|skip"
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
        """Follow a new handle of the same run (after resume): every view of the run does."""
        if handle.run_id != self.run_id:
            msg = f"cannot attach run {handle.run_id} to the view of run {self.run_id}"
            raise ValueError(msg)
        self.handle = handle
        self.feed.offer(handle)
        self._hold(handle)
        self._poke()
