"""An earlier run redrawn from the store, with a picker of the other runs of its workflow.

What ``%workflow show`` and ``rho.show`` display: a Dropdown of the runs of the shown run's
workflow in the same workspace (newest first) above the live DAG widget of the chosen run. The
DAG is the same widget a run started in this kernel gets (:class:`~._run.RunController`), fed by
a live handle of the run while an owner executes it (this kernel's, or one attached to the run's
owner process: ``handle_for``), else by a :class:`~._run.JournalWatch` that reads the journal:
nothing is executed. Choosing another run
replaces the DAG widget and closes the previous one.

The display carries a text and an HTML rendering (the run's node lines and outputs, the SVG of
the DAG) for viewers without widgets and for a saved notebook.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets  # type: ignore[import-untyped]
import traitlets

from rho_notebook.errors import NotFound
from rho_notebook.model.node_names import no_node
from rho_notebook.service import Service
from rho_notebook.views.runs import run_choice_label, run_show_text, workflow_runs
from rho_notebook.widgets._call import StaticViews, call
from rho_notebook.widgets._dag import DagWidget
from rho_notebook.widgets._run import JournalWatch, RunController, RunHandleLike

__all__ = ["RunPicker"]

HandleFor = Callable[[str], Any]
"""Run ID -> a live handle of the run (a :class:`RunHandleLike`, such as the service's
``RunHandle`` that ``rho.attach`` gives), or None when the view should read the store."""


class RunPicker(StaticViews, ipywidgets.VBox):  # type: ignore[misc]
    """The DAG of one run of a workflow and a Dropdown that switches between its runs."""

    run_id = traitlets.Unicode("")
    """The run shown now (full ID)."""

    def __init__(self, run_id: str, *, service: Service, handle_for: HandleFor | None = None) -> None:
        self.service = service
        self._handle_for = handle_for
        full = call(service.resolve_run(run_id))
        manifest = call(service.manifest(full))
        self.workflow = manifest.workflow
        rows = call(workflow_runs(service, workflow=manifest.workflow, workspace_key=manifest.workspace_key))
        options = [(run_choice_label(row), row["run_id"]) for row in rows]
        if full not in {value for _, value in options}:  # not listable (e.g. damaged): still shown
            options.insert(0, (full[:13], full))
        self.picker = ipywidgets.Dropdown(
            options=options,
            value=full,
            description=f"runs of {manifest.workflow}",
            style={"description_width": "initial"},
            layout=ipywidgets.Layout(width="max-content"),
        )
        self.dag = self._dag(full)
        super().__init__(children=[self.picker, self.dag], run_id=full)
        self.picker.observe(self._switch, names="value")

    def _dag(self, run_id: str) -> DagWidget:
        handle = self._handle_for(run_id) if self._handle_for is not None else None
        if not isinstance(handle, RunHandleLike):
            handle = JournalWatch(self.service, run_id)
        return RunController(handle, service=self.service).widget

    def _switch(self, change: dict[str, Any]) -> None:
        self.show(str(change["new"]))

    def show(self, run_id: str) -> None:
        """Show the DAG of ``run_id`` (one of the picker's runs) instead of the current one."""
        if run_id == self.run_id:
            return
        previous = self.dag
        self.dag = self._dag(run_id)
        with self.hold_sync():
            self.run_id = run_id
            self.children = [self.picker, self.dag]
        if self.picker.value != run_id:
            self.picker.value = run_id
        previous.close()

    def select(self, node: str) -> None:
        """Select a node of the shown run: its output pane opens with its latest attempt's artifacts.

        Raises
        ------
        NotFound
            The run has no such node.
        """
        if node not in self.dag.nodes:
            msg = no_node(f"run {self.run_id}", node, self.dag.nodes)
            raise NotFound(msg)
        self.dag.select(node)

    def close(self) -> None:
        for part in (getattr(self, "dag", None), getattr(self, "picker", None)):  # none when __init__ refused
            if part is not None:
                part.close()
        super().close()

    # -- static views -----------------------------------------------------------------------------

    def text(self) -> str:
        """The shown run's node lines and validated outputs (read from the store now)."""
        state = call(self.service.status(self.run_id))
        result = call(self.service.result(self.run_id))
        return run_show_text(state, result)

    def _static_views(self) -> dict[str, str]:
        text = self.text()
        return {
            "text/plain": text,
            "text/html": f"{self.dag.snapshot_html()}<pre>{html.escape(text)}</pre>",
        }
