"""A saved notebook reopened in a fresh kernel shows its earlier run from the store: running only
the ``%workflow show`` cell redraws the run's DAG widget with its node states and outputs and
a picker of the workflow's runs, and starts no run.

Real kernels through nbclient: the first executes the whole notebook (define the workflow, run
it, show it) and the notebook is saved; the second kernel executes only the show cell of the
saved file. The widget's state is read where a saved notebook keeps it (the notebook's widget
metadata, as nbclient writes it); the text it carries is read from the cell's output.
"""

from __future__ import annotations

import json
import os
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from tests.conftest import REPO, Project
from tests.kernel.helpers import C, workflow_cell

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STATE_MIME = "application/vnd.jupyter.widget-state+json"

STEPS = workflow_cell(
    "steps",
    f"""        command(name = "count", argv = ["sh", "-c", "echo counted >> launches.txt; echo 3"], {C}),
        command(name = "total", argv = ["sh", "-c", "echo '{{\\"total\\": 6}}'"], needs = ["count"],
                output = schema.stdout_json(schema.record({{"total": schema.integer()}})), {C}),
""",
)

SHOW = "%load_ext rho_notebook\n%workflow show --node total"


def _client(nb: Any, project: Project) -> NotebookClient:
    return NotebookClient(
        nb, kernel_name="python3", timeout=120, allow_errors=False, resources={"metadata": {"path": str(project.root)}}
    )


def _env(project: Project) -> dict[str, str]:
    return {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}


def _runs(project: Project) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(project.cli("runs", "--output", "json").stdout)
    return rows


def _widget_states(nb: Any) -> dict[str, dict[str, Any]]:
    states: dict[str, dict[str, Any]] = nb.metadata["widgets"][STATE_MIME]["state"]
    return {model_id: entry["state"] for model_id, entry in states.items()}


def _shown(cell: Any) -> Any:
    found = [o for o in cell.outputs if o.output_type == "display_data" and WIDGET_MIME in o.data]
    assert len(found) == 1, cell.outputs
    return found[0]


def test_a_reopened_notebook_shows_the_earlier_run_without_running_it(ws: Project) -> None:
    nb = new_notebook(
        cells=[
            new_code_cell("%load_ext rho_notebook"),
            new_code_cell(STEPS),
            new_code_cell("%workflow run steps --yes --wait"),
            new_code_cell(SHOW),
        ]
    )
    _client(nb, ws).execute(env=_env(ws))
    saved = ws.root / "explore.ipynb"
    nbformat.write(nb, saved)
    before = _runs(ws)
    assert [(r["workflow"], r["outcome"]) for r in before] == [("steps", "success")]
    run_id = before[0]["run_id"]
    assert (ws.root / "launches.txt").read_text() == "counted\n"
    assert run_id in _shown(nb.cells[3]).data["text/plain"]  # the first kernel shows it too

    reopened = nbformat.read(saved, as_version=4)
    show = reopened.cells[3]
    show.outputs = []
    reopened.metadata.pop("widgets", None)
    client = _client(reopened, ws)
    with client.setup_kernel(env=_env(ws)):
        client.execute_cell(show, 3)
    client.set_widgets_metadata()

    assert _runs(ws) == before  # nothing was run, created or resumed
    assert (ws.root / "launches.txt").read_text() == "counted\n"
    output = _shown(show)
    text = output.data["text/plain"]
    assert f"run {run_id} of workflow steps · completed · outcome success" in text
    assert "nothing re-executed" in text
    assert [line.split()[:2] for line in text.splitlines()[1:3]] == [["count", "success"], ["total", "success"]]
    assert 'output of total: {"total": 6}' in text
    assert '<img src="data:image/png;base64,' in output.data["text/html"]  # survives the sanitizer

    states = _widget_states(reopened)
    picker = states[output.data[WIDGET_MIME]["model_id"]]
    assert picker["_model_name"] == "VBoxModel"
    dropdown_ref, dag_ref = picker["children"]
    dropdown = states[dropdown_ref.removeprefix("IPY_MODEL_")]
    assert dropdown["_model_name"] == "DropdownModel"
    assert len(dropdown["_options_labels"]) == 1 and dropdown["_options_labels"][0].startswith(run_id[:13])
    dag = states[dag_ref.removeprefix("IPY_MODEL_")]
    assert dag["mode"] == "run" and dag["title"] == "steps"
    assert dag["run"]["run_id"] == run_id and dag["run"]["outcome"] == "success"
    assert {name: view["state"] for name, view in dag["nodes"].items()} == {"count": "success", "total": "success"}
    assert dag["selected"] == "total"
    assert dag["detail"]["value"] == {"total": 6}
    assert dag["detail"]["stdout"]["text"] == '{"total": 6}\n'


def test_show_switches_between_the_runs_of_a_workflow(ws: Project) -> None:
    nb = new_notebook(
        cells=[
            new_code_cell("%load_ext rho_notebook"),
            new_code_cell(STEPS),
            new_code_cell("%workflow run steps --yes --wait"),
            new_code_cell("%workflow run steps --yes --wait"),
            new_code_cell(
                "import json, rho_notebook as rho\n"
                "picker = rho.show(workflow='steps')\n"
                "first = picker.run_id\n"
                "older = picker.picker.options[-1][1]\n"
                "picker.picker.value = older\n"
                "print(json.dumps({'first': first, 'shown': picker.run_id, 'dag': picker.dag.run['run_id'],\n"
                "                  'options': [v for _, v in picker.picker.options]}))"
            ),
        ]
    )
    _client(nb, ws).execute(env=_env(ws))
    runs = [r["run_id"] for r in _runs(ws)]
    assert len(runs) == 2
    data = json.loads(nb.cells[4].outputs[-1]["text"])
    assert data["options"] == runs[::-1]  # newest first
    assert data["first"] == runs[1]
    assert data["shown"] == data["dag"] == runs[0]


def test_show_without_a_run_says_how_to_start_one(ws: Project) -> None:
    nb = new_notebook(
        cells=[new_code_cell("%load_ext rho_notebook"), new_code_cell("%workflow show --workflow nothing")]
    )
    client = NotebookClient(
        nb, kernel_name="python3", timeout=120, allow_errors=True, resources={"metadata": {"path": str(ws.root)}}
    )
    client.execute(env=_env(ws))
    stderr = "".join(o.get("text", "") for o in nb.cells[1].outputs if o.output_type == "stream")
    assert "no run of workflow nothing in this workspace yet" in stderr
