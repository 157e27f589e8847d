"""How long the CLI's read verbs take to start and answer, against an interpreter that does nothing.

    PYTHONPATH=. python bench/cli_start.py [--samples 9] [--tree DIR] [--profile] [--no-bytecode-cache]

``--tree`` measures another checkout (``git worktree add /tmp/base HEAD``; default: this one): the
commands run with it first on PYTHONPATH, with the interpreter running this script.

Bytecode: an installed package has its ``.pyc`` files (pip compiles them), so by default the
measured processes may write and read bytecode under a temporary ``PYTHONPYCACHEPREFIX`` (the
warm-up round writes it; the tree is not touched) even when the environment sets
``PYTHONDONTWRITEBYTECODE``. ``--no-bytecode-cache`` keeps the environment as it is: with
``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` in the tree, every start compiles every module
of ours again (about 40 ms more for ``status``, 150 ms more before issue 31).

Setup (not timed): a temporary workspace and ``RHO_NOTEBOOK_HOME``; the tree's own CLI plans a
workflow of three ``echo`` nodes in a chain and runs it ``--runs`` times (default 20), so ``runs``
lists that many runs and ``status`` reads a finished run of a few nodes.

Each sample runs, in this order and each once, as a fresh process with its output discarded:

- floor: ``python -c pass`` (the same interpreter; the issue's ``python3 -c pass``, without the
  shell shim a version manager may put in front of ``python3``);
- ``python -m rho_notebook runs``, ``status RUN``, ``--help``;
- a reference, not a goal: ``python -c "import pydantic.main"`` -- the model library ``status``
  and ``runs`` no longer import (they read the manifest as JSON and the frozen graph as its
  digest-checked outline: rho_notebook/service/glance.py), which alone is about 6x the floor.

Each figure is the median of ``--samples`` samples (after one untimed warm-up round), and each
ratio is that median over the floor's median from the same run. Goal (issue 31): ``runs`` and
``status`` <= 8x the floor. With ``--profile``, the modules ``status`` still imports that took
longest (``-X importtime``, cumulative; a module imported by :func:`importlib.import_module`, as a
handler or a lazy service part is, is not listed itself, only what it imports), for a missed goal.

Measured on the development VM (2 vCPU, other helpers' test suites running: load average 5-7;
floor 20-26 ms median, 11 ms min), bytecode cached, 15 samples, 20 runs of three nodes; before:
``--tree`` at HEAD 456a0df, the same run; after: this tree:

    command                    before            after
    rho-notebook runs          0.475 s (18.2x)   0.141 s (7.1x)    goal <= 8x met
    rho-notebook status RUN    0.399 s (15.3x)   0.136 s (6.8x)    goal <= 8x met
    rho-notebook --help        0.112 s (4.3x)    0.113 s (5.7x)
    import pydantic.main       0.157 s (6.0x)    0.166 s (8.4x)

A later run, 21 samples, floor 14 ms: runs 0.098 s (6.9x), status 0.096 s (6.7x), ``--help``
0.074 s (5.2x). The ratios move with the load: five runs of this tree at load 3-9 gave 5.9-8.1x
(one at load 3, floor 14 ms, before the run list stopped reading each manifest twice: runs
0.116 s, 8.1x, missed by a hair). ``status`` and ``runs`` build no pydantic
model and start no event loop now. What is left of the ~50 ms ``status`` spends importing
(``-X importtime``, min of 8): the standard library every stage needs (typing, dataclasses and
inspect, logging, pathlib, argparse, re, json, hashlib) ~38 ms, ours ~14 ms (the verbs'
declarations and the flags ~3 ms, the status fold, journal and store readers ~6 ms, the wire
shapes ~3 ms with typing_extensions). Removed from the path: pydantic (~40 ms) and its plugin
scan (~16 ms: not skipped but never reached, as no model is built), the graph, plan, manifest and
approval models (~40 ms), asyncio and ssl (~18 ms, the verbs run synchronously through
rho_notebook/service/glance.py), uuid and platform, and 24 of the 25 verbs' argument
declarations (the parser of the verb that runs is built alone: ~7 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL = 8.0
WORKFLOW = """\
def say(name, needs):
    return command(name = name, argv = ["echo", name], timeout_seconds = 30, max_output_bytes = 1000, needs = needs)

def build(inputs):
    return workflow(name = "start", nodes = [say("one", []), say("two", ["one"]), say("three", ["two"])])

