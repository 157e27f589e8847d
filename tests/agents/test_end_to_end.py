"""Agent nodes end to end through the real CLI (plan + run --yes in separate processes) against a
local OpenAI-compatible server: the Rho page's inspect -> check example on both branches, agent
files with every front-matter field, plan-time provider checks, cancellation, and the rule that no
secret is ever stored under RHO_NOTEBOOK_HOME."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.agents.prompts import BASE_PROMPT
from rho_notebook.errors import InvalidWorkflow
from tests.agents.fakeserver import OPENAI, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, assert_no_secret, install_fake_claude, write_settings_for
from tests.cli.runhelp import plan_id, start_run, status, wait_for_event
from tests.conftest import REPO, Project

Serve = Callable[..., ScriptedServer]
EXAMPLE = REPO / "examples" / "agents" / "inspect-check" / "inspect-check.star"
ENTRY = ".rho/workflows/inspect-check/inspect-check.star"
ENV = {KEY_ENV: SECRET}


def configure(project: Project, server: ScriptedServer, **extra: Any) -> None:
    """settings.json in the test's RHO_NOTEBOOK_HOME, pointing at the scripted server."""
    write_settings_for(project.home, server, **extra)


def run_cli(
    project: Project, entry: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    plan = project.cli("plan", entry, "--output", "json", *args, env=env or ENV)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    result = project.cli("run", json.loads(plan.stdout)["plan_id"], "--yes", "--output", "jsonl", env=env or ENV)
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert events, result.stderr
    return result.returncode, events, status(project, events[0]["run_id"])


def attempt_dir(project: Project, run_id: str, node: str) -> Path:
    return project.home / "workflows" / "runs" / run_id / "nodes" / node / "attempts" / "1"


@pytest.fixture
def example(project: Project) -> Project:
    target = project.root / ENTRY
    target.parent.mkdir(parents=True)
    shutil.copy(EXAMPLE, target)
    (project.root / "src").mkdir()
    (project.root / "src" / "main.py").write_text("print('hello')\n")
    return project


def test_inspect_then_check_when_approved(example: Project, serve: Serve) -> None:
    server = serve(
        [
            OPENAI.tools(("c1", "read_file", {"path": "src/main.py"})),
            OPENAI.answer('{"decision": "approve", "summary": "main prints hello"}'),
        ]
    )
    configure(example, server)
    code, events, state = run_cli(example, ENTRY, "--input", 'target="src"')
    assert code == 0, events
    assert state["outcome"] == "success"
    assert {n: v["state"] for n, v in state["nodes"].items()} == {"inspect": "success", "check": "success"}
    run_id = state["run_id"]
    inspect_dir = attempt_dir(example, run_id, "inspect")
    assert json.loads((inspect_dir / "value.json").read_text()) == {
        "decision": "approve",
        "summary": "main prints hello",
    }
    assert (inspect_dir / "answer.txt").exists() and (inspect_dir / "transcript.json").exists()
    usage = json.loads((inspect_dir / "usage.json").read_text())
    assert (usage["provider"], usage["model"], usage["turns"], usage["tool_calls"]) == ("local", "test-model", 2, 1)
    check_stdout = (attempt_dir(example, run_id, "check") / "stdout").read_text()
    assert check_stdout == "inspection summary: main prints hello\n"
    finished = next(e for e in events if e["kind"] == "node_finished" and e["node"] == "inspect")
    assert finished["exit"]["kind"] == "agent" and finished["exit"]["provider"] == "local"
    assert finished["exit"]["input_tokens"] == 16 and finished["exit"]["failure"] is None
    task = OPENAI.task(server.requests[0])
    assert task.startswith("Inspect src and return the required JSON value.")
    assert OPENAI.tool_names(server.requests[0]) == ["glob", "grep", "list_dir", "read_file"]
    assert server.requests[1].headers["authorization"] == f"Bearer {SECRET}"
    assert "hello" in OPENAI.tool_results(server.requests[1])[0][1]
    assert_no_secret(example.home)


def test_inspect_then_check_skipped_when_revise(example: Project, serve: Serve) -> None:
    server = serve([OPENAI.answer('{"decision": "revise", "summary": "needs tests"}')])
    configure(example, server)
    code, events, state = run_cli(example, ENTRY)
    assert code == 0
    assert {n: v["state"] for n, v in state["nodes"].items()} == {"inspect": "success", "check": "skipped"}
    assert state["outcome"] == "success"
    assert not attempt_dir(example, state["run_id"], "check").exists()
    assert OPENAI.task(server.requests[0]).startswith("Inspect . and return the required JSON value.")


def test_invalid_answer_fails_inspect_and_blocks_check(example: Project, serve: Serve) -> None:
    server = serve([OPENAI.answer('```json\n{"decision": "approve", "summary": "x"}\n```')])
    configure(example, server)
    code, events, state = run_cli(example, ENTRY)
    assert code != 0 and state["outcome"] == "failure"
    assert state["nodes"]["inspect"]["state"] == "failure" and state["nodes"]["check"]["state"] == "blocked"
    assert "code fence is not stripped" in state["nodes"]["inspect"]["reason"]


def test_no_secret_anywhere_under_the_store(example: Project, serve: Serve) -> None:
    """Success, a model that repeats the key, and a 401 that echoes it: the key is in no file."""
    server = serve(
        [
            OPENAI.answer(f'{{"decision": "approve", "summary": "my key is {SECRET}"}}'),
            OPENAI.error(401, f"Incorrect API key provided: {SECRET}"),
        ]
    )
    configure(example, server)
    _, _, first = run_cli(example, ENTRY)
    assert first["outcome"] == "success"
    _, _, second = run_cli(example, ENTRY)
    assert second["nodes"]["inspect"]["state"] == "failure"
    assert "HTTP 401" in second["nodes"]["inspect"]["reason"] and KEY_ENV in second["nodes"]["inspect"]["reason"]
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)
    assert_no_secret(example.home)
    for request in server.requests:  # the plan and prompts never carried it either
        assert SECRET not in json.dumps(request.body)


