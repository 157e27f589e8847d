"""Which earlier runs a reopened notebook can show: the runs of one workflow in one workspace,
newest first, and the run ``%workflow show`` picks when none is named.

Read from the store through the service (the run list, then the manifest of each run of the
workflow for its workspace key); nothing is executed. The notebook's ``%workflow show``, the
Python API's ``rho.show`` and the run picker of the DAG widget all choose runs through here.
"""

from __future__ import annotations

from rho_notebook.errors import NotFound
from rho_notebook.model.run_state import RunState
from rho_notebook.service import RunsQuery, Service
from rho_notebook.service.wire import ResultJson, RunRowJson, allowed_failures_of, node_order, shown_state
from rho_notebook.views.text import (
    OUTPUT_CHARS,
    decision_lines,
    node_status_lines,
    output_text,
    run_output_line,
    usage_text,
)

__all__ = ["OUTPUT_CHARS", "workflow_runs", "latest_run", "run_choice_label", "run_show_text"]


async def workflow_runs(service: Service, *, workflow: str | None, workspace_key: str | None) -> list[RunRowJson]:
    """The runs of ``workflow`` (None: of every workflow) created in the workspace with key
    ``workspace_key`` (None: in any workspace), newest first."""
    rows = await service.run_rows(RunsQuery())
    if workflow is not None:
        rows = [row for row in rows if row["workflow"] == workflow]
    if workspace_key is not None:
        kept = []
        for row in rows:
            try:
                manifest = await service.manifest(row["run_id"])
            except NotFound:  # deleted since the listing
                continue
            if manifest.workspace_key == workspace_key:
                kept.append(row)
        rows = kept
    return rows[::-1]


async def latest_run(service: Service, *, workflow: str | None, workspace_key: str | None) -> str:
    """The ID of the newest run of ``workflow`` in the workspace (see :func:`workflow_runs`).

    Raises
    ------
    NotFound
        There is no such run yet.
    """
    rows = await workflow_runs(service, workflow=workflow, workspace_key=workspace_key)
    if not rows:
        what = f"workflow {workflow}" if workflow is not None else "any workflow"
        msg = f"no run of {what} in this workspace yet: start one with %workflow run {workflow or 'NAME'}"
        raise NotFound(msg)
    return rows[0]["run_id"]


def run_choice_label(row: RunRowJson) -> str:
    """One line of the run picker: short ID, when, lifecycle and outcome."""
    when = (row.get("created_at") or row["updated_at"] or "").replace("T", " ")[:19]
    outcome = f" · {row['outcome']}" if row["outcome"] else ""
    return f"{row['run_id'][:13]}  {when}  {row['lifecycle']}{outcome}"


def run_show_text(state: RunState, result: ResultJson) -> str:
    """What ``%workflow show`` prints under the DAG (and all a text front end sees): the run,
    every node's status line (a script run's steps in arrival order), the validated outputs, a
    script run's emitted output and the steps it needs a decision on, read from the store."""
    outcome = f" · outcome {state.outcome}" if state.outcome else ""
    lines = [
        f"run {state.run_id} of workflow {state.workflow} · {state.lifecycle.value}{outcome} "
        "(from the store: nothing re-executed)"
    ]
    if "usage" in result:  # the run made or saved a model call (docs/usage.md)
        lines.append(f"usage {usage_text(result['usage'])}")
    allowed = allowed_failures_of(state)
    rows = [(name, state.nodes[name]) for name in node_order(state)]
    lines += node_status_lines(
        [(name, record, shown_state(record, allowed=name in allowed), None) for name, record in rows]
    )
    for name, node in result["nodes"].items():
        if "output" in node:
            lines.append(f"  output of {name}: {output_text(node['output'], limit=OUTPUT_CHARS)}")
    emitted = run_output_line(result)
    if emitted is not None:
        lines.append(f"  {emitted}")
    lines.extend(decision_lines(state))
    return "\n".join(lines)
