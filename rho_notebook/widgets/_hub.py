"""The hub (``%workflow hub``): START, RUNS and SAVED PLANS in one widget, as in Rho's /workflow.

- START: one row per authoring cell of the notebook (``%%workflow``, ``%%script``, ``%%flow``,
  ``%%graph``, and the ``%%star`` / ``%%py`` modules and ``%%agent`` cells they use), each with its
  kind; Start (on a runnable cell that validated) calls the session's start callable (a new
  background run) and opens its live view below.
- RUNS: the store's newest runs. Live runs and runs that need a person (``needs_recovery``,
  ``needs_decision``: with the command that moves them on) first, then finished runs (newest
  first). Each is named by its start time and the shortest prefix of its ID that no other listed
  run shares. Watch opens the DAG without taking ownership, Cancel requests a stop of a live run,
  Delete (finished runs only) asks for confirmation first.
- SAVED PLANS, named by the shortest unique prefix of their ID as runs are: Run plan opens the
  plan card, whose Run button confirms the digest; Delete asks for confirmation first (local
  .star sources are never touched).

All actions run on the kernel's main thread (button callbacks); nothing here is updated from
another thread. Refresh re-reads the store.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from html import escape
from typing import Any, Protocol, cast, runtime_checkable

import ipywidgets as widgets  # type: ignore[import-untyped]

from rho_notebook.errors import RhoError, RunRefused
from rho_notebook.model.plan import Plan, PlanManifest
from rho_notebook.service import RunsQuery, Service
from rho_notebook.service.wire import RunRowJson
from rho_notebook.views.text import decision_lines
from rho_notebook.widgets._call import StaticViews, call
from rho_notebook.widgets._fork import lineage_text

__all__ = ["HubSession", "Hub", "unique_prefixes", "run_name", "needs_person", "SHORTEST_PREFIX"]

RUNS_SHOWN = 50
SHORTEST_PREFIX = 4
"""No run is named by fewer ID characters than this, even when fewer would be unique."""
NEEDS_PERSON = ("needs_recovery", "needs_decision")
"""Lifecycles of a run that has stopped without ending: a person moves it on (resume)."""
_WAITS_FOR = {"needs_decision": "needs a decision", "needs_recovery": "needs recovery", "waiting": "waits for a person"}


def unique_prefixes(ids: Iterable[str], *, shortest: int = SHORTEST_PREFIX) -> dict[str, str]:
    """Each ID -> its shortest prefix (at least ``shortest`` characters, never ending at a ``-``)
    that no other of ``ids`` starts with; an ID that is a prefix of another is itself."""
    ordered = sorted(set(ids))
    found: dict[str, str] = {}
    for index, run_id in enumerate(ordered):
        shared = 0  # the longest prefix shared with a neighbour (sorted: only neighbours matter)
        for other in ordered[max(index - 1, 0) : index + 2]:
            if other != run_id:
                shared = max(shared, _common(run_id, other))
        length = max(shortest, shared + 1)
        while length < len(run_id) and run_id[length - 1] == "-":
            length += 1
        found[run_id] = run_id[:length]
    return found


def _common(a: str, b: str) -> int:
    count = 0
    for x, y in zip(a, b):
        if x != y:
            break
        count += 1
    return count


def run_name(row: RunRowJson, prefix: str) -> str:
    """How the hub names a run: when it was created (UTC, to the second) and its ID prefix."""
    when = (row.get("created_at") or row.get("updated_at") or "").replace("T", " ")[:19]
    return f"{when} · {prefix}" if when else prefix


def needs_person(row: RunRowJson) -> bool:
    """A run stopped without ending (its owner died, or a script step needs a decision)."""
    return row["lifecycle"] in NEEDS_PERSON


@runtime_checkable
class HubSession(Protocol):
    """What the hub needs of the notebook session.

    Required: ``workflows`` — the validated workflows of this notebook as ``(name, start)`` pairs,
    where ``start()`` starts a new background run and returns its run handle (or run ID).

    Optional, used when present: ``forms`` (every authoring cell, objects with ``name``, ``kind``,
    ``cell``, ``start`` (None: not runnable alone) and ``note``, as
    :class:`rho_notebook.notebook.session.AuthoringForm`; without it the START rows are the
    ``workflows``); ``service`` (the :class:`Service` over the store; default
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
        """Both groups of runs, each under its heading (or one line when the store has none)."""
        self.live_rows: list[widgets.Widget] = []
        """Rows of live runs and of runs that need a person."""
        self.finished_rows: list[widgets.Widget] = []
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
        self.live_rows, self.finished_rows = live, finished = self._run_rows()
        if not live and not finished:
            self.runs_box.children = [_label("<i>no runs yet</i>")]
        else:
            live = live or [widgets.HBox([_label("<i>none</i>")])]
            finished = finished or [widgets.HBox([_label("<i>none</i>")])]
            heading = widgets.HBox([_label("<i>live, or waiting for a person</i>")])
            self.runs_box.children = [heading, *live, widgets.HBox([_label("<i>finished</i>")]), *finished]
        self.plans_box.children = self._plan_rows()

    def _say(self, text: str, *, error: bool = False) -> None:
        colour = "#dc2626" if error else "#374151"
        self.message.value = f'<span style="color:{colour}">{escape(text)}</span>'

    def _forms(self) -> list[tuple[str, str, str, Callable[[], Any] | None, str]]:
        """(name, kind, cell, start or None, note) of every authoring cell the session lists."""
        forms = getattr(self.session, "forms", None)
        if forms is None:
            return [(name, "workflow", "", start, "") for name, start in self.session.workflows]
        return [(f.name, f.kind, f.cell, f.start, f.note) for f in forms]

    def _start_rows(self) -> list[widgets.Widget]:
        rows: list[widgets.Widget] = []
        for name, kind, where, start, note in self._forms():
            text = f"<code>%%{escape(kind)}</code> <b>{escape(name)}</b>" + (f" · {escape(where)}" if where else "")
            if start is None:
                rows.append(widgets.HBox([_label(text + (f" · <i>{escape(note)}</i>" if note else ""))]))
                continue
            button = _button(
                f"Start {name}", style="primary", icon="play", tooltip=f"start a new run of {name} in the background"
            )
            button.on_click(lambda _b, name=name, start=start: self._start(name, start))
            rows.append(widgets.HBox([button, _label(text)]))
        if not rows:
            rows.append(
                _label(
                    "<i>no validated workflows in this notebook yet (write a %%workflow, %%script or %%graph cell)</i>"
                )
            )
        return rows

    def _runs(self) -> list[RunRowJson]:
        """The newest runs of the store, newest first."""
        return call(self.service.run_rows(RunsQuery(limit=RUNS_SHOWN)))[::-1]

    def _plans(self) -> list[PlanManifest]:
        """The saved plans, newest first."""
        return call(self.service.plans())[::-1]

    def _run_rows(self) -> tuple[list[widgets.Widget], list[widgets.Widget]]:
        """The rows of live runs and runs that need a person, and of finished runs."""
        rows = self._runs()
        names = unique_prefixes(row["run_id"] for row in rows)
        live: list[widgets.Widget] = []
        finished: list[widgets.Widget] = []
        for row in rows:
            first = row["live"] or needs_person(row)
            (live if first else finished).append(self._run_row(row, names[row["run_id"]]))
        return live, finished

    def _run_row(self, row: RunRowJson, prefix: str) -> widgets.HBox:
        run_id = row["run_id"]
        text = f"<code>{escape(row['lifecycle'])}</code> {escape(row['workflow'])}"
        if row["outcome"]:
            text += f" · {escape(row['outcome'])}"
        lineage = lineage_text(cast("Mapping[str, Any]", row))
        if lineage:
            text += f" · <i class='rho-hub-lineage'>{escape(lineage)}</i>"
        command = row.get("next") or (f"rho-notebook status {run_id}" if needs_person(row) else None)
        if command:
            what = _WAITS_FOR.get(row["lifecycle"], "needs a person")
            text += f" · <b>{what}</b>: {self._halted_steps(run_id) if row['lifecycle'] == 'needs_decision' else ''}"
            text += f"<code>{escape(command)}</code>"
        watch = _button(
            f"Watch {row['lifecycle']} · {run_name(row, prefix)}", icon="eye", tooltip=f"open the DAG of run {run_id}"
        )
        watch.on_click(lambda _b: self.watch(run_id))
        items: list[widgets.Widget] = [watch, _label(text)]
        if row["live"]:
            cancel = _button("Cancel", style="warning", icon="stop", tooltip="request cancellation of this run")
            cancel.on_click(lambda _b: self._cancel(run_id))
            items.append(cancel)
        row_box = widgets.HBox(items)
        if not row["live"] and not needs_person(row):
            delete = _button("Delete", icon="trash", tooltip="delete this run and its artifacts (asks first)")
            delete.on_click(
                lambda _b: self._confirm(
                    row_box, f"delete run {run_id} and its artifacts?", lambda: self._delete_run(run_id)
                )
            )
            row_box.children = [*items, delete]
        return row_box

    def _halted_steps(self, run_id: str) -> str:
        """The steps a script run stopped at, each with why (as ``status`` says), then `` · ``."""
        try:
            lines = decision_lines(call(self.service.status(run_id)))
        except RhoError:
            return ""
        steps = ", ".join(escape(line.strip()) for line in lines[1:-2])
        return f"{steps} · " if steps else ""

    def _plan_rows(self) -> list[widgets.Widget]:
        rows: list[widgets.Widget] = []
        plans = self._plans()
        names = unique_prefixes(manifest.plan_id for manifest in plans)
        for manifest in plans:
            plan_id = manifest.plan_id
            run = _button(
                f"Run plan · {names[plan_id]}",
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
        lines += [f"<li>%%{escape(kind)} {escape(name)}</li>" for name, kind, *_ in self._forms()] or [
            "<li>(none)</li>"
        ]
        lines.append("</ul><b>RUNS</b><ul>")
        lines += [
            f"<li>{escape(r['lifecycle'])} · {escape(r['run_id'])} {escape(r['workflow'])} {escape(r['outcome'] or '')}"
            f"{' · ' + escape(r.get('next') or '') if needs_person(r) else ''}</li>"
            for r in runs
        ] or ["<li>(none)</li>"]
        lines.append("</ul><b>SAVED PLANS</b><ul>")
        lines += [f"<li>{escape(p.plan_id)} {escape(p.workflow)} {escape(p.graph_digest)}</li>" for p in plans] or [
            "<li>(none)</li>"
        ]
        lines.append("</ul></div>")
        return {"text/html": "".join(lines), "text/plain": f"<rho_notebook hub: {len(runs)} runs, {len(plans)} plans>"}
