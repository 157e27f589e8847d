"""The Python API (``import rho_notebook as rho``): lazy imports, sources, confirmation, runs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rho_notebook as rho
from rho_notebook.errors import InvalidWorkflow, PlanError
from rho_notebook.service.cells import CellSet, parse_cell
from tests.conftest import REPO, Project, star
from tests.kernel.helpers import C

FLOW = star(
    f"""
return workflow(name = "flow", nodes = [
    command(name = "hi", argv = ["echo", "{{\\"n\\": 2}}"], output = schema.stdout_json(schema.record({{"n": schema.integer()}})), {C}),
    command(name = "oops", argv = ["false"], allow_failure = True, {C}),
])
"""
)


def test_importing_the_package_imports_no_ipython_or_widgets() -> None:
    code = (
        "import sys, rho_notebook as rho\n"
        "names = [rho.validate, rho.plan, rho.run, rho.runs, rho.status, rho.cancel, rho.resume, rho.result, rho.export]\n"
        "import rho_notebook.cli.main, rho_notebook.service, rho_notebook.notebook.session, rho_notebook.service.export\n"
        "print(sorted(m for m in ('IPython', 'ipywidgets', 'anywidget', 'ipykernel', 'rho_notebook.widgets') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout
    assert set(rho.__all__) <= set(dir(rho))
    assert {name for name in dir(rho) if not name.startswith("__")} == set(rho.__all__)  # not Any, importlib
    with pytest.raises(AttributeError):
        rho.no_such_thing  # noqa: B018


def test_validate_and_plan_from_a_path_source_text_and_notebook_source(ws: Project) -> None:
    ws.write("wf.star", FLOW)
    from_path = rho.validate("wf.star")
    from_text = rho.validate(FLOW)
    assert from_path.plan_id == from_text.plan_id == "unsaved"
    assert from_path.graph_digest == from_text.graph_digest
    cells = CellSet()
    cells.add(parse_cell("workflow", "flow", FLOW, display="cell In[1]"))
    source = cells.source(cells.workflows["flow"], entry_label="//flow.star", workflow_dir=ws.root)
    assert rho.validate(source).graph_digest == from_path.graph_digest
    stored = rho.plan("wf.star")
    assert stored.plan_id in ws.stored_plans()
    assert [m.plan_id for m in rho.plans()] == [stored.plan_id]
    with pytest.raises(InvalidWorkflow) as caught:
        rho.validate(FLOW.replace('"oops"', '"Oops"'))
    assert caught.value.diagnostics()[0].file == "<source>"


def test_sync_facades_work_inside_a_running_event_loop(ws: Project) -> None:
    ws.write("wf.star", FLOW)

    async def cell() -> str:  # a kernel cell runs inside the kernel's loop
        return rho.plan("wf.star").graph_digest

    assert asyncio.run(cell()).startswith("sha256:")


def test_run_needs_the_exact_digest(ws: Project) -> None:
    ws.write("wf.star", FLOW)
    plan = rho.plan("wf.star")
    with pytest.raises(rho.ConfirmationRequired, match=plan.graph_digest):
        rho.run(plan)
    with pytest.raises(rho.ConfirmationRequired, match="you confirmed digest sha256:00"):
        rho.run(plan.plan_id, confirm_digest="sha256:" + "0" * 64)
    with pytest.raises(PlanError, match="was not stored"):
        rho.run(rho.validate("wf.star"), yes=True)
    assert not (ws.home / "workflows" / "runs").exists()
    handle = rho.run(plan.plan_id[:13], confirm_digest=plan.graph_digest.removeprefix("sha256:"))

    async def wait() -> str | None:
        final = await handle
        return final.outcome

    assert asyncio.run(wait()) == "success"
    assert handle.outputs == {"hi": {"n": 2}}
    assert rho.status(handle.run_id).outcome == "success"
    result = rho.result(handle.run_id[:13])
    assert result.nodes["oops"].state == "failure" and result.outputs == {"hi": {"n": 2}}
    assert result.to_json()["nodes"]["hi"]["output"] == {"n": 2}
    assert rho.logs(handle.run_id, "hi") == {"stdout": '{"n": 2}\n', "stderr": ""}
    assert [s.run_id for s in rho.runs()] == [handle.run_id]
    assert rho.runs(state="running") == []
    assert rho.cancel(handle.run_id).cancellation_state == "already_completed"
    manifest = json.loads((ws.home / "workflows" / "runs" / handle.run_id / "manifest.json").read_text())
    assert manifest["origin"] == "notebook"


def test_keywords_the_cli_would_refuse_are_refused_by_name_before_anything_starts(ws: Project) -> None:
    """The API's keywords follow the rules of the flags they match: a mode, a timeout, a limit or a
    stream the CLI refuses is an ArgumentError naming the keyword, never a pydantic dump, a
    silently empty answer or every run; a file given where a plan is named says how to plan it."""
    from rho_notebook.errors import ArgumentError, NotFound

    ws.write("wf.star", FLOW)
    plan = rho.plan("wf.star")
    refused = {
        "mode='yolo': one of 'auto', 'plan', 'supervised'": lambda: rho.run(plan, yes=True, mode="yolo"),
        "approval_timeout=-5: give a finite number, 0 or more": lambda: rho.run(plan, yes=True, approval_timeout=-5),
        "approval_timeout=nan: give a finite number, 0 or more": lambda: rho.run(
            plan, yes=True, approval_timeout=float("nan")
        ),
        "limit=0: give a whole number, 1 or more": lambda: rho.runs(limit=0),
        "wait_seconds=-1: give a finite number, 0 or more": lambda: rho.cancel("0000", wait_seconds=-1),
        "stream='out': one of 'stdout', 'stderr', 'both'": lambda: rho.logs("0000", "hi", stream="out"),  # type: ignore[arg-type]
        "inputs=[1, 2]: give a dict of inputs by name": lambda: rho.plan("wf.star", inputs=[1, 2]),  # type: ignore[arg-type]
        "decisions=['s']: give a dict of decisions by name": lambda: rho.resume("0000", decisions=["s"]),  # type: ignore[arg-type]
        "decisions['s']='maybe': one of 'rerun', 'skip'": lambda: rho.resume("0000", decisions={"s": "maybe"}),  # type: ignore[dict-item]
    }
    for message, act in refused.items():
        with pytest.raises(ArgumentError) as caught:
            act()
        assert str(caught.value).startswith(message), str(caught.value)
    assert not (ws.home / "workflows" / "runs").exists()
    with pytest.raises(NotFound) as unplanned:
        rho.run("wf.star", yes=True)
    assert str(unplanned.value) == (
        "no plan matches 'wf.star': 'wf.star' is a file, not a plan; plan it first: rho.run(rho.plan('wf.star'), yes=True)"
    )
    with pytest.raises(NotFound, match="list them with"):  # an ID that is no file keeps the listing hint
        rho.run("ffff", yes=True)


def test_result_json_matches_the_cli(ws: Project) -> None:
    ws.write("wf.star", FLOW)
    handle = rho.run(rho.plan("wf.star"), yes=True)
    handle.wait(30)
    cli = json.loads(ws.cli("result", handle.run_id, "--output", "json").stdout)
    assert rho.result(handle.run_id).to_json() == cli
    assert handle.result().to_json() == cli
    assert isinstance(cli["nodes"]["oops"]["attempts"], list) and len(cli["nodes"]["oops"]["attempts"]) == 1


def test_result_of_the_quickstart_is_the_clis_result(ws: Project) -> None:
    """The quickstart notebook's workflow, run through the API: ``rho.result(id).to_json()`` is
    exactly ``rho-notebook result ID --output json`` (attempts as a list, outputs, artifacts)."""
    exported = rho.export(REPO / "notebooks" / "01_quickstart.ipynb", ws.root)
    handle = rho.run(rho.plan(exported.entry, inputs=exported.inputs), yes=True)
    final = handle.wait(60)
    assert final.outcome == "success", final
    cli = ws.cli("result", handle.run_id, "--output", "json")
    assert cli.returncode == 0, cli.stderr
    wire = json.loads(cli.stdout)
    mine = rho.result(handle.run_id)
    assert mine.to_json() == wire
    assert wire["nodes"]["stats"]["output"] == mine.outputs["stats"]
    assert all(isinstance(node["attempts"], list) for node in wire["nodes"].values())


def test_export_through_the_api(ws: Project, tmp_path: Path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell("%%workflow flow\n" + FLOW)])
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    result = rho.export(path, ws.root / "flows")
    assert result.entry == ws.root / "flows" / "flow.star"
    assert rho.validate(result.entry).graph_digest == rho.validate(FLOW).graph_digest
