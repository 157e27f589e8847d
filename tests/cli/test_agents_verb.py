"""``rho-notebook agents [DIR]`` (docs/agents.md "Which agents a workflow can name"): every agent id
a workflow in DIR can name, resolved as planning resolves it, with what each definition hides, and
the ids that cannot be resolved reported with planning's own diagnostics."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Project

REVIEWER = "---\ndescription: {what}\ntools: {tools}\n---\nReview.\n"


def _agent(project: Project, relative: str, what: str, tools: str = "[read_file]") -> Path:
    return project.write(relative, REVIEWER.format(what=what, tools=tools))


def test_the_workflow_folder_wins_and_what_it_hides_is_named(project: Project) -> None:
    _agent(project, ".rho/agents/reviewer.md", "the project's reviewer")
    _agent(project, "flows/agents/reviewer.md", "the folder's reviewer", tools="all")
    _agent(project, ".rho/agents/triage.md", "sorts issues")
    _agent(project, "elsewhere/agents/triage.md", "not seen from flows/")

    listed = project.cli("agents", "flows")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["ID", "ORIGIN", "RUNTIME", "ACCESS", "DEFINED", "IN"]
    rows = {line.split()[0]: line.split() for line in lines[1:] if not line.startswith(" ")}
    assert set(rows) == {"default", "explorer", "reviewer", "triage", "worker"}
    assert rows["reviewer"][1:] == ["workflow", "rho", "writes", "flows/agents/reviewer.md"]
    assert rows["triage"][1:] == ["project", "rho", "read-only", ".rho/agents/triage.md"]
    assert rows["explorer"][1:] == ["builtin", "rho", "read-only", "built-in"]
    after_reviewer = lines[[line.split()[0] for line in lines].index("reviewer") + 1]
    assert after_reviewer == "  hides .rho/agents/reviewer.md, built-in"

    from_root = json.loads(project.cli("agents", "--output", "json").stdout)
    reviewer = next(row for row in from_root["agents"] if row["id"] == "reviewer")
    assert reviewer["origin"] == "project" and reviewer["description"] == "the project's reviewer"
    assert reviewer["file"] == str(project.root / ".rho/agents/reviewer.md")
    assert reviewer["hides"] == ["built-in"] and reviewer["read_only"] is True and reviewer["problems"] == []


def test_an_id_planning_cannot_resolve_is_reported_with_planning_s_diagnostic(project: Project) -> None:
    _agent(project, ".rho/agents/rev.md", "one")
    project.write(".rho/agents/rev2.md", "---\nid: rev\ndescription: two\n---\n")
    project.write(".rho/agents/bad.md", "---\ndescription: [oops\n---\n")

    listed = project.cli("agents")
    assert listed.returncode == 1
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:] if not line.startswith(" ")}
    assert "cannot be resolved (below): .rho/agents/rev.md, .rho/agents/rev2.md" in rows["rev"]
    assert "cannot be resolved (below): .rho/agents/bad.md" in rows["bad"]
    assert "error[agent.duplicate]: agent id 'rev' is defined twice" in listed.stderr
    assert "bad.md:2:1: error[agent.description]" in listed.stderr

    project.write(
        "wf.star",
        'def build(inputs):\n    return workflow(name = "w", nodes = [agent(name = "a", agent = "rev", prompt = "hi",'
        " timeout_seconds = 30, max_output_bytes = 1000)])\n\nWORKFLOW = define(build = build)\n",
    )
    planned = project.cli("validate", "wf.star")
    assert planned.returncode == 1 and "error[agent.duplicate]: agent id 'rev' is defined twice" in planned.stderr

    as_json = json.loads(project.cli("agents", "--output", "json").stdout)
    rev = next(row for row in as_json["agents"] if row["id"] == "rev")
    assert rev["origin"] is None and rev["hides"] == []
    assert rev["claimed_by"] == [str(project.root / ".rho/agents/rev.md"), str(project.root / ".rho/agents/rev2.md")]
    assert [problem["rule"] for problem in rev["problems"]] == ["agent.duplicate"]


def test_a_symlinked_agent_folder_and_a_missing_folder_are_refused(project: Project, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (project.root / "flows").mkdir()
    (project.root / "flows" / "agents").symlink_to(tmp_path / "elsewhere")
    linked = project.cli("agents", "flows")
    assert linked.returncode == 1 and "error[agent.root]" in linked.stderr and "symbolic link" in linked.stderr

    missing = project.cli("agents", "nowhere")
    assert missing.returncode == 2 and "nowhere: no such folder" in missing.stderr