def test_cancel_through_the_cli_stops_a_held_request(example: Project, serve: Serve) -> None:
    held = threading.Event()
    server = serve([Reply(body={}, hold=held)])
    configure(example, server)
    proc = start_run(example, ENTRY, env=ENV)
    try:
        run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "node_launched")
        server.wait_for_requests(1, timeout=20)
        cancel = example.cli("cancel", run_id, "--wait", "10", "--output", "json")
        assert cancel.returncode == 0, cancel.stderr
        assert '"acknowledged"' in cancel.stdout
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    state = status(example, run_id)
    assert state["outcome"] == "cancellation" and state["nodes"]["inspect"]["state"] == "cancellation"
    assert server.disconnected.wait(5) and not held.is_set()
    usage = json.loads((attempt_dir(example, run_id, "inspect") / "usage.json").read_text())
    assert usage["outcome"] == "cancellation"


RHO_EVERY_FIELD = """---
id: full-rho
description: Every front-matter field of a rho agent
runtime: rho
prompt: extend
model-policy: require
model: pinned-model
provider: local
auth: local-key
reasoning: medium
tools: [read_file, list_dir, grep, glob]
inherit_claude_config: false
---
Look carefully before you answer.
"""

CLAUDE_EVERY_FIELD = """---
id: full-claude
description: Every front-matter field of a claude-cli agent
runtime: claude-cli
prompt: replace
model-policy: select
model: claude-opus-5
reasoning: xhigh
tools: [Read, Grep, "Bash(git *)"]
inherit_claude_config: false
---
You plan changes. Answer with exactly the JSON asked for.
"""

EVERY_FIELD_FLOW = """
def build(inputs):
    decision = schema.record({"decision": schema.enum_(["approve", "revise"]), "summary": schema.string()})
    rho = agent(name = "rho", agent = "full-rho", prompt = "Review.", access = "read_only",
                output = decision, timeout_seconds = 60, max_output_bytes = 4000)
    claude = agent(name = "claude", agent = "full-claude", needs = ["rho"],
                   prompt = template(["Plan after: ", output("rho", ["summary"])]),
                   output = decision, timeout_seconds = 60, max_output_bytes = 4000)
    return workflow(name = "every-field", nodes = [rho, claude])

WORKFLOW = define(inputs = {}, build = build)
"""


