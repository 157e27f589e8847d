"""Budgets from a notebook (issue 34): ``%workflow run NAME --max-tokens N`` halts the run before
a call could pass it, and ``%workflow resume RUN --raise-budget tokens=N`` finishes it. A real
IPython shell, real owner processes, a local OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents.fakeserver import OPENAI, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.conftest import Project
from tests.kernel.helpers import C, ok, status_json, usage_error, wait_until, workflow_cell

CHAIN = workflow_cell(
    "chain",
    f"""        agent(name = "a", agent = "explorer", prompt = template(["first"]), access = "read_only", {C}),
        agent(name = "b", agent = "explorer", prompt = template(["second"]), access = "read_only", needs = ["a"], {C}),
        agent(name = "c", agent = "explorer", prompt = template(["third"]), access = "read_only", needs = ["b"], {C}),
""",
)


@pytest.fixture
def server(ws: Project, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    """The server every call goes to: 18 tokens a call, each request's output capped at 10."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    with ScriptedServer([OPENAI.answer("done")], repeat_last=True) as started:
        write_settings_for(ws.home, started)
        path = ws.home / "settings.json"
        settings = json.loads(path.read_text())
        settings["providers"]["local"]["max_tokens"] = 10
        path.write_text(json.dumps(settings))
        yield started


def test_run_max_tokens_halts_and_resume_raise_budget_finishes(ip: Any, ws: Project, server: ScriptedServer) -> None:
    assert os.environ[KEY_ENV] == SECRET
    ok(ip, CHAIN)
    ok(ip, "run = %workflow run chain --yes --max-tokens 40")
    handle = ip.user_ns["run"]
    final = handle.wait(60)
    assert final.lifecycle.value == "needs_decision" and len(server.requests) == 2
    state = status_json(ws, handle.run_id)
    assert state["halted"][0]["step"] == "c" and "budget tokens" in state["halted"][0]["why"]
    # %workflow status says what `rho-notebook status` says: it left out the usage, the budget and
    # each node's spend (the notebook kept its own shorter copy of the status text)
    report, _ = ok(ip, f"%workflow status {handle.run_id}")
    shown = repr(report).splitlines()
    cli = ws.cli("status", handle.run_id, env={KEY_ENV: SECRET}).stdout.splitlines()
    assert shown == cli
    assert any(line.startswith("usage      2 calls  22 in / 14 out tokens") for line in shown), shown
    assert "budget     run: tokens 36 of 40 (set by run)" in shown
    assert any(line.startswith("  a ") and "[1 call  11 in / 7 out tokens" in line for line in shown), shown
    assert "--raise-budget" in usage_error(ip, f"%workflow resume {handle.run_id} --yes --raise-budget apples")
    ok(ip, f"resumed = %workflow resume {handle.run_id} --yes --raise-budget tokens=1000")
    resumed = ip.user_ns["resumed"]
    wait_until(lambda: resumed.done(), timeout=60)
    assert resumed.wait(10).outcome == "success" and len(server.requests) == 3
