"""The item graph's ``code`` step: a Starlark ``run(item)`` in a real planning worker process."""

from __future__ import annotations

import asyncio
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import CodeStepError
from rho_notebook.source.code_step import run_code_step
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.warm import use_warm_workers

ITEM = {"score": 70, "ticket": {"tags": ["billing", "urgent"], "owner": None, "open": True}}

BUSY = """
def run(item):
    n = 0
    for i in range(2147483647):
        for j in range(2147483647):
            n += 1
    return item
"""


@pytest.fixture(autouse=True)
def _no_warm_worker() -> Any:
    """Code steps run in a run's owner, which keeps no warm worker; a kernel extension loaded
    earlier in this test process (tests/kernel) would otherwise have turned the pool on."""
    use_warm_workers(False)
    yield


def with_budgets(**limits: int) -> Limits:
    """The checked-in planning limits with some budgets' accepted limits replaced."""
    base = load_limits()
    budgets = dict(base.budgets)
    for name, limit in limits.items():
        budgets[name] = budgets[name].model_copy(update={"limit": limit})
    return base.model_copy(update={"budgets": budgets})


def run(source: str, item: dict[str, Any] = ITEM, *, step: str = "score", limits: Limits | None = None) -> Any:
    return asyncio.run(run_code_step(source, item, step=step, limits=limits))


def failure(source: str, *, step: str = "score", limits: Limits | None = None) -> CodeStepError:
    with pytest.raises(CodeStepError) as caught:
        run(source, step=step, limits=limits)
    assert caught.value.step == step
    assert str(caught.value).startswith(f"code step {step!r}: ")
    return caught.value


def test_transforms_the_item_keeping_nested_values() -> None:
    source = """
def run(item):
    level = "high" if item["score"] >= 50 else "low"
    tags = item["ticket"]["tags"] + ["triaged"]
    return dict(item, level = level, label = "ticket %d" % item["score"], tags = tags)
"""
    assert run(source) == {
        **ITEM,
        "level": "high",
        "label": "ticket 70",
        "tags": ["billing", "urgent", "triaged"],
    }


def test_item_is_also_a_global_and_the_argument_is_the_same_value() -> None:
    source = """
def run(arg):
    arg["seen"] = True
    return {"same": arg == item, "global_seen": item.get("seen", False), "score": item["score"]}
"""
    assert run(source) == {"same": True, "global_seen": True, "score": 70}


def test_exceeding_the_time_budget_stops_the_step() -> None:
    err = failure(BUSY, limits=with_budgets(evaluator_wall_ms=200, evaluator_ticks=2**62))
    assert err.rule == "limit.evaluator_wall_ms"
    assert "'evaluator_wall_ms' exceeded: limit 200 ms" in str(err)
    assert "the step was stopped" in str(err)


def test_other_planning_budgets_apply_with_their_names() -> None:
    err = failure(BUSY, limits=with_budgets(evaluator_ticks=1000))
    assert err.rule == "limit.evaluator_ticks"
    assert "'evaluator_ticks' exceeded: limit 1000 ticks" in str(err)


def test_load_is_refused() -> None:
    source = 'load("//x.star", "y")\n\ndef run(item):\n    return item\n'
    err = failure(source)
    assert err.rule == "code.load"
    assert "code steps cannot load modules" in str(err)
    assert (err.line, err.column) == (1, 6)


def test_syntax_error_names_line_and_column_in_the_source() -> None:
    source = 'def run(item):\n    item["x"] = 1 +\n    return item\n'
    err = failure(source)
    assert err.rule == "code.error"
    assert (err.line, err.column) == (2, 20)
    assert str(err).startswith("code step 'score': line 2:20: Parse error: unexpected new line")


def test_runtime_error_names_line_and_column() -> None:
    source = 'def run(item):\n    n = 1\n    return {"x": item["score"] + "!"}\n'
    err = failure(source)
    assert err.rule == "code.error"
    assert str(err).startswith("code step 'score': line 3:18: ")
    assert "`+` not supported for types `int` and `string`" in str(err)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('["a"]', "must return a dict (the new item, a JSON object), got list"),
        ("None", "must return a dict (the new item, a JSON object), got NoneType"),
        ('{"ratio": 0.5}', "floats are not supported (got 0.5)"),
        ('{"ratio": item["score"] / 7}', "floats are not supported (got 10.0)"),
        ('{"f": run}', "holding a value of type function"),
        ("{1: 2}", "dictionary keys must be strings, got 1"),
    ],
)
def test_result_must_be_a_json_object(body: str, said: str) -> None:
    err = failure(f"def run(item):\n    return {body}\n")
    assert err.rule == "code.result"
    assert said in str(err)


def test_missing_run_is_an_error() -> None:
    err = failure("def transform(item):\n    return item\n")
    assert err.rule == "code.error"
    assert "must define the function `def run(item)" in str(err)


def test_run_that_is_not_a_function_is_an_error() -> None:
    err = failure("run = 3\n")
    assert err.rule == "code.error"
    assert "`run` must be a function" in str(err)


def test_error_pickles_with_its_fields() -> None:
    err = failure("run = 3\n", step="route")
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), again.step, again.rule, str(again)) == (CodeStepError, "route", "code.error", str(err))


def _workers() -> set[int]:
    """Our own live (or unreaped) planning worker processes."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"_worker.py" in cmdline:
            found.add(int(entry.name))
    return found


def test_cancellation_kills_and_reaps_the_worker() -> None:
    limits = with_budgets(evaluator_wall_ms=600_000, evaluator_ticks=2**62)

    async def scenario() -> int:
        task = asyncio.ensure_future(run_code_step(BUSY, ITEM, step="spin", limits=limits))
        while not (started := _workers()) and not task.done():
            await asyncio.sleep(0.01)
        assert not task.done(), "the step ended before it could be cancelled"
        (pid,) = started
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pid

    pid = asyncio.run(scenario())
    assert not Path(f"/proc/{pid}").exists()  # killed and reaped: not even a zombie is left
    assert _workers() == set()


def test_memory_budget_stops_the_step_and_the_caller_lives_on() -> None:
    source = 'def run(item):\n    hoard = []\n    for i in range(2147483647):\n        hoard.append("x" * 1000000)\n    return item\n'
    err = failure(source)
    assert err.rule == "limit.evaluator_address_space"
    assert "the step was stopped" in str(err)
    assert run("def run(item):\n    return {'after': item['score']}\n") == {"after": 70}
