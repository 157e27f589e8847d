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

And what tests/hardening/test_fuzz.py found after them (its findings 7 to 13), each named here:

- a path the file system cannot use (a name over 255 bytes, a NUL, a file where a folder must be)
  given to ``untrust``, ``validate``, ``plan``, ``convert``, ``export`` or ``record``, or as an MCP
  ``file``: exit 2 (a tool error), one line naming the argument, nothing written;
- a graph document that is YAML null (``~``, ``null``, a bare ``---``): the same finding for
  ``validate``, ``plan`` and ``convert``;
- ``validate`` and ``convert`` read a graph as ``plan`` does: a FIFO, a symlink (to ``/dev/zero``)
  or a file over the ``source_bytes`` limit is refused, never read.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from rho_notebook.cli.main import main
from rho_notebook.mcp.server import build_server
from rho_notebook.service import Service, StoreLayout, Workspace
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
        "has no %%workflow NAME, %%script NAME, %%flow NAME or %%graph NAME cell",
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


# -- paths the file system cannot use (test_fuzz.py findings 7 to 10, 13) ---------------------------

LONG = "a" * 300
NOTEBOOK = json.dumps(
    {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "c1",
                "metadata": {},
                "outputs": [],
                "source": "%%workflow i\n" + WF,
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
)
TOO_LONG = "has a name of {} bytes, longer than the 255 a file name may have"
NOT_A_FOLDER = "is a file, not a folder"
UNDER_A_FILE = "which is a file, not a folder"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["untrust", LONG], "path 'aaaa"),
        (["trust", LONG], "path 'aaaa"),
        (["validate", LONG + ".star"], "file 'aaaa"),
        (["validate", LONG + ".py"], "file 'aaaa"),
        (["validate", "sub/" + LONG + "/x.star"], "file 'sub/aaaa"),
        (["plan", LONG + ".py"], "file 'aaaa"),
        (["plan", LONG + ".graph.yaml"], "file 'aaaa"),
        (["convert", LONG + ".graph.yaml"], "file 'aaaa"),
        (["validate", "a\x00b.graph.yaml"], "file 'a\\x00b.graph.yaml' holds a NUL byte"),
        (["export", "nb.ipynb", LONG], "dir 'aaaa"),
        (["export", "nb.ipynb", "wf.star"], f"dir 'wf.star' {NOT_A_FOLDER}"),
        (["export", "nb.ipynb", "wf.star/x"], "dir 'wf.star/x' lies under "),
    ],
)
def test_a_path_the_file_system_cannot_use_is_a_usage_error(
    project: Project, monkeypatch: pytest.MonkeyPatch, argv: list[str], says: str
) -> None:
    project.write("wf.star", WF)
    project.write("nb.ipynb", NOTEBOOK)
    code, out, err = _call(project, monkeypatch, *argv)
    assert code == 2, out + err
    line = _one_line(err)
    assert line.startswith("rho-notebook: error[usage.path]: ") and says in line, line
    if LONG in argv[-1]:
        assert TOO_LONG.format(max(len(part) for part in argv[-1].split("/"))) in line, line
    assert sorted(p.name for p in project.root.iterdir()) == [".rho", "nb.ipynb", "wf.star"]
    assert (project.root / "wf.star").read_text() == WF and not (project.home / "trust.json").exists()


