"""One agent attempt at a time, through AgentExecutor, against a real local OpenAI-compatible server:
typed answers, tools in the workspace, failures of every kind, timeout and cancellation."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rho_notebook.agents.loop import LoopLimits
from rho_notebook.agents.prompts import BASE_PROMPT
from rho_notebook.model.reference import OutputRef, Template
from rho_notebook.model.state import NodeState
from tests.agents.fakeserver import OPENAI, Reply, ScriptedServer
from tests.agents.helpers import (
    DECISION,
    KEY_ENV,
    SECRET,
    Runner,
    assert_no_secret,
    definition,
    process_alive,
    settings_for,
)

Serve = Callable[..., ScriptedServer]
REVIEWER = definition(id="reviewer", tools=("read_file", "list_dir", "grep", "glob"))
APPROVE = '{"decision": "approve", "summary": "looks fine"}'


def test_schema_answer_is_parsed_validated_and_stored_apart(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer("\n  " + APPROVE + "\n")])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION, access="read_only")
    assert attempt.result.state is NodeState.SUCCESS, attempt.result.message
    assert attempt.result.value == {"decision": "approve", "summary": "looks fine"}
    assert attempt.artifact("value.json") == {"decision": "approve", "summary": "looks fine"}
    assert attempt.artifact("answer.txt").strip() == APPROVE
    assert not attempt.has("answer.md")
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.body["model"] == "test-model"
    assert OPENAI.system(request) == BASE_PROMPT + "\n\nBe brief."
    task = OPENAI.task(request)
    assert task.startswith("Inspect the workspace.")
    assert '"decision"?' not in task and '"decision": "approve" | "revise"' in task
    assert "exactly one JSON value" in task and "no Markdown code fences" in task
    assert "read-only" in task
    assert OPENAI.tool_names(request) == ["glob", "grep", "list_dir", "read_file"]
    usage = attempt.usage
    assert (usage["provider"], usage["model"], usage["provider_type"]) == ("local", "test-model", "openai")
    assert usage["credential"] == f"environment variable {KEY_ENV}"
    assert (usage["input_tokens"], usage["output_tokens"], usage["turns"]) == (11, 7, 1)
    assert usage["outcome"] == "success" and usage["failure"] is None and usage["retries"] == []
    assert usage["duration_ms"] > 0
    transcript = attempt.artifact("transcript.json")
    assert transcript["system"].endswith("Be brief.")
    assert [m["role"] for m in transcript["messages"]] == ["user", "assistant"]
    summary = attempt.result.exit or {}
    assert summary["kind"] == "agent" and summary["input_tokens"] == 11 and summary["failure"] is None
    assert set(attempt.result.artifacts) == {"answer", "value", "transcript", "usage"}
    assert_no_secret(attempt.attempt_dir)


def test_prompt_template_renders_ancestor_outputs(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer("Done.")])
    template = Template(parts=("Summary was: ", OutputRef(node="first", path=("summary",)), "."))
    attempt = runner.run(
        agent=REVIEWER,
        settings=settings_for(server),
        prompt_template=template,
        outputs={"first": {"summary": "all good"}},
    )
    assert attempt.result.state is NodeState.SUCCESS
    assert OPENAI.task(server.requests[0]).startswith("Summary was: all good.")


def test_unavailable_template_value_fails_before_any_request(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer("Done.")])
    template = Template(parts=(OutputRef(node="first", path=("summary",)),))
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), prompt_template=template)
    assert attempt.result.state is NodeState.FAILURE
    assert "cannot render the prompt" in attempt.result.message and attempt.usage["failure"]["kind"] == "template"
    assert server.requests == []


def test_prose_answer_without_schema_is_markdown_and_has_no_value(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer("## Findings\n\nNothing to fix.")])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server))
    assert attempt.result.state is NodeState.SUCCESS
    assert attempt.artifact("answer.md") == "## Findings\n\nNothing to fix."
    assert not attempt.has("value.json") and not attempt.has("answer.txt")
    assert "exactly one JSON value" not in OPENAI.task(server.requests[0])


def test_schema_mismatch_fails_and_keeps_the_raw_answer(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer('{"decision": "maybe", "summary": 3, "extra": true}')])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE
    message = attempt.result.message
    assert "does not match the output schema" in message
    assert '"maybe" is not one of ["approve", "revise"]' in message and "expected string" in message
    assert "unexpected field 'extra'" in message
    assert attempt.usage["failure"]["kind"] == "schema"
    assert attempt.has("answer.txt") and not attempt.has("value.json")


def test_non_json_answer_fails(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer('The decision is approve. {"decision": "approve", "summary": "x"}')])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE
    assert "not one JSON value" in attempt.result.message
    assert attempt.usage["failure"]["kind"] == "not_json"


def test_fenced_json_answer_fails(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer("```json\n" + APPROVE + "\n```")])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE
    assert "code fence is not stripped" in attempt.result.message
    assert attempt.usage["failure"]["kind"] == "not_json"
    assert not attempt.has("value.json")


def test_tool_calls_read_files_in_the_workspace(runner: Runner, serve: Serve) -> None:
    server = serve(
        [
            OPENAI.tools(("c1", "list_dir", {}), ("c2", "glob", {"pattern": "**/*.py"})),
            OPENAI.tools(
                ("c3", "read_file", {"path": "README.md"}), ("c4", "grep", {"pattern": "TODO", "path": "src"})
            ),
            OPENAI.answer('{"decision": "revise", "summary": "a TODO is left in src/app.py"}'),
        ]
    )
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION, access="read_only")
    assert attempt.result.state is NodeState.SUCCESS, attempt.result.message
    assert attempt.result.value["decision"] == "revise"
    first = dict((cid, text) for cid, text, _ in OPENAI.tool_results(server.requests[1]))
    assert first["c1"].splitlines() == ["README.md", "src/"]
    assert first["c2"] == "src/app.py"
    second = dict((cid, text) for cid, text, _ in OPENAI.tool_results(server.requests[2]))
    assert second["c3"] == "     1\t# Demo\n     2\tThe answer is 42."
    assert second["c4"] == "src/app.py:2:     return 42  # TODO tidy"
    usage = attempt.usage
    assert (usage["turns"], usage["tool_calls"], usage["tool_errors"]) == (3, 4, 0)
    assert (usage["input_tokens"], usage["output_tokens"]) == (5 + 5 + 11, 3 + 3 + 7)
    transcript = attempt.artifact("transcript.json")
    assert [t["tool_calls"] for t in transcript["turns"]] == [["list_dir", "glob"], ["read_file", "grep"], []]
    tool_messages = [m for m in transcript["messages"] if m["role"] == "tool"]
    assert [m["tool_name"] for m in tool_messages] == ["list_dir", "glob", "read_file", "grep"]


def test_read_only_agent_asking_for_write_is_refused(runner: Runner, serve: Serve) -> None:
    server = serve(
        [
            OPENAI.tools(
                ("w1", "write", {"path": "pwned.txt", "content": "x"}), ("w2", "bash", {"command": "touch pwned2"})
            ),
            OPENAI.answer(APPROVE),
        ]
    )
    # even a definition with every tool gets only read-only tools on a read-only node
    attempt = runner.run(
        agent=definition(tools="all"), settings=settings_for(server), output=DECISION, access="read_only"
    )
    assert attempt.result.state is NodeState.SUCCESS
    assert OPENAI.tool_names(server.requests[0]) == ["glob", "grep", "list_dir", "read_file"]
    results = OPENAI.tool_results(server.requests[1])
    assert all("refused" in text and "read-only" in text for _, text, _ in results)
    assert not (runner.workspace / "pwned.txt").exists() and not (runner.workspace / "pwned2").exists()
    assert attempt.usage["tool_errors"] == 2
    transcript = attempt.artifact("transcript.json")
    assert all(m.get("is_error") for m in transcript["messages"] if m["role"] == "tool")


def test_unoffered_tool_of_a_mutating_agent_is_refused(runner: Runner, serve: Serve) -> None:
    server = serve(
        [
            OPENAI.tools(("e1", "edit", {"path": "README.md", "old_string": "42", "new_string": "43"})),
            OPENAI.answer("ok"),
        ]
    )
    attempt = runner.run(agent=definition(tools=("read_file", "write")), settings=settings_for(server))
    assert attempt.result.state is NodeState.SUCCESS
    ((_, text, _),) = OPENAI.tool_results(server.requests[1])
    assert text.startswith("refused: there is no tool 'edit' for this agent; you may use: read_file, write")
    assert "42" in (runner.workspace / "README.md").read_text()


def test_path_escapes_are_refused(runner: Runner, serve: Serve, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("top secret")
    os.symlink(outside, runner.workspace / "link.txt")
    os.symlink(tmp_path, runner.workspace / "linkdir")
    server = serve(
        [
            OPENAI.tools(
                ("p1", "read_file", {"path": "../outside.txt"}),
                ("p2", "read_file", {"path": str(outside)}),
                ("p3", "read_file", {"path": "link.txt"}),
                ("p4", "list_dir", {"path": "linkdir"}),
                ("p5", "grep", {"pattern": "secret", "path": "src/../../"}),
                ("p6", "glob", {"pattern": "../*"}),
            ),
            OPENAI.answer(APPROVE),
        ]
    )
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION, access="read_only")
    assert attempt.result.state is NodeState.SUCCESS
    results = {cid: text for cid, text, _ in OPENAI.tool_results(server.requests[1])}
    assert "outside the workspace" in results["p1"] and "outside the workspace" in results["p2"]
    assert "symbolic link" in results["p3"] and "symbolic link" in results["p4"]
    assert "outside the workspace" in results["p5"] and "may not use '..'" in results["p6"]
    assert not any("top secret" in text for text in results.values())


def test_mutating_agent_writes_edits_and_runs_commands(runner: Runner, serve: Serve) -> None:
    server = serve(
        [
            OPENAI.tools(("t1", "write", {"path": "notes/plan.txt", "content": "step one\n"})),
            OPENAI.tools(("t2", "edit", {"path": "notes/plan.txt", "old_string": "one", "new_string": "two"})),
            OPENAI.tools(("t3", "bash", {"command": "cat notes/plan.txt; echo oops >&2; echo $RHO_NODE; exit 3"})),
            OPENAI.answer("Wrote the plan."),
        ]
    )
    attempt = runner.run(agent=definition(tools="all"), settings=settings_for(server))
    assert attempt.result.state is NodeState.SUCCESS, attempt.result.message
    assert (runner.workspace / "notes" / "plan.txt").read_text() == "step two\n"
    ((_, shell, is_error),) = OPENAI.tool_results(server.requests[3])[-1:]
    assert shell == "exit code: 3\n--- stdout ---\nstep two\ninspect\n\n--- stderr ---\noops\n"
    assert attempt.usage["tools"] == ["bash", "edit", "glob", "grep", "list_dir", "read_file", "shell", "write"]
    assert "web_search" in attempt.usage["unavailable_tools"]


def test_shell_tool_does_not_see_the_provider_key(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.tools(("s1", "bash", {"command": f"echo key=${KEY_ENV}"})), OPENAI.answer("done")])
    attempt = runner.run(agent=definition(tools=("bash",)), settings=settings_for(server))
    assert attempt.result.state is NodeState.SUCCESS
    ((_, text, _),) = OPENAI.tool_results(server.requests[1])
    assert "key=\n" in text


def test_401_names_the_credential_reference_never_the_value(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.error(401, f"Incorrect API key provided: {SECRET}.")])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE
    message = attempt.result.message
    assert "HTTP 401" in message and f"environment variable {KEY_ENV}" in message
    assert SECRET not in message and "[REDACTED]" in message
    assert attempt.usage["failure"]["kind"] == "auth" and attempt.usage["failure"]["status"] == 401
    assert len(server.requests) == 1  # no retry
    assert_no_secret(attempt.attempt_dir)


def test_429_then_success_waits_for_retry_after_and_records_it(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.error(429, "slow down", headers={"Retry-After": "1"}), OPENAI.answer(APPROVE)])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.SUCCESS
    assert attempt.elapsed >= 1.0
    assert len(server.requests) == 2
    assert attempt.usage["retries"] == [{"status": 429, "retry_after": "1", "waited_seconds": 1.0}]
    assert attempt.artifact("transcript.json")["turns"][0]["retries"] == attempt.usage["retries"]
    assert (attempt.result.exit or {})["retries"] == 1


def test_503_retries_are_bounded(runner: Runner, serve: Serve) -> None:
    busy = OPENAI.error(503, "overloaded", headers={"retry-after-ms": "50"})
    server = serve([busy, busy, busy, OPENAI.answer(APPROVE)])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server, max_retries=2), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE
    assert "HTTP 503 after 2 retries" in attempt.result.message
    assert len(server.requests) == 3
    assert [r["retry_after"] for r in attempt.usage["retries"]] == ["50 ms", "50 ms"]
    assert attempt.usage["failure"] == {"kind": "http", "status": 503, "message": attempt.usage["failure"]["message"]}


def test_retry_after_beyond_the_limit_is_not_waited_for(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.error(429, "later", headers={"Retry-After": "120"})])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and attempt.elapsed < 5
    assert "retry after 120 s" in attempt.result.message
    assert attempt.usage["failure"]["kind"] == "rate_limited"


def test_other_http_errors_are_not_retried(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.error(500, "boom"), OPENAI.answer(APPROVE)])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert (
        attempt.result.state is NodeState.FAILURE
        and "HTTP 500" in attempt.result.message
        and "boom" in attempt.result.message
    )
    assert len(server.requests) == 1


def test_malformed_response(runner: Runner, serve: Serve) -> None:
    server = serve([Reply(body={"object": "chat.completion", "choices": []})])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and "malformed chat completion" in attempt.result.message
    assert attempt.usage["failure"]["kind"] == "malformed"


def test_response_that_is_not_json(runner: Runner, serve: Serve) -> None:
    server = serve([Reply(body=b"<html>gateway</html>")])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and "response is not JSON" in attempt.result.message


def test_truncated_final_answer_fails(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer('{"decision": "appr', truncated=True)])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "truncated"


def test_transport_error(runner: Runner, serve: Serve) -> None:
    server = serve([])
    settings = settings_for(server, base_url="http://127.0.0.1:9/v1")
    attempt = runner.run(agent=REVIEWER, settings=settings, output=DECISION)
    assert attempt.result.state is NodeState.FAILURE
    assert "cannot reach http://127.0.0.1:9/v1/chat/completions" in attempt.result.message
    assert attempt.usage["failure"]["kind"] == "transport"


def test_request_timeout(runner: Runner, serve: Serve) -> None:
    server = serve([Reply(body={}, delay=5)])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server, request_timeout_seconds=0.5), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "timeout"
    assert "within 0.5 s" in attempt.result.message


def test_node_timeout_stops_the_attempt(runner: Runner, serve: Serve) -> None:
    server = serve([Reply(body={}, delay=20)])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION, timeout=1)
    assert attempt.result.state is NodeState.FAILURE
    assert attempt.elapsed < 4
    assert attempt.result.message.startswith("agent node_timeout: timed out after 1 s")
    assert attempt.usage["outcome"] == "failure" and attempt.usage["failure"]["kind"] == "node_timeout"


def test_cancellation_mid_request_ends_promptly(runner: Runner, serve: Serve) -> None:
    import threading

    held = threading.Event()
    server = serve([Reply(body={}, hold=held)])
    cancelled_at: list[float] = []

    def cancel_when_requested(cancel: Any) -> None:
        server.wait_for_requests(1)
        time.sleep(0.2)
        cancelled_at.append(time.monotonic())
        cancel.set()

    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION, during=cancel_when_requested)
    assert attempt.result.state is NodeState.CANCELLATION
    assert time.monotonic() - cancelled_at[0] < 2.0
    assert server.disconnected.wait(5), "the held request was not aborted"
    assert not held.is_set()
    assert attempt.usage["outcome"] == "cancellation" and attempt.usage["failure"]["kind"] == "cancelled"
    assert attempt.has("transcript.json")


def test_cancellation_stops_a_running_shell_tool(runner: Runner, serve: Serve) -> None:
    pid_file = runner.workspace / "child.pid"
    server = serve([OPENAI.tools(("b1", "bash", {"command": f"sleep 60 & echo $! > {pid_file}; wait"}))])

    def cancel_when_started(cancel: Any) -> None:
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cancel.set()

    attempt = runner.run(agent=definition(tools=("bash",)), settings=settings_for(server), during=cancel_when_started)
    assert attempt.result.state is NodeState.CANCELLATION
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while process_alive(pid, "sleep") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(pid, "sleep"), "the tool's child process survived cancellation"


def test_turn_budget(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.tools(("l", "list_dir", {}))], repeat_last=True)
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), limits=LoopLimits(max_turns=3))
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "turn_budget"
    assert "turn budget (3 model calls)" in attempt.result.message
    assert len(server.requests) == 3


def test_tool_error_budget(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.tools(("x", "read_file", {"path": "missing.txt"}))], repeat_last=True)
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), limits=LoopLimits(max_tool_errors=2))
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "tool_budget"
    assert "failed 3 times" in attempt.result.message and "missing.txt does not exist" in attempt.result.message


def test_answer_bound_by_max_output_bytes(runner: Runner, serve: Serve) -> None:
    long_json = '{"decision": "approve", "summary": "' + "x" * 500 + '"}'
    server = serve([OPENAI.answer(long_json), OPENAI.answer("y" * 500)])
    typed = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION, max_output_bytes=100)
    assert typed.result.state is NodeState.FAILURE and typed.usage["failure"]["kind"] == "too_large"
    prose = runner.run(agent=REVIEWER, settings=settings_for(server), max_output_bytes=100)
    assert prose.result.state is NodeState.SUCCESS and prose.artifact("answer.md") == "y" * 100


def test_empty_answer_fails(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer("  ")])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server))
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "empty_answer"


def test_secret_echoed_by_the_model_is_redacted_everywhere(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer(f'{{"decision": "approve", "summary": "the key is {SECRET}"}}')])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.SUCCESS
    assert attempt.result.value == {"decision": "approve", "summary": "the key is [REDACTED]"}
    assert_no_secret(attempt.attempt_dir)


def test_missing_credential_variable(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer(APPROVE)])
    runner.environ.pop(KEY_ENV)
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "credential"
    assert f"environment variable {KEY_ENV}, which is not set" in attempt.result.message
    assert server.requests == []


def test_provider_without_credential_sends_no_authorization(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer(APPROVE)])
    attempt = runner.run(agent=REVIEWER, settings=settings_for(server, api_key_env=None), output=DECISION)
    assert attempt.result.state is NodeState.SUCCESS
    assert "authorization" not in server.requests[0].headers and attempt.usage["credential"] is None


def test_default_provider_unknown_at_run_time(runner: Runner, serve: Serve) -> None:
    server = serve([])
    settings = settings_for(server).model_copy(update={"default_provider": "nowhere"})
    attempt = runner.run(agent=REVIEWER, settings=settings, output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "config"
    assert (
        "provider 'nowhere' (from the settings' default_provider) is not defined in settings (providers: local"
        in attempt.result.message
    )


def test_unsupplied_extension_capability_fails_at_bind(runner: Runner, serve: Serve) -> None:
    server = serve([])
    attempt = runner.run(agent=definition(tools=("read_file", "acme_custom")), settings=settings_for(server))
    assert attempt.result.state is NodeState.FAILURE
    assert "capability 'acme_custom', which this host does not supply" in attempt.result.message


def test_replace_prompt_is_the_whole_system_prompt_and_reasoning_is_sent(runner: Runner, serve: Serve) -> None:
    server = serve([OPENAI.answer("ok")])
    agent = definition(
        prompt="replace", body="You only say ok.", reasoning="off", model_policy="select", model="other-model"
    )
    attempt = runner.run(agent=agent, settings=settings_for(server))
    assert attempt.result.state is NodeState.SUCCESS
    request = server.requests[0]
    assert OPENAI.system(request) == "You only say ok."
    assert request.body["model"] == "other-model" and request.body["reasoning_effort"] == "none"
