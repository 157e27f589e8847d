"""The ledger as readers show it (service/usage.py): roll-ups of script and flow steps by key
prefix, what a replayed step saved, the old-run fallbacks, and the rows of ``rho.usage``."""

from __future__ import annotations

from rho_notebook.model.ledger import Price
from rho_notebook.model.run_state import AttemptRecord, NodeRecord, RunState
from rho_notebook.model.tally import add_call
from rho_notebook.service.usage import attempt_tally, key_prefixes, run_ledger

PRICES = {"local/m": Price(input_per_mtok=1.0, output_per_mtok=2.0)}


def _call(**fields: object) -> dict[str, object]:
    return {"provider": "local", "model": "m", "input_tokens": 100, "output_tokens": 10, "seconds": 0.1, **fields}


def _step(
    tally: dict[str, object] | None, *, replayed: int = 0, exit_record: dict[str, object] | None = None
) -> NodeRecord:
    attempt = AttemptRecord(number=1, started_at="2026-01-01T00:00:00+00:00", ended_at="2026-01-01T00:00:02+00:00")
    attempt.usage = tally  # type: ignore[assignment]
    attempt.exit = exit_record
    record = NodeRecord(attempts=[attempt], step={"kind": "model", "digest": "d", "facts": {}})
    record.replayed = replayed
    return record


def test_flow_keys_roll_up_by_module_path_and_branch() -> None:
    assert key_prefixes("team.research.writer/f1.2#3") == [
        "team",
        "team.research",
        "team.research.writer",
        "team.research.writer/f1",
        "team.research.writer/f1.2",
    ]
    assert key_prefixes("review.writer#1") == ["review", "review.writer"]
    assert key_prefixes("fetch:docs/a.md") == ["fetch"]
    assert key_prefixes("summarize[2]") == ["summarize"]
    assert key_prefixes("plain") == []


def test_steps_roll_up_and_the_run_adds_them_once() -> None:
    state = RunState(run_id="r", plan_id="p", graph_digest="d", workflow="w", nodes={})
    state.nodes["team.writer#1"] = _step(add_call(None, _call()))
    state.nodes["team.writer/f1#1"] = _step(add_call(None, _call(input_tokens=7)))
    state.nodes["team.critic#1"] = _step(add_call(None, _call(input_tokens=1)))
    ledger = run_ledger(state, prices=PRICES)
    assert ledger.run.input_tokens == 108 and ledger.run.calls == 3
    assert ledger.groups["team"].input_tokens == 108
    assert ledger.groups["team.writer"].input_tokens == 107
    assert ledger.groups["team.writer/f1"].input_tokens == 7
    assert ledger.run.cost_usd == (108 + 30 * 2) / 1e6
    rows = ledger.rows()
    assert [r.level for r in rows] == ["run", "node", "node", "node", "group", "group", "group", "group"]


def test_a_replayed_step_spends_nothing_new_and_shows_what_it_saved() -> None:
    state = RunState(run_id="r", plan_id="p", graph_digest="d", workflow="w", nodes={})
    state.nodes["ask"] = _step(add_call(None, _call()), replayed=2)
    ledger = run_ledger(state, prices=PRICES)
    node = ledger.nodes["ask"]
    assert node.usage.calls == 1  # the one call that was made, once
    assert node.saved is not None and node.saved.calls == 2 and node.saved.input_tokens == 200
    assert ledger.saved is not None and ledger.saved.calls == 2


def test_an_old_model_step_counts_its_journaled_record_and_a_command_counts_nothing() -> None:
    model = {"kind": "model", "provider": "local", "model": "m", "input_tokens": 9, "output_tokens": 2, "retries": 1}
    old = _step(None, exit_record=model)
    tally = attempt_tally("ask", old.attempts[0])
    assert tally is not None and (tally["calls"], tally["input_tokens"], tally["retries"]) == (1, 9, 1)
    agent = {"kind": "agent", "provider": "local", "model": "m", "turns": 3, "input_tokens": 30, "output_tokens": 6}
    from_usage_file = attempt_tally(
        "a",
        _step(None, exit_record=agent).attempts[0],
        lambda node, attempt: {**agent, "input_tokens": 31, "retries": [{"status": 503}]},
    )
    assert from_usage_file is not None and (from_usage_file["calls"], from_usage_file["input_tokens"]) == (3, 31)
    assert from_usage_file["retries"] == 1
    assert attempt_tally("c", _step(None, exit_record={"kind": "exit", "code": 0}).attempts[0]) is None
    state = RunState(run_id="r", plan_id="p", graph_digest="d", workflow="w", nodes={"c": NodeRecord()})
    assert not run_ledger(state, prices={}).spent