WORKFLOW = define(inputs = {}, build = build)
"""


class Tree:
    """Runs ``python -m rho_notebook ...`` of one checkout over one temporary store."""

    def __init__(self, tree: Path, base: Path, *, bytecode_cache: bool) -> None:
        self.root = base / "ws"
        (self.root / ".rho").mkdir(parents=True)
        self.env = {
            **os.environ,
            "RHO_NOTEBOOK_HOME": str(base / "home"),
            "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        }
        if bytecode_cache:
            self.env.pop("PYTHONDONTWRITEBYTECODE", None)
            self.env["PYTHONPYCACHEPREFIX"] = str(base / "pycache")

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "rho_notebook", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            msg = f"rho-notebook {' '.join(args)} failed ({done.returncode}):\n{done.stderr}"
            raise SystemExit(msg)
        return done.stdout

    def setup(self, runs: int) -> str:
        """Plan the workflow and run it ``runs`` times: the last run's ID."""
        (self.root / "wf.star").write_text(WORKFLOW)
        plan_id = str(json.loads(self.cli("plan", "wf.star", "--output", "json"))["plan_id"])
        run_id = ""
        for _ in range(runs):
            first = self.cli("run", plan_id, "--yes", "--output", "jsonl").splitlines()[0]
            run_id = str(json.loads(first)["run_id"])
        return run_id

    def seconds(self, argv: list[str]) -> float:
        """Wall time of one process, from start to exit."""
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=self.root, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        took = time.perf_counter() - start
        if done.returncode != 0:
            msg = f"{' '.join(argv)} exited {done.returncode}"
            raise SystemExit(msg)
        return took


def commands(run_id: str) -> dict[str, list[str]]:
    python = sys.executable
    return {
        "floor: python -c pass": [python, "-c", "pass"],
        "rho-notebook runs": [python, "-m", "rho_notebook", "runs"],
        "rho-notebook status RUN": [python, "-m", "rho_notebook", "status", run_id],
        "rho-notebook --help": [python, "-m", "rho_notebook", "--help"],
        "reference: import pydantic.main": [python, "-c", "import pydantic.main"],
    }


def profile(tree: Tree, run_id: str, *, top: int = 25) -> None:
    """The slowest imports (cumulative) of one ``status RUN`` under ``-X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rho_notebook", "status", run_id],
        cwd=tree.root,
        env=tree.env,
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.removeprefix("import time:").split("|")
            if cumulative.strip().isdigit():
                rows.append((int(cumulative), name.rstrip()))
    print(f"\n-X importtime of `status RUN` ({len(rows)} modules), slowest {top} by cumulative us:")
    for micros, module in sorted(rows, reverse=True)[:top]:
        print(f"{micros:9d}  {module}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--runs", type=int, default=20, help="runs in the store for `runs` to list")
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout to measure")
    parser.add_argument("--profile", action="store_true", help="print -X importtime of `status RUN`")
    parser.add_argument("--no-bytecode-cache", action="store_true", help="do not let the processes cache bytecode")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rho-cli-start-") as base:
        tree = Tree(args.tree.resolve(), Path(base), bytecode_cache=not args.no_bytecode_cache)
        run_id = tree.setup(args.runs)
        argvs = commands(run_id)
        for argv in argvs.values():  # warm-up: the page cache and the bytecode caches
            tree.seconds(argv)
        times: dict[str, list[float]] = {name: [] for name in argvs}
        for _ in range(args.samples):
            for name, argv in argvs.items():
                times[name].append(tree.seconds(argv))
        medians = {name: statistics.median(values) for name, values in times.items()}
        floor = medians["floor: python -c pass"]
        cache = "no bytecode cache" if args.no_bytecode_cache else "bytecode cached"
        print(f"tree {args.tree.resolve()}; median of {args.samples} interleaved samples; {args.runs} runs; {cache}")
        print(f"{'command':36} {'median s':>9} {'min s':>7} {'x floor':>8}  goal")
        for name, median in medians.items():
            goal = ""
            if name in ("rho-notebook runs", "rho-notebook status RUN"):
                goal = f"<= {GOAL:g}x " + ("met" if median / floor <= GOAL else "MISSED")
            print(f"{name:36} {median:9.3f} {min(times[name]):7.3f} {median / floor:8.1f}  {goal}")
        if args.profile:
            profile(tree, run_id)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
