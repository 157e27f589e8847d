"""The timeline fold (rho_notebook.views.timeline): rows, attempts, queued time, retries, waits for a
person, reused and replayed marks, and the critical path, from journal records."""

from __future__ import annotations

from typing import Any

from rho_notebook.views.timeline import timeline_of, timeline_text

RUN = "01run"


def at(seconds: float) -> str:
    whole = int(seconds)
    return f"2026-01-01T00:{whole // 60:02d}:{whole % 60:02d}.{round((seconds - whole) * 1000):03d}+00:00"


def rec(t: float, kind: str, node: str | None = None, **data: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"run_id": RUN, "at": at(t), "kind": kind, **data}
    if node is not None:
        found["node"] = node
    return found


def ran(
    node: str, ready: float, launched: float, finished: float, attempt: int = 1, state: str = "success"
) -> list[dict[str, Any]]:
    return [
        rec(ready, "node_ready", node),
        rec(launched, "node_launched", node, attempt=attempt),
        rec(launched + 0.01, "process_started", node, attempt=attempt, pid=1),
        rec(finished, "node_finished", node, attempt=attempt, state=state, exit=None, message=""),
    ]


NEEDS = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}


def diamond() -> list[dict[str, Any]]:
    """a (0-1), then b (1-2) and c (queued 1-1.5, ran 1.5-4), then d (4-5)."""
    return [
        rec(0, "run_created", plan_id="p", graph_digest="g", mode="default"),
        rec(0, "run_started", pid=1, resumed=False),
        *ran("a", 0, 0, 1),
        *ran("b", 1, 1, 2),
        *ran("c", 1, 1.5, 4),
        *ran("d", 4, 4, 5),
        rec(5, "run_completed", outcome="success"),
    ]


def rows(timeline: Any) -> dict[str, Any]:
    return {row["name"]: row for row in timeline["rows"]}


def test_rows_bars_and_queued_time() -> None:
    tl = timeline_of(RUN, diamond(), needs=NEEDS, now=at(100))
    assert [row["name"] for row in tl["rows"]] == ["a", "b", "c", "d"]  # by first activity
    assert tl["span"] == 5.0 and not tl["running"]  # a finished run ends at its last record, not now
    c = rows(tl)["c"]["bars"][0]
    assert (c["queued"], c["launched"], c["finished"], c["state"]) == (1.0, 1.5, 4.0, "success")
    assert rows(tl)["b"]["bars"][0]["queued"] is None  # launched as it became ready: no queued stretch
    assert rows(tl)["d"]["needs"] == ["b", "c"]


def test_critical_path_follows_the_need_that_ended_last() -> None:
    tl = timeline_of(RUN, diamond(), needs=NEEDS, now=at(100))
    assert tl["critical_path"] == ["a", "c", "d"]
    assert {name for name, row in rows(tl).items() if row["critical"]} == {"a", "c", "d"}
    # b made slower than c: the path moves to b
    slower = [r for r in diamond() if not (r.get("node") == "b" and r["kind"] == "node_finished")]
    slower.insert(-3, rec(4.5, "node_finished", "b", attempt=1, state="success", exit=None, message=""))
    assert timeline_of(RUN, slower, needs=NEEDS, now=at(100))["critical_path"] == ["a", "b", "d"]


def test_retry_is_an_earlier_attempt() -> None:
    records = [
        rec(0, "run_started", pid=1, resumed=False),
        *ran("a", 0, 0, 1, state="cancellation"),
        rec(1, "run_completed", outcome="cancellation"),
        rec(10, "run_started", pid=2, resumed=True),
        rec(10, "node_reset", "a", reason="new attempt after cancellation"),
        *ran("a", 10, 10.5, 12, attempt=2),
        rec(12, "run_completed", outcome="success"),
    ]
    a = rows(timeline_of(RUN, records, needs={"a": []}, now=at(100)))["a"]
    assert [(b["attempt"], b["state"], b["retry"]) for b in a["bars"]] == [
        (1, "cancellation", True),
        (2, "success", False),
    ]
    assert a["bars"][1]["queued"] == 10.0 and a["state"] == "success"


