"""Validate + plan of the 750-node / 7,500-edge case: warm worker, fresh worker, and the floor.

    PYTHONPATH=. python bench/plan_warm.py [--samples 9] [--profile]

One sample of each, interleaved (the order rotates from sample to sample), in one process:

- floor: the in-process starlark-pyo3 evaluation of the same source (the constructors replaced by
  ``dict``, as bench/plan_stress.py does), build's result converted to Python;
- warm: ``validate`` then ``plan`` (stored) with the warm planning worker on
  (:func:`rho_notebook.service.planning.use_warm_planner`), as a kernel, the jupyter server or
  the MCP server plans; the worker has served a plan before the first sample;
- cold: the same with a fresh worker per call, as the CLI plans (the CLI's own start-up is not
  counted here: bench/compare_trees.py and the CLI start figures cover it).

Before every warm and cold sample the entry's text changes (a comment with the sample's number at
its end: the same graph), as after an edit in a notebook: ``validate`` evaluates it, and the warm
process's ``plan`` may reuse that evaluation (:mod:`rho_notebook.source.evaluate` keeps it after
checking every source again) but not one kept from an earlier sample. With the evaluation it
reuses the validation's command nodes and canonical bytes where freezing again (every program
resolved and hashed anew) gives the same nodes (:func:`rho_notebook.planning.starlark_nodes.freeze_nodes`).

Goals (issue 31): warm <= 3x the floor, cold <= 12x. The table gives the median and the minimum of
each and the ratio of the medians; then where one warm ``validate`` spends its time (medians of
the same samples): the worker's own evaluation (its ``wall_ms``), the rest of the worker round
trip (frames, JSON), the graph rules, freezing the nodes, the canonical bytes and digest, the
authority list and the rest of sealing. ``--profile`` adds a cProfile of the warm calls (the
event loop's thread; the node freezing runs in a worker thread and shows as waiting) and one of
the worker's evaluation, run in this process (:func:`worker_profile`: the same code, without the
process and its pipes).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import starlark as sl  # noqa: E402

import rho_notebook.planning.plan as starlark_form  # noqa: E402
import rho_notebook.planning.seal as seal  # noqa: E402
import rho_notebook.source.warm as warm_module  # noqa: E402
from bench.limit_corpus import graph_case, write_case  # noqa: E402
from rho_notebook.model.plan import Plan  # noqa: E402
from rho_notebook.service import Service  # noqa: E402
from rho_notebook.service.planning import use_warm_planner  # noqa: E402
from rho_notebook.source._starlark.channel import Channel  # noqa: E402 - the worker's channel, run in-process
from rho_notebook.source.workspace import Workspace  # noqa: E402
from rho_notebook.store.layout import StoreLayout  # noqa: E402
from rho_notebook.store.plans import PlanStore  # noqa: E402

PHASES: dict[str, list[float]] = {}
WARM_GOAL, COLD_GOAL = 3.0, 12.0


def timed(owner: Any, name: str, phase: str) -> None:
    """Record the wall time of every call of ``owner.name`` under ``phase`` (sync or async)."""
    inner = getattr(owner, name)
    if asyncio.iscoroutinefunction(inner):

        async def outer_async(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await inner(*args, **kwargs)
            finally:
                PHASES.setdefault(phase, []).append(time.perf_counter() - started)

        setattr(owner, name, outer_async)
        return

    def outer(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            PHASES.setdefault(phase, []).append(time.perf_counter() - started)

    setattr(owner, name, outer)


def floor_source(text: str) -> str:
    """The case's source with the workflow builtins replaced by plain dicts (plan_stress.py's floor)."""
    text = (
        text.replace("command(", "dict(")
        .replace("workflow(", "dict(")
        .replace("WORKFLOW = define(", "WORKFLOW = dict(")
    )
    return text.replace('"count": input.integer(default = 750)', '"count": 750')


def floor_once(source: str) -> float:
    started = time.perf_counter()
    module = sl.Module()
    sl.eval(module, sl.parse("wf.star", source), sl.Globals.standard())
    graph: Any = module.freeze().call("build", {"count": 750})
    elapsed = time.perf_counter() - started
    if len(graph["nodes"]) != 750:
        raise SystemExit("the floor did not build 750 nodes")
    return elapsed


def validate_and_plan(service: Service, request: Any) -> tuple[float, Plan, Plan]:
    """Validate then plan in one event loop; the seconds it took and both plans.

    The coroutine keeps the plans aside instead of returning them: on Python 3.11 ``asyncio.run``
    formats its task's result when it restores the SIGINT handler (``signal._int_to_enum`` builds
    a ValueError message with the repr of the previous handler, which holds the task), and the
    repr of two 750-node plans costs about 30 ms that no planning step spends.
    """
    plans: list[Plan] = []

    async def both() -> None:
        plans.extend([await service.validate(request), await service.plan(request)])

    started = time.perf_counter()
    asyncio.run(both())
    elapsed = time.perf_counter() - started
    validated, planned = plans
    if len(planned.graph.nodes) != 750 or planned.graph.edge_count() != 7500:
        raise SystemExit("the plan does not have 750 nodes and 7,500 edges")
    return elapsed, validated, planned


def measure(samples: int, profile: cProfile.Profile | None) -> dict[str, list[float]]:
    case = graph_case(750, 7500)
    source = floor_source(case.files["wf.star"])
    figures: dict[str, list[float]] = {"floor": [], "warm": [], "cold": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        entry = write_case(case, root)
        service = Service(layout=StoreLayout(home=Path(tmp) / "home"))
        edits = iter(range(1, 10**6))

        def edited() -> Any:
            """A request for the entry after an edit that changes its text, not its graph."""
            entry.write_text(case.files["wf.star"] + f"\n# sample {next(edits)}\n")
            return service.request_for(entry, inputs={}, workspace=Workspace(root=root.resolve()))

        def warm() -> None:
            request = edited()
            if profile is not None:
                profile.enable()
            PHASES.clear()
            elapsed, validated, _ = validate_and_plan(service, request)
            if profile is not None:
                profile.disable()
            figures["warm"].append(elapsed)
            PHASES.setdefault("worker wall_ms", []).append(validated.manifest.stats["wall_ms"] / 1000)
            for phase, values in PHASES.items():
                figures.setdefault(f"phase {phase}", []).append(values[0])

        def cold() -> None:
            request = edited()
            kept = warm_module.warm_pool()  # set aside, not closed: its worker stays warm
            warm_module._pool = None
            try:
                figures["cold"].append(validate_and_plan(service, request)[0])
            finally:
                warm_module._pool = kept

        def floor() -> None:
            figures["floor"].append(floor_once(source))

        use_warm_planner()
        validate_and_plan(service, edited())  # the warm worker has served a plan before
        order: list[Callable[[], None]] = [floor, warm, cold]
        for sample in range(samples):
            for run in order[sample % 3 :] + order[: sample % 3]:
                run()
        use_warm_planner(False)
    return figures


def report(figures: dict[str, list[float]], samples: int) -> int:
    median = statistics.median
    floor = median(figures["floor"])
    print(f"validate + plan, 750 nodes / 7,500 edges: {samples} interleaved samples (medians, ms)")
    print(f"{'':44}{'median':>9}{'min':>9}{'ratio':>8}  goal")
    rows = [
        ("floor: starlark-pyo3 eval in-process", "floor", ""),
        ("warm: kept worker (kernel, server, MCP)", "warm", f"<= {WARM_GOAL:g}x"),
        ("cold: fresh worker per call (CLI)", "cold", f"<= {COLD_GOAL:g}x"),
    ]
    for label, key, goal in rows:
        values = figures[key]
        print(f"{label:44}{median(values) * 1000:9.1f}{min(values) * 1000:9.1f}{median(values) / floor:7.1f}x  {goal}")
    print("\nwhere one warm validate spends its time (median ms):")
    phase = {key[len("phase ") :]: median(values) * 1000 for key, values in figures.items() if key.startswith("phase ")}
    worker = phase["worker wall_ms"]
    breakdown = [
        ("evaluation in the worker (its wall_ms)", worker),
        ("worker round trip beyond it (frames, JSON)", phase["evaluate"] - worker),
        ("graph rules (drafts_of, check_graph)", phase["graph rules"]),
        ("freezing the nodes (resolve, node models)", phase["freeze nodes"]),
        ("canonical bytes (model.canonical) + digest", phase["canonical bytes"]),
        ("authority list", phase["authority"]),
        ("rest of sealing (manifest, plan model)", phase["seal"] - phase["canonical bytes"] - phase["authority"]),
    ]
    for label, value in breakdown:
        print(f"  {label:46}{value:8.1f}")
    print(f"  {'validate in all':46}{phase['validate']:8.1f}")
    print(f"  {'plan in all (kept work checked, then stored)':46}{phase['plan']:8.1f}")
    print(f"  {'of which storing (store.plans.save_once)':46}{phase['store']:8.1f}")
    warm_ok = median(figures["warm"]) <= WARM_GOAL * floor
    cold_ok = median(figures["cold"]) <= COLD_GOAL * floor
    return 0 if warm_ok and cold_ok else 1


class _InProcessParent(Channel):
    """The parent's side of the worker's channel, in this process: build() gets the case's inputs.
    A Channel without its descriptors (its ``__init__`` would move this process's stdout)."""

    def __init__(self) -> None:  # Channel.__init__ deliberately not called
        self.last: Any = None

    def send(self, message: dict[str, Any]) -> None:
        self.last = message

    def send_text(self, text: str) -> None:
        self.last = text

    def receive(self) -> dict[str, Any]:
        return {"op": "inputs", "values": {"count": 750}}


def worker_profile(samples: int) -> str:
    """A cProfile of the worker's evaluation of the case (``serve`` in this process), by own time,
    after the median of its in-process evaluation."""
    from rho_notebook.source._starlark import serve  # the worker's code, imported here only
    from rho_notebook.source.limits import load_limits

    text = graph_case(750, 7500).files["wf.star"]
    request = {"op": "evaluate", "entry": "//wf.star", "text": text, "limits": load_limits().worker_limits()}
    times, profile = [], cProfile.Profile()
    for sample in range(2 * samples + 1):  # one to warm up, then timed ones, then profiled ones
        parent = _InProcessParent()
        started = time.perf_counter()
        profile.runcall(serve.serve, parent, request) if sample > samples else serve.serve(parent, request)
        times.append(time.perf_counter() - started)
        if not isinstance(parent.last, str):  # a graph answers as one JSON text
            raise SystemExit(f"the worker did not answer a graph: {parent.last}")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(15)
    median = statistics.median(times[1 : samples + 1]) * 1000
    return f"in-process evaluation (median of {samples}, unprofiled): {median:.1f} ms\n{out.getvalue()}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the warm calls")
    args = parser.parse_args()
    timed(starlark_form, "evaluate_source", "evaluate")
    timed(starlark_form, "_checked_drafts", "graph rules")
    timed(starlark_form, "freeze_nodes", "freeze nodes")
    timed(seal, "graph_bytes", "canonical bytes")
    timed(seal, "authority_of", "authority")
    timed(seal, "seal", "seal")
    timed(Service, "validate", "validate")
    timed(Service, "plan", "plan")
    timed(PlanStore, "save_once", "store")
    profile = cProfile.Profile() if args.profile else None
    figures = measure(args.samples, profile)
    status = report(figures, args.samples)
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
        print("\ncProfile of the warm samples (event loop thread, by own time):")
        print(out.getvalue())
        print("cProfile of the worker's evaluation (in this process, by own time):")
        print(worker_profile(args.samples))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
