"""Runner overhead per workload against a floor measured in the same process and run.

    PYTHONPATH=. python bench/run_overhead.py [--samples 5]

The store and the floors' journal live in a temporary directory: set TMPDIR to measure another
filesystem (directory creation and fsync costs differ a lot between volumes; on the development
VM a mkdir took 25 us under /root and up to 400 us under /tmp, same ext4 device).

Workloads (planning is done once up front and never timed; "run" = ``create_run`` + ``execute``
in-process through the service API, with the durable journal on the temporary directory's
filesystem, which is printed):

(a) a 100-node chain of ``true`` commands (node i needs node i-1).
    Floor: ``subprocess.run(["/bin/true"])`` 100 times in order. Goal: <= 2.0 ms per node.
(b) the 750-node / 7,500-edge layered graph of ``true`` (``bench.limit_corpus.graph_case``;
    every node needs its predecessor, so it runs serially although concurrency is 2).
    Floor: ``subprocess.run(["/bin/true"])`` 750 times in order. Goal: < 1.5 s.
(c) the same graph with every command replaced by an in-process no-op executor
    (``execute_run(..., executors={"command": NoopExecutor()})``). Floor: a bare asyncio loop
    that walks the same graph in topological order with concurrency 2 (no-op tasks), appends one
    JSON line per state change -- as many lines as the real run journaled -- and fsyncs once per
    loop tick. Goal: <= 2x floor.

Each figure is the median of ``--samples`` samples; real runs and floors are interleaved. The
events in each run's events.jsonl and its node launches are reported (the writer's fsync count is
not reachable from outside). Exit status 0 unless a run does not succeed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.limit_corpus import graph_case, write_case  # noqa: E402
from rho_notebook.exec.base import AttemptContext, AttemptResult, Executor  # noqa: E402
from rho_notebook.model.plan import Plan  # noqa: E402
from rho_notebook.model.state import NodeState  # noqa: E402
from rho_notebook.runtime.owner import create_run, execute_run  # noqa: E402
from rho_notebook.service import Service  # noqa: E402
from rho_notebook.source.workspace import Workspace  # noqa: E402
from rho_notebook.store.journal import read_journal  # noqa: E402
from rho_notebook.store.layout import StoreLayout  # noqa: E402

CHAIN = 100


class NoopExecutor:
    """Succeeds at once without a process (measures the runner alone)."""

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        await asyncio.sleep(0)
        return AttemptResult(state=NodeState.SUCCESS)


@dataclass
class RunFigures:
    seconds: float
    events: int
    launches: int
    journal: list[dict[str, Any]]
    """The run's records, as read back from its journal."""


def chain_source(count: int) -> str:
    return f"""
def build(inputs):
    nodes = []
    for i in range({count}):
        nodes.append(command(name = "c" + str(1000 + i), argv = ["true"], needs = ["c" + str(999 + i)] if i else [],
                             timeout_seconds = 60, max_output_bytes = 1024))
    return workflow(name = "chain", nodes = nodes)

WORKFLOW = define(inputs = {{}}, build = build)
"""


def make_plan(service: Service, root: Path, files: Mapping[str, str]) -> Plan:
    (root / ".rho").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    request = service.request_for(root / "wf.star", inputs={}, workspace=Workspace(root=root.resolve()))
    return asyncio.run(service.plan(request))


def run_once(service: Service, plan: Plan, executors: Mapping[str, Executor] | None = None) -> RunFigures:
    began = time.perf_counter()
    run_id = create_run(service.layout, plan)
    state = asyncio.run(execute_run(service.layout, run_id, resume=False, executors=executors))
    seconds = time.perf_counter() - began
    bad = [name for name, record in state.nodes.items() if record.state is not NodeState.SUCCESS]
    if state.outcome != "success" or bad:
        raise SystemExit(f"run {run_id} ended {state.outcome} (not successful: {bad[:5]})")
    events = read_journal(service.layout.run_dir(run_id) / "events.jsonl").events
    return RunFigures(seconds, len(events), sum(1 for e in events if e["kind"] == "node_launched"), events)


def true_floor(count: int) -> float:
    began = time.perf_counter()
    for _ in range(count):
        subprocess.run(["/bin/true"], check=True)
    return time.perf_counter() - began


async def _journal_loop(needs: Mapping[str, tuple[str, ...]], lines: int, path: Path, concurrency: int) -> None:
    children: dict[str, list[str]] = {name: [] for name in needs}
    waiting = {name: len(deps) for name, deps in needs.items()}
    for name, deps in needs.items():
        for dep in deps:
            children[dep].append(name)
    extra = lines - 3 * len(needs)  # ready + launched + finished per node; the rest are run-level
    if extra < 0:
        raise SystemExit(f"floor: the real run journaled {lines} lines, fewer than 3 per node")
    out: list[dict[str, object]] = [{"kind": "run", "n": i} for i in range(extra)]
    ready = deque(sorted(name for name, count in waiting.items() if count == 0))
    out += [{"kind": "node_ready", "node": name} for name in ready]
    running: set[asyncio.Task[str]] = set()

    async def noop(name: str) -> str:
        await asyncio.sleep(0)
        return name

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    written = 0
    try:
        while ready or running:
            while ready and len(running) < concurrency:
                name = ready.popleft()
                out.append({"kind": "node_launched", "node": name})
                running.add(asyncio.ensure_future(noop(name)))
            os.write(fd, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in out).encode())
            os.fsync(fd)
            written += len(out)
            out = []
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                name = task.result()
                out.append({"kind": "node_finished", "node": name})
                for child in children[name]:
                    waiting[child] -= 1
                    if waiting[child] == 0:
                        ready.append(child)
                        out.append({"kind": "node_ready", "node": child})
        os.write(fd, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in out).encode())
        os.fsync(fd)
        written += len(out)
    finally:
        os.close(fd)
    if written != lines:
        raise SystemExit(f"floor wrote {written} lines, expected {lines}")


