"""The hub (``%workflow hub``): START, RUNS and SAVED PLANS in one widget, as in Rho's /workflow.

- START: one row per validated workflow of the notebook; Start calls the session's start
  callable (a new background run) and opens its live view below.
- RUNS: live and finished runs of the store (newest first): Watch opens the DAG without taking
  ownership, Cancel requests a stop of a live run, Delete asks for confirmation first (a live run
  is never deleted).
- SAVED PLANS: Run plan opens the plan card, whose Run button confirms the digest; Delete asks
  for confirmation first (local .star sources are never touched).

All actions run on the kernel's main thread (button callbacks); nothing here is updated from
another thread. Refresh re-reads the store.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from html import escape
from typing import Any, Protocol, runtime_checkable

import ipywidgets as widgets  # type: ignore[import-untyped]

from rho_notebook.errors import RhoError, RunRefused
from rho_notebook.model.plan import Plan, PlanManifest
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle
from rho_notebook.service import RunsQuery, Service
from rho_notebook.service.wire import LIVE_LIFECYCLES
from rho_notebook.views.text import decision_lines
from rho_notebook.widgets._call import StaticViews, call

__all__ = ["HubSession", "Hub"]

RUNS_SHOWN = 50


@runtime_checkable
class HubSession(Protocol):
    """What the hub needs of the notebook session.

    Required: ``workflows`` — the validated workflows of this notebook as ``(name, start)`` pairs,
    where ``start()`` starts a new background run and returns its run handle (or run ID).

    Optional, used when present: ``service`` (the :class:`Service` over the store; default
    ``Service.default()``); ``handle_for(run_id)`` returning this kernel's live handle of a run, or
    None (the hub then watches through the journal); ``start_plan(plan)`` starting a new
    background run of a saved plan after its digest was confirmed on the plan card (without it,
    the card's Run button reports that this session cannot start saved plans).
    """

    @property
    def workflows(self) -> Sequence[tuple[str, Callable[[], Any]]]: ...


def _button(description: str, *, style: str = "", tooltip: str = "", icon: str = "") -> widgets.Button:
    return widgets.Button(
        description=description, button_style=style, tooltip=tooltip, icon=icon, layout=widgets.Layout(width="auto")
    )


def _label(html: str, width: str = "auto") -> widgets.HTML:
    return widgets.HTML(html, layout=widgets.Layout(width=width))


class Hub(StaticViews, widgets.VBox):  # type: ignore[misc]
    def __init__(self, session: HubSession) -> None:
        self.session = session
        service = getattr(session, "service", None)
        self.service: Service = service if isinstance(service, Service) else Service.default()
        self.message = widgets.HTML("")
        self.refresh_button = _button("Refresh", icon="refresh", tooltip="re-read runs and plans from the store")
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.start_box = widgets.VBox()
        self.runs_box = widgets.VBox()
        self.plans_box = widgets.VBox()
        self.detail = widgets.VBox()
        super().__init__(
            children=[
                widgets.HBox([_label("<b>Workflows</b>"), self.refresh_button, self.message]),
                _label("<b>START</b>"),
                self.start_box,
                _label("<b>RUNS</b>"),
                self.runs_box,
                _label("<b>SAVED PLANS</b>"),
                self.plans_box,
                self.detail,
            ]
        )
        self.add_class("rho-hub")
        self.refresh()

    # -- building ---------------------------------------------------------------------------------

    def refresh(self) -> None:
        self.start_box.children = self._start_rows()
        self.runs_box.children = self._run_rows()
        self.plans_box.children = self._plan_rows()

    def _say(self, text: str, *, error: bool = False) -> None:
        colour = "#dc2626" if error else "#374151"
        self.message.value = f'<span style="color:{colour}">{escape(text)}</span>'

    def _start_rows(self) -> list[widgets.Widget]:
        rows: list[widgets.Widget] = []
        for name, start in self.session.workflows:
            button = _button(
                f"Start {name}", style="primary", icon="play", tooltip=f"start a new run of {name} in the background"
            )
            button.on_click(lambda _b, name=name, start=start: self._start(name, start))
            rows.append(widgets.HBox([button]))
        if not rows:
            rows.append(_label("<i>no validated workflows in this notebook yet (write a %%workflow cell)</i>"))
        return rows

    def _runs(self) -> list[RunState]:
        """The newest runs of the store, newest first."""
        return call(self.service.runs(RunsQuery(limit=RUNS_SHOWN)))[::-1]

    def _plans(self) -> list[PlanManifest]:
        """The saved plans, newest first."""
        return call(self.service.plans())[::-1]

    def _run_rows(self) -> list[widgets.Widget]:
        rows: list[widgets.Widget] = []
        for state in self._runs():
            run_id = state.run_id
            live = state.lifecycle in LIVE_LIFECYCLES
            text = f"<code>{escape(state.lifecycle.value)}</code> · <code>{escape(run_id[:13])}</code> {escape(state.workflow)}"
            if state.outcome:
                text += f" · {escape(state.outcome)}"
            if state.lifecycle is Lifecycle.NEEDS_DECISION:
                # a script run stopped at steps it cannot decide alone: name them and the command
                lines = decision_lines(state)
                steps = ", ".join(escape(line.strip()) for line in lines[1:-2])
                text += f" · <b>needs a decision</b>: {steps} · <code>{escape(lines[-1].strip())}</code>"
            watch = _button(
                f"Watch {state.lifecycle.value} · {run_id[:8]}", icon="eye", tooltip=f"open the DAG of run {run_id}"
            )
            watch.on_click(lambda _b, run_id=run_id: self.watch(run_id))
            items: list[widgets.Widget] = [watch, _label(text)]
            if live:
                cancel = _button("Cancel", style="warning", icon="stop", tooltip="request cancellation of this run")
                cancel.on_click(lambda _b, run_id=run_id: self._cancel(run_id))
                items.append(cancel)
            delete = _button("Delete", icon="trash", tooltip="delete this run and its artifacts (asks first)")
            row = widgets.HBox(items + [delete])
            delete.on_click(
                lambda _b, run_id=run_id, row=row: self._confirm(
                    row, f"delete run {run_id} and its artifacts?", lambda: self._delete_run(run_id)
                )
            )
            rows.append(row)
        if not rows:
            rows.append(_label("<i>no runs yet</i>"))
        return rows

    def _plan_rows(self) -> list[widgets.Widget]:
        rows: list[widgets.Widget] = []
        for manifest in self._plans():
            plan_id = manifest.plan_id
            run = _button(
                f"Run plan · {plan_id[:8]}",
                icon="play",
                tooltip=f"open plan {plan_id} to confirm its digest and run it",
            )
            run.on_click(lambda _b, plan_id=plan_id: self.open_plan(plan_id))
            text = f"<code>{escape(plan_id[:13])}</code> {escape(manifest.workflow)} · <code>{escape(manifest.graph_digest[:19])}…</code> · {escape(manifest.created_at)}"
            delete = _button("Delete", icon="trash", tooltip="delete this saved plan (asks first; sources stay)")
            row = widgets.HBox([run, _label(text), delete])
            delete.on_click(
                lambda _b, plan_id=plan_id, row=row: self._confirm(
                    row, f"delete plan {plan_id}?", lambda: self._delete_plan(plan_id)
                )
            )
            rows.append(row)
        if not rows:
            rows.append(_label("<i>no saved plans</i>"))
        return rows

    def _confirm(self, row: widgets.HBox, question: str, action: Callable[[], None]) -> None:
        """Replace a row's buttons with [Delete] [Keep] until one is chosen."""
        before = row.children
        yes = _button("Delete", style="danger", icon="trash", tooltip=question)
        no = _button("Keep", tooltip="do not delete")
        yes.add_class("rho-confirm-delete")

        def confirmed(_b: object) -> None:
            action()
            self.refresh()

        def kept(_b: object) -> None:
            row.children = before

        yes.on_click(confirmed)
        no.on_click(kept)
        row.children = [_label(escape(question)), yes, no]

    # -- actions ----------------------------------------------------------------------------------

    def _open(self, widget: widgets.Widget) -> None:
        self.detail.children = [widget]

    def _start(self, name: str, start: Callable[[], Any]) -> None:
        try:
            result = start()
        except RhoError as err:
            self._say(f"{name}: {err.message}", error=True)
            return
        self._show_started(result)
        self.refresh()

    def _show_started(self, result: Any) -> None:
        from rho_notebook.widgets import run_view

        if hasattr(result, "add_listener"):
            self._say(f"run {result.run_id} started")
            self._open(run_view(result, service=self.service))
        elif isinstance(result, str):
            self._say(f"run {result} started")
            self.watch(result)

    def watch(self, run_id: str) -> None:
        """Open the DAG of a run: this kernel's handle when it owns the run, else the journal."""
        from rho_notebook.widgets import run_view
        from rho_notebook.widgets._run import JournalWatch

        handle_for = getattr(self.session, "handle_for", None)
        handle = handle_for(run_id) if callable(handle_for) else None
        try:
            source = handle if handle is not None else JournalWatch(self.service, run_id)
            self._open(run_view(source, service=self.service))
        except RhoError as err:
            self._say(err.message, error=True)

    def _cancel(self, run_id: str) -> None:
        handle_for = getattr(self.session, "handle_for", None)
        handle = handle_for(run_id) if callable(handle_for) else None
        try:
            result = handle.cancel() if handle is not None else call(self.service.cancel(run_id))
        except RhoError as err:
            self._say(err.message, error=True)
            return
        state = getattr(result, "cancellation_state", "requested")
        self._say(f"cancel of {run_id[:13]}: {state}")
        self.refresh()

    def _delete_run(self, run_id: str) -> None:
        # the service refuses a live run (an owner holds it)
        self._act(
            self.service.delete(run_id, include_plans=False),
            f"deleted run {run_id}",
            refused=f"run {run_id[:13]} is live; cancel it first",
        )

    def _delete_plan(self, plan_id: str) -> None:
        self._act(self.service.delete_plan(plan_id), f"deleted plan {plan_id}")

    def _act(self, verb: Coroutine[Any, Any, object], done: str, *, refused: str | None = None) -> None:
        """Await a service verb and say what happened (or why it was refused)."""
        try:
            call(verb)
        except RunRefused as err:
            self._say(refused or err.message, error=True)
        except RhoError as err:
            self._say(err.message, error=True)
        else:
            self._say(done)

    def open_plan(self, plan_id: str) -> None:
        from rho_notebook.widgets import plan_card

        try:
            plan = call(self.service.load_plan(plan_id))
        except RhoError as err:
            self._say(err.message, error=True)
            return
        self._open(plan_card(plan, on_run=lambda: self._run_plan(plan)))

    def _run_plan(self, plan: Plan) -> Any:
        start_plan = getattr(self.session, "start_plan", None)
        if not callable(start_plan):
            msg = f"this session cannot start saved plans; run `rho-notebook run {plan.plan_id[:13]} --yes`"
            raise RhoError(msg)
        result = start_plan(plan)  # the plan card shows the live run it returns
        self.refresh()
        return result

    def _static_views(self) -> dict[str, str]:
        runs = self._runs()
        plans = self._plans()
        lines = ['<div class="rho-hub-static" style="font-family:monospace;font-size:12px"><b>START</b><ul>']
        lines += [f"<li>{escape(name)}</li>" for name, _ in self.session.workflows] or ["<li>(none)</li>"]
        lines.append("</ul><b>RUNS</b><ul>")
        lines += [
            f"<li>{escape(s.lifecycle.value)} · {escape(s.run_id)} {escape(s.workflow)} {escape(s.outcome or '')}</li>"
            for s in runs
        ] or ["<li>(none)</li>"]
        lines.append("</ul><b>SAVED PLANS</b><ul>")
        lines += [f"<li>{escape(p.plan_id)} {escape(p.workflow)} {escape(p.graph_digest)}</li>" for p in plans] or [
            "<li>(none)</li>"
        ]
        lines.append("</ul></div>")
        return {"text/html": "".join(lines), "text/plain": f"<rho_notebook hub: {len(runs)} runs, {len(plans)} plans>"}
