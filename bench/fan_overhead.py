"""Runner overhead of a wide fan of read-only no-op nodes against an asyncio loop with one fsync per tick.

    PYTHONPATH=. python bench/fan_overhead.py [--samples 9] [--width 500] [--concurrency N] [--profile 10] [--phases 10]

Workloads (planning is done once up front and never timed; "run" = ``create_run`` + ``execute``
in-process, with the durable journal on the temporary directory's filesystem, which is printed):

(d) a fan 1 -> ``--width`` -> 1 of read-only Python nodes (``access = "read_only"``: they share
    the checkout) with ``concurrency`` as wide as the fan (or ``--concurrency``: total, command
    and checkout_readers), every attempt run by an in-process
    no-op executor (``executors={"python": NoopExecutor()}``), so what is measured is the runner:
    scheduler, gate, journal and fsyncs. Issue 31 measured 23x here (0.276 s against 0.012 s).
(e) the same fan 1 -> 2 -> 1: what a run costs whatever its width, so that the table can split
    (d) into that fixed cost and a cost per node (each against the same split of the floor).
(c) the 750-node / 7,500-edge layered graph with no-op commands, as in bench/run_overhead.py (c):
    it must stay within 2x while (d) is brought there.

Floor of both: bench/run_overhead.py's asyncio loop over the same graph with the same
concurrency (no-op tasks) that appends as many JSON lines as the real run journaled and fsyncs
once per loop tick; the heap built before the samples is frozen (``gc.freeze``), as an owner
process freezes what it inherits. Goal (issue 31 item 6): run <= 2x floor. Each figure is the median of
``--samples`` samples, real runs and floors interleaved; the table also gives the journal fsyncs
of one run (counted by wrapping ``os.fsync`` in this process), which should not grow with the
width. ``--profile N`` then prints where the time of N more runs of (d) goes (cProfile, by own
time and by cumulative time); ``--phases N`` prints the wall time N more runs of (d) spend in each
of the runner's phases (bench/run_phases.py: no profiler overhead), and as many runs of (c) (a
chain in effect: one node per scheduler turn, so it shows what a turn costs). Exit status 0
unless a run does not succeed.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.limit_corpus import graph_case, write_case  # noqa: E402
from bench.run_overhead import NoopExecutor, RunFigures, journal_floor, make_plan, run_once, store_place  # noqa: E402
from bench.run_phases import timed_phases  # noqa: E402
from rho_notebook.exec.base import Executor  # noqa: E402
from rho_notebook.model.plan import Plan  # noqa: E402
from rho_notebook.runtime import owner  # noqa: E402
from rho_notebook.runtime.owner import create_run, execute_run  # noqa: E402
from rho_notebook.service import Service  # noqa: E402
from rho_notebook.store.layout import StoreLayout  # noqa: E402

MODULE = "def noop():\n    return None\n"


def fan_source(width: int, concurrency: int | None = None) -> str:
    """A source node, ``width`` read-only Python nodes that need it, and a sink that needs them all;
    ``concurrency`` (default: ``width``) bounds how many run at once."""
    limit = concurrency or width
    return f"""
def node(name, needs):
    return python(name = name, module = "//noop.py", function = "noop", needs = needs,
                  access = "read_only", timeout_seconds = 60, max_output_bytes = 1024)

def build(inputs):
    middle = ["m" + str(100000 + i)[1:] for i in range({width})]
    nodes = [node("a_source", [])] + [node(name, ["a_source"]) for name in middle] + [node("z_sink", middle)]
    return workflow(name = "fan", nodes = nodes,
                    concurrency = {{"total": {limit}, "command": {limit}, "checkout_readers": {limit}}})

