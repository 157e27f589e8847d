"""A chain of Python nodes against a chain of ``true`` command nodes, in the same store and run.

    PYTHONPATH=. python bench/python_nodes.py [--samples 9] [--budget 5]

Workloads (planned once up front, never timed; "run" = ``create_run`` + ``execute_run``
in-process, with the durable journal on the temporary directory's filesystem, which is printed):

(a) floor: a 100-node chain of ``command(argv = ["true"])`` nodes (node i needs node i-1).
(b) a 100-node chain of Python nodes: ``step(i, prev)`` of one module, ``prev`` the predecessor's
    output, an integer output schema; the executor's default path (the run's fork server, started
    at the run's first Python node, so its start counts).
(c) the same chain with the fork server turned off (``PythonExecutor(fork_server=False)``): a fresh
    interpreter per node, as before issue 31 item 3.
(d) (b) with every ``value.json`` written durably before the node ends
    (``PythonExecutor(journal_values=False)``), as before small values were journaled with
    ``node_finished``: what that saves, in the same run.

Goal (issue 31, item 3): (b) <= 3x (a) per node. Each figure is the median of ``--samples``
samples; the workloads are interleaved within each sample, and the median of the per-sample
ratios (b)/(a) is printed as well (steadier on a shared machine). ``--budget N`` then runs (a) and
(b) N more times each, alternated, and prints where a node's wall time goes in processor time
(bench/cpu_budget.py): the run's event loop, the owner's other threads (its writer), the child
processes (the fork server and its attempts, or the ``true`` processes), the loop's wait for a
processor, and how many processors all of them kept busy. ``--ends N`` runs N chains of Python
nodes whose function returns the time, and prints where each forked attempt's end waits, from the
function's return to the owner knowing the attempt is over (bench/attempt_ends.py). Exit status 0
when the goal is met and every run succeeds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.attempt_ends import ENDS_STEP, EndStamps, watched_ends  # noqa: E402
from bench.cpu_budget import HEADER, CpuBudget, row  # noqa: E402
from bench.run_overhead import chain_source, make_plan, run_once, spread, store_place  # noqa: E402
from rho_notebook.exec.base import Executor  # noqa: E402
from rho_notebook.exec.python import PythonExecutor  # noqa: E402
from rho_notebook.model.plan import Plan  # noqa: E402
from rho_notebook.service import Service  # noqa: E402
from rho_notebook.store.layout import StoreLayout  # noqa: E402

CHAIN = 100
GOAL = 3.0

STEP = """\
def step(i, prev):
    return (prev or 0) + i
"""


def python_chain(count: int) -> str:
    return f"""
def build(inputs):
    nodes = []
    for i in range({count}):
        name = "p" + str(1000 + i)
        before = "p" + str(999 + i)
        nodes.append(python(
            name = name, module = "//nodes/step.py", function = "step",
            args = {{"i": i, "prev": output(before) if i else None}},
            output = schema.integer(), needs = [before] if i else [],
            timeout_seconds = 60, max_output_bytes = 1024,
        ))
    return workflow(name = "pychain", nodes = nodes)

