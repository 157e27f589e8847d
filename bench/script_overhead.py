"""Script-run overhead: 200 command steps of ``true`` in a script, the same 200 as a graph run and as
bare ``subprocess.run`` calls, and the replay of those 200 steps on resume, all in one run.

    PYTHONPATH=. python bench/script_overhead.py [--samples 5] [--budget 5]

The store lives in a temporary directory (set TMPDIR to measure another filesystem). Planning is done
once up front and never timed; every run is ``create_run`` + ``execute_run`` in this process (the
script itself runs in its own interpreter process, as always).

Figures, each the median of ``--samples`` samples (the workloads are interleaved in every sample):

script, executed
    A script calling ``run_command(["true"], ...)`` 200 times, then exiting 3 (so that the run ends
    failed and can be resumed). Wall time per step of the whole run (interpreter start included),
    and the *step span*: from the first step's ``node_finished`` to the last one's, over 199
    intervals, timed in this process as the owner journals them (``on_event``) -- the interpreter's
    start and exit are outside it.
graph
    A graph run of 200 ``command`` nodes of ``true`` in a chain (node i needs node i-1): wall time
    per node, and the same span over ``node_finished``.
floor
    ``subprocess.run(["/bin/true"])`` 200 times in order, per call.
script, replayed
    ``resume`` of the executed script run (with the file that lets it finish): every step call is
    answered from the journal, nothing launches. Wall time per step, and the span from the first
    ``step_replayed`` to the last, over 199 intervals.

Goals, both on the step span (interpreter start excluded):

* issue 31: an executed script step costs at most 1.5 x a graph command node, i.e. script span per
  step <= 1.5 x graph span per node (the ratio of the medians);
* issue 16: a replayed step costs less than 5 % of an executed one, i.e. replayed span per step
  < 0.05 x executed span per step.

``--budget N`` then runs the executed script and the graph N more times each, alternated, and
prints where a step's wall time goes in processor time (bench/cpu_budget.py, per step of the whole
run, the script interpreter's start included): the run's event loop, the owner's other threads
(its writer, which makes the attempt folder of a step that printed), the child processes
(the script's interpreter and every ``true``), the loop's wait for a processor, and how many
processors all of them kept busy. ``--timeline N`` runs each N more times and prints a step's
critical path instead: the median time between consecutive marks of one cycle, ``node_finished``
to the next (bench/step_timeline.py: the script's request read and handled, the step's task, the
launch record and its fsync, the process, the value stored, the answer written; for the graph its
records and fsync).

Exit status 0 when both goals are met, 1 when one is not, 2 when a run does not end as expected.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.cpu_budget import HEADER, CpuBudget, row  # noqa: E402
from bench.run_overhead import store_place  # noqa: E402
from bench.step_timeline import StepMarks, marked_steps  # noqa: E402
from rho_notebook.model.plan import Plan  # noqa: E402
from rho_notebook.runtime.owner import create_run, execute_run  # noqa: E402
from rho_notebook.service import Service  # noqa: E402
from rho_notebook.source.workspace import Workspace  # noqa: E402
from rho_notebook.store.layout import StoreLayout  # noqa: E402

STEPS = 200
GOAL = 0.05
"""Replayed / executed step span (issue 16)."""
STEP_GOAL = 1.5
"""Executed script step / graph command node, step spans (issue 31)."""

SCRIPT = f"""\
import os
import sys

from rho_notebook.script import run_command

for _ in range({STEPS}):
    run_command(["true"], timeout_seconds=60, max_output_bytes=1024)
if not os.path.exists("go"):
    sys.exit(3)
"""

CHAIN = f"""\
def build(inputs):
    nodes = []
    for i in range({STEPS}):
        nodes.append(command(name = "c" + str(1000 + i), argv = ["true"], needs = ["c" + str(999 + i)] if i else [],
                             timeout_seconds = 60, max_output_bytes = 1024))
    return workflow(name = "chain", nodes = nodes)

