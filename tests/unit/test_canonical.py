"""The canonical encoding and graph digest: stable across dict order and processes, sensitive to every field."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rho_notebook.model.canonical import encode, graph_digest
from rho_notebook.model.graph import Graph
from tests.conftest import REPO, Project

WORKFLOW = """
def build(inputs):
    a = command(name = "a", argv = ["true"], output = schema.stdout_json(schema.record({"ok": schema.bool(), "n": schema.optional(schema.integer())})),
                timeout_seconds = 5, max_output_bytes = 100)
    b = command(name = "b", argv = ["echo", output("a", ["n"])], needs = ["a"], when = condition.equals(output("a", ["ok"]), True),
                timeout_seconds = 5, max_output_bytes = 100)
    return workflow(name = "digest", nodes = [b, a])

WORKFLOW = define(inputs = {"mode": input.enum(["x", "y"], default = "x")}, build = build)
"""


def test_encoding_ignores_dict_order() -> None:
    assert encode({"a": 1, "b": [True, None, "x"]}) == encode({"b": [True, None, "x"], "a": 1})


def test_encoding_distinguishes_types() -> None:
    assert encode(1) != encode("1")
    assert encode(True) != encode(1)
    assert encode([]) != encode({})


def test_encoding_rejects_floats_and_wide_ints() -> None:
    with pytest.raises(TypeError):
        encode(1.5)
    with pytest.raises(ValueError, match="64-bit"):
        encode(2**63)


def test_same_source_same_digest_in_two_processes(project: Project) -> None:
    project.write("wf.star", WORKFLOW)
    digests = set()
    for _ in range(2):
        result = project.cli("plan", "wf.star", "--output", "json", check=True)
        digests.add(json.loads(result.stdout)["graph_digest"])
    assert len(digests) == 1
    # and the same graph re-loaded in another interpreter with a different hash seed digests the same
    plan_id = project.stored_plans()[0]
    graph_json = project.home / "workflows" / "plans" / plan_id / "graph.json"
    code = (
        "import json,sys; from rho_notebook.model.graph import Graph; from rho_notebook.model.canonical import graph_digest;"
        f"print(graph_digest(Graph.model_validate(json.loads(open({str(graph_json)!r}).read()))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONHASHSEED": "123", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() in digests


def test_two_checkouts_same_digest(project: Project, tmp_path) -> None:
    project.write("wf.star", WORKFLOW)
    project.write("tools/run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    project.write("wf2.star", WORKFLOW.replace('argv = ["true"]', 'argv = ["./tools/run.sh"]'))
    first = project.plan("wf2.star").graph_digest
    other = Project(root=(tmp_path / "checkout2").resolve(), home=project.home)
    (other.root / ".rho").mkdir(parents=True)
    other.write("wf2.star", WORKFLOW.replace('argv = ["true"]', 'argv = ["./tools/run.sh"]'))
    other.write("tools/run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    assert other.plan("wf2.star").graph_digest == first


def test_comment_change_keeps_digest_but_source_digest_changes(project: Project) -> None:
    project.write("wf.star", WORKFLOW)
    first = project.plan("wf.star")
    project.write("wf.star", "# a comment\n" + WORKFLOW)
    second = project.plan("wf.star")
    assert first.graph_digest == second.graph_digest
    assert first.manifest.sources[0].sha256 != second.manifest.sources[0].sha256


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('name = "digest"', 'name = "digest2"'),
        ("timeout_seconds = 5, max_output_bytes = 100)\n    b", "timeout_seconds = 6, max_output_bytes = 100)\n    b"),
        ("max_output_bytes = 100)\n    return", "max_output_bytes = 101)\n    return"),
        ('"ok": schema.bool()', '"ok": schema.optional(schema.bool())'),  # still allows the True compared with
        ("schema.optional(schema.integer())", "schema.integer()"),
        ('condition.equals(output("a", ["ok"]), True)', 'condition.equals(output("a", ["ok"]), False)'),
        ('["echo", output("a", ["n"])]', '["echo", "-n", output("a", ["n"])]'),
        ('argv = ["true"]', 'argv = ["false"]'),
        ('default = "x"', 'default = "y"'),
        ('input.enum(["x", "y"]', 'input.enum(["x", "y", "z"]'),
        ('needs = ["a"], when', 'needs = ["a"], allow_failure = True, when'),
    ],
)
def test_any_field_change_changes_digest(project: Project, old: str, new: str) -> None:
    assert old in WORKFLOW
    project.write("wf.star", WORKFLOW)
    base = project.plan("wf.star", store=False).graph_digest
    project.write("wf.star", WORKFLOW.replace(old, new, 1))
    assert project.plan("wf.star", store=False).graph_digest != base


def test_input_value_changes_digest(project: Project) -> None:
    project.write("wf.star", WORKFLOW)
    a = project.plan("wf.star", {"mode": "x"}, store=False).graph_digest
    b = project.plan("wf.star", {"mode": "y"}, store=False).graph_digest
    assert a != b


def test_executable_content_changes_digest(project: Project) -> None:
    project.write("tools/run.sh", "#!/bin/sh\necho one\n", mode=0o755)
    project.write("wf.star", WORKFLOW.replace('argv = ["true"]', 'argv = ["./tools/run.sh"]'))
    a = project.plan("wf.star", store=False).graph_digest
    project.write("tools/run.sh", "#!/bin/sh\necho two\n", mode=0o755)
    assert project.plan("wf.star", store=False).graph_digest != a


def test_graph_round_trips_through_json(project: Project) -> None:
    project.write("wf.star", WORKFLOW)
    plan = project.plan("wf.star", store=False)
    again = Graph.model_validate(json.loads(plan.graph.model_dump_json()))
    assert graph_digest(again) == plan.graph_digest