def test_record_into_a_folder_that_cannot_be_made_is_a_usage_error(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.write("wf.star", WF)
    result, data = run(project)
    assert result.returncode == 0, result.stderr
    for folder, says in [
        ("wf.star", f"dir 'wf.star' {NOT_A_FOLDER}"),
        ("wf.star/x", UNDER_A_FILE),
        (LONG, TOO_LONG.format(300)),
    ]:
        code, out, err = _call(project, monkeypatch, "record", data["run_id"], folder)
        assert code == 2, out + err
        line = _one_line(err)
        assert line.startswith("rho-notebook: error[usage.path]: dir ") and says in line, line
    assert sorted(p.name for p in project.root.iterdir()) == [".rho", "wf.star"]
    assert (project.root / "wf.star").read_text() == WF


async def _tool_call(project: Project, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    server = build_server(Service(layout=StoreLayout(home=project.home)), Workspace(root=project.root))
    async with Client(server, client_info=types.Implementation(name="pytest", version="1")) as client:
        return await client.call_tool(name, arguments)


@pytest.mark.parametrize(
    ("tool", "file", "says"),
    [
        ("workflow_plan", "a\x00b.ipynb", "holds a NUL byte"),
        ("workflow_validate", "a\x00b.graph.yaml", "holds a NUL byte"),
        ("workflow_validate", "a\x00b.star", "holds a NUL byte"),
        ("workflow_plan", "a\x00b.py", "holds a NUL byte"),
        ("workflow_validate", LONG + ".py", TOO_LONG.format(303)),
        ("workflow_plan", LONG + ".star", TOO_LONG.format(305)),
    ],
)
def test_an_mcp_file_the_file_system_cannot_hold_is_a_tool_error_naming_it(
    project: Project, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tool: str, file: str, says: str
) -> None:
    monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(project.home))
    with caplog.at_level(logging.ERROR):
        result = asyncio.run(_tool_call(project, tool, {"file": file}))
    text = " ".join(getattr(part, "text", "") for part in result.content)
    assert result.is_error, text
    assert text.startswith("error[usage.path]: file ") and says in text and "\n" not in text, text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


# -- graph documents: null, and read as plan reads them (test_fuzz.py findings 11 and 12) -----------


@pytest.mark.parametrize("document", ["~\n", "null\n...\n", "---\n"])
def test_a_null_graph_document_is_a_finding_for_validate_plan_and_convert(
    project: Project, monkeypatch: pytest.MonkeyPatch, document: str
) -> None:
    project.write("g.graph.yaml", document)
    for verb in ("validate", "plan", "convert"):
        code, out, err = _call(project, monkeypatch, verb, "g.graph.yaml")
        assert code == 1, (verb, out + err)
        assert (
            "g.graph.yaml:" in err and "error[graph.yaml]: the document is empty; it needs name, steps and edges" in err
        )
        assert "Traceback" not in err and not out.startswith("valid:"), (verb, out + err)
    assert project.stored_plans() == []


@pytest.mark.parametrize(
    ("kind", "says"),
    [("link-to-dev-zero", "is a symlink"), ("over-the-limit", "error[limit.source_bytes]")],
)
def test_validate_and_convert_read_a_graph_as_plan_does(
    project: Project, monkeypatch: pytest.MonkeyPatch, kind: str, says: str
) -> None:
    """A link to ``/dev/zero`` is refused, not followed, and a sparse 1 GiB document is refused
    by its size, not read (before, validate and convert read both whole)."""
    path = project.root / "g.graph.yaml"
    if kind == "link-to-dev-zero":
        path.symlink_to("/dev/zero")
    else:
        with open(path, "wb") as handle:
            handle.truncate(1 << 30)
    for verb in ("validate", "plan", "convert"):
        code, out, err = _call(project, monkeypatch, verb, "g.graph.yaml")
        assert code == 1 and says in err and "Traceback" not in err, (verb, out + err)


def test_validate_and_convert_refuse_a_fifo_graph(project: Project) -> None:
    """A FIFO nobody writes to: refused at once (in a subprocess: a regression would hang)."""
    os.mkfifo(project.root / "g.graph.yaml")
    for verb in ("validate", "plan", "convert"):
        result = project.cli(verb, "g.graph.yaml", timeout=30)
        assert result.returncode == 1, (verb, result.stdout + result.stderr)
        assert "is not a regular file (a FIFO)" in result.stderr and "Traceback" not in result.stderr