def journal_floor(plan: Plan, lines: int, folder: Path) -> float:
    needs = {node.name: tuple(node.needs) for node in plan.graph.nodes}
    path = folder / f"floor-{time.monotonic_ns()}.jsonl"
    began = time.perf_counter()
    asyncio.run(_journal_loop(needs, lines, path, plan.graph.scheduler.total))
    return time.perf_counter() - began


def fs_type(path: Path) -> str:
    best, kind = "", "?"
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _, point, fstype = line.split()[:3]
            if str(path).startswith(point) and len(point) > len(best):
                best, kind = point, fstype
    return f"{kind} (mounted at {best})"


def file_creation_us(folder: Path, count: int = 50) -> float:
    """Median microseconds to create an empty file in a new subfolder of ``folder`` (the files stay).

    A run creates files (its folder, snapshots, attempt folders and their copies) where its floors
    create none, so what a creation costs at the moment moves the ratios. On ext4 without a journal
    it grows with the inodes deleted in the same block group in the last minutes, which the
    kernel's allocator walks past one by one: on the development VM 30 us in a quiet folder and
    0.3-1.3 ms in a ``/tmp`` that tests and benches had just filled and emptied."""
    place = folder / f"creation-probe-{time.monotonic_ns()}"
    place.mkdir()
    spent: list[float] = []
    for index in range(count):
        began = time.perf_counter()
        fd = os.open(place / f"f{index}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        spent.append(time.perf_counter() - began)
        os.close(fd)
    return statistics.median(spent) * 1e6


def store_place(path: Path) -> str:
    """Where a bench's store lives: its file system, and what creating a file there costs now."""
    return f"{fs_type(path)}; an empty file created there in {file_creation_us(path):.0f} us (median of 50)"


def spread(values: list[float], scale: float) -> str:
    return f"{min(values) * scale:.2f}-{max(values) * scale:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rho-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        service = Service(layout=StoreLayout(home=tmp / "home"))
        chain = make_plan(service, tmp / "chain", {"wf.star": chain_source(CHAIN)})
        case = graph_case()
        write_case(case, tmp / "graph")
        graph = make_plan(service, tmp / "graph", case.files)
        assert len(graph.graph.nodes) == 750 and graph.graph.edge_count() == 7500
        noop: dict[str, Executor] = {"command": NoopExecutor()}
        series: dict[str, list[float]] = {k: [] for k in ("a", "a_floor", "b", "b_floor", "c", "c_floor")}
        counts: dict[str, RunFigures] = {}

        def real(key: str, plan: Plan, executors: Mapping[str, Executor] | None = None) -> Callable[[], float]:
            def step() -> float:
                counts[key] = run_once(service, plan, executors)
                return counts[key].seconds

            return step

        steps: list[tuple[str, Callable[[], float]]] = [
            ("a", real("a", chain)),
            ("a_floor", lambda: true_floor(CHAIN)),
            ("b", real("b", graph)),
            ("b_floor", lambda: true_floor(len(graph.graph.nodes))),
            ("c", real("c", graph, noop)),
            ("c_floor", lambda: journal_floor(graph, counts["c"].events, tmp)),
        ]
        for index in range(args.samples):
            for key, step in steps:
                series[key].append(step())
            print(
                f"sample {index + 1}: " + "  ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in series.items()), flush=True
            )
        where = store_place(tmp)
    m = {k: statistics.median(v) for k, v in series.items()}
    per_node_a, per_node_floor = m["a"] * 1000 / CHAIN, m["a_floor"] * 1000 / CHAIN

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    rows = [
        (
            "(a) chain 100 x true, ms/node",
            per_node_a,
            per_node_floor,
            spread(series["a"], 1000 / CHAIN),
            "<= 2.0 ms/node",
            verdict(per_node_a <= 2.0),
            counts["a"],
        ),
        (
            "(b) graph 750/7500 x true, s",
            m["b"],
            m["b_floor"],
            spread(series["b"], 1),
            "< 1.5 s",
            verdict(m["b"] < 1.5),
            counts["b"],
        ),
        (
            "(c) graph 750/7500 no-op, s",
            m["c"],
            m["c_floor"],
            spread(series["c"], 1),
            "<= 2x floor",
            verdict(m["c"] <= 2 * m["c_floor"]),
            counts["c"],
        ),
    ]
    print(f"\nmedian of {args.samples} samples; store and floors on {where}")
    print(
        f"{'workload':31} {'run':>8} {'(min-max)':>11} {'floor':>8} {'ratio':>7}  {'goal':15} {'verdict':8} {'events':>7} {'launches':>8}"
    )
    for name, value, floor, rng, goal, ok, figures in rows:
        print(
            f"{name:31} {value:8.3f} {rng:>11} {floor:8.3f} {value / floor:6.2f}x  {goal:15} {ok:8} {figures.events:7d} {figures.launches:8d}"
        )
    print("floors: (a), (b) subprocess.run(['/bin/true']) in order; (c) asyncio loop, same lines, one fsync per tick")
    print(f"rerun: cd {REPO} && PYTHONPATH={REPO} {sys.executable} bench/run_overhead.py --samples {args.samples}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
