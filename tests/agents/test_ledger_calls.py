"""What each model call reports to the run's ledger (``Attempt.model_calls``), per provider wire
format and runtime, against a real local server: one ``before_call`` before every request (with the
request's output limit) and one ``after_call`` with what the response reported, cached and
reasoning tokens included; a refused call is never sent. Also the ``prices`` settings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.agents.settings import AgentSettings, load_prices, parse_settings
from rho_notebook.errors import BudgetExceeded, SettingsError
from rho_notebook.exec.agent import AgentExecutor
from rho_notebook.exec.base import AttemptContext, AttemptResult
from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import AgentNode, EnvironmentPolicy, Graph
from rho_notebook.model.ledger import Price
from rho_notebook.model.reference import Template
from rho_notebook.model.state import NodeState
from rho_notebook.store.artifacts import AttemptFiles
from tests.agents.fakeserver import ANTHROPIC, OPENAI, ScriptedServer, Wire
from tests.agents.helpers import KEY_ENV, SECRET, definition, install_fake_claude, settings_for

Serve = Callable[..., ScriptedServer]
WIRES = pytest.mark.parametrize("wire", [OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
READER = definition(id="reader", tools=("read_file",))


class Calls:
    """The run's side of the hook as a test sees it: what was asked and told, in order; refuses
    the call numbered ``refuse`` (1-based) as a budget would."""

    def __init__(self, refuse: int | None = None) -> None:
        self.refuse = refuse
        self.seen: list[tuple[str, Any]] = []

    async def before_call(self, *, max_output_tokens: int | None, key: str | None = None) -> None:
        self.seen.append(("before", max_output_tokens))
        if self.refuse is not None and sum(1 for kind, _ in self.seen if kind == "before") == self.refuse:
            raise BudgetExceeded("the run's token budget", budget="tokens", limit=10, spent=10)

    async def after_call(self, call: Mapping[str, Any]) -> None:
        self.seen.append(("after", dict(call)))

    @property
    def after(self) -> list[dict[str, Any]]:
        return [call for kind, call in self.seen if kind == "after"]


def attempt(
    tmp_path: Path, agent: AgentDefinition, settings: AgentSettings | None, calls: Calls, environ: dict[str, str]
) -> AttemptResult:
    """One agent attempt through the executor with ``calls`` as its ledger hook."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "README.md").write_text("The answer is 42.\n")
    node = AgentNode(
        name="inspect", agent=agent.id, prompt=Template(parts=("Inspect.",)), timeout_seconds=30, max_output_bytes=9000
    )
    graph = Graph(name="t", inputs=(), nodes=(node,), agents=(agent,))
    folder = tmp_path / f"attempt-{len(list(tmp_path.glob('attempt-*')))}"
    folder.mkdir()

    async def started(pid: int) -> None:
        return None

    async def go() -> AttemptResult:
        ctx = AttemptContext(
            run_id="run-1",
            node=node,
            attempt=1,
            files=AttemptFiles.made(folder),
            workspace=workspace,
            identities={},
            environment=EnvironmentPolicy(),
            outputs=lambda name: UNAVAILABLE,
            cancel=asyncio.Event(),
            on_started=started,
            model_calls=calls,
            source_environ={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), KEY_ENV: SECRET, **environ},
        )
        return await AgentExecutor(settings=settings, graph=graph).execute(ctx)

    return asyncio.run(go())


@WIRES
def test_each_turn_is_asked_first_and_reports_its_tokens(wire: Wire, tmp_path: Path, serve: Serve) -> None:
    server = serve(
        [
            wire.tools(("t1", "read_file", {"path": "README.md"}), ("t2", "read_file", {"path": "x.md"})),
            wire.answer("done", tokens=(120, 30), cached=64, reasoning=12),
        ]
    )
    calls = Calls()
    result = attempt(tmp_path, READER, settings_for(server, wire), calls, {})
    assert result.state is NodeState.SUCCESS, result.message
    limit = None if wire is OPENAI else 8192  # anthropic always sets max_tokens
    assert [kind for kind, _ in calls.seen] == ["before", "after", "before", "after"]
    assert calls.seen[0] == ("before", limit) and calls.seen[2] == ("before", limit)
    first, second = calls.after
    assert (first["provider"], first["model"], first["input_tokens"], first["output_tokens"]) == (
        "local",
        "test-model",
        5,
        3,
    )
    assert first["tool_calls"] == 2 and first["retries"] == 0 and "cached_tokens" not in first
    assert second["output_tokens"] == 30 and second["cached_tokens"] == 64 and second["tool_calls"] == 0
    if wire is OPENAI:  # prompt tokens include the cached ones; reasoning is part of the output
        assert second["input_tokens"] == 120 and second["reasoning_tokens"] == 12
    else:  # Anthropic counts cache reads apart: the ledger's input is every prompt token
        assert second["input_tokens"] == 120 + 64 and "reasoning_tokens" not in second
    usage = json.loads((tmp_path / "attempt-0" / "usage.json").read_text())
    assert usage["cached_tokens"] == 64 and usage["input_tokens"] == 5 + second["input_tokens"]


