"""Measure the planning-limit corpus and verify (or rewrite) the checked-in receipt.

    python bench/measure_limits.py            # verify: exit 1 when a measurement lost its margin
    python bench/measure_limits.py --write    # record the corpus measurements in the receipt

Deterministic measurements (counts, bytes, depths, ticks) must equal the receipt exactly. Wall
time and address space vary with the machine: each may be at most twice its recorded baseline and
must leave at least half of the accepted limit free.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.limit_corpus import CASES, Case, write_case  # noqa: E402
from rho_notebook.model.condition import condition_depth  # noqa: E402
from rho_notebook.model.graph import CommandNode  # noqa: E402
from rho_notebook.model.schema import schema_depth  # noqa: E402
from rho_notebook.service import Service  # noqa: E402
from rho_notebook.source.limits import RECEIPT_PATH  # noqa: E402
from rho_notebook.source.workspace import Workspace  # noqa: E402
from rho_notebook.store.layout import StoreLayout  # noqa: E402

VARIABLE = {"evaluator_wall_ms", "evaluator_address_space"}
MIN_FREE_FRACTION = 0.5


def measure(case: Case) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        entry = write_case(case, root)
        service = Service(layout=StoreLayout(home=Path(tmp) / "home"))
        request = service.request_for(entry, inputs=case.inputs, workspace=Workspace(root=root.resolve()))
        plan = asyncio.run(service.plan(request))
    graph, stats = plan.graph, plan.manifest.stats
    argv_bytes = [
        sum(len(p.encode()) for p in n.argv if isinstance(p, str)) for n in graph.nodes if isinstance(n, CommandNode)
    ]
    return {
        "source_bytes": stats["source_bytes"],
        "module_count": stats["modules"],
        "module_depth": stats["module_depth"],
        "evaluator_ticks": stats["ticks"],
        "evaluator_wall_ms": stats["wall_ms"],
        "evaluator_address_space": stats["peak_address_space_bytes"],
        "node_count": len(graph.nodes),
        "edge_count": graph.edge_count(),
        "graph_bytes": stats["graph_bytes"],
        "schema_depth": max((schema_depth(n.output) for n in graph.nodes if n.output), default=0),
        "condition_depth": max((condition_depth(n.when) for n in graph.nodes if n.when), default=0),
        "argv_bytes": max(argv_bytes, default=0),
        "timeout_seconds": max(n.timeout_seconds for n in graph.nodes),
        "max_output_bytes": max(n.max_output_bytes for n in graph.nodes),
        "total_output_bytes": 2 * sum(n.max_output_bytes for n in graph.nodes),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="record the measurements in the receipt")
    args = parser.parse_args()
    receipt: dict[str, Any] = json.loads(RECEIPT_PATH.read_text())
    best: dict[str, tuple[int, str]] = {}
    for case in CASES:
        found = measure(case)
        for key, expected in case.expect.items():
            if found[key] != expected:
                print(f"case {case.name}: {key} measured {found[key]}, the generator promises {expected}")
                return 1
        for budget, value in found.items():
            if value > best.get(budget, (-1, ""))[0]:
                best[budget] = (value, case.name)
    failures = []
    print(f"{'budget':<26}{'measured':>14}{'receipt':>14}{'limit':>16}  free   case")
    for budget, entry in sorted(receipt["budgets"].items()):
        value, case_name = best.get(budget, (0, "floor"))
        limit = entry["limit"]
        free = 1 - value / limit
        print(f"{budget:<26}{value:>14,}{entry['measured']:>14,}{limit:>16,}  {free:5.0%}  {case_name}")
        if value > limit:
            failures.append(f"{budget}: measured {value} exceeds the accepted limit {limit}")
        elif budget in VARIABLE:
            if free < MIN_FREE_FRACTION:
                failures.append(
                    f"{budget}: only {free:.0%} of the limit {limit} is free (need {MIN_FREE_FRACTION:.0%})"
                )
            if not args.write and entry["measured"] and value > 2 * entry["measured"]:
                failures.append(f"{budget}: measured {value} is more than twice the baseline {entry['measured']}")
        elif not args.write and value != entry["measured"]:
            failures.append(
                f"{budget}: measured {value}, the receipt records {entry['measured']} (rerun with --write if the change is intended)"
            )
        if args.write:
            entry["measured"] = value
            entry["case"] = case
    if args.write:
        RECEIPT_PATH.write_text(json.dumps(receipt, indent=2) + "\n")
        print(f"wrote {RECEIPT_PATH}")
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
