"""The budget guard's rules (runtime/budget.py) on states folded from real journal records: the
call is made only while spend so far plus its maximum output stays within each limit of the run and
of its node; cost needs prices; wall counts execution time only; the fold keeps limits a raise does
not name. Pure: no processes."""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from rho_notebook.errors import ArgumentError, BudgetExceeded
from rho_notebook.model.budget import Limits, limits_of
from rho_notebook.model.budget_spec import budget_spec
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.ledger import Price
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.runtime.budget import BudgetGuard, budget_records, executed_seconds, is_budget_halt
from rho_notebook.service.flags import MAX_COST, MAX_WALL, parse_budgets
from rho_notebook.service.starting import start_budgets
from rho_notebook.store.layout import StoreLayout

if TYPE_CHECKING:
    from rho_notebook.model.plan import Plan

RUN = "01900000-0000-7000-8000-000000000000"


def state_with(*records: dict[str, Any]) -> RunState:
    state = RunState(run_id=RUN, plan_id="p", graph_digest="d", workflow="w", nodes={"a": NodeRecord()})
    for record in records:
        apply(state, record)
    return state


def call(node: str = "a", tokens: tuple[int, int] = (11, 7), model: str = "m") -> list[dict[str, Any]]:
    return [
        event(EventKind.NODE_LAUNCHED, RUN, node=node, attempt=1),
        event(
            EventKind.MODEL_CALLED,
            RUN,
            node=node,
            attempt=1,
            provider="p",
            model=model,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            retries=0,
            tool_calls=0,
            seconds=0.1,
        ),
    ]


def budget(**limits: Any) -> dict[str, Any]:
    node = limits.pop("node", None)
    (record,) = budget_records(RUN, Limits(**limits), source="run", node=node)
    return record


def test_a_call_is_made_only_while_spend_plus_its_maximum_output_stays_within() -> None:
    guard = BudgetGuard()
    state = state_with(budget(max_tokens=40), *call())
    guard.check(state, node="a", max_output_tokens=22, key=None)  # 18 + 22 = 40: within
    with pytest.raises(BudgetExceeded) as caught:
        guard.check(state, node="a", max_output_tokens=23, key=None)
    assert caught.value.budget == "tokens" and caught.value.limit == 40 and caught.value.spent == 18
    assert is_budget_halt(caught.value.message) and "--raise-budget tokens=N" in caught.value.message
    # without a maximum output, a call is made while the spend is below the limit
    guard.check(state_with(budget(max_tokens=19), *call()), node="a", max_output_tokens=None, key=None)
    with pytest.raises(BudgetExceeded):
        guard.check(state_with(budget(max_tokens=18), *call()), node="a", max_output_tokens=None, key=None)


def test_a_node_budget_counts_only_that_node() -> None:
    state = state_with(budget(max_tokens=20, node="b"), *call("a", (100, 100)))
    state.nodes["b"] = NodeRecord()
    BudgetGuard().check(state, node="b", max_output_tokens=20, key=None)
    for record in call("b"):
        apply(state, record)
    with pytest.raises(BudgetExceeded) as caught:
        BudgetGuard().check(state, node="b", max_output_tokens=5, key=None)
    assert caught.value.budget == "b:tokens" and "--raise-budget b:tokens=N" in caught.value.message


def test_cost_is_priced_and_an_unknown_cost_is_refused_never_taken_as_zero() -> None:
    prices = {"p/m": Price(input_per_mtok=1_000_000.0, output_per_mtok=1_000_000.0)}  # $1 a token
    state = state_with(budget(max_cost_usd=20.0), *call())
    BudgetGuard(prices=prices).check(state, node="a", max_output_tokens=2, key=None)  # $18 + $2
    with pytest.raises(BudgetExceeded) as caught:
        BudgetGuard(prices=prices).check(state, node="a", max_output_tokens=3, key=None)
    assert caught.value.budget == "cost"
    unpriced = state_with(budget(max_cost_usd=20.0), *call(model="unknown"))
    with pytest.raises(BudgetExceeded, match="no known cost"):
        BudgetGuard(prices=prices).check(unpriced, node="a", max_output_tokens=None, key=None)


