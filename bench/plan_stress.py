"""Validate + plan of the 750-node / 7,500-edge stress case, end to end (worker start-up included).

    python bench/plan_stress.py [--samples 5]

Prints the median of the samples for validate, plan, and validate + plan, the planning worker's
peak address space and this process's peak RSS. Goal: validate + plan under 1.0 s on 2 cores.
Baseline in the same run: evaluating the same source with starlark-pyo3 directly, in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.limit_corpus import graph_case, write_case  # noqa: E402
from rho_notebook.service import Service  # noqa: E402
from rho_notebook.source.workspace import Workspace  # noqa: E402
from rho_notebook.store.layout import StoreLayout  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    case = graph_case(750, 7500)
    validate_s, plan_s, both_s, worker_vm = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        entry = write_case(case, root)
        service = Service(layout=StoreLayout(home=Path(tmp) / "home"))
        workspace = Workspace(root=root.resolve())
        for _ in range(args.samples):
            request = service.request_for(entry, inputs={}, workspace=workspace)
            t0 = time.perf_counter()
            asyncio.run(service.validate(request))
            t1 = time.perf_counter()
            plan = asyncio.run(service.plan(request))
            t2 = time.perf_counter()
            validate_s.append(t1 - t0)
            plan_s.append(t2 - t1)
            both_s.append(t2 - t0)
            worker_vm.append(plan.manifest.stats["peak_address_space_bytes"])
            assert len(plan.graph.nodes) == 750 and plan.graph.edge_count() == 7500
    baseline = []
    import starlark as sl

    source = case.files["wf.star"].replace("command(", "dict(").replace("workflow(", "dict(")
    source = source.replace("WORKFLOW = define(", "WORKFLOW = dict(").replace(
        '"count": input.integer(default = 750)', '"count": 750'
    )
    for _ in range(args.samples):
        t0 = time.perf_counter()
        module = sl.Module()
        sl.eval(module, sl.parse("wf.star", source), sl.Globals.standard())
        module.freeze().call("build", {"count": 750})
        baseline.append(time.perf_counter() - t0)
    median = statistics.median
    print(f"samples                       {args.samples}")
    print(f"validate          median      {median(validate_s) * 1000:8.1f} ms")
    print(f"plan (stored)     median      {median(plan_s) * 1000:8.1f} ms")
    print(f"validate + plan   median      {median(both_s) * 1000:8.1f} ms   (goal < 1000 ms)")
    print(f"starlark eval alone (in-process baseline) {median(baseline) * 1000:8.1f} ms")
    print(f"worker peak address space     {max(worker_vm) / 2**20:8.1f} MiB")
    print(f"caller peak RSS               {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:8.1f} MiB")
    return 0 if median(both_s) < 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