def test_the_output_limit_asked_about_is_the_requests_own(tmp_path: Path, serve: Serve) -> None:
    server = serve([OPENAI.answer("ok"), ANTHROPIC.answer("ok")])
    calls = Calls()
    attempt(tmp_path, READER, settings_for(server, OPENAI, max_tokens=500), calls, {})
    thinker = definition(id="thinker", tools=("read_file",), reasoning="high")
    attempt(tmp_path, thinker, settings_for(server, ANTHROPIC, max_tokens=1000), calls, {})
    assert [limit for kind, limit in calls.seen if kind == "before"] == [500, 1000 + 16000]
    assert server.requests[0].body["max_tokens"] == 500 and server.requests[1].body["max_tokens"] == 17000


def test_a_refused_call_is_never_sent(tmp_path: Path, serve: Serve) -> None:
    server = serve([OPENAI.tools(("t1", "read_file", {"path": "README.md"})), OPENAI.answer("never")])
    calls = Calls(refuse=2)
    with pytest.raises(BudgetExceeded):
        attempt(tmp_path, READER, settings_for(server, OPENAI), calls, {})
    assert len(server.requests) == 1 and len(calls.after) == 1
    with pytest.raises(BudgetExceeded):
        attempt(tmp_path, READER, settings_for(server, OPENAI), Calls(refuse=1), {})
    assert len(server.requests) == 1


def test_claude_cli_is_asked_once_before_and_reports_its_totals_once(tmp_path: Path) -> None:
    bin_dir = tmp_path / "fakebin"
    install_fake_claude(bin_dir)
    (tmp_path / "answer.txt").write_text("plan ready")
    environ = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "CLAUDE_FAKE_RECORD": str(tmp_path / "record.json"),
        "CLAUDE_FAKE_ANSWER": str(tmp_path / "answer.txt"),
    }
    agent = definition(id="planner", runtime="claude-cli", model_policy="select", model="claude-x", tools=("Read",))
    calls = Calls()
    result = attempt(tmp_path, agent, None, calls, environ)
    assert result.state is NodeState.SUCCESS, result.message
    assert [kind for kind, _ in calls.seen] == ["before", "after"] and calls.seen[0] == ("before", None)
    (call,) = calls.after
    assert (call["provider"], call["model"]) == ("claude-cli", "claude-x")
    assert (call["input_tokens"], call["cached_tokens"], call["output_tokens"]) == (35, 5, 9)
    refused = Calls(refuse=1)
    with pytest.raises(BudgetExceeded):
        attempt(tmp_path, agent, None, refused, environ)
    assert refused.after == []


# -- prices ----------------------------------------------------------------------------------------------


def test_prices_are_read_from_settings_and_merged_per_model(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    (workspace / ".rho").mkdir(parents=True)
    home.mkdir()
    user = {
        "prices": {
            "local/a": {"input_per_mtok": 1, "output_per_mtok": 2},
            "local/b": {"input_per_mtok": 3, "output_per_mtok": 4},
        }
    }
    project = {"prices": {"local/b": {"input_per_mtok": 5, "output_per_mtok": 6, "cached_input_per_mtok": 0.5}}}
    (home / "settings.json").write_text(json.dumps(user))
    (workspace / ".rho" / "settings.json").write_text(json.dumps(project))
    assert load_prices(home) == {"local/a": Price(1, 2), "local/b": Price(3, 4)}
    assert load_prices(home, workspace, trusted=True)["local/b"] == Price(5, 6, 0.5)
    assert load_prices(home, workspace, trusted=False)["local/b"] == Price(3, 4)
    assert load_prices(tmp_path / "nowhere") == {}  # none shipped


@pytest.mark.parametrize(
    ("prices", "named"),
    [
        ({"gpt-5": {"input_per_mtok": 1, "output_per_mtok": 1}}, "prices: the name 'gpt-5' must be provider/model"),
        ({"o/m": {"input_per_mtok": 1}}, "prices.o/m.output_per_mtok: required"),
        ({"o/m": {"input_per_mtok": -1, "output_per_mtok": 1}}, "prices.o/m.input_per_mtok: must be a number"),
        ({"o/m": {"input_per_mtok": "1", "output_per_mtok": 1}}, "prices.o/m.input_per_mtok: must be a number"),
        ({"o/m": {"input_per_mtok": 1, "output_per_mtok": 1, "per_call": 2}}, "prices.o/m.per_call: unknown key"),
        ({"o/m": 3}, "prices.o/m: must be an object"),
        ([], "prices: must be an object"),
    ],
)
def test_a_bad_price_is_refused_naming_the_file_and_key(prices: Any, named: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings({"prices": prices}, source="/home/u/settings.json")
    assert str(caught.value).startswith("/home/u/settings.json: invalid agent settings") and named in str(caught.value)
