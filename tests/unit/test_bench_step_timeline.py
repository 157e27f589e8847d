"""bench/step_timeline.py stamps a chain's critical path and cuts it into cycles."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.script_overhead import make_plan
from bench.step_timeline import StepMarks, marked_steps
from rho_notebook.runtime import script_attempts, script_channel
from rho_notebook.runtime.owner import create_run, execute_run
from rho_notebook.service import Service
from rho_notebook.store.journal import JournalWriter
from rho_notebook.store.layout import StoreLayout

STEPS = 6
SCRIPT = f"""\
from rho_notebook.script import run_command

for _ in range({STEPS}):
    run_command(["true"], timeout_seconds=60, max_output_bytes=1024)
"""


def test_a_run_is_cut_into_cycles_from_one_node_finished_to_the_next() -> None:
    live, runs = StepMarks(), StepMarks()
    stamps = [("node_finished", 0.0), ("node_launched", 0.001), ("node_finished", 0.003)]
    stamps += [("node_launched", 0.0035), ("node_finished", 0.006), ("node_launched", 0.0061), ("node_finished", 0.01)]
    live.marks = list(stamps)
    runs.take_run(live, edge=0)
    assert live.marks == [], "the live stamps are taken, so the next run starts afresh"
    assert [round(c * 1e3, 3) for c in runs.cycles] == [3.0, 3.0, 4.0]
    assert [round(v * 1e3, 3) for v in runs.intervals["node_launched -> node_finished"]] == [2.0, 2.5, 3.9]
    table = runs.table("chain")
    assert table.splitlines()[0] == "chain: 3.000 ms a cycle (median of 3)"
    assert "   2.500 ms  node_launched -> node_finished  (n=3)" in table


def test_a_script_step_is_stamped_along_its_whole_path_and_the_wrappers_go_away(tmp_path: Path) -> None:
    originals = (
        script_channel._Connection.buffer_updated,
        JournalWriter.sync,
        script_attempts._store_value,
    )
    service = Service(layout=StoreLayout(home=tmp_path / "home"))
    plan = make_plan(service, tmp_path / "script", "steps.py", SCRIPT)
    runs = StepMarks()
    with marked_steps() as live:
        run_id = create_run(service.layout, plan)
        state = asyncio.run(execute_run(service.layout, run_id, resume=False, on_event=live.on_event))
        names = [name for name, _ in live.marks]
        runs.take_run(live, edge=1)
    assert state.outcome == "success"
    assert (script_channel._Connection.buffer_updated, JournalWriter.sync, script_attempts._store_value) == originals
    # one step's path, in the order the owner passes it (a later step's request follows the answer)
    step = names[names.index("request read", names.index("node_finished")) :]
    step = step[: step.index("node_finished") + 1]
    assert step == [
        "request read",
        "request handled",
        "step task runs",
        "node_launched",
        "fsync",
        "fsynced",
        "process_started",
        "value stored",
        "node_finished",
    ]
    assert names.count("node_finished") == STEPS
    assert len(runs.cycles) == STEPS - 3  # the first and last finishes are left out (edge=1)
    assert "answer -> answer written" in runs.intervals
