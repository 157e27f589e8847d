"""One conformance suite for every provider wire format (OpenAI-compatible and Anthropic), each
against a real local server: answers, tool round trips, usage, auth failures, retries, malformed
responses, reasoning and cancellation."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from rho_notebook.agents.anthropic import ANTHROPIC_VERSION, DEFAULT_MAX_TOKENS, THINKING_BUDGETS
from rho_notebook.model.state import NodeState
from tests.agents.fakeserver import ANTHROPIC, OPENAI, Reply, ScriptedServer, Wire
from tests.agents.helpers import DECISION, KEY_ENV, SECRET, Runner, assert_no_secret, definition, settings_for

Serve = Callable[..., ScriptedServer]
WIRES = pytest.mark.parametrize("wire", [OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
READER = definition(id="reader", tools=("read_file", "list_dir", "grep", "glob"))
APPROVE = '{"decision": "approve", "summary": "fine"}'


@WIRES
def test_answer_usage_and_request_shape(wire: Wire, runner: Runner, serve: Serve) -> None:
    server = serve([wire.answer(APPROVE, tokens=(100, 20))])
    attempt = runner.run(agent=READER, settings=settings_for(server, wire), output=DECISION, access="read_only")
    assert attempt.result.state is NodeState.SUCCESS, attempt.result.message
    assert attempt.result.value == {"decision": "approve", "summary": "fine"}
    assert (attempt.usage["input_tokens"], attempt.usage["output_tokens"]) == (100, 20)
    request = server.requests[0]
    assert request.path == wire.path and request.body["model"] == "test-model"
    assert wire.system(request).endswith("Be brief.") and wire.task(request).startswith("Inspect the workspace.")
    assert wire.tool_names(request) == ["glob", "grep", "list_dir", "read_file"]
    if wire is OPENAI:
        assert request.headers["authorization"] == f"Bearer {SECRET}"
    else:
        assert request.headers["x-api-key"] == SECRET and request.headers["anthropic-version"] == ANTHROPIC_VERSION
        assert request.body["max_tokens"] == DEFAULT_MAX_TOKENS and "thinking" not in request.body
        assert request.body["tools"][0]["input_schema"]["type"] == "object"


@WIRES
def test_tool_round_trip(wire: Wire, runner: Runner, serve: Serve) -> None:
    server = serve(
        [
            wire.tools(
                ("t1", "read_file", {"path": "README.md"}), ("t2", "read_file", {"path": "nope.md"}), text="Reading."
            ),
            wire.answer(APPROVE),
        ]
    )
    attempt = runner.run(agent=READER, settings=settings_for(server, wire), output=DECISION)
    assert attempt.result.state is NodeState.SUCCESS, attempt.result.message
    results = wire.tool_results(server.requests[1])
    assert [cid for cid, _, _ in results] == ["t1", "t2"]
    assert "The answer is 42." in results[0][1] and "nope.md does not exist" in results[1][1]
    messages = server.requests[1].body["messages"]
    if wire is ANTHROPIC:
        # both results travel in ONE user message, after the assistant's tool_use blocks
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert [b["type"] for b in messages[1]["content"]] == ["text", "tool_use", "tool_use"]
        assert results[1][2] is True and results[0][2] is False
    else:
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
        assert messages[2]["tool_calls"][0]["function"]["arguments"] == '{"path": "README.md"}'


@WIRES
def test_unauthorised(wire: Wire, runner: Runner, serve: Serve) -> None:
    server = serve([wire.error(401, f"invalid x-api-key {SECRET}")])
    attempt = runner.run(agent=READER, settings=settings_for(server, wire), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE
    assert "unauthorised (HTTP 401)" in attempt.result.message and KEY_ENV in attempt.result.message
    assert SECRET not in attempt.result.message
    assert_no_secret(attempt.attempt_dir)


@WIRES
def test_rate_limit_retry_honours_retry_after(wire: Wire, runner: Runner, serve: Serve) -> None:
    server = serve([wire.error(429, "rate limited", headers={"retry-after": "0.5"}), wire.answer(APPROVE)])
    attempt = runner.run(agent=READER, settings=settings_for(server, wire), output=DECISION)
    assert attempt.result.state is NodeState.SUCCESS and attempt.elapsed >= 0.5
    assert attempt.usage["retries"] == [{"status": 429, "retry_after": "0.5", "waited_seconds": 0.5}]


@WIRES
def test_rate_limit_without_retries_configured(wire: Wire, runner: Runner, serve: Serve) -> None:
    server = serve([wire.error(429, "rate limited", headers={"retry-after": "0"}), wire.answer(APPROVE)])
    attempt = runner.run(agent=READER, settings=settings_for(server, wire, max_retries=0), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "rate_limited"
    assert len(server.requests) == 1


@WIRES
def test_malformed(wire: Wire, runner: Runner, serve: Serve) -> None:
    server = serve([Reply(body={"unexpected": True})])
    attempt = runner.run(agent=READER, settings=settings_for(server, wire), output=DECISION)
    assert attempt.result.state is NodeState.FAILURE and attempt.usage["failure"]["kind"] == "malformed"
    assert "malformed" in attempt.result.message


@WIRES
def test_reasoning_levels(wire: Wire, runner: Runner, serve: Serve) -> None:
    server = serve([wire.answer("ok")])
    agent = definition(reasoning="high", model_policy="select", model="m-1")
    attempt = runner.run(agent=agent, settings=settings_for(server, wire))
    assert attempt.result.state is NodeState.SUCCESS
    body = server.requests[0].body
    assert body["model"] == "m-1"
    if wire is OPENAI:
        assert body["reasoning_effort"] == "high"
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": THINKING_BUDGETS["high"]}
        assert body["max_tokens"] == DEFAULT_MAX_TOKENS + THINKING_BUDGETS["high"]


def test_anthropic_thinking_blocks_are_echoed_back(runner: Runner, serve: Serve) -> None:
    thinking = {"type": "thinking", "thinking": "I should read the README.", "signature": "sig-1"}
    first = Reply(
        body={
            "content": [
                thinking,
                {"type": "tool_use", "id": "tu1", "name": "read_file", "input": {"path": "README.md"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    server = serve([first, ANTHROPIC.answer("done")])
    attempt = runner.run(agent=definition(reasoning="low"), settings=settings_for(server, ANTHROPIC))
    assert attempt.result.state is NodeState.SUCCESS
    assistant = server.requests[1].body["messages"][1]
    assert assistant["content"][0] == thinking and assistant["content"][1]["type"] == "tool_use"


@WIRES
def test_cancellation_aborts_the_request(wire: Wire, runner: Runner, serve: Serve) -> None:
    held = threading.Event()
    server = serve([Reply(body={}, hold=held)])

    def cancel(handle: Any) -> None:
        server.wait_for_requests(1)
        handle.set()

    began = time.monotonic()
    attempt = runner.run(agent=READER, settings=settings_for(server, wire), output=DECISION, during=cancel)
    assert attempt.result.state is NodeState.CANCELLATION and time.monotonic() - began < 5
    assert server.disconnected.wait(5)
