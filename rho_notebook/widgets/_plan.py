"""The plan card: what a person confirms before a run, and the Run button that confirms it.

Shows plan ID, workflow, graph digest, inputs, the authority list and source digests, and the
plan's DAG. When the cell was planned before with another graph, the card first shows what
changed (nodes added, removed and changed by field, and which nodes will be reused or launched:
a :class:`~rho_notebook.service.DiffResult` the caller got from the service). The Run button
names the exact graph digest it confirms; one click is consent for one new run of that digest
(the button disables itself; a new run needs a new card).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped]

from rho_notebook.errors import RhoError
from rho_notebook.model.plan import Plan
from rho_notebook.service import DiffResult
from rho_notebook.views.picture import picture_html
from rho_notebook.widgets._call import StaticViews
from rho_notebook.widgets._dag import DagWidget

__all__ = ["PlanCard", "plan_html", "changes_html"]

_TABLE = "border-collapse:collapse;font-family:monospace;font-size:12px;margin:4px 0"
_CELL = "border:1px solid #d1d5db;padding:2px 6px;text-align:left;vertical-align:top"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f'<th style="{_CELL}">{escape(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f'<td style="{_CELL}">{escape(c)}</td>' for c in row) + "</tr>" for row in rows)
    return f'<table style="{_TABLE}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def plan_html(plan: Plan) -> str:
    """The card's facts as self-contained HTML (also the static view in saved notebooks)."""
    m = plan.manifest
    inputs = [[name, json.dumps(value)] for name, value in sorted(m.inputs.items())] or [["(none)", ""]]
    authority = [[a.kind, a.value, a.detail] for a in m.authority] or [["(none)", "", ""]]
    sources = [[s.label, str(s.size), s.sha256] for s in m.sources]
    return (
        '<div class="rho-plan-card" style="font-family:sans-serif;font-size:13px">'
        f"<div><b>Plan</b> <code>{escape(m.plan_id)}</code> · workflow <b>{escape(m.workflow)}</b> · "
        f"{len(plan.graph.nodes)} nodes, {plan.graph.edge_count()} edges · created {escape(m.created_at)}</div>"
        f'<div>graph digest <code class="rho-digest">{escape(m.graph_digest)}</code></div>'
        f'<div style="margin-top:6px"><b>Inputs</b></div>{_table(["input", "value"], inputs)}'
        f"<div><b>Authority</b> (what this plan may use)</div>{_table(['kind', 'value', 'detail'], authority)}"
        f"<details><summary>Sources ({len(sources)})</summary>{_table(['label', 'bytes', 'sha256'], sources)}</details>"
        "</div>"
    )


def changes_html(changes: DiffResult) -> str:
    """What changed since the previous plan, as self-contained HTML (one row per node)."""
    found = changes.diff
    rows = [["added", name, ""] for name in found.added]
    rows += [["removed", name, ""] for name in found.removed]
    rows += [["changed", change.node, ", ".join(change.fields)] for change in found.changed]
    if found.graph:
        rows.append(["workflow", "", ", ".join(found.graph)])
    if not rows:
        rows.append(["(no changes)", "", ""])
    table = _table(["", "node", "fields"], rows)
    predicted = ""
    if changes.will_reuse is not None and changes.will_launch is not None:
        reuse = ", ".join(changes.will_reuse) or "(none)"
        launch = ", ".join(changes.will_launch) or "(none)"
        predicted = f"<div>will reuse: {escape(reuse)}<br>will launch: {escape(launch)}</div>"
    return (
        '<div class="rho-plan-changes" style="font-family:sans-serif;font-size:13px;margin:4px 0">'
        f"<div><b>Changes</b> since plan <code>{escape(changes.old.id[:13])}</code> "
        f"(<code>{escape(_short(changes.old.graph_digest))}</code>)</div>{table}{predicted}</div>"
    )


def _short(digest: str) -> str:
    return digest if len(digest) <= 23 else digest[:23] + "…"


class PlanCard(StaticViews, widgets.VBox):  # type: ignore[misc]
    """A plan's facts, its DAG and the Run button that confirms its exact digest.

    When ``on_run`` returns a run handle, the card then shows that run's live view.
    """

    def __init__(
        self,
        plan: Plan,
        *,
        on_run: Callable[[], Any],
        graph: DagWidget | None = None,
        changes: DiffResult | None = None,
    ) -> None:
        self.plan = plan
        self.changes = changes
        """What changed since the cell's previous plan (None: nothing to compare with)."""
        self.changes_view = widgets.HTML(changes_html(changes) if changes is not None else "")
        self._on_run = on_run
        digest = plan.graph_digest
        self.facts = widgets.HTML(plan_html(plan))
        self.run_button = widgets.Button(
            description=f"Run — confirm {_short(digest)}",
            tooltip=f"Start one new run of plan {plan.plan_id}, confirming graph digest {digest}",
            button_style="primary",
            icon="play",
            layout=widgets.Layout(width="auto"),
        )
        self.run_button.add_class("rho-run-button")
        self.digest_label = widgets.HTML(
            f'<code class="rho-confirm-digest" title="the digest this button confirms">{escape(digest)}</code>'
        )
        self.status = widgets.HTML("")
        self.run_button.on_click(self._clicked)
        self.graph = graph
        self.run: Any = None
        """The live run view, once Run started a run whose handle came back."""
        children: list[widgets.Widget] = [self.facts]
        if changes is not None:
            children.append(self.changes_view)
        children += [widgets.HBox([self.run_button, self.digest_label]), self.status]
        if graph is not None:
            children.append(graph)
        super().__init__(children=children)
        self.add_class("rho-plan-card")

    @property
    def confirmed(self) -> bool:
        return bool(self.run_button.disabled)

    def _clicked(self, _button: object = None) -> None:
        """Confirm the digest: exactly one call of on_run per card."""
        if self.run_button.disabled:
            return
        self.run_button.disabled = True
        digest = self.plan.graph_digest
        self.status.value = f"confirmed <code>{escape(digest)}</code>; starting a run…"
        try:
            result = self._on_run()
        except RhoError as err:
            self.status.value = f'<span style="color:#dc2626">run refused: {escape(err.message)}</span>'
            return
        except Exception as err:
            self.status.value = f'<span style="color:#dc2626">run failed to start: {escape(type(err).__name__)}: {escape(str(err))}</span>'
            raise
        run_id = result if isinstance(result, str) else getattr(result, "run_id", None)
        started = f"run <code>{escape(run_id)}</code> started" if run_id else "run started"
        self.status.value = f"confirmed <code>{escape(digest)}</code>; {started}"
        if hasattr(result, "add_listener"):
            # the card follows the run it started: the live DAG replaces the plan's
            from rho_notebook.widgets import run_view

            self.run = run_view(result)
            kept: list[Any] = [child for child in self.children if child is not self.graph]  # type: ignore[has-type]
            self.children = [*kept, self.run]

    def _static_views(self) -> dict[str, str]:
        """The card's facts as HTML with the DAG as a PNG ``<img>`` (inline SVG would not survive
        JupyterLab's sanitizer in an untrusted notebook), and the picture's PNG and SVG."""
        picture = self.graph.picture() if self.graph is not None else {}
        changed = changes_html(self.changes) if self.changes is not None else ""
        image = picture_html(picture) if picture else ""
        views = {"text/html": plan_html(self.plan) + changed + image}
        views.update({mime: data for mime, data in picture.items() if mime != "text/plain"})
        views["text/plain"] = f"<rho_notebook plan {self.plan.plan_id} {self.plan.graph.name} {self.plan.graph_digest}>"
        return views