WORKFLOW = define(inputs = {{}}, build = build)
"""


@dataclass
class Timed:
    """One run: its wall time and the perf_counter stamps of the events of one kind."""

    seconds: float
    stamps: list[float]

    def span_per_step(self) -> float:
        if len(self.stamps) != STEPS:
            raise SystemExit(f"expected {STEPS} step events, saw {len(self.stamps)}")
        return (self.stamps[-1] - self.stamps[0]) / (STEPS - 1)


def make_plan(service: Service, root: Path, name: str, text: str) -> Plan:
    (root / ".rho").mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text)
    request = service.request_for(root / name, inputs={}, workspace=Workspace(root=root.resolve()))
    return asyncio.run(service.plan(request))


def timed_run(layout: StoreLayout, run_id: str, *, resume: bool, kind: str, outcome: str) -> Timed:
    stamps: list[float] = []

    def sink(record: dict[str, Any]) -> None:
        if record.get("kind") == kind:
            stamps.append(time.perf_counter())

    began = time.perf_counter()
    state = asyncio.run(execute_run(layout, run_id, resume=resume, on_event=sink))
    seconds = time.perf_counter() - began
    if state.outcome != outcome:
        print(f"run {run_id} ended {state.outcome}, expected {outcome}", file=sys.stderr)
        raise SystemExit(2)
    return Timed(seconds, stamps)


def script_executed(service: Service, plan: Plan, go: Path) -> tuple[str, Timed]:
    """Create and execute the script run without ``go`` (it fails at the end): (its ID, its timing)."""
    go.unlink(missing_ok=True)
    began = time.perf_counter()
    run_id = create_run(service.layout, plan)
    executed = timed_run(service.layout, run_id, resume=False, kind="node_finished", outcome="failure")
    executed.seconds = time.perf_counter() - began
    return run_id, executed


def script_pair(service: Service, plan: Plan, go: Path) -> tuple[Timed, Timed]:
    """Execute the script run (it fails at the end), then resume it with ``go`` present (replay)."""
    run_id, executed = script_executed(service, plan, go)
    go.write_text("")
    replayed = timed_run(service.layout, run_id, resume=True, kind="step_replayed", outcome="success")
    return executed, replayed


def graph_run(service: Service, plan: Plan) -> Timed:
    began = time.perf_counter()
    run_id = create_run(service.layout, plan)
    run = timed_run(service.layout, run_id, resume=False, kind="node_finished", outcome="success")
    run.seconds = time.perf_counter() - began
    return run


def timeline_runs(service: Service, script: Plan, chain: Plan, go: Path, runs: int) -> tuple[StepMarks, StepMarks]:
    """The step marks of ``runs`` executed script runs and as many graph runs, alternated."""
    script_runs, graph_runs = StepMarks(), StepMarks()
    with marked_steps() as live:
        for _ in range(runs):
            go.unlink(missing_ok=True)
            run_id = create_run(service.layout, script)
            asyncio.run(execute_run(service.layout, run_id, resume=False, on_event=live.on_event))
            script_runs.take_run(live)
            run_id = create_run(service.layout, chain)
            asyncio.run(execute_run(service.layout, run_id, resume=False, on_event=live.on_event))
            graph_runs.take_run(live)
    return script_runs, graph_runs


def true_floor() -> float:
    began = time.perf_counter()
    for _ in range(STEPS):
        subprocess.run(["/bin/true"], check=True)
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--budget", type=int, default=0, help="runs of each to split into processor time")
    parser.add_argument("--timeline", type=int, default=0, help="runs of each to split into a step's critical path")
    args = parser.parse_args()
    budgets: dict[str, list[CpuBudget]] = {"script": [], "graph": []}
    series: dict[str, list[float]] = {
        key: []
        for key in (
            "script_wall",
            "script_span",
            "replay_wall",
            "replay_span",
            "graph_wall",
            "graph_span",
            "floor",
        )
    }
    with tempfile.TemporaryDirectory(prefix="rho-script-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        service = Service(layout=StoreLayout(home=tmp / "home"))
        script = make_plan(service, tmp / "script", "steps.py", SCRIPT)
        chain = make_plan(service, tmp / "chain", "wf.star", CHAIN)
        go = tmp / "script" / "go"

        def sample() -> None:
            executed, replayed = script_pair(service, script, go)
            series["script_wall"].append(executed.seconds / STEPS)
            series["script_span"].append(executed.span_per_step())
            series["replay_wall"].append(replayed.seconds / STEPS)
            series["replay_span"].append(replayed.span_per_step())
            graph = graph_run(service, chain)
            series["graph_wall"].append(graph.seconds / STEPS)
            series["graph_span"].append(graph.span_per_step())
            series["floor"].append(true_floor() / STEPS)

        steps: list[Callable[[], None]] = [sample] * args.samples
        for index, step in enumerate(steps, start=1):
            step()
            print(
                f"sample {index}: " + "  ".join(f"{key} {values[-1] * 1e3:.3f}" for key, values in series.items()),
                flush=True,
            )
        for _ in range(args.budget):
            with CpuBudget.measure() as budget:
                script_executed(service, script, go)
            budgets["script"].append(budget)
            with CpuBudget.measure() as budget:
                graph_run(service, chain)
            budgets["graph"].append(budget)
        timelines = timeline_runs(service, script, chain, go, args.timeline) if args.timeline else None
        where = store_place(tmp)
    m = {key: statistics.median(values) for key, values in series.items()}
    ratio = m["replay_span"] / m["script_span"]
    print(f"\nmedian of {args.samples} samples, ms per step ({STEPS} steps of `true`); store on {where}")
    print(f"{'':34} {'wall':>9} {'step span':>10}")
    print(f"{'script run, executed':34} {m['script_wall'] * 1e3:9.3f} {m['script_span'] * 1e3:10.3f}")
    print(f"{'graph run (chain of command nodes)':34} {m['graph_wall'] * 1e3:9.3f} {m['graph_span'] * 1e3:10.3f}")
    print(f"{'subprocess.run floor':34} {m['floor'] * 1e3:9.3f} {'':>10}")
    print(f"{'script run, replayed on resume':34} {m['replay_wall'] * 1e3:9.3f} {m['replay_span'] * 1e3:10.3f}")
    step_ratio = m["script_span"] / m["graph_span"]
    step_met = step_ratio <= STEP_GOAL
    print(
        f"\nscript step / graph command node (step span): {step_ratio:.2f}x "
        f"(goal <= {STEP_GOAL}x): {'met' if step_met else 'NOT met'}"
    )
    met = ratio < GOAL
    print(
        f"replayed / executed (step span, interpreter start excluded): {ratio * 100:.2f} % "
        f"(goal < {GOAL * 100:.0f} %): {'met' if met else 'NOT met'}"
    )
    if args.budget:
        print(f"\nwhere a step's time goes, median of {args.budget} runs of each (ms per step; bench/cpu_budget.py)")
        print(HEADER)
        print(row("script run, executed", budgets["script"], STEPS))
        print(row("graph run (chain of command nodes)", budgets["graph"], STEPS))
    if timelines is not None:
        print(f"\nwhere a step waits, {args.timeline} runs of each (bench/step_timeline.py)")
        print(timelines[0].table("script run, executed"))
        print(timelines[1].table("graph run (chain of command nodes)"))
    return 0 if met and step_met else 1


if __name__ == "__main__":
    raise SystemExit(main())