WORKFLOW = define(inputs = {{}}, build = build)
"""


def attempt_ends(service: Service, plan: Plan, runs: int) -> EndStamps:
    """Where the end of each forked attempt of ``runs`` runs of ``plan`` waits (bench/attempt_ends.py)."""
    with watched_ends() as stamps:
        for _ in range(runs):
            stamps.take_run(run_once(service, plan).journal)
    return stamps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--budget", type=int, default=0, help="runs of (a) and (b) to split into processor time")
    parser.add_argument(
        "--ends", type=int, default=0, help="runs of a chain that stamps where each attempt's end waits"
    )
    args = parser.parse_args()
    budgets: dict[str, list[CpuBudget]] = {"command": [], "python": []}
    with tempfile.TemporaryDirectory(prefix="rho-pynodes-") as tmp_name:
        tmp = Path(tmp_name)
        service = Service(layout=StoreLayout(home=tmp / "home"))
        commands = make_plan(service, tmp / "cmd", {"wf.star": chain_source(CHAIN)})
        (tmp / "py" / "nodes").mkdir(parents=True)
        (tmp / "py" / "nodes" / "step.py").write_text(STEP)
        pythons = make_plan(service, tmp / "py", {"wf.star": python_chain(CHAIN)})

        def cold() -> dict[str, Executor]:
            return {"python": PythonExecutor(fork_server=False)}

        def durable() -> dict[str, Executor]:
            return {"python": PythonExecutor(journal_values=False)}

        steps: list[tuple[str, Callable[[], float]]] = [
            ("command", lambda: run_once(service, commands).seconds),
            ("python", lambda: run_once(service, pythons).seconds),
            ("python_cold", lambda: run_once(service, pythons, cold()).seconds),
            ("python_durable", lambda: run_once(service, pythons, durable()).seconds),
        ]
        series: dict[str, list[float]] = {key: [] for key, _ in steps}
        for index in range(args.samples):
            for key, step in steps:
                series[key].append(step())
            print(
                f"sample {index + 1}: " + "  ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in series.items()), flush=True
            )
        for _ in range(args.budget):
            for key, plan in (("command", commands), ("python", pythons)):
                with CpuBudget.measure() as budget:
                    run_once(service, plan)
                budgets[key].append(budget)
        ends = None
        if args.ends:
            (tmp / "ends" / "nodes").mkdir(parents=True)
            (tmp / "ends" / "nodes" / "step.py").write_text(ENDS_STEP)
            ends = attempt_ends(service, make_plan(service, tmp / "ends", {"wf.star": python_chain(CHAIN)}), args.ends)
        where = store_place(tmp)
    per_node = {k: statistics.median(v) * 1000 / CHAIN for k, v in series.items()}
    floor = per_node["command"]
    print(f"\nmedian of {args.samples} samples, chains of {CHAIN}; store on {where}")
    print(f"{'workload':40} {'ms/node':>8} {'(min-max)':>11} {'ratio':>7}  goal")
    rows = [
        ("(a) command node of true (floor)", "command", ""),
        ("(b) Python node, fork server", "python", f"<= {GOAL:g}x"),
        ("(c) Python node, fresh interpreter", "python_cold", "(before item 3)"),
        ("(d) (b) with value.json durable", "python_durable", "(values not journaled)"),
    ]
    for label, key, goal in rows:
        ratio = per_node[key] / floor
        print(f"{label:40} {per_node[key]:8.2f} {spread(series[key], 1000 / CHAIN):>11} {ratio:6.2f}x  {goal}")
    paired = statistics.median(p / c for p, c in zip(series["python"], series["command"], strict=True))
    print(f"median of the per-sample ratios (b)/(a), each sample's runs back to back: {paired:.2f}x")
    met = per_node["python"] <= GOAL * floor
    print(f"goal (b) <= {GOAL:g}x (a): {'met' if met else 'NOT met'}")
    if args.budget:
        print(f"\nwhere a node's time goes, median of {args.budget} runs of each (ms per node; bench/cpu_budget.py)")
        print(HEADER)
        print(row("(a) command node of true", budgets["command"], CHAIN))
        print(row("(b) Python node, fork server", budgets["python"], CHAIN))
    if ends is not None:
        print(f"\nwhere a forked attempt's end waits, {args.ends} runs of a chain of {CHAIN} (bench/attempt_ends.py):")
        print(ends.table())
    print(
        f"rerun: cd {REPO} && PYTHONPATH={REPO} {sys.executable} bench/python_nodes.py --samples {args.samples}"
        + (f" --budget {args.budget}" if args.budget else "")
        + (f" --ends {args.ends}" if args.ends else "")
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
