"""``validate`` and ``plan`` of a saved notebook, through the real command: the workflow of a
``%%workflow`` (or ``%%script``) cell is checked, or frozen and stored, exactly as ``run
NOTEBOOK.ipynb`` plans it; ``--workflow NAME`` chooses among several."""

from __future__ import annotations

import json

from tests.cli.test_notebook_runs_parameters import SCRIPT
from tests.conftest import Project
from tests.kernel.test_export import ENTRY, MODULE, notebook


def plans(project: Project) -> list[str]:
    listed = project.cli("plans", "--output", "json")
    assert listed.returncode == 0, listed.stderr
    return [row["plan_id"] for row in json.loads(listed.stdout)]


def test_validate_and_plan_take_a_notebook_and_its_workflow_cell(project: Project) -> None:
    notebook(project.root / "nb" / "two.ipynb", MODULE, ENTRY, SCRIPT)
    several = project.cli("validate", "nb/two.ipynb")
    assert several.returncode == 1
    assert "has several workflows (counted, numbers); choose one with --workflow NAME" in several.stderr

    checked = project.cli("validate", "nb/two.ipynb", "--workflow", "numbers", "--output", "json")
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["valid"] is True
    assert plans(project) == []  # validate stores nothing

    planned = project.cli("plan", "nb/two.ipynb", "--workflow", "numbers", "--input", "count=7", "--output", "json")
    assert planned.returncode == 0, planned.stderr
    plan_id = json.loads(planned.stdout)["plan_id"]
    assert plans(project) == [plan_id]
    ran = project.cli("run", plan_id, "--yes", "--output", "json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["nodes"]["big"]["state"] == "success"  # the frozen input, 7

    # the same notebook's workflow run headless is the same plan (one plan per graph)
    again = project.cli(
        "run", "nb/two.ipynb", "--workflow", "numbers", "--input", "count=7", "--yes", "--output", "json"
    )
    assert again.returncode == 0, again.stderr
    assert plans(project) == [plan_id]


def test_a_notebooks_mistakes_name_its_cells_and_workflow_is_for_notebooks_only(project: Project) -> None:
    notebook(project.root / "bad.ipynb", ENTRY.replace('needs = ["one"],', 'needs = ["one"]'))
    broken = project.cli("validate", "bad.ipynb")
    assert broken.returncode == 1
    assert "bad.ipynb cell 2:" in broken.stderr and "starlark.syntax" in broken.stderr, broken.stderr

    project.write("wf.star", "WORKFLOW = 1\n")
    misplaced = project.cli("plan", "wf.star", "--workflow", "numbers")
    assert misplaced.returncode == 2
    assert misplaced.stderr.strip() == "rho-notebook: --workflow applies to a NOTEBOOK.ipynb, not to wf.star"


def test_a_notebook_at_the_workspace_root_is_one_plan_run_after_run(project: Project) -> None:
    """Its export folder is made and removed in the workspace root, the nodes' working directory,
    so the root's mtime moves with every run; the plan is still the one stored plan."""
    notebook(project.root / "root.ipynb", MODULE, ENTRY)
    for _ in range(3):
        ran = project.cli("run", "root.ipynb", "--yes", "--output", "json")
        assert ran.returncode == 0, ran.stderr
    assert len(plans(project)) == 1
