"""Every example of the Rho workflows page validates (fragments wrapped in a minimal entry module)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import Project

AGENT_FILE = """---
description: Reviews a target and returns a decision
tools: [read_file, list_dir, grep, glob]
---
Review what you are asked to review. Do not modify files.
"""

INSPECT = """
    inspect = agent(
        name = "inspect",
        agent = "reviewer",
        prompt = template([
            "Inspect ",
            inputs["target"],
            " and return the required JSON value.",
        ]),
        access = "read_only",
        output = schema.record({
            "decision": schema.enum_(["approve", "revise"]),
            "summary": schema.string(),
        }),
        timeout_seconds = 1800,
        max_output_bytes = 12000,
    )
"""

CHECK_COMMAND = """
    check = command(
        name = "check",
        argv = ["cargo", "check", "-p", "rho-coding-agent"],
        cwd = ".",
        needs = ["inspect"],
        timeout_seconds = 1800,
        max_output_bytes = 12000,
    )
"""

CHECK_SHELL = """
    check = shell(
        name = "check",
        executable = "bash",
        arguments = ["-lc"],
        command = "set -euo pipefail; cargo check",
        cwd = ".",
        timeout_seconds = 1800,
        max_output_bytes = 12000,
    )
"""

INPUTS = """{
        "target": input.string(default = "."),
        "workers": input.integer(default = 2),
        "full": input.bool(default = False),
        "mode": input.enum(["fast", "full"], default = "fast"),
    }"""


def entry(body: str, nodes: str, inputs: str = INPUTS) -> str:
    return f'def build(inputs):\n{body}\n    return workflow(name = "example", nodes = {nodes})\n\nWORKFLOW = define(\n    inputs = {inputs},\n    build = build,\n)\n'


@pytest.fixture
def rho_project(project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """A project with a local reviewer agent and a `cargo` on PATH (the page's command examples use it)."""
    project.write(".rho/workflows/review/agents/reviewer.md", AGENT_FILE)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cargo").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "cargo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return project


def validate(project: Project, text: str, *args: str) -> dict:
    project.write(".rho/workflows/review/review.star", text)
    result = project.cli("validate", ".rho/workflows/review/review.star", "--output", "json", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def test_minimal_entry_module(rho_project: Project) -> None:
    text = 'def build(inputs):\n    return workflow(name = "example", nodes = [])\n\nWORKFLOW = define(\n    inputs = {},\n    build = build,\n)\n'
    assert validate(rho_project, text)["nodes"] == []


def test_inputs_example_with_cli_inputs(rho_project: Project) -> None:
    out = validate(rho_project, entry("", "[]"), "--input", 'target="src"', "--input", "full=true")
    assert out["inputs"] == {"full": True, "mode": "fast", "target": "src", "workers": 2}


def test_module_loading_example(rho_project: Project) -> None:
    rho_project.write(
        ".rho/workflows/common.star",
        'def make_checks(n):\n    return [command(name = "check-%d" % i, argv = ["cargo", "check"], timeout_seconds = 60, max_output_bytes = 1000) for i in range(n)]\n',
    )
    text = 'load("//.rho/workflows/common.star", "make_checks")\n\n' + entry("", 'make_checks(inputs["workers"])')
    out = validate(rho_project, text)
    assert [n["name"] for n in out["nodes"]] == ["check-0", "check-1"]
    assert [s["label"] for s in out["sources"]] == [
        "//.rho/workflows/common.star",
        "//.rho/workflows/review/review.star",
    ]


def test_agent_example_with_local_agent(rho_project: Project) -> None:
    out = validate(rho_project, entry(INSPECT, "[inspect]"))
    assert out["nodes"][0]["kind"] == "agent"
    agents = [a for a in out["authority"] if a["kind"] == "agent"]
    assert agents[0]["value"] == "reviewer" and "from workflow" in agents[0]["detail"]


def test_direct_command_example(rho_project: Project) -> None:
    out = validate(rho_project, entry(INSPECT + CHECK_COMMAND, "[inspect, check]"))
    check = next(n for n in out["nodes"] if n["name"] == "check")
    assert check["needs"] == ["inspect"]
    assert any(a["kind"] == "executable" and a["value"].endswith("/cargo") for a in out["authority"])


def test_shell_example(rho_project: Project) -> None:
    out = validate(rho_project, entry(CHECK_SHELL, "[check]"))
    assert out["nodes"][0]["kind"] == "shell"


def test_schema_examples(rho_project: Project) -> None:
    body = """
    schemas = [
        schema.null(),
        schema.bool(),
        schema.integer(),
        schema.string(),
        schema.enum_(["approve", "revise"]),
        schema.list(schema.string()),
        schema.optional(schema.string()),
        schema.record({
            "required_field": schema.string(),
            "optional_field": schema.optional(schema.integer()),
        }),
    ]
    nodes = [
        command(name = "s%d" % i, argv = ["cargo"], output = schema.stdout_json(s), timeout_seconds = 5, max_output_bytes = 100)
        for i, s in enumerate(schemas)
    ]
    nodes.append(command(name = "passed", argv = ["cargo"], output = schema.stdout_json(schema.record({"passed": schema.bool()})),
                         timeout_seconds = 5, max_output_bytes = 100))
"""
    out = validate(rho_project, entry(body, "nodes"))
    assert len(out["nodes"]) == 9


def test_templates_and_conditions_examples(rho_project: Project) -> None:
    body = (
        INSPECT
        + CHECK_COMMAND
        + """
    summarize = agent(
        name = "summarize",
        agent = "reviewer",
        prompt = template([
            "Inspection summary: ",
            output("inspect", ["summary"]),
        ]),
        needs = ["inspect", "check"],
        when = condition.all([
            condition.equals(output("inspect", ["decision"]), "approve"),
            condition.any([
                condition.is_one_of(status("check"), ["success", "failure"]),
                condition.not_(condition.equals(exit_code("check"), 0)),
            ]),
        ]),
        timeout_seconds = 600,
        max_output_bytes = 4000,
    )
    gated = command(
        name = "gated",
        argv = ["cargo", "check"],
        needs = ["check"],
        when = condition.equals(exit_code("check"), 0),
        timeout_seconds = 600,
        max_output_bytes = 4000,
    )
"""
    )
    out = validate(rho_project, entry(body, "[inspect, check, summarize, gated]"))
    assert {n["name"]: n["conditional"] for n in out["nodes"]} == {
        "check": False,
        "gated": True,
        "inspect": False,
        "summarize": True,
    }
