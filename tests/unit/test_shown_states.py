"""States as the run has them (``shown``): the one rule (:func:`rho_notebook.service.wire.shown_state`)
and where it shows: node views, the status JSON and text, the run list's command for a person,
and the node pane's traceback without our harness frames."""

from __future__ import annotations

from typing import Any

import pytest

from rho_notebook.model.run_fold import replay
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.model.state import NodeState
from rho_notebook.service.wire import (
    SHOWN_ORDER,
    ShownName,
    person_command,
    run_row_json,
    shown_label,
    shown_state,
    status_json,
)
from rho_notebook.views.detail import user_traceback
from rho_notebook.views.state import node_view, node_views
from rho_notebook.views.text import decision_lines, node_status_line, node_status_lines

AT = "2026-01-01T00:00:00Z"


def folded(*events: dict[str, Any], nodes: tuple[str, ...] = ("a", "b")) -> RunState:
    """A run of ``nodes`` with ``events`` folded in (run_started first)."""
    state = RunState(run_id="01RUN", plan_id="01PLAN", graph_digest="sha256:none", workflow="wf", nodes={})
    state.nodes = {name: NodeRecord() for name in nodes}
    return replay(state, [{"kind": "run_started", "at": AT, "pid": 1}, *({"at": AT, **e} for e in events)])


def launched(node: str, attempt: int = 1) -> dict[str, Any]:
    return {"kind": "node_launched", "node": node, "attempt": attempt}


def asked(node: str, attempt: int = 1) -> dict[str, Any]:
    return {"kind": "approval_requested", "node": node, "attempt": attempt, "request_id": f"req-{node}"}


def finished(node: str, state: str, attempt: int = 1) -> dict[str, Any]:
    return {"kind": "node_finished", "node": node, "attempt": attempt, "state": state, "message": ""}


def test_every_node_state_is_shown_as_itself_and_the_order_holds_every_shown_state() -> None:
    assert set(SHOWN_ORDER) == set(ShownName.__args__)  # type: ignore[attr-defined]
    assert len(SHOWN_ORDER) == len(set(SHOWN_ORDER))
    for state in NodeState:
        assert shown_state(NodeRecord(state=state)) == state.value
        assert shown_label(state.value) == state.value
    assert [shown_label(s) for s in ("failure_allowed", "failure_handled", "denial_handled")] == [
        "failure (allowed)",
        "failure (handled)",
        "denial (handled)",
    ]
    assert shown_label("waiting_for_approval") == "waiting for approval"


def test_a_launch_held_for_approval_is_waiting_until_decided_then_running() -> None:
    state = folded(launched("a"), asked("a"))
    record = state.nodes["a"]
    assert record.state is NodeState.RUNNING  # what the journal says
    assert shown_state(record) == "waiting_for_approval"  # what the run has: nothing started
    replay(state, [{"kind": "approval_decided", "node": "a", "attempt": 1, "request_id": "req-a", "at": AT}])
    assert shown_state(state.nodes["a"]) == "running"
    replay(state, [{**finished("a", "success"), "at": AT}])
    assert shown_state(state.nodes["a"]) == "success"


def test_a_failure_is_allowed_only_for_an_allow_failure_node() -> None:
    state = folded(launched("a"), finished("a", "failure"), launched("b"), finished("b", "failure"))
    assert shown_state(state.nodes["a"], allowed=True) == "failure_allowed"
    assert shown_state(state.nodes["b"], allowed=False) == "failure"
    assert shown_state(NodeRecord(state=NodeState.SUCCESS), allowed=True) == "success"  # only a failure


def test_node_views_carry_shown_from_the_allowed_nodes() -> None:
    state = folded(launched("a"), finished("a", "failure"), launched("b"), asked("b"))
    views = node_views(state, allowed=frozenset({"a"}))
    assert {name: (view["state"], view["shown"]) for name, view in views.items()} == {
        "a": ("failure", "failure_allowed"),
        "b": ("running", "waiting_for_approval"),
    }
    assert node_view(state.nodes["a"])["shown"] == "failure"  # not allowed unless said


def test_status_json_shows_allowed_failures_and_infers_them_from_a_successful_outcome() -> None:
    state = folded(launched("a"), finished("a", "failure"), launched("b"), finished("b", "success"))
    assert status_json(state, allowed=frozenset({"a"}))["nodes"]["a"]["shown"] == "failure_allowed"
    assert status_json(state, allowed=frozenset())["nodes"]["a"]["shown"] == "failure"
    replay(state, [{"kind": "run_completed", "outcome": "success", "at": AT}])
    # a graph this process never read: a run that succeeded had only allowed failures
    assert status_json(state)["nodes"]["a"]["shown"] == "failure_allowed"


def test_status_lines_name_the_shown_state() -> None:
    state = folded(launched("a"), asked("a"), launched("b"), finished("b", "failure"))
    assert "waiting for approval" in node_status_line("a", state.nodes["a"])
    assert " failure " in node_status_line("b", state.nodes["b"])
    assert "failure (allowed)" in node_status_line("b", state.nodes["b"], shown="failure_allowed")


def test_a_run_that_waits_for_a_person_names_the_command_that_moves_it_on() -> None:
    waiting = folded(launched("a"), asked("a"))
    assert person_command(waiting) == "rho-notebook status 01RUN"
    assert run_row_json(waiting)["next"] == "rho-notebook status 01RUN"
    # the owner died while a person was asked: nothing ran, resume asks again
    recover = folded(launched("a"), asked("a"), {"kind": "needs_recovery"})
    assert person_command(recover) == "rho-notebook resume 01RUN"
    # the owner died while a process ran: no result, so resume needs --recover-uncertain
    unsettled = folded(launched("a"), {"kind": "needs_recovery"})
    assert person_command(unsettled) == "rho-notebook resume 01RUN --recover-uncertain"
    halted = folded({"kind": "run_halted", "steps": [{"step": "a", "why": "changed"}]})
    assert person_command(halted) == "rho-notebook resume 01RUN --decide a=rerun|skip"
    done = folded(launched("a"), finished("a", "success"), {"kind": "run_completed", "outcome": "success"})
    assert person_command(done) is None
    assert "next" not in run_row_json(done)


