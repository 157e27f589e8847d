"""The pure step-call decision of script runs (runtime/replay.py): one test per rule.

Histories are built from real journal folds (model/run_fold.apply) where the record shape matters,
and directly otherwise.
"""

from __future__ import annotations

from typing import Any

import pytest

from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.runtime.replay import (
    NEVER_SETTLED,
    UNREADABLE,
    Diverge,
    Execute,
    Halt,
    Replay,
    Skip,
    StepAttempt,
    StepHistory,
    decide_call,
)

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64


def history(*states: str | None, readable: bool = True, digest: str = D1) -> StepHistory:
    attempts = [StepAttempt(number=i + 1, state=s) for i, s in enumerate(states)]
    if attempts and attempts[-1].state == "success":
        attempts[-1] = StepAttempt(number=len(attempts), state="success", readable=readable)
    return StepHistory(digest=digest, attempts=tuple(attempts))


def test_a_new_key_executes_whatever_the_decision_or_recovery() -> None:
    for recovery in (None, "rerun", "manual"):
        for decision in (None, "rerun", "skip"):
            assert decide_call(StepHistory(), D1, recovery, decision) == Execute()  # type: ignore[arg-type]


def test_a_readable_success_with_the_same_digest_replays() -> None:
    assert decide_call(history("failure", "success"), D1, None, None) == Replay(attempt=2)


def test_recovery_manual_does_not_stop_a_replay() -> None:
    assert decide_call(history("success"), D1, "manual", None) == Replay(attempt=1)


def test_another_digest_diverges_even_with_a_decision() -> None:
    for states in (("success",), ("failure",), (None,)):
        for decision in (None, "rerun", "skip"):
            verdict = decide_call(history(*states), D2, None, decision)  # type: ignore[arg-type]
            assert verdict == Diverge(stored_digest=D1)


def test_an_unreadable_success_halts() -> None:
    assert decide_call(history("success", readable=False), D1, None, None) == Halt(why=UNREADABLE)


def test_an_unsettled_attempt_halts_without_a_decision() -> None:
    assert decide_call(history(None), D1, None, None) == Halt(why=NEVER_SETTLED)
    assert decide_call(history(None), D1, "manual", None) == Halt(why=NEVER_SETTLED)


def test_an_unsettled_attempt_with_recovery_rerun_executes() -> None:
    assert decide_call(history(None), D1, "rerun", None) == Execute(decided=False)


def test_rerun_decision_executes_once_and_says_it_used_the_decision() -> None:
    for states in (("success",), ("failure",), (None,), ("success",)):
        assert decide_call(history(*states), D1, None, "rerun") == Execute(decided=True)
    # the driver passes the decision only to the first call: the next attempt's loss asks again
    assert decide_call(history(None, None), D1, None, None) == Halt(why=NEVER_SETTLED)


def test_skip_decision_answers_the_stored_attempt() -> None:
    assert decide_call(history(None), D1, None, "skip") == Skip(attempt=1, readable=False)
    assert decide_call(history("failure", "success"), D1, None, "skip") == Skip(attempt=2, readable=True)
    assert decide_call(history("success", readable=False), D1, None, "skip") == Skip(attempt=1, readable=False)
    assert decide_call(history("failure"), D1, "manual", "skip") == Skip(attempt=1, readable=False)


@pytest.mark.parametrize("state", ["failure", "denial", "cancellation"])
def test_a_settled_failure_executes_again(state: str) -> None:
    assert decide_call(history(state), D1, None, None) == Execute()
    assert decide_call(history(state), D1, "rerun", None) == Execute()


@pytest.mark.parametrize("state", ["failure", "denial", "cancellation"])
def test_recovery_manual_halts_a_settled_failure(state: str) -> None:
    verdict = decide_call(history(state), D1, "manual", None)
    assert isinstance(verdict, Halt)
    assert "manual" in verdict.why and state in verdict.why


def _fold(events: list[dict[str, Any]]) -> RunState:
    state = RunState(run_id="r", plan_id="p", graph_digest="sha256:x", workflow="s", nodes={})
    for seq, ev in enumerate(events, 1):
        apply(state, {"seq": seq, "at": "2026-12-03T00:00:00Z", "run_id": "r", **ev})
    return state


def _launched(attempt: int, digest: str = D1) -> dict[str, Any]:
    step = {"kind": "command", "digest": digest, "facts": {}, "after": [], "recovery": None}
    return {"kind": "node_launched", "node": "fetch", "attempt": attempt, "step": step}


def test_history_of_a_journaled_step() -> None:
    state = _fold(
        [
            _launched(1),
            {"kind": "node_finished", "node": "fetch", "attempt": 1, "state": "failure", "exit": None},
            _launched(2, D2),
            {"kind": "node_finished", "node": "fetch", "attempt": 2, "state": "success", "exit": None},
        ]
    )
    asked: list[int] = []

    def readable(attempt: int) -> bool:
        asked.append(attempt)
        return True

    found = StepHistory.of(state.nodes["fetch"], readable=readable)
    assert found == StepHistory(
        digest=D2, attempts=(StepAttempt(1, "failure"), StepAttempt(2, "success", readable=True))
    )
    assert asked == [2]
    assert decide_call(found, D2, None, None) == Replay(attempt=2)


def test_history_of_an_unsettled_step_and_of_a_new_key() -> None:
    state = _fold([_launched(1)])
    found = StepHistory.of(state.nodes["fetch"], readable=lambda _: True)
    assert found.attempts == (StepAttempt(1, None),)
    assert decide_call(found, D1, None, None) == Halt(why=NEVER_SETTLED)
    assert StepHistory.of(None, readable=lambda _: True) == StepHistory()
