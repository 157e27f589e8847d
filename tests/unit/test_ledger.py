"""The ledger folded from ``model_called`` records: counts, per-model prices, unknown price never 0."""

from rho_notebook.model.events import EventKind, event
from rho_notebook.model.ledger import Price, node_usage, run_usage, tally_usage
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import AttemptRecord, NodeRecord, RunState
from rho_notebook.model.tally import add_call


def _call(**fields: object) -> dict[str, object]:
    base = {"provider": "local", "model": "m1", "input_tokens": 100, "output_tokens": 20, "retries": 0, "tool_calls": 1}
    return {**base, "seconds": 0.5, **fields}


def test_calls_add_up_and_keep_tokens_per_model() -> None:
    tally = add_call(None, _call())
    tally = add_call(tally, _call(model="m2", input_tokens=10, output_tokens=5, cached_tokens=4, retries=2))
    usage = tally_usage(tally, {})
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (110, 25, 4)
    assert (usage.calls, usage.retries, usage.tool_calls) == (2, 2, 2)
    assert tally["models"] == {"local/m1": [100, 20, 0], "local/m2": [10, 5, 4]}


def test_cost_is_null_when_any_model_has_no_price_and_priced_otherwise() -> None:
    tally = add_call(add_call(None, _call()), _call(model="m2", input_tokens=1_000_000, output_tokens=0))
    m1 = Price(input_per_mtok=1.0, output_per_mtok=2.0)
    assert tally_usage(tally, {"local/m1": m1}).cost_usd is None
    priced = tally_usage(tally, {"local/m1": m1, "local/m2": Price(input_per_mtok=3.0, output_per_mtok=0.0)})
    assert priced.cost_usd == (100 * 1.0 + 20 * 2.0) / 1e6 + 3.0


def test_cached_tokens_cost_the_cached_price() -> None:
    price = Price(input_per_mtok=10.0, output_per_mtok=0.0, cached_input_per_mtok=1.0)
    assert price.cost(1_000_000, 0, 500_000) == 5.0 + 0.5


def test_calls_with_a_key_roll_up_by_key() -> None:
    tally = add_call(add_call(None, _call(key="review/a")), _call(key="review/b", input_tokens=1))
    assert tally["by_key"]["review/a"]["input_tokens"] == 100
    assert tally["by_key"]["review/b"]["calls"] == 1


def test_the_journal_fold_keeps_each_attempts_spend_and_a_reused_attempt_spends_nothing() -> None:
    state = RunState(run_id="r", plan_id="p", graph_digest="d", workflow="w", nodes={"a": NodeRecord()})
    state.nodes["b"] = NodeRecord()
    for number in (1, 2):
        apply(state, {**event(EventKind.NODE_LAUNCHED, "r", node="a", attempt=number), "seq": number})
        apply(state, {**event(EventKind.MODEL_CALLED, "r", node="a", attempt=number, **_call()), "seq": 10 + number})
    apply(
        state,
        {
            **event(EventKind.NODE_REUSED, "r", node="b", attempt=1, source_run="s", source_node="b", source_attempt=1),
            "seq": 20,
        },
    )
    assert node_usage(state.nodes["a"], {}).calls == 2
    assert node_usage(state.nodes["b"], {}).calls == 0
    assert run_usage(state, {}).input_tokens == 200
    again = AttemptRecord.from_json(state.nodes["a"].attempts[0].to_json())
    assert again.usage == state.nodes["a"].attempts[0].usage
