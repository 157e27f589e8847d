"""Text and static HTML the magics show (pure; no IPython).

Everything here is deterministic for a given plan or state, so that notebook outputs can be
checked (nbval): no times, no absolute paths of this machine except where the CLI shows them too.
"""

from __future__ import annotations

import html
import json
import shlex
import time
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from rho_notebook.model.events import PROGRESS_KINDS, describe_event
from rho_notebook.model.graph import AgentNode, ApprovalNode, CommandNode, Graph, Node, ShellNode
from rho_notebook.model.itemgraph import ItemGraph
from rho_notebook.model.plan import Plan, PlanManifest
from rho_notebook.model.run_state import RunState
from rho_notebook.service import StoreLayout
from rho_notebook.service.cells import GraphCell, ScriptCell, WorkflowCell, inputs_text
from rho_notebook.views.run_notes import status_lines
from rho_notebook.views.text import condition_text

__all__ = [
    "Report",
    "node_line",
    "counted",
    "graph_text",
    "graph_html",
    "workflow_report",
    "plan_report",
    "status_report",
    "runs_report",
    "plans_report",
    "script_report",
    "graph_report",
    "run_started_text",
    "run_started_html",
    "Progress",
]


class Report:
    """Text shown as the cell's result (``repr`` is the text itself, not a quoted string)."""

    def __init__(self, text: str, *, data: Any = None) -> None:
        self.text = text
        self.data = data
        """The object the report describes (a Plan, a RunState, ...), for programmatic use."""

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text)


def _what(node: Node) -> str:
    if isinstance(node, CommandNode):
        return "command " + " ".join(p if isinstance(p, str) else "{template}" for p in node.argv[:1])
    if isinstance(node, ShellNode):
        return "shell " + (node.command if len(node.command) <= 40 else node.command[:37] + "...")
    if isinstance(node, AgentNode):
        return f"agent {node.agent} ({node.access})"
    if isinstance(node, ApprovalNode):
        return "approval"
    return getattr(node, "kind", "node")


def node_line(node: Node) -> str:
    parts = [f"{node.name:<16}", _what(node)]
    if node.needs:
        parts.append("needs " + ", ".join(node.needs))
    if node.when is not None:
        parts.append("when " + condition_text(node.when))
    if node.allow_failure:
        parts.append("allow_failure")
    if node.output is not None:
        parts.append("typed output")
    return "  ".join(parts)


def counted(count: int, noun: str) -> str:
    """``1 edge``, ``2 edges``, ``0 edges``."""
    return f"{count} {noun}{'s' if count != 1 else ''}"


def graph_text(graph: Graph) -> str:
    """One line: ``graph of workflow NAME: N nodes, E edges``."""
    return f"graph of workflow {graph.name}: {counted(len(graph.nodes), 'node')}, {counted(graph.edge_count(), 'edge')}"