def test_agent_files_with_every_front_matter_field_resolve_and_run(
    project: Project, serve: Serve, tmp_path: Path
) -> None:
    project.write(".rho/workflows/full/agents/full-rho.md", RHO_EVERY_FIELD)
    project.write(".rho/workflows/full/agents/full-claude.md", CLAUDE_EVERY_FIELD)
    project.write(".rho/workflows/full/flow.star", EVERY_FIELD_FLOW)
    server = serve([OPENAI.answer('{"decision": "approve", "summary": "rho says fine"}')])
    project.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (project.home / "settings.json").write_text(
        json.dumps(
            {
                "providers": {"local": {"type": "openai", "base_url": OPENAI.base(server.url)}},
                "auth_profiles": {"local-key": {"api_key_env": KEY_ENV, "provider": "local"}},
                "default_provider": "local",
                "default_model": "unused-default",
            }
        )
    )
    bin_dir = tmp_path / "fakebin"
    install_fake_claude(bin_dir)
    answer = tmp_path / "claude-answer.txt"
    answer.write_text('{"decision": "revise", "summary": "claude plan"}')
    record = tmp_path / "claude-record.json"
    env = {
        **ENV,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "CLAUDE_FAKE_RECORD": str(record),
        "CLAUDE_FAKE_ANSWER": str(answer),
    }
    code, events, state = run_cli(project, ".rho/workflows/full/flow.star", env=env)
    assert code == 0, events
    assert {n: v["state"] for n, v in state["nodes"].items()} == {"rho": "success", "claude": "success"}
    request = server.requests[0]
    assert request.body["model"] == "pinned-model" and request.body["reasoning_effort"] == "medium"
    assert request.headers["authorization"] == f"Bearer {SECRET}"  # from the auth profile
    assert OPENAI.system(request) == BASE_PROMPT + "\n\nLook carefully before you answer."
    seen = json.loads(record.read_text())
    argv = seen["argv"]
    assert argv[argv.index("--model") + 1] == "claude-opus-5" and argv[argv.index("--effort") + 1] == "xhigh"
    assert argv[argv.index("--tools") + 1] == "Read,Grep,Bash"
    assert argv[argv.index("--allowedTools") + 1 : argv.index("--allowedTools") + 4] == ["Read", "Grep", "Bash(git *)"]
    assert (
        "--system-prompt-file" in argv
        and seen["system_prompt"] == "You plan changes. Answer with exactly the JSON asked for."
    )
    assert seen["stdin"].startswith("Plan after: rho says fine")
    run_id = state["run_id"]
    rho_usage = json.loads((attempt_dir(project, run_id, "rho") / "usage.json").read_text())
    assert rho_usage["credential"] == f"environment variable {KEY_ENV} (auth profile 'local-key')"
    claude_value = json.loads((attempt_dir(project, run_id, "claude") / "value.json").read_text())
    assert claude_value == {"decision": "revise", "summary": "claude plan"}
    graph = json.loads((project.home / "workflows" / "runs" / run_id / "graph.json").read_text())
    frozen = {a["id"]: a for a in graph["agents"]}
    assert frozen["full-rho"]["auth"] == "local-key" and frozen["full-claude"]["runtime"] == "claude-cli"
    assert_no_secret(project.home)


def test_unknown_provider_in_an_agent_file_fails_at_plan_time(project: Project, serve: Serve) -> None:
    project.write(
        ".rho/workflows/full/agents/full-rho.md", RHO_EVERY_FIELD.replace("provider: local", "provider: elsewhere")
    )
    project.write(
        ".rho/workflows/full/flow.star", EVERY_FIELD_FLOW.replace(', agent = "full-claude"', ', agent = "full-rho"')
    )
    configure(project, serve([]), auth_profiles={"local-key": {"api_key_env": KEY_ENV}})
    result = project.cli("plan", ".rho/workflows/full/flow.star")
    assert result.returncode != 0
    path = project.root / ".rho/workflows/full/agents/full-rho.md"
    assert (
        f"{path}:8:1: error[agent.provider]: agent 'full-rho' names provider 'elsewhere', which settings do not define"
        in result.stderr
    )
    assert "providers: local" in result.stderr
    assert project.stored_plans() == []


def test_unknown_auth_profile_fails_at_plan_time(project: Project, serve: Serve) -> None:
    project.write(".rho/workflows/full/agents/full-rho.md", RHO_EVERY_FIELD)
    project.write(
        ".rho/workflows/full/flow.star", EVERY_FIELD_FLOW.replace(', agent = "full-claude"', ', agent = "full-rho"')
    )
    configure(project, serve([]))
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan(".rho/workflows/full/flow.star", store=False)
    (found,) = caught.value.diagnostics()
    assert found.rule == "agent.auth" and found.line == 9
    assert "auth profile 'local-key', which settings do not define" in found.message


def test_provider_from_settings_only_fails_at_run_time(example: Project, serve: Serve) -> None:
    server = serve([])
    configure(example, server, default_provider="missing")
    pid = plan_id(example, ENTRY)  # planning does not look at the default provider
    result = example.cli("run", pid, "--yes", "--output", "jsonl", env=ENV)
    state = status(example, json.loads(result.stdout.splitlines()[0])["run_id"])
    reason = state["nodes"]["inspect"]["reason"]
    assert state["nodes"]["inspect"]["state"] == "failure"
    assert "provider 'missing' (from the settings' default_provider) is not defined in settings" in reason
    assert server.requests == []
