"""Headless runs of a notebook: one plan per unchanged notebook (a stable label, never the
temporary export folder), and ``--output-notebook``'s executed copy, through real processes."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REPO, Project, star
from tests.kernel.helpers import C
from tests.kernel.test_export import AGENT, ENTRY, MODULE, notebook

QUICKSTART = "notebooks/01_quickstart.ipynb"


def _repo_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``rho-notebook ARGS`` in the repository (the shipped notebooks' workspace), with a private store."""
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "rho_notebook", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def _plans(home: Path) -> list[dict[str, object]]:
    listed = _repo_cli(home, "plans", "--output", "json")
    assert listed.returncode == 0, listed.stderr
    found: list[dict[str, object]] = json.loads(listed.stdout)
    return found


def _manifests(home: Path) -> list[dict[str, object]]:
    folder = home / "workflows" / "plans"
    return [json.loads((plan / "manifest.json").read_text()) for plan in sorted(folder.iterdir()) if plan.is_dir()]


def test_three_headless_runs_of_the_quickstart_leave_one_plan(tmp_path: Path) -> None:
    home = tmp_path / "home"
    plan_ids = []
    for _ in range(3):
        run = _repo_cli(home, "run", QUICKSTART, "--yes")
        assert run.returncode == 0, run.stderr
        assert "run completed: success" in run.stdout
        plan_ids.append(next(line.split()[1] for line in run.stdout.splitlines() if line.startswith("plan ")))
    assert len(set(plan_ids)) == 1, plan_ids  # the stored plan was handed back twice
    plans = _plans(home)
    assert [p["plan_id"] for p in plans] == plan_ids[:1]
    (manifest,) = _manifests(home)
    labels = [str(source["label"]) for source in manifest["sources"]]  # type: ignore[attr-defined]
    assert manifest["entry"] == "//notebooks/quickstart.star"  # the kernel's label of the cell
    assert "//notebooks/quickstart.star" in labels
    assert not [label for label in labels if "rho-notebook-export" in label]
    assert not list((REPO / "notebooks").glob(".rho-notebook-export-*"))
    # the kernel labels the cell the same way: the same cells planned in memory hand back that plan
    probe = "\n".join(
        [
            "from pathlib import Path",
            "import rho_notebook as rho",
            "from rho_notebook.service.export import read_cells",
            "cells = read_cells(Path('01_quickstart.ipynb'))",
            "source = cells.source(cells.workflows['quickstart'], entry_label='//notebooks/quickstart.star', "
            "workflow_dir=Path('.').resolve())",
            "print(rho.plan(source).plan_id)",
        ]
    )
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(home), "PYTHONPATH": str(REPO)}
    kernel_like = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO / "notebooks", env=env, capture_output=True, text=True, timeout=120
    )
    assert kernel_like.returncode == 0, kernel_like.stderr
    assert kernel_like.stdout.strip() == plan_ids[0]


def test_labels_never_carry_the_export_folder(project: Project) -> None:
    """Modules, agents and the entry: every label is stable, so an unchanged notebook plans once;
    an edit to a cell is a new plan (docs/diff.md)."""
    path = notebook(project.root / "nb" / "numbers.ipynb", MODULE, AGENT, ENTRY)
    for _ in range(2):
        run = project.cli("run", "nb/numbers.ipynb", "--yes", "--output", "json")
        assert run.returncode == 0, run.stderr
    assert len(project.stored_plans()) == 1
    stored = (project.home / "workflows" / "plans").rglob("*")
    assert not [p for p in stored if p.is_file() and b"rho-notebook-export" in p.read_bytes()]
    book = nbformat.read(path, as_version=4)
    book.cells[3].source = book.cells[3].source.replace('step("one", "one")', 'step("one", "uno")')
    nbformat.write(book, path)
    again = project.cli("run", "nb/numbers.ipynb", "--yes", "--output", "json")
    assert again.returncode == 0, again.stderr
    assert len(project.stored_plans()) == 2


def _outputs(book: nbformat.NotebookNode) -> dict[int, list[dict[str, object]]]:
    return {
        index: cell.get("outputs", []) for index, cell in enumerate(book.cells, start=1) if cell.cell_type == "code"
    }


