"""``rho-notebook convert FILE.graph.yaml`` through the real CLI: it prints a Starlark workflow
that ``rho-notebook validate`` accepts, refuses a graph without a faithful equivalent (exit 2,
naming the step and line:column) and reports an invalid document as ``validate`` does (exit 1)."""

from __future__ import annotations

import json

from tests.conftest import Project
from tests.unit.test_itemgraph_convert import TRIAGE
from tests.unit.test_itemgraph_validate import TRIAGE as SET_TRIAGE


def test_convert_prints_a_workflow_that_validates(project: Project) -> None:
    project.write("graphs/triage.graph.yaml", TRIAGE)
    result = project.cli("convert", "graphs/triage.graph.yaml")
    assert result.returncode == 0, result
    assert result.stdout.startswith("# Converted from graphs/triage.graph.yaml by `rho-notebook convert`")
    assert result.stdout.endswith(")\n")
    assert result.stderr == ""

    project.write("triage.star", result.stdout)
    checked = project.cli("validate", "triage.star", "--input", 'ticket="T-9"', "--output", "json")
    assert checked.returncode == 0, checked
    nodes = {n["name"]: n for n in json.loads(checked.stdout)["nodes"]}
    assert sorted(nodes) == ["classify", "escalate", "file", "note"]
    assert nodes["note"]["needs"] == ["escalate", "file"]
    assert nodes["escalate"]["conditional"] is True
    assert nodes["classify"]["conditional"] is False


def test_convert_refuses_the_issue_example_naming_each_set_step(project: Project) -> None:
    project.write("triage.graph.yaml", SET_TRIAGE)
    result = project.cli("convert", "triage.graph.yaml")
    assert result.returncode == 2, result
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith(
        "triage.graph.yaml:5:23: error[convert.step_kind]: step 'start' is a set step; convert handles only agent, "
        "command, branch and output steps"
    )
    assert [line.split(": error")[0] for line in lines] == [
        "triage.graph.yaml:5:23",
        "triage.graph.yaml:7:22",
        "triage.graph.yaml:8:21",
    ]


def test_convert_reports_an_invalid_document_and_a_missing_file(project: Project) -> None:
    project.write("bad.graph.yaml", SET_TRIAGE.replace('"=ticket {{', '"ticket {{'))
    result = project.cli("convert", "bad.graph.yaml")
    assert result.returncode == 1, result
    assert "bad.graph.yaml:5:82: error[graph.mapping_without_equals]: step 'start'" in result.stderr

    result = project.cli("convert", "missing.graph.yaml")
    assert result.returncode == 1, result
    assert "error[graph.read]: cannot read missing.graph.yaml" in result.stderr
