"""papermill's ``parameters`` cell in a headless ``run NOTEBOOK.ipynb``, through real processes:
its values replace the inputs' defaults, ``--input`` wins, and anything but ``NAME = literal``
assignments of declared inputs of the right type is refused with the problem named."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from tests.conftest import Project
from tests.kernel.test_export import ENTRY, MODULE, notebook

SCRIPT = '%%script counted\nfrom rho_notebook.script import emit_output, get_inputs\n\nINPUTS = {"count": {"type": "integer", "required": False, "default": 1}, "word": {"type": "string", "required": False, "default": "d"}}\n\nvalues = get_inputs()\nemit_output({"count": values["count"], "word": values["word"]})\n'


def _with_parameters(path: Path, *sources: str, text: str, tags: tuple[str, ...] = ("parameters",)) -> Path:
    """A notebook of ``sources`` with a code cell of ``text`` tagged ``tags`` as its second cell."""
    notebook(path, *sources)
    book = nbformat.read(path, as_version=4)
    cell = new_code_cell(text)
    cell.metadata["tags"] = list(tags)
    book.cells.insert(1, cell)
    nbformat.write(book, path)
    return path


def _finished(result_stdout: str) -> dict[str, str]:
    """Node -> final state, from ``run --output json``."""
    return {name: node["state"] for name, node in json.loads(result_stdout)["nodes"].items()}


def test_parameters_replace_the_defaults_and_input_wins(project: Project) -> None:
    _with_parameters(project.root / "nb" / "p.ipynb", MODULE, ENTRY, text="# papermill's cell\ncount = 7  # big\n")
    used = project.cli("run", "nb/p.ipynb", "--yes", "--output", "json")
    assert used.returncode == 0, used.stderr
    assert _finished(used.stdout)["big"] == "success"  # 7 from the parameters cell, over the cell's --input 3
    overridden = project.cli("run", "nb/p.ipynb", "--yes", "--output", "json", "--input", "count=3")
    assert overridden.returncode == 0, overridden.stderr
    assert _finished(overridden.stdout)["big"] == "skipped"  # --input wins
    untagged = _with_parameters(project.root / "nb" / "u.ipynb", MODULE, ENTRY, text="count = 7\n", tags=("other",))
    plain = project.cli("run", str(untagged.relative_to(project.root)), "--yes", "--output", "json")
    assert plain.returncode == 0, plain.stderr
    assert _finished(plain.stdout)["big"] == "skipped"  # no parameters cell: the cell's --input 3


def test_parameters_of_a_script_cell(project: Project) -> None:
    _with_parameters(project.root / "s.ipynb", SCRIPT, text='word: str = "from the cell"\ncount = (4)\n')
    run = project.cli("run", "s.ipynb", "--yes", "--output", "json")
    assert run.returncode == 0, run.stderr
    result = json.loads(project.cli("result", json.loads(run.stdout)["run_id"], "--output", "json").stdout)
    assert result["output"] == {"count": 4, "word": "from the cell"}


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (
            "count = 7\nghost = 1\n",
            ["p.ipynb cell 2:2:1: error[input.unknown]: parameters cell: unknown input 'ghost'", "declares: count"],
        ),
        ('count = "seven"\n', ["p.ipynb cell 2:1:1: error[input.type]:", "'count' must be an integer", '"seven"']),
        ("import os\ncount = 1\n", ["p.ipynb cell 2 (tagged parameters) line 1: 'import os' is not NAME = literal"]),
        ('count = len("abc")\n', ["line 1: 'count = len(\"abc\")': the value of count is not a literal"]),
        ("count = {1, 2}\n", ["the value of count is a set, not a JSON value"]),
        ("count = 1\n%matplotlib inline\n", ["line 2: '%matplotlib inline' is not Python"]),
        ("a = b = 1\n", ["line 1: 'a = b = 1' is not NAME = literal"]),
    ],
)
def test_bad_parameters_are_refused_naming_the_problem(project: Project, text: str, needles: list[str]) -> None:
    _with_parameters(project.root / "p.ipynb", MODULE, ENTRY, text=text)
    refused = project.cli("run", "p.ipynb", "--yes")
    assert refused.returncode == 1, refused.stdout
    for needle in needles:
        assert needle in refused.stderr, refused.stderr
    assert project.stored_plans() == [] and not (project.home / "workflows" / "runs").exists()


def test_a_bad_input_value_is_not_blamed_on_the_parameters_cell(project: Project) -> None:
    _with_parameters(project.root / "p.ipynb", MODULE, ENTRY, text="count = 7\n")
    refused = project.cli("run", "p.ipynb", "--yes", "--input", 'count="x"')
    assert refused.returncode == 1
    assert "'count' must be an integer" in refused.stderr and "parameters cell" not in refused.stderr


def test_one_parameters_cell(project: Project) -> None:
    path = _with_parameters(project.root / "p.ipynb", MODULE, ENTRY, text="count = 7\n")
    book = nbformat.read(path, as_version=4)
    second = new_code_cell("count = 8\n")
    second.metadata["tags"] = ["parameters", "x"]
    book.cells.append(second)
    nbformat.write(book, path)
    refused = project.cli("run", "p.ipynb", "--yes")
    assert refused.returncode == 1
    assert "cells 2, 6 are all tagged parameters; keep the tag on one cell" in refused.stderr