def test_waits_for_a_person_are_marked_on_their_attempt() -> None:
    records = [
        rec(0, "run_started", pid=1, resumed=False),
        rec(0, "node_ready", "deploy"),
        rec(0.5, "node_launched", "deploy", attempt=1),
        rec(0.5, "approval_requested", "deploy", attempt=1, request_id="r1", approval="x", facts={}, facts_sha256="s"),
        rec(
            30,
            "approval_decided",
            "deploy",
            attempt=1,
            request_id="r1",
            decision="approve",
            by="ann",
            comment="",
            decided_at=at(29),
            via="cli",
            facts_sha256="s",
        ),
        rec(31, "process_started", "deploy", attempt=1, pid=3),
        rec(32, "node_finished", "deploy", attempt=1, state="success", exit=None, message=""),
    ]
    bar = rows(timeline_of(RUN, records, now=at(40)))["deploy"]["bars"][0]
    assert bar["waits"] == [[0.5, 29.0]] and bar["started"] == 31.0
    # still waiting: the wait is open and the row says so; the run is running until now
    waiting = timeline_of(RUN, records[:4], now=at(40))
    assert rows(waiting)["deploy"]["state"] == "waiting"
    assert rows(waiting)["deploy"]["bars"][0]["waits"] == [[0.5, None]]
    assert waiting["running"] and waiting["span"] == 40.0


def test_open_bars_skipped_rows_reused_and_replayed_steps() -> None:
    records = [
        rec(0, "run_started", pid=1, resumed=False),
        rec(
            0,
            "node_launched",
            "s1",
            attempt=1,
            step={"kind": "command", "digest": "d", "facts": {}, "after": [], "recovery": None},
        ),
        rec(2, "node_finished", "s1", attempt=1, state="success", exit=None, message=""),
        rec(
            2,
            "node_launched",
            "s2",
            attempt=1,
            step={"kind": "model", "digest": "d", "facts": {}, "after": ["s1"], "recovery": None},
        ),
        rec(2, "node_skipped", "gated", reason="condition"),
        rec(
            2,
            "node_reused",
            "cached",
            attempt=1,
            source_run="r0",
            source_node="cached",
            source_attempt=1,
            reuse_key="k",
        ),
        rec(2, "node_finished", "cached", attempt=1, state="success", exit=None, message=""),
        rec(3, "step_replayed", "s1", attempt=1, digest="d"),
    ]
    tl = timeline_of(RUN, records, now=at(9))
    found = rows(tl)
    assert found["s2"]["kind"] == "step" and found["s2"]["needs"] == ["s1"]
    assert found["s2"]["bars"][0]["finished"] is None and found["s2"]["state"] == "running"
    assert tl["critical_path"] == ["s1", "s2"]  # the open bar ends now, last
    assert found["gated"]["bars"] == [] and found["gated"]["decided"] == 2.0
    assert found["cached"]["bars"][0]["reused"] is True
    assert found["s1"]["replays"] == [3.0]


def test_old_journal_without_needs_or_start() -> None:
    """Records of an old version (no run_started, missing keys) still fold: nothing is required."""
    records = [
        rec(1, "node_launched", "x", attempt=1),
        {"kind": "node_finished", "node": "x"},
        rec(2, "node_finished", "x"),
    ]
    tl = timeline_of(RUN, records, now=at(5))
    assert rows(tl)["x"]["bars"][0]["finished"] == 1.0 and tl["origin"] is None


def test_text_gantt_fits_the_width_and_marks_what_happened() -> None:
    records = [
        *diamond()[:-1],
        rec(5, "node_launched", "d", attempt=2),
        rec(6, "node_finished", "d", attempt=2, state="success", exit=None, message=""),
        rec(6, "run_completed", outcome="success"),
    ]
    tl = timeline_of(RUN, records, needs=NEEDS, now=at(100))
    for width in (50, 80, 140):
        lines = timeline_text(tl, width=width)
        assert all(len(line) <= width for line in lines), (width, lines)
    lines = timeline_text(tl, width=80)
    d_line = next(line for line in lines if line.startswith("d "))
    assert "▒" in d_line and "█" in d_line and d_line.rstrip().endswith("*")  # retry, last attempt, critical
    c_line = next(line for line in lines if line.startswith("c "))
    assert "░" in c_line  # queued
    assert "critical path: a → c → d" in lines
    plain = timeline_text(tl, width=80, unicode=False)
    assert all(line.isascii() for line in plain)


