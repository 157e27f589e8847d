"""``%workflow resume RUN --max-tokens N`` (issue 34): the notebook's resume takes the run's limits
as the CLI's ``resume --max-tokens`` does (it was accepted and ignored). A real IPython shell, real
owner processes, a local OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

from tests.agents.fakeserver import ScriptedServer
from tests.conftest import Project
from tests.kernel.helpers import ok, status_json, wait_until
from tests.kernel.test_budget_magics import CHAIN, server

__all__ = ["server"]  # the fixture, shared with tests/kernel/test_budget_magics.py


def test_resume_max_tokens_sets_the_run_budget(ip: Any, ws: Project, server: ScriptedServer) -> None:
    ok(ip, CHAIN)
    ok(ip, "run = %workflow run chain --yes --max-tokens 40")
    handle = ip.user_ns["run"]
    assert handle.wait(60).lifecycle.value == "needs_decision" and len(server.requests) == 2

    # a lower limit than spent halts again at once, without a request: the flag was applied
    ok(ip, f"again = %workflow resume {handle.run_id} --yes --max-tokens 20")
    again = ip.user_ns["again"]
    wait_until(lambda: again.done(), timeout=60)
    assert again.wait(10).lifecycle.value == "needs_decision" and len(server.requests) == 2
    assert "(20)" in status_json(ws, handle.run_id)["halted"][0]["why"]

    ok(ip, f"resumed = %workflow resume {handle.run_id} --yes --max-tokens 1000")
    resumed = ip.user_ns["resumed"]
    wait_until(lambda: resumed.done(), timeout=60)
    assert resumed.wait(10).outcome == "success" and len(server.requests) == 3
    (budget,) = status_json(ws, handle.run_id)["budgets"]
    assert (budget["node"], budget["max_tokens"], budget["spent_tokens"]) == (None, 1000, 54)
    assert budget["source"] == "raise"  # as the CLI's resume --max-tokens journals it (set after the start)