def graph_html(graph: Graph, *, states: dict[str, str] | None = None) -> str:
    """A static table of the graph: what a notebook shows where widgets do not render."""
    rows = []
    for node in graph.nodes:
        cells = [
            f"<td><code>{html.escape(node.name)}</code></td>",
            f"<td>{html.escape(_what(node))}</td>",
            f"<td>{html.escape(', '.join(node.needs))}</td>",
            f"<td>{html.escape(condition_text(node.when)) if node.when is not None else ''}</td>",
            f"<td>{'yes' if node.allow_failure else ''}</td>",
        ]
        if states is not None:
            cells.append(f"<td>{html.escape(states.get(node.name, ''))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = ["node", "runs", "needs", "when", "allow failure"] + (["state"] if states is not None else [])
    return (
        f'<div class="rho-notebook-graph"><p><b>{html.escape(graph_text(graph))}</b></p>'
        "<table><thead><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def input_flags(raw: Sequence[str]) -> list[str]:
    """The ``--input`` flags of a verb line, quoted to be run again."""
    return [f"--input {shlex.quote(item)}" for item in raw]


def _run_line(name: str, inputs: Sequence[str]) -> str:
    """``%workflow run NAME [--input ...] --yes``: the run of what was just validated, with the
    ``--input`` values a verb line gave (the cell's own are its defaults)."""
    return " ".join(["%workflow run", name, *input_flags(inputs), "--yes"])


def workflow_report(
    plan: Plan, cell: WorkflowCell | None = None, *, verb: str = "valid", inputs: Sequence[str] = ()
) -> Report:
    """What a ``%%workflow`` cell and ``%workflow validate`` (with its ``--input`` values) print."""
    graph = plan.graph
    lines = [f"workflow {graph.name}: {verb}", f"digest   {plan.graph_digest}"]
    values = plan.manifest.inputs
    lines.append(f"inputs   {inputs_text(values) if values else '(none)'}")
    for index, node in enumerate(graph.nodes):
        lines.append(("nodes    " if index == 0 else "         ") + node_line(node).rstrip())
    if not graph.nodes:
        lines.append("nodes    (none)")
    if cell is not None:
        lines.append(f"next     {_run_line(graph.name, inputs)}")
    return Report("\n".join(lines), data=plan)


def plan_report(plan: Plan) -> Report:
    """What ``%workflow plan`` prints (the CLI's text, shortened to what a notebook needs)."""
    m = plan.manifest
    lines = [
        f"plan        {m.plan_id}",
        f"workflow    {m.workflow}",
        f"digest      {m.graph_digest}",
        f"nodes       {len(plan.graph.nodes)} ({counted(plan.graph.edge_count(), 'edge')})",
        f"inputs      {inputs_text(m.inputs) if m.inputs else '(none)'}",
        "sources",
    ]
    lines += [f"  {s.label}  {s.size} bytes" for s in m.sources]
    lines.append("authority")
    lines += [f"  {a.kind:<12} {a.value}" for a in m.authority]
    lines.append(f"run it with: %workflow run {m.plan_id[:13]} --yes")
    return Report("\n".join(lines), data=plan)


def status_report(state: RunState, layout: StoreLayout) -> Report:
    """``%workflow status``: what ``rho-notebook status`` prints (:func:`status_lines`), as a report."""
    return Report("\n".join(status_lines(layout, state)), data=state)


def runs_report(states: Iterable[RunState]) -> Report:
    found = list(states)
    if not found:
        return Report("no runs", data=found)
    return Report(
        "\n".join(
            f"{s.run_id}  {s.workflow:<20} {s.lifecycle.value:<15} {s.outcome or '':<13} {s.updated_at}" for s in found
        ),
        data=found,
    )


def plans_report(manifests: Iterable[PlanManifest]) -> Report:
    found = list(manifests)
    if not found:
        return Report("no saved plans", data=found)
    return Report(
        "\n".join(f"{m.plan_id}  {m.workflow:<24} {m.graph_digest[:19]}  {m.created_at}" for m in found), data=found
    )


def script_report(plan: Plan, cell: ScriptCell, *, label: str, inputs: Sequence[str] = ()) -> Report:
    """What a ``%%script`` cell (or ``%workflow validate`` of a ``%%flow`` cell) prints: stored,
    checked, frozen, and how to run it."""
    lines = cell.body.count("\n")
    values = plan.manifest.inputs
    head = f"{'script' if cell.flow is None else 'flow'} {cell.name}: stored as {label} ({lines} line{'s' if lines != 1 else ''}); valid; not run in this kernel"
    rows = {
        "digest": plan.graph_digest,
        "inputs": inputs_text(values) if values else "(none)",
        "next": _run_line(cell.name, inputs),
    }
    return _cell_report(head, rows, data=plan)


def _cell_report(head: str, rows: dict[str, str], *, data: Any) -> Report:
    """A cell's summary: ``head``, then one ``key     value`` line per row."""
    return Report("\n".join([head, *(f"{key:<8} {value}" for key, value in rows.items())]), data=data)


def graph_report(graph: ItemGraph, cell: GraphCell, *, label: str) -> Report:
    """What a valid ``%%graph`` cell prints: stored, valid, its size and inputs, and how to run it."""
    inputs = ", ".join(f"{name}: {decl.type}" for name, decl in graph.inputs.items()) or "(none)"
    head = f"graph {cell.name}: stored as {label}; valid; %workflow run {cell.name} --input NAME=VALUE runs it (docs/graphs.md)"
    rows = {
        "steps": f"{len(graph.steps)} ({', '.join(f'{step.id} {step.kind}' for step in graph.steps)})",
        "edges": str(len(graph.edges)),
        "inputs": inputs,
    }
    return _cell_report(head, rows, data=graph)


def run_started_text(run_id: str, workflow: str) -> str:
    """What a cell that started or resumed a run shows without widgets: the run lives in its own
    owner process, and the magic that reattaches to it (after a kernel restart, in a reopened
    notebook)."""
    return (
        f"run {run_id} of workflow {workflow}: running in its own process (a kernel restart leaves it going)\n"
        f"reattach with: %workflow show {run_id[:13]}"
    )


def run_started_html(run_id: str, workflow: str) -> str:
    """The HTML twin of :func:`run_started_text` (what nbconvert and GitHub show)."""
    short = html.escape(run_id[:13])
    return (
        f"<p>run <code>{html.escape(run_id)}</code> of workflow <b>{html.escape(workflow)}</b> runs in its own "
        f"process; restarting this kernel leaves it going. Check it with <code>%workflow status {short}</code>, "
        f"wait for it with <code>await run</code>, reattach with <code>%workflow show {short}</code>.</p>"
    )


class Progress:
    """Prints run events like ``rho-notebook run --output text|jsonl`` (called on one thread)."""

    def __init__(self, stream: TextIO, *, output: str = "text", timed: bool = False) -> None:
        self.stream = stream
        self.output = output
        self.timed = timed
        self.start = time.monotonic()

    def __call__(self, record: dict[str, Any]) -> None:
        kind = record.get("kind", "")
        if kind == "output_chunk":
            return
        if self.output == "jsonl":
            print(json.dumps(record, separators=(",", ":")), file=self.stream, flush=True)
            return
        if kind not in PROGRESS_KINDS:
            return
        node = record.get("node", "")
        detail = describe_event(record, approve_command="%workflow approve")
        prefix = f"[{time.monotonic() - self.start:7.2f}s] " if self.timed else ""
        print(f"{prefix}{node:<16} {detail}".rstrip(), file=self.stream, flush=True)
