"""``%%graph NAME`` cells: an item-graph document held at ``//<notebook folder>/NAME.graph.yaml`` and
validated at once (docs/graphs.md); export writes ``NAME.graph.yaml``; item graphs are not run in
this version, so ``%workflow run NAME`` says so.

The first test uses a real Jupyter kernel (nbclient); the rest the in-process IPython shell.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from rho_notebook.service.cells import GraphCell
from tests.conftest import Project
from tests.kernel.helpers import ok, usage_error
from tests.kernel.test_kernel import kernel
from tests.unit.test_itemgraph_validate import TRIAGE

GRAPH = "%%graph triage\n" + TRIAGE
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
LITERAL = GRAPH.replace('"=ticket {{ $json.score }}"', '"ticket {{ $json.score }}"')


def test_a_graph_cell_validates_in_a_kernel_and_refuses_a_mapping_without_equals(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            shown = await k.ok(GRAPH)
            assert "graph triage: stored as //triage.graph.yaml; valid" in shown["text"], shown
            assert "steps    5 (start set, route branch, high set, low set, done output)" in shown["text"]
            assert "edges    5" in shown["text"] and "inputs   score: integer" in shown["text"]

            refused = await k.cell(LITERAL)
            [(ename, message)] = refused["errors"]
            assert ename == "UsageError", message  # shown without a traceback
            # line 6 of the cell is the `start` step (line 5 of the document)
            assert "%%graph triage" in message and ":6:82:" in message, message
            assert "graph.mapping_without_equals" in message
            assert "step 'start', field 'params.fields.label'" in message, message

    asyncio.run(scenario())


# -- the in-process shell ----------------------------------------------------------------------------


def test_a_valid_graph_cell_is_stored_as_an_overlay_document(ip: Any) -> None:
    from rho_notebook.notebook.extension import current_session

    report, captured = ok(ip, GRAPH)
    assert "%workflow run triage --input NAME=VALUE runs it" in repr(report)
    # the document drawn with the DAG layout: steps as nodes, the condition edge into `high` dashed;
    # the live DAG widget as for %%workflow, and its picture for saved and untrusted notebooks
    [shown] = [output.data for output in captured.outputs if "image/svg+xml" in output.data]
    assert WIDGET_MIME in shown and shown["image/png"] and "text/html" not in shown
    drawing = shown["image/svg+xml"]
    assert drawing.startswith("<svg") and "item graph triage" in drawing
    assert all(f'data-name="{step}"' in drawing for step in ("start", "route", "high", "low", "done"))
    assert 'stroke-dasharray="5,4"' in drawing
    session = current_session()
    cell = session.cells.graphs["triage"]
    assert isinstance(cell, GraphCell) and cell.text == TRIAGE  # the body as written: the file
    assert session.entry_label("triage", suffix=".graph.yaml") == "//triage.graph.yaml"
    assert [step.id for step in session.graphs["triage"].steps] == ["start", "route", "high", "low", "done"]
    assert "triage" in session.workflow_names()
    assert session.describe()["workflows"]["triage"]["kind"] == "graph"
    assert session.describe()["workflows"]["triage"]["valid"] is True


def test_the_mapping_without_equals_names_step_field_and_cell_line(ip: Any) -> None:
    from rho_notebook.notebook.extension import current_session

    message = usage_error(ip, LITERAL)
    assert "%%graph triage" in message and "is not valid (1 problem)" in message, message
    [problem] = [line for line in message.splitlines() if "graph.mapping_without_equals" in line]
    assert ":6:82:" in problem, problem  # line 5 of the document: the first body line is line 2 of the cell
    assert "step 'start', field 'params.fields.label'" in problem, problem
    session = current_session()
    assert "triage" in session.cells.graphs and "triage" not in session.graphs  # held, not valid


def test_the_documents_name_must_equal_the_cells(ip: Any) -> None:
    message = usage_error(ip, GRAPH.replace("%%graph triage", "%%graph sorting"))
    assert "NAME must equal it" in message and "'triage'" in message, message
    assert "a-z, 0-9, _ and -" in usage_error(ip, "%%graph Triage\n" + TRIAGE)
    assert "required: name" in usage_error(ip, "%%graph\n" + TRIAGE)


def test_other_validation_rules_point_at_cell_lines(ip: Any) -> None:
    unknown = GRAPH.replace("{from: low, to: done}", "{from: low, to: nowhere}")
    message = usage_error(ip, unknown)
    assert "graph.edge_step" in message and ":16:" in message, message
    assert "graph.yaml" in usage_error(ip, "%%graph broken\nname: [unclosed\n")


def test_a_json_document_is_accepted(ip: Any) -> None:
    document = {
        "name": "tiny",
        "steps": [{"id": "a", "kind": "set", "params": {"fields": {"x": 1}}}, {"id": "b", "kind": "output"}],
        "edges": [{"from": "a", "to": "b"}],
    }
    report, _ = ok(ip, "%%graph tiny\n" + json.dumps(document, indent=2) + "\n")
    assert "graph tiny: stored as //tiny.graph.yaml; valid" in repr(report)
    assert "inputs   (none)" in repr(report)


def test_workflow_validate_checks_a_stored_graph_cell(ip: Any) -> None:
    ok(ip, GRAPH)
    report, _ = ok(ip, "%workflow validate triage")
    assert "graph triage: stored as //triage.graph.yaml; valid" in repr(report)
    assert "--input" in usage_error(ip, "%workflow validate triage --input score=3")


def test_one_edge_is_counted_as_one_edge(ip: Any) -> None:
    pair = "%%graph pair\nname: pair\nsteps:\n  - {id: start, kind: set, params: {fields: {a: 1}}}\n"
    pair += "  - {id: done, kind: output}\nedges:\n  - {from: start, to: done}\n"
    _, captured = ok(ip, pair)
    [drawing] = captured.outputs
    assert drawing.data["text/plain"] == "item graph pair: 2 steps, 1 edge"
    report, _ = ok(ip, "%workflow plan pair")
    assert "nodes       2 (1 edge)\n" in repr(report)


def test_planning_a_graph_cell_names_it_a_graph(ip: Any) -> None:
    ok(ip, GRAPH)
    message = usage_error(ip, "%workflow plan triage")
    assert message.startswith("graph triage needs the required input 'score' (integer)"), message
    message = usage_error(ip, "%workflow run triage --input ghost=1 --yes")
    assert message.startswith("graph triage is not valid (2 problems):"), message


def test_validate_output_json_of_a_graph_cell_prints_the_json_alone(ip: Any) -> None:
    ok(ip, GRAPH)
    _, captured = ok(ip, "%workflow validate triage --output json")
    assert json.loads(captured.stdout) == {"valid": True, "graph": "triage", "diagnostics": []}
    assert captured.outputs == []  # no drawing: a %%workflow's --output json shows none either


def test_a_graph_cell_plans_and_runs_in_the_kernel(ip: Any, ws: Project) -> None:
    ok(ip, GRAPH)
    report, _ = ok(ip, "%workflow run triage --input score=70 --yes")
    [run] = json.loads(ws.cli("runs", "--output", "json").stdout)
    result = json.loads(ws.cli("result", run["run_id"], "--output", "json").stdout)
    assert result["outcome"] == "success"
    assert result["output"] == {"score": 70, "label": "ticket 70", "level": "high"}
    assert result["nodes"]["low"]["state"] == "skipped"


def test_a_graph_cell_shares_the_namespace_of_workflow_names(ip: Any) -> None:
    from rho_notebook.notebook.extension import current_session

    ok(ip, "%%script triage\nx = 1\n")
    ok(ip, GRAPH)
    session = current_session()
    assert "triage" in session.cells.graphs and "triage" not in session.cells.scripts
    ok(ip, "%%script triage\nx = 1\n")
    assert "triage" in session.cells.scripts and "triage" not in session.cells.graphs


def test_export_writes_the_document_as_name_graph_yaml(ip: Any, ws: Project) -> None:
    ok(ip, GRAPH)
    report, _ = ok(ip, "%workflow export out --workflow triage")
    assert (ws.root / "out" / "triage.graph.yaml").read_text() == TRIAGE  # the body verbatim
    assert Path(report.data.entry).name == "triage.graph.yaml"
    assert report.data.plan_command() == f"rho-notebook plan {ws.root / 'out' / 'triage.graph.yaml'}"
    checked = ws.cli("validate", "out/triage.graph.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_saved_notebooks_graph_exports_and_runs_headless(ws: Project) -> None:
    notebook = new_notebook(cells=[new_code_cell("%load_ext rho_notebook"), new_code_cell(GRAPH)])
    nbformat.write(notebook, os.fspath(ws.root / "triage.ipynb"))  # type: ignore[no-untyped-call]

    exported = ws.cli("export", "triage.ipynb", "out")
    assert exported.returncode == 0, exported.stderr
    assert (ws.root / "out" / "triage.graph.yaml").read_text() == TRIAGE

    ran = ws.cli("run", "triage.ipynb", "--workflow", "triage", "--input", "score=10", "--yes")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [run] = json.loads(ws.cli("runs", "--output", "json").stdout)
    result = json.loads(ws.cli("result", run["run_id"], "--output", "json").stdout)
    assert result["output"]["level"] == "low"
    assert not list(ws.root.glob(".rho-notebook-export-*"))


def test_a_graph_with_a_loop_edge_is_drawn_without_the_loop(ip: Any) -> None:
    retry = (
        "%%graph retry\n"
        "name: retry\n"
        "steps:\n"
        "  - {id: work, kind: set, params: {fields: {tries: 1}}}\n"
        "  - {id: check, kind: branch}\n"
        "  - {id: done, kind: output}\n"
        "edges:\n"
        "  - {from: work, to: check}\n"
        "  - {from: check, to: done, when: {field: tries, op: gte, value: 3}}\n"
        "  - {from: check, to: work, loop: {max_rounds: 3}}\n"
    )
    report, captured = ok(ip, retry)
    assert "steps    3 (work set, check branch, done output)" in repr(report)
    [drawing] = [output.data["image/svg+xml"] for output in captured.outputs if "image/svg+xml" in output.data]
    assert drawing.count('class="node"') == 3
    message = usage_error(ip, retry.replace("loop: {max_rounds: 3}", "loop: {}"))
    assert "cell In[" in message and ":10:35: error[graph.loop_rounds]" in message, message


def test_a_refused_answer_names_the_answer_not_a_workflow(ip: Any) -> None:
    from tests.kernel.helpers import wait_until
    from tests.kernel.test_graph_form import GRAPH as ASK

    ok(ip, ASK)
    ok(ip, "run = %workflow run ask --input score=9 --yes")
    run = ip.user_ns["run"]
    wait_until(lambda: run.state().lifecycle.value == "waiting")
    message = usage_error(ip, "%workflow answer {run.run_id} escalate assignee='\"nobody\"'")
    assert message.startswith("the answer to step escalate is not valid (1 problem):\nstep escalate: error[field.enum]")
    message = usage_error(ip, "%workflow answer {run.run_id} escalate backlog")
    assert message == "%workflow answer: 'backlog' is not FIELD=JSON (one per form field, e.g. note='\"call Bob\"')"
    _, captured = ok(ip, "%workflow answer {run.run_id} escalate assignee=backlog")
    assert "answered step escalate by " in captured.stdout
    assert "its form (answer with %workflow answer RUN STEP FIELD=JSON...):" in captured.stdout  # not the CLI's