def test_wall_counts_each_execution_from_its_start_to_its_last_record() -> None:
    records = [
        {"kind": "run_created", "at": "2026-01-01T00:00:00+00:00"},
        {"kind": "run_started", "at": "2026-01-01T00:00:10+00:00"},
        {"kind": "run_halted", "at": "2026-01-01T00:00:40+00:00"},
        {"kind": "run_started", "at": "2026-01-02T00:00:00+00:00"},  # a day idle: not counted
        {"kind": "node_launched", "at": "2026-01-02T00:00:05+00:00"},  # then killed
    ]
    assert executed_seconds(records) == 35.0
    state = state_with(budget(max_wall_seconds=30.0))
    with pytest.raises(BudgetExceeded) as caught:
        BudgetGuard(earlier_seconds=35.0).check(state, node="a", max_output_tokens=None, key=None)
    assert caught.value.budget == "wall"
    # it said the budget "could be passed by the next model call" when it was long passed already
    said = "budget wall: the run's wall budget (30 s) is used up before the next model call of a (the run has executed"
    assert str(caught.value.message).startswith(said), caught.value.message
    BudgetGuard(earlier_seconds=5.0).check(state, node="a", max_output_tokens=None, key=None)


def test_a_raise_replaces_the_limits_it_names_and_keeps_the_others() -> None:
    state = state_with(budget(max_tokens=40, max_cost_usd=1.0))
    apply(state, budget_records(RUN, Limits(max_tokens=100), source="raise")[0])
    assert limits_of(state.budgets) == Limits(max_tokens=100, max_cost_usd=1.0)
    assert state.budgets[""]["source"] == "raise"
    assert RunState.from_json(state.to_json()).budgets == state.budgets  # the snapshot keeps them


def test_budget_flags_parse_to_scoped_limits() -> None:
    given = parse_budgets(max_tokens=10, raises=["cost=0.5", "b:tokens=7", "wall=30"])
    assert given == {"": Limits(max_tokens=10, max_cost_usd=0.5, max_wall_seconds=30.0), "b": Limits(max_tokens=7)}
    assert parse_budgets() == {}
    for bad in ("tokens", "apples=1", "tokens=0", "tokens=1.5", "cost=cheap"):
        with pytest.raises(ArgumentError):
            parse_budgets(raises=[bad])


@pytest.mark.parametrize("bad", ["tokens=inf", "tokens=1e400", "cost=inf", "wall=-inf", "cost=nan", "c:wall=inf"])
def test_a_limit_that_is_not_finite_is_refused_by_name_not_with_a_traceback(bad: str) -> None:
    """``--raise-budget tokens=inf`` crashed (OverflowError) and ``cost=inf`` was journaled until JSON
    refused it (ValueError): every budget's front door now says what to give instead."""
    with pytest.raises(ArgumentError, match=r"give a (finite )?number above 0"):
        parse_budgets(raises=[bad])


def test_the_limit_flags_and_keywords_say_the_same_rule_as_the_source() -> None:
    """``--max-cost -1`` said "give a finite number, 0 or more" while 0 was refused too; ``inf`` and
    ``rho.run(max_tokens=inf)`` (OverflowError) are refused by the one rule every budget passes."""
    for flag in (MAX_COST, MAX_WALL):
        for text, said in (("-1", "'-1': give a number above 0"), ("inf", "'inf': give a finite number above 0")):
            with pytest.raises(argparse.ArgumentTypeError, match=re.escape(said)):
                flag.options["type"](text)
    layout = StoreLayout(home=Path("/nonexistent-home"))
    for keywords, said in (
        ({"max_tokens": float("inf")}, "max_tokens=inf: give a finite number above 0"),
        ({"max_cost": -1.0}, "max_cost=-1.0: give a number above 0"),
        ({"max_tokens": 2.5}, "max_tokens=2.5: give a whole number of tokens"),
    ):
        with pytest.raises(ArgumentError, match=re.escape(said)):
            asyncio.run(start_budgets(layout, cast("Plan", None), **keywords))
    with pytest.raises(ValueError, match="budget cost = inf: give a finite number above 0"):
        budget_spec({"cost": float("inf")}, where="define.budget")
