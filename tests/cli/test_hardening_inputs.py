"""Malformed notebooks, out-of-range flags and impossible names give one line and the documented
exit code, never a traceback (issue 28, findings 2 and 6). Verbs are called in-process through
the CLI's ``main(argv)``; an exception escaping it fails the test with its traceback.

- ``run X.ipynb --yes`` and ``export X.ipynb DIR`` of a notebook that is ``[1,2,3]``, has
  ``"cells": 5``, is nbformat 3 without metadata, has a cell ``source: [1, null, {}]`` or
  metadata nested 100,000 deep: exit 1 naming the notebook;
- ``prune --older-than`` must be finite and >= 0, ``runs --limit`` >= 1 (else exit 2, nothing
  deleted); ``prune --older-than 1e308`` prunes nothing;
- ``run`` of a 5,000-character name: exit 1 or 2 naming it;
- ``trust`` of a folder that does not exist: exit 3, nothing trusted;
- a ``.graph.yaml`` holding NUL or another C0/C1 control character: a finding (exit 1), not a
  ``yaml.reader.ReaderError``.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from rho_notebook.cli.main import main
from tests.cli.runhelp import run
from tests.conftest import Project, star

WF = star(
    'return workflow(name = "i", nodes = [command(name = "a", argv = ["true"], timeout_seconds = 10, max_output_bytes = 100)])'
)


def _call(project: Project, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str, str]:
    """``rho-notebook ARGV`` in this process, in the workspace: (exit code, stdout, stderr)."""
    monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(project.home))
    monkeypatch.chdir(project.root)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


NOTEBOOKS = {
    "a_list": ("[1,2,3]", "the file holds a list, not a JSON object"),
    "cells_a_number": ('{"cells": 5, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}', "its cells are a number"),
    "nbformat_3_without_metadata": (
        '{"nbformat": 3, "nbformat_minor": 0, "worksheets": [{"cells": []}]}',
        "has no %%workflow NAME or %%script NAME cell",
    ),
    "source_not_text": (
        '{"cells": [{"cell_type": "code", "source": [1, null, {}], "metadata": {}, "outputs": [],'
        ' "execution_count": null}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
        "cell 1: its source is not text",
    ),
    "metadata_100000_deep": (
        '{"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": ' + _deep(100_000) + "}",
        "nests too deeply",
    ),
    "not_json": ("{cells", "not JSON"),
    "nbformat_2": ('{"nbformat": 2, "worksheets": []}', "nbformat 2 is not supported"),
}


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
@pytest.mark.parametrize("verb", ["run", "export"])
def test_a_malformed_notebook_is_named_in_one_line(
    project: Project, monkeypatch: pytest.MonkeyPatch, name: str, verb: str
) -> None:
    text, named = NOTEBOOKS[name]
    project.write(f"{name}.ipynb", text)
    argv = ["run", f"{name}.ipynb", "--yes"] if verb == "run" else ["export", f"{name}.ipynb", "out"]
    code, _, err = _call(project, monkeypatch, *argv)
    assert code == 1, err
    line = _one_line(err)
    assert f"{name}.ipynb" in line and named in line, line
    assert not (project.root / "out").exists()


def test_an_nbformat_3_notebook_with_a_workflow_cell_runs(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """nbformat 3 keeps a code cell's text in ``input``: its workflow cell is found and runs."""
    body = '%%workflow w3\ndef build(inputs):\n    return workflow(name = "w3", nodes = [command(name = "a", argv = ["true"], timeout_seconds = 10, max_output_bytes = 100)])\n\nWORKFLOW = define(inputs = {}, build = build)\n'
    cell = {"cell_type": "code", "input": body.splitlines(keepends=True), "outputs": [], "language": "python"}
    project.write("v3.ipynb", json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": [{"cells": [cell]}]}))
    code, out, err = _call(project, monkeypatch, "run", "v3.ipynb", "--yes")
    assert code == 0, err
    assert "outcome success" in out


@pytest.mark.parametrize("days", ["nan", "inf", "-inf", "-1", "-0.5", "x"])
def test_prune_older_than_must_be_finite_and_not_negative(
    project: Project, monkeypatch: pytest.MonkeyPatch, days: str
) -> None:
    project.write("wf.star", WF)
    result, data = run(project)
    assert result.returncode == 0, result.stderr
    code, out, err = _call(project, monkeypatch, "prune", "--older-than", days, "--yes")
    assert code == 2 and "--older-than" in _one_line(err), err
    assert (project.home / "workflows" / "runs" / data["run_id"]).is_dir(), out


def test_prune_older_than_the_calendar_prunes_nothing(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    project.write("wf.star", WF)
    result, data = run(project)
    assert result.returncode == 0, result.stderr
    code, out, err = _call(project, monkeypatch, "prune", "--older-than", "1e308", "--yes")
    assert code == 0 and "nothing to prune" in out and not err, err
    assert (project.home / "workflows" / "runs" / data["run_id"]).is_dir()


@pytest.mark.parametrize("limit", ["-1", "0", "1.5"])
def test_runs_limit_must_be_at_least_one(project: Project, monkeypatch: pytest.MonkeyPatch, limit: str) -> None:
    code, _, err = _call(project, monkeypatch, "runs", "--limit", limit)
    assert code == 2 and "--limit" in _one_line(err), err


@pytest.mark.parametrize("suffix", ["", ".py", ".ipynb", ".graph.yaml"])
def test_run_of_a_name_too_long_for_the_file_system(
    project: Project, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    code, _, err = _call(project, monkeypatch, "run", "x" * 5000 + suffix, "--yes")
    assert code in (1, 2), err
    assert "xxxx" in _one_line(err)


def test_trust_of_a_folder_that_does_not_exist_is_refused(
    project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "no" / "such" / "folder"
    code, out, err = _call(project, monkeypatch, "trust", str(missing))
    assert code == 3, out + err
    assert f"{missing} does not exist" in _one_line(err)
    assert not (project.home / "trust.json").exists() and "trusted" not in out


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x9f"])
def test_a_graph_document_with_a_control_character_is_a_finding(
    project: Project, monkeypatch: pytest.MonkeyPatch, char: str
) -> None:
    project.write("g.graph.yaml", f"name: g{char}\nsteps: []\nedges: []\n")
    for argv in (["validate", "g.graph.yaml"], ["run", "g.graph.yaml", "--yes"]):
        code, _, err = _call(project, monkeypatch, *argv)
        assert code == 1 and "g.graph.yaml" in err and "Traceback" not in err, err