def test_output_notebook_of_the_quickstart(tmp_path: Path) -> None:
    home, out = tmp_path / "home", tmp_path / "executed.ipynb"
    before = (REPO / QUICKSTART).read_bytes()
    run = _repo_cli(home, "run", QUICKSTART, "--yes", "--output-notebook", str(out))
    assert run.returncode == 0, run.stderr
    assert f"wrote {out}" in run.stdout and "cell 7 carries run" in run.stdout
    assert (REPO / QUICKSTART).read_bytes() == before  # the input is never written
    book = nbformat.read(out, as_version=4)
    nbformat.validate(book)
    run_id = book.metadata["rho_notebook"]["run_id"]
    assert book.metadata["rho_notebook"]["outcome"] == "success"
    cells = {index: cell for index, cell in enumerate(book.cells, start=1)}
    workflow = cells[7]
    assert workflow.source.startswith("%%workflow quickstart")
    picture, result = workflow.outputs
    assert picture["output_type"] == "display_data" and result["output_type"] == "display_data"
    png = base64.b64decode(picture["data"]["image/png"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 2000
    assert picture["data"]["image/svg+xml"].lstrip().startswith("<svg")
    assert "quickstart" in picture["data"]["text/plain"] and run_id[:13] in picture["data"]["text/plain"]
    assert picture["metadata"]["image/png"]["width"] > 0
    assert result["data"]["application/json"]["run_id"] == run_id
    nodes = result["data"]["application/json"]["nodes"]
    assert nodes["stats"] == {"state": "success", "output": {"count": 8, "largest": 9, "total": 31, "verdict": "big"}}
    assert nodes["shrug"]["state"] == "skipped" and "output" not in nodes["shrug"]
    assert f"run {run_id}" in result["data"]["text/plain"]
    assert workflow.metadata["rho_notebook"]["run_id"] == run_id
    run_cell = cells[9]  # `run = %workflow run quickstart --yes`: its output is the final DAG
    assert "%workflow run quickstart" in run_cell.source
    assert [o["data"]["image/png"] for o in run_cell.outputs] == [picture["data"]["image/png"]]
    status = json.loads(_repo_cli(home, "status", run_id, "--output", "json").stdout)
    assert status["outcome"] == "success"
    saved = nbformat.read(REPO / QUICKSTART, as_version=4)  # other cells: copied as saved
    assert _outputs(book)[5] == _outputs(saved)[5]


def test_output_notebook_in_a_project(project: Project) -> None:
    path = notebook(project.root / "nb" / "numbers.ipynb", MODULE, ENTRY)
    run = project.cli(
        "run", "nb/numbers.ipynb", "--yes", "--output", "json", "--input", "count=7", "--output-notebook", "out.ipynb"
    )
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)  # stdout keeps its one JSON object; the note goes to stderr
    assert answer["outcome"] == "success" and "wrote" in run.stderr
    book = nbformat.read(project.root / "out.ipynb", as_version=4)
    nbformat.validate(book)
    outputs = _outputs(book)
    assert outputs[3][0]["data"]["image/png"] and outputs[3][1]["data"]["application/json"]["nodes"]["big"] == {
        "state": "success"
    }
    assert outputs[2] == [] and outputs[4] == []
    assert oct((project.root / "out.ipynb").stat().st_mode & 0o777) == "0o644"
    assert not [p.name for p in project.root.iterdir() if p.name.endswith(".rho-tmp")]
    # naming the input notebook itself writes over it (only because the person named it)
    over = project.cli("run", "nb/numbers.ipynb", "--yes", "--output-notebook", "nb/numbers.ipynb")
    assert over.returncode == 0, over.stderr
    rewritten = nbformat.read(path, as_version=4)
    assert rewritten.metadata["rho_notebook"]["run_id"] != book.metadata["rho_notebook"]["run_id"]
    assert project.cli("run", "nb/numbers.ipynb", "--yes").returncode == 0  # the copy still runs


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--detach",), "--output-notebook follows the run to its end to write the copy, and --detach"),
        (("--output-notebook", "nodir/out.ipynb"), "its folder"),
        (("--output-notebook", "nb"), "not a notebook file"),
    ],
)
def test_output_notebook_refusals(project: Project, args: tuple[str, ...], needle: str) -> None:
    notebook(project.root / "nb" / "numbers.ipynb", MODULE, ENTRY)
    full = ("--output-notebook", "out.ipynb", *args) if args == ("--detach",) else args
    refused = project.cli("run", "nb/numbers.ipynb", "--yes", *full)
    assert refused.returncode == 2, refused.stderr
    assert needle in refused.stderr
    assert project.stored_plans() == [] and not (project.home / "workflows" / "runs").exists()  # checked first
    assert not (project.root / "out.ipynb").exists()


def test_output_notebook_needs_a_notebook_and_a_run(project: Project) -> None:
    notebook(project.root / "nb" / "numbers.ipynb", MODULE, ENTRY)
    project.write("wf.star", star(f'return workflow(name = "w", nodes = [command(name = "x", argv = ["true"], {C})])'))
    other = project.cli("run", "wf.star", "--yes", "--output-notebook", "out.ipynb")
    assert other.returncode == 2 and "applies to `run NOTEBOOK.ipynb`" in other.stderr
    unconfirmed = project.cli("run", "nb/numbers.ipynb", "--output-notebook", "out.ipynb")  # no --yes, no terminal
    assert unconfirmed.returncode == 3 and "pass --yes" in unconfirmed.stderr
    assert "no run started" in unconfirmed.stderr and not (project.root / "out.ipynb").exists()


def test_output_notebook_of_a_failed_run(project: Project) -> None:
    failing = f'%%workflow broken\ndef build(inputs):\n    return workflow(name = "broken", nodes = [command(name = "no", argv = ["false"], {C})])\n\nWORKFLOW = define(inputs = {{}}, build = build)\n'
    notebook(project.root / "f.ipynb", failing)
    run = project.cli("run", "f.ipynb", "--yes", "--output-notebook", "f-out.ipynb")
    assert run.returncode == 1, run.stderr  # the run's exit code stands; the copy is still written
    book = nbformat.read(project.root / "f-out.ipynb", as_version=4)
    nbformat.validate(book)
    assert book.metadata["rho_notebook"]["outcome"] == "failure"
    picture, result = book.cells[1].outputs
    assert result["data"]["application/json"]["nodes"]["no"]["state"] == "failure"
    assert "failure" in picture["data"]["text/plain"]
