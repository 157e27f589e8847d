"""The MCP tools a CAO user reaches for (issue 33 point 5), through the SDK's own client and a real
``rho-notebook mcp`` subprocess (:mod:`tests.cli.mcp_session`).

From the seed's *MCP tool reference* and *CLI <-> MCP name mapping*
(/work/shared/seeds/cao-workflows.txt): ``workflow_events`` reads a run's ordered progress, and
``workflow_list`` is the false friend: CAO's lists runs, ours lists the workspace's workflows;
``workflow_runs`` lists runs and takes ``state`` and ``limit`` like the CLI's ``runs``, in the same
order. The runs are of the seed's *Quick start* ``hello.py``, adapted as in
tests/cli/test_porting_cao_surface.py (our script import; ``run_step`` names an agent of the
catalog, docs/scripts.md), started by a person with the CLI (a run started through MCP is
supervised: docs/mcp.md); the tools only read them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from rho_notebook.store.ids import new_id
from tests.agents.fakeserver import ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.cli.mcp_session import McpSession
from tests.cli.test_porting_cao_surface import AGENT, HELLO, SUMMARIZE, answer
from tests.conftest import Project

ENV = {KEY_ENV: SECRET}


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, list[str]]]:
    """A workspace holding the seed's two scripts, and two finished runs of ``hello`` (oldest first)."""
    base = tmp_path_factory.mktemp("cao-mcp")
    project = Project(root=(base / "ws").resolve(), home=(base / "home").resolve())
    (project.root / ".rho").mkdir(parents=True)
    with ScriptedServer([answer], repeat_last=True) as server:
        write_settings_for(project.home, server)
        project.write("hello.py", HELLO)
        project.write("summarize.py", SUMMARIZE)
        for name in ("developer", "reviewer"):
            project.write(f"agents/{name}.md", AGENT.format(name=name))
        runs = []
        for _ in range(2):
            run_id = new_id()
            done = project.cli("run", "hello.py", "--run-id", run_id, "--yes", "--json", env=ENV, timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
            runs.append(run_id)
        yield project, runs


@pytest.fixture(scope="module")
def mcp(ws: tuple[Project, list[str]]) -> Iterator[McpSession]:
    session = McpSession(ws[0])
    yield session
    session.close()


def cli_json(project: Project, *args: str) -> Any:
    done = project.cli(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_workflow_list_lists_workflows_and_workflow_runs_lists_runs(
    ws: tuple[Project, list[str]], mcp: McpSession
) -> None:
    """The false friend: CAO's ``workflow_list`` lists runs; ours answers what ``list --json``
    prints, the workspace's workflows, and ``workflow_runs`` is the tool that lists runs."""
    project, runs = ws
    listed = mcp.answer("workflow_list")
    assert listed == cli_json(project, "list", "--json")
    assert {(entry["name"], entry["kind"]) for entry in listed["workflows"]} == {
        ("hello", "script"),
        ("summarize", "script"),
    }
    assert "run_id" not in json.dumps(listed)

    every = mcp.answer("workflow_runs")
    assert [row["run_id"] for row in every] == runs  # newest last, as `runs` lists them
    assert every == cli_json(project, "runs", "--json")
    newest = mcp.answer("workflow_runs", {"state": "completed", "limit": 1})
    assert [row["run_id"] for row in newest] == [runs[1]]
    assert newest == cli_json(project, "runs", "--state", "completed", "--limit", "1", "--json")
    assert mcp.answer("workflow_runs", {"state": "needs_decision"}) == []
    assert "limit" in mcp.error("workflow_runs", {"limit": 0})
    assert "state" in mcp.error("workflow_runs", {"state": "failed"})  # CAO's word; ours are lifecycles

    tools = {tool.name: tool for tool in mcp.tools()}
    assert "not runs" in (tools["workflow_list"].description or "")
    assert "not the workflows" in (tools["workflow_runs"].description or "")


def test_workflow_events_pages_the_journal_after_a_seq(ws: tuple[Project, list[str]], mcp: McpSession) -> None:
    """``workflow_events`` (CAO: read a run's ordered progress) answers the records after
    ``after_seq``, at most ``limit``; following ``next_after_seq`` page by page gives exactly what
    ``events RUN --no-follow`` prints."""
    project, runs = ws
    run_id = runs[0]
    printed = project.cli("events", run_id, "--no-follow")
    assert printed.returncode == 0, printed.stderr
    journal = [json.loads(line) for line in printed.stdout.splitlines()]
    assert len(journal) > 6

    first = mcp.answer("workflow_events", {"run_id": run_id[:13], "limit": 3})
    assert first["run_id"] == run_id
    assert [record["seq"] for record in first["events"]] == [1, 2, 3]
    assert (first["truncated"], first["next_after_seq"], first["last_seq"]) == (True, 3, journal[-1]["seq"])
    assert (first["torn"], first["damage"]) == (False, None)

    paged = list(first["events"])
    after = first["next_after_seq"]
    while after is not None:
        page = mcp.answer("workflow_events", {"run_id": run_id, "after_seq": after, "limit": 3})
        assert page["after_seq"] == after and len(page["events"]) <= 3
        paged.extend(page["events"])
        after = page["next_after_seq"]
    assert paged == journal

    rest = mcp.answer("workflow_events", {"run_id": run_id, "after_seq": 4})
    assert rest["events"] == [record for record in journal if record["seq"] > 4]
    assert (rest["truncated"], rest["next_after_seq"]) == (False, None)
    end = mcp.answer("workflow_events", {"run_id": run_id, "after_seq": journal[-1]["seq"]})
    assert (end["events"], end["truncated"]) == ([], False)

    assert "limit" in mcp.error("workflow_events", {"run_id": run_id, "limit": 0})
    assert "after_seq" in mcp.error("workflow_events", {"run_id": run_id, "after_seq": -1})
    assert "follow" in mcp.error("workflow_events", {"run_id": run_id, "follow": True})  # reads once, never follows
