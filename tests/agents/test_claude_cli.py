"""The claude-cli runtime against a fake `claude` program on PATH that records what it was given and
prints a scripted result: flag mapping, typed answers, missing program, fail-closed tools, exits
and cancellation."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.agents.claude_cli import claude_arguments
from rho_notebook.errors import AgentFailure
from rho_notebook.model.state import NodeState
from tests.agents.helpers import DECISION, Runner, definition, install_fake_claude, process_alive

CLAUDE_AGENT = definition(
    id="claude-planner",
    runtime="claude-cli",
    model_policy="select",
    model="claude-opus-5",
    reasoning="high",
    tools=("Read", "Edit", "Bash(git *)"),
    body="Produce a short plan. Prefer reading before editing.",
)


@pytest.fixture
def claude(runner: Runner, tmp_path: Path) -> dict[str, Any]:
    bin_dir = tmp_path / "fakebin"
    install_fake_claude(bin_dir)
    answer = tmp_path / "answer.txt"
    answer.write_text('{"decision": "approve", "summary": "plan ready"}')
    record = tmp_path / "claude-record.json"
    runner.environ.update(
        {
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "CLAUDE_FAKE_RECORD": str(record),
            "CLAUDE_FAKE_ANSWER": str(answer),
            "ANTHROPIC_API_KEY": "sk-ant-should-be-redacted-123",
            "UNRELATED_SECRET": "not-for-claude",
        }
    )
    return {"record": record, "answer": answer}


def recorded(claude: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(claude["record"].read_text())
    return data


def test_flags_stdin_and_typed_answer(runner: Runner, claude: dict[str, Any]) -> None:
    attempt = runner.run(agent=CLAUDE_AGENT, settings=None, output=DECISION, prompt="Plan the refactor.")
    assert attempt.result.state is NodeState.SUCCESS, attempt.result.message
    assert attempt.result.value == {"decision": "approve", "summary": "plan ready"}
    seen = recorded(claude)
    prompt_file = str(attempt.attempt_dir / "system-prompt.txt")
    assert seen["argv"] == [
        "-p", "--output-format", "json",
        "--permission-mode", "dontAsk",
        "--disallowedTools", "Task",
        "--setting-sources", "",
        "--strict-mcp-config",
        "--no-session-persistence",
        "--max-turns", "32",
        "--model", "claude-opus-5",
        "--effort", "high",
        "--tools", "Read,Edit,Bash",
        "--allowedTools", "Read", "Edit", "Bash(git *)",
        "--append-system-prompt-file", prompt_file,
    ]  # fmt: skip
    assert seen["system_prompt"] == "Produce a short plan. Prefer reading before editing."
    assert seen["stdin"].startswith("Plan the refactor.") and "exactly one JSON value" in seen["stdin"]
    assert seen["cwd"] == str(runner.workspace)
    assert "ANTHROPIC_API_KEY" in seen["env"] and "UNRELATED_SECRET" not in seen["env"]
    assert {"RHO_RUN_ID", "RHO_NODE"} <= set(seen["env"])
    usage = attempt.usage
    assert (usage["runtime"], usage["model"], usage["input_tokens"], usage["output_tokens"], usage["turns"]) == (
        "claude-cli", "claude-opus-5", 35, 9, 2,
    )  # fmt: skip
    transcript = attempt.artifact("transcript.json")
    assert transcript["argv"][1:] == seen["argv"] and transcript["result"]["result"] == claude["answer"].read_text()
    assert "sk-ant-should-be-redacted-123" not in json.dumps(transcript)
    assert attempt.result.artifacts["system_prompt"] == "system-prompt.txt"


def test_replace_prompt_and_no_tools(runner: Runner, claude: dict[str, Any]) -> None:
    claude["answer"].write_text("Plan: nothing to do.")
    agent = definition(runtime="claude-cli", prompt="replace", body="You are a planner.", tools=())
    attempt = runner.run(agent=agent, settings=None)
    assert attempt.result.state is NodeState.SUCCESS
    assert attempt.artifact("answer.md") == "Plan: nothing to do."
    argv = recorded(claude)["argv"]
    assert argv[argv.index("--tools") + 1] == "" and "--allowedTools" not in argv and "--model" not in argv
    assert argv[-2:] == ["--system-prompt-file", str(attempt.attempt_dir / "system-prompt.txt")]
    assert attempt.usage["model"] == "claude-sonnet-test"  # as Claude reported it


def test_claude_not_on_path(runner: Runner) -> None:
    runner.environ["PATH"] = "/nonexistent"
    attempt = runner.run(agent=CLAUDE_AGENT, settings=None)
    assert attempt.result.state is NodeState.FAILURE
    assert "needs the `claude` program (Claude Code), but it is not on the PATH of this run" in attempt.result.message


def test_inherited_claude_config_fails_closed(runner: Runner, claude: dict[str, Any]) -> None:
    attempt = runner.run(agent=CLAUDE_AGENT.model_copy(update={"inherit_claude_config": True}), settings=None)
    assert attempt.result.state is NodeState.FAILURE and "inherit_claude_config: true" in attempt.result.message
    assert not claude["record"].exists()


def test_unknown_claude_tools_fail_closed() -> None:
    agent = CLAUDE_AGENT.model_copy(update={"tools": ("Read", "mcp__server__tool")})
    with pytest.raises(AgentFailure, match="'mcp__server__tool' whose effects are not known"):
        claude_arguments(agent, prompt_file=None, max_turns=4)


def test_claude_failure_exit(runner: Runner, claude: dict[str, Any]) -> None:
    runner.environ["CLAUDE_FAKE_MODE"] = "fail"
    attempt = runner.run(agent=CLAUDE_AGENT, settings=None)
    assert attempt.result.state is NodeState.FAILURE
    assert "claude exited with code 1: Invalid API key · Please run /login" in attempt.result.message
    assert attempt.usage["failure"]["kind"] == "claude"


def test_claude_error_result(runner: Runner, claude: dict[str, Any]) -> None:
    runner.environ["CLAUDE_FAKE_MODE"] = "error-result"
    attempt = runner.run(agent=CLAUDE_AGENT, settings=None)
    assert attempt.result.state is NodeState.FAILURE
    assert "claude reported an error (error_max_turns): hit the turn limit" in attempt.result.message


def test_claude_non_json_answer_fails_for_a_typed_node(runner: Runner, claude: dict[str, Any]) -> None:
    claude["answer"].write_text("I approve.")
    attempt = runner.run(agent=CLAUDE_AGENT, settings=None, output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "not_json"


def test_cancellation_stops_claude(runner: Runner, claude: dict[str, Any]) -> None:
    runner.environ["CLAUDE_FAKE_MODE"] = "sleep"

    def cancel_when_running(handle: Any) -> None:
        deadline = time.monotonic() + 10
        while not claude["record"].exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        handle.set()

    attempt = runner.run(agent=CLAUDE_AGENT, settings=None, during=cancel_when_running)
    assert attempt.result.state is NodeState.CANCELLATION
    pid = recorded(claude)["pid"]
    deadline = time.monotonic() + 5
    while process_alive(pid, "claude") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(pid, "claude")


def test_claude_timeout(runner: Runner, claude: dict[str, Any]) -> None:
    runner.environ["CLAUDE_FAKE_MODE"] = "sleep"
    attempt = runner.run(agent=CLAUDE_AGENT, settings=None, timeout=1)
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "node_timeout"
    assert attempt.elapsed < 5