def test_a_run_halted_by_a_budget_is_moved_on_by_a_raise_not_by_decide() -> None:
    """A graph run takes no --decide: the way on after a budget's halt is --raise-budget, wherever
    it is said (runs' ``next``, status' last line), and a step budget's halt names its scope."""
    run_budget = "budget tokens: the run's tokens budget (40) could be passed by the next model call of a"
    step_budget = "budget b:cost: b's cost budget ($0.1) could be passed by the next model call of b"
    halted = folded(
        {"kind": "run_halted", "steps": [{"step": "a", "why": run_budget}, {"step": "b", "why": step_budget}]}
    )
    expected = "rho-notebook resume 01RUN --raise-budget tokens=N --raise-budget b:cost=N"
    assert person_command(halted) == expected
    assert run_row_json(halted)["next"] == expected
    assert decision_lines(halted)[-1] == f"  {expected}"
    # a halt that is not (only) a budget's is decided step by step
    mixed = folded({"kind": "run_halted", "steps": [{"step": "a", "why": run_budget}, {"step": "b", "why": "changed"}]})
    assert person_command(mixed) == "rho-notebook resume 01RUN --decide a=rerun|skip --decide b=rerun|skip"


HARNESS_TB = """\
Traceback (most recent call last):
  File "/home/u/.rho/workflows/runs/01R/python/_rho_harness.py", line 233, in main
    result = _call(request)
             ^^^^^^^^^^^^^^
  File "/proc/self/fd/19", line 182, in _c
  File "/home/u/.rho/workflows/runs/01R/python/_rho_harness.py", line 76, in _call
    return function(**request["args"])
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/u/.rho/workflows/runs/01R/python/modules/nodes/boom.py", line 6, in boom
    return helper(x)
           ^^^^^^^^^
  File "/home/u/.rho/workflows/runs/01R/python/modules/nodes/boom.py", line 2, in helper
    raise ValueError(f"bad value {x}")
ValueError: bad value 3
"""


def test_a_traceback_starts_at_the_authors_code() -> None:
    shown = user_traceback(HARNESS_TB)
    assert shown == (
        "Traceback (most recent call last):\n"
        '  File "/home/u/.rho/workflows/runs/01R/python/modules/nodes/boom.py", line 6, in boom\n'
        "    return helper(x)\n"
        "           ^^^^^^^^^\n"
        '  File "/home/u/.rho/workflows/runs/01R/python/modules/nodes/boom.py", line 2, in helper\n'
        '    raise ValueError(f"bad value {x}")\n'
        "ValueError: bad value 3\n"
    )


def test_package_frames_leave_and_text_around_the_traceback_stays() -> None:
    import rho_notebook

    package = rho_notebook.__file__.rsplit("/", 1)[0]
    text = (
        "computing...\n"
        "Traceback (most recent call last):\n"
        '  File "/work/flow.py", line 3, in <module>\n'
        "    run_step(x)\n"
        f'  File "{package}/script/_steps.py", line 40, in run_step\n'
        "    raise StepFailed(name)\n"
        "rho_notebook.script.StepFailed: step x failed\n"
    )
    shown = user_traceback(text)
    assert "_steps.py" not in shown and "raise StepFailed" not in shown
    assert shown.startswith('computing...\nTraceback (most recent call last):\n  File "/work/flow.py"')
    assert shown.endswith("rho_notebook.script.StepFailed: step x failed\n")


@pytest.mark.parametrize(
    "text",
    [
        "plain output, no traceback\n",
        # only our frames: the fault is ours, and the frames say where
        'Traceback (most recent call last):\n  File "/x/python/_rho_harness.py", line 1, in main\n    boom()\nOSError: x\n',
        "",
    ],
)
def test_text_without_an_authors_frame_is_kept_whole(text: str) -> None:
    assert user_traceback(text) == text


def test_status_lines_widen_their_columns_to_the_longest_state_and_name() -> None:
    """``failure (allowed)`` and ``waiting for approval`` are wider than the state column's 13
    characters: every line's column widens, so the attempts stay in one column."""
    state = folded(launched("a"), finished("a", "failure"), launched("b"), asked("b"), nodes=("a", "b", "c"))
    rows = [
        ("a", state.nodes["a"], "failure_allowed", None),
        ("b", state.nodes["b"], shown_state(state.nodes["b"]), None),
        ("c", state.nodes["c"], shown_state(state.nodes["c"]), None),
    ]
    lines = node_status_lines(rows)
    assert len({line.index("attempt") for line in lines}) == 1, lines
    assert lines[1].startswith("  b" + " " * 24 + "waiting for approval attempt 1")
    short = node_status_lines([("c", state.nodes["c"], "pending", None)])  # the usual widths when all fit
    assert short == [node_status_line("c", state.nodes["c"], shown="pending")]
    assert short[0] == "  c" + " " * 24 + "pending" + " " * 7 + "attempt 0"
    long_name = "n" * 30
    widened = node_status_lines(
        [(long_name, state.nodes["c"], "pending", None), ("c", state.nodes["c"], "pending", None)]
    )
    assert widened[1].index("attempt") == widened[0].index("attempt") == 2 + 30 + 1 + 13 + 1