WORKFLOW = define(build = build)
"""


@contextmanager
def counting_fsyncs() -> Iterator[list[int]]:
    """Count ``os.fsync`` and ``os.fdatasync`` calls made in this process meanwhile."""
    count = [0]
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: Any) -> None:
        count[0] += 1
        real_fsync(fd)

    def fdatasync(fd: Any) -> None:
        count[0] += 1
        real_fdatasync(fd)

    os.fsync, os.fdatasync = fsync, fdatasync
    try:
        yield count
    finally:
        os.fsync, os.fdatasync = real_fsync, real_fdatasync


def profile_runs(service: Service, plan: Plan, executors: Mapping[str, Executor], count: int) -> None:
    """``count`` runs of ``plan``, timed the way the bench times them (create_run + execute_run)."""
    for _ in range(count):
        run_id = create_run(service.layout, plan)
        asyncio.run(execute_run(service.layout, run_id, resume=False, executors=executors))


def phase_runs(service: Service, plan: Plan, executors: Mapping[str, Executor], count: int) -> str:
    """The phase table of ``count`` runs of ``plan`` (looked up through ``owner``: timed_phases patches it)."""
    with timed_phases() as phases:
        for _ in range(count):
            run_id = owner.create_run(service.layout, plan)
            asyncio.run(owner.execute_run(service.layout, run_id, resume=False, executors=executors))
    return phases.table(runs=count, nodes=len(plan.graph.nodes))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--width", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=None, help="default: the width")
    parser.add_argument("--profile", type=int, default=0, help="then profile this many runs of (d)")
    parser.add_argument("--phases", type=int, default=0, help="then time the phases of this many runs of (d)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rho-fan-") as tmp_name:
        tmp = Path(tmp_name)
        service = Service(layout=StoreLayout(home=tmp / "home"))
        fan = make_plan(service, tmp / "fan", {"wf.star": fan_source(args.width, args.concurrency), "noop.py": MODULE})
        tiny = make_plan(service, tmp / "tiny", {"wf.star": fan_source(2), "noop.py": MODULE})
        case = graph_case()
        write_case(case, tmp / "graph")
        layered = make_plan(service, tmp / "graph", case.files)
        noop: Executor = NoopExecutor()
        counts: dict[str, RunFigures] = {}
        fsyncs: dict[str, int] = {}
        plans = (("d", fan, {"python": noop}), ("e", tiny, {"python": noop}), ("c", layered, {"command": noop}))
        for key, plan, executors in plans:
            with counting_fsyncs() as count:  # one counted run each, not timed
                counts[key] = run_once(service, plan, executors)
            fsyncs[key] = count[0]

        # as a run's owner process does before it runs (runtime/detached._run_owner): what exists
        # now is out of the collector's way, for the runs and the floors alike
        gc.freeze()

        def real(key: str, plan: Plan, executors: Mapping[str, Executor]) -> Callable[[], float]:
            return lambda: run_once(service, plan, executors).seconds

        steps: list[tuple[str, Callable[[], float]]] = [
            ("d", real("d", fan, {"python": noop})),
            ("d_floor", lambda: journal_floor(fan, counts["d"].events, tmp)),
            ("e", real("e", tiny, {"python": noop})),
            ("e_floor", lambda: journal_floor(tiny, counts["e"].events, tmp)),
            ("c", real("c", layered, {"command": noop})),
            ("c_floor", lambda: journal_floor(layered, counts["c"].events, tmp)),
        ]
        series: dict[str, list[float]] = {key: [] for key, _ in steps}
        for index in range(args.samples):
            for key, step in steps:
                series[key].append(step())
            print(
                f"sample {index + 1}: " + "  ".join(f"{k} {v[-1] * 1000:.1f} ms" for k, v in series.items()), flush=True
            )
        where = store_place(tmp)
        phases = phase_runs(service, fan, {"python": noop}, args.phases) if args.phases else ""
        layered_phases = phase_runs(service, layered, {"command": noop}, args.phases) if args.phases else ""
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(profile_runs, service, fan, {"python": noop}, args.profile)
    m = {k: statistics.median(v) for k, v in series.items()}
    rows = [
        (f"(d) fan 1->{args.width}->1 read-only no-op, conc. {args.concurrency or args.width}", "d"),
        ("(c) graph 750/7500 no-op", "c"),
    ]
    print(f"\nmedian of {args.samples} samples; store and floors on {where}")
    print(
        f"{'workload':46} {'run s':>8} {'(min-max)':>13} {'floor s':>8} {'ratio':>7}  {'goal':11} {'verdict':8}"
        f" {'events':>7} {'fsyncs':>6}"
    )
    for name, key in rows:
        run, floor = m[key], m[f"{key}_floor"]
        rng = f"{min(series[key]):.3f}-{max(series[key]):.3f}"
        verdict = "met" if run <= 2 * floor else "NOT met"
        print(
            f"{name:46} {run:8.3f} {rng:>13} {floor:8.3f} {run / floor:6.2f}x  {'<= 2x floor':11} {verdict:8}"
            f" {counts[key].events:7d} {fsyncs[key]:6d}"
        )
    print("floor: asyncio loop over the same graph and concurrency, same lines, one fsync per tick")
    per_node, floor_per_node = ((m[k] - m[f"e{k[1:]}"]) / max(args.width - 2, 1) * 1e6 for k in ("d", "d_floor"))
    print(
        f"where (d) goes: a fan 1->2->1 (fixed cost of a run) {m['e'] * 1000:.1f} ms against"
        f" {m['e_floor'] * 1000:.1f} ms; each further node {per_node:.0f} us against {floor_per_node:.0f} us"
    )
    options = f"--samples {args.samples} --width {args.width}" + (
        f" --concurrency {args.concurrency}" if args.concurrency else ""
    )
    print(f"rerun: cd {REPO} && PYTHONPATH={REPO} {sys.executable} bench/fan_overhead.py {options}")
    if phases:
        print(f"\nphases of {args.phases} runs of (d) (wall time inside each; rows nest, see bench/run_phases.py):")
        print(phases)
        print(f"\nphases of {args.phases} runs of (c) (one node per scheduler turn: each turn fsyncs):")
        print(layered_phases)
    if args.profile:
        print(f"\nprofile of {args.profile} runs of (d) (create_run + execute_run):")
        stats = pstats.Stats(profile)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(40)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