def test_a_fast_run_says_its_scale_in_milliseconds() -> None:
    """A run of a quarter second on 80 columns: a column is a few milliseconds, which ``0.00s`` hid."""
    records = [rec(0, "run_started", pid=1, resumed=False), *ran("a", 0, 0, 0.004), *ran("b", 0.004, 0.004, 0.25)]
    records.append(rec(0.25, "run_completed", outcome="success"))
    lines = timeline_text(timeline_of(RUN, records, now=at(1)), width=80)
    assert "0.00s" not in "\n".join(lines)
    legend = next(line for line in lines if line.startswith("1 column = "))
    scale = legend.split()[3]
    assert scale.endswith("ms") and 1 < float(scale.removesuffix("ms")) < 10, legend
    a_line = next(line for line in lines if line.startswith("a "))
    assert "4.0ms" in a_line


def test_static_picture_caps_its_rows_and_keeps_apart_from_the_dag_marks() -> None:
    from rho_notebook.views.timeline_svg import MAX_ROWS, timeline_svg

    records: list[dict[str, Any]] = [rec(0, "run_started", pid=1, resumed=False)]
    for i in range(MAX_ROWS + 5):
        records += ran(f"n{i}", i, i, i + 0.5)
    svg = timeline_svg(timeline_of(RUN, records, now=at(1000)))
    assert svg.count('class="rho-tl-row') == MAX_ROWS and "5 more rows" in svg
    assert "data-state=" not in svg and "data-name=" not in svg  # the DAG picture's marks, counted by tests
    small = timeline_svg(timeline_of(RUN, diamond(), needs=NEEDS, now=at(100)))
    assert small.count("rho-tl-critical") == 3 and "critical path: a → c → d" in small


def test_an_attempt_without_a_result_ends_uncertain_not_with_the_clock() -> None:
    """An owner killed while `a` ran journaled no end: while nobody owns the run the bar ends at the
    last record, uncertain; recovery's `attempt_uncertain` closes it the same way."""
    records = [rec(0, "run_started", pid=1, resumed=False), *ran("a", 0, 0, 1)[:3]]
    live = timeline_of(RUN, records, now=at(50))
    assert live["running"] and live["span"] == 50.0 and rows(live)["a"]["bars"][0]["finished"] is None
    dead = timeline_of(RUN, records, now=at(50), live=False)
    bar = rows(dead)["a"]["bars"][0]
    assert not dead["running"] and dead["span"] == 0.01 and (bar["finished"], bar["state"]) == (0.01, "uncertain")
    recovered = [*records, rec(9, "attempt_uncertain", "a", attempt=1), rec(9, "needs_recovery", nodes=["a"])]
    found = timeline_of(RUN, recovered, now=at(50))
    assert not found["running"] and rows(found)["a"]["state"] == "uncertain"
    assert rows(found)["a"]["bars"][0]["finished"] == 9.0


def test_a_budget_set_record_neither_makes_a_row_nor_moves_one() -> None:
    """A node's budget is journaled at start (``budget_set`` with its ``node``): that put the node's
    row first (its "first activity"), and a budget raised for a scope with no node made a row of
    its own that never ran. Only a node's own records place its row."""
    records = diamond()
    records.insert(2, rec(0, "budget_set", "d", source="workflow", max_tokens=100))
    records.insert(3, rec(0, "budget_set", "nowhere", source="raise", max_tokens=5))
    tl = timeline_of(RUN, records, needs=NEEDS, now=at(100))
    assert [row["name"] for row in tl["rows"]] == ["a", "b", "c", "d"]
    assert tl["critical_path"] == ["a", "c", "d"]


def test_the_ascii_gantt_is_ascii_even_where_a_long_name_is_cut() -> None:
    """A name cut to fit ended with "…" in the ASCII Gantt too, and printing it on a terminal that
    cannot encode it failed with a UnicodeEncodeError traceback."""
    long = "a-node-with-a-really-long-name-indeed"
    records = [rec(0, "run_started", pid=1, resumed=False), *ran(long, 0, 0, 1), rec(1, "run_completed")]
    lines = timeline_text(timeline_of(RUN, records, needs={long: []}, now=at(5)), width=80, unicode=False)
    assert all(line.isascii() for line in lines), lines
    assert any(line.startswith(long[:27] + "~") for line in lines), lines
