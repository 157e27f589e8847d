"""The run benchmarks of two checkouts, interleaved in one measurement run: is one slower?

    python bench/compare_trees.py --base /tmp/base [--head .] [--samples 5] [--inner 1] [--bench NAME ...]

``--base`` is a second worktree (``git worktree add /tmp/base main``). Each sample runs each of
bench/run_overhead.py, script_overhead.py, fan_overhead.py, item_graph.py, reuse.py and
python_nodes.py once
(``--samples`` ``--inner``, default 1: the bench's own first sample is used, or the median of its
``--inner`` samples for the fan, whose runs last milliseconds) in each tree, alternating which tree
goes first, with the interpreter running this script and the tree on PYTHONPATH. Each bench's figures are ratios against a baseline it measures in the same
process (a ``/bin/true`` floor, a command node, one Python launch), so machine noise that hits
both cancels; the table compares each ratio's median in head with its median in base, and the
exit status is 1 when any is more than ``--tolerance`` (default 5 %) worse.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

Figures = dict[str, float]
NUMBER = r"([0-9]+(?:\.[0-9]+)?)"


def sample_line(text: str) -> Figures:
    """``sample 1: key value [ms]  key value ...`` as a dict."""
    line = next(line for line in text.splitlines() if line.startswith("sample 1:"))
    return {key: float(value) for key, value in re.findall(r"([a-z_]+) " + NUMBER, line.split(":", 1)[1])}


def sample_medians(text: str) -> Figures:
    """The median of each key over every ``sample N:`` line."""
    lines = [line.split(":", 1)[1] for line in text.splitlines() if re.match(r"sample [0-9]+:", line)]
    series: dict[str, list[float]] = {}
    for line in lines:
        for key, value in re.findall(r"([a-z_]+) " + NUMBER, line):
            series.setdefault(key, []).append(float(value))
    return {key: statistics.median(values) for key, values in series.items()}


def labelled(text: str, labels: dict[str, str]) -> Figures:
    """The first number after each label (a regex) in ``text``."""
    found = {}
    for key, label in labels.items():
        match = re.search(label + r"\s+" + NUMBER, text)
        if match is None:
            msg = f"no {label!r} in:\n{text}"
            raise SystemExit(msg)
        found[key] = float(match.group(1))
    return found


def run_overhead(text: str) -> Figures:
    f = sample_line(text)
    return {
        "chain/true": f["a"] / f["a_floor"],
        "graph/true": f["b"] / f["b_floor"],
        "noop/journal": f["c"] / f["c_floor"],
    }


def script_overhead(text: str) -> Figures:
    f = sample_line(text)
    return {
        "script step/true": f["script_wall"] / f["floor"],
        "replayed/executed": f["replay_span"] / f["script_span"],
        "graph node/true": f["graph_wall"] / f["floor"],
    }


def fan_overhead(text: str) -> Figures:
    f = sample_medians(text)
    return {"fan/floor": f["d"] / f["d_floor"], "layered/floor": f["c"] / f["c_floor"]}


def item_graph(text: str) -> Figures:
    f = labelled(
        text, {"command": r"command node \(true\)", "set": r"set step \(inline\)", "code": r"code step \(worker\)"}
    )
    return {"set/command": f["set"] / f["command"], "code/command": f["code"] / f["command"]}


def reuse(text: str) -> Figures:
    f = labelled(
        text,
        {
            "launch": r"one Python node launch \(run\)",
            "run1": r"first run: run \([0-9]+ launches\)",
            "plan2": r"second run: plan \(leaf edited\)",
            "run2": r"second run: run \(1 launch\)",
        },
    )
    return {"first run/launch": f["run1"] / f["launch"], "reused run/launch": f["run2"] / f["launch"]}


def python_nodes(text: str) -> Figures:
    f = sample_line(text)
    return {"python node/command node": f["python"] / f["command"]}


BENCHES: dict[str, Callable[[str], Figures]] = {
    "run_overhead": run_overhead,
    "script_overhead": script_overhead,
    "fan_overhead": fan_overhead,
    "item_graph": item_graph,
    "reuse": reuse,
    "python_nodes": python_nodes,
}


def measure(tree: Path, bench: str, inner: int) -> Figures:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    samples = str(inner if bench == "fan_overhead" else 1)
    done = subprocess.run(
        [sys.executable, str(tree / "bench" / f"{bench}.py"), "--samples", samples],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode not in (0, 1):  # 1: a bench's own goal not met, still a measurement
        msg = f"{tree}/bench/{bench}.py exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        raise SystemExit(msg)
    return BENCHES[bench](done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--head", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--inner", type=int, default=1, help="samples per run of fan_overhead.py (their median)")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--bench", action="append", choices=sorted(BENCHES), help="only these (repeatable)")
    args = parser.parse_args()
    benches = args.bench or list(BENCHES)
    trees = {"base": args.base.resolve(), "head": args.head.resolve()}
    series: dict[tuple[str, str, str], list[float]] = {}
    for index in range(args.samples):
        order = ["base", "head"] if index % 2 == 0 else ["head", "base"]
        for bench in benches:
            for side in order:
                for key, value in measure(trees[side], bench, args.inner).items():
                    series.setdefault((bench, key, side), []).append(value)
        print(f"sample {index + 1}/{args.samples} done", flush=True)
    worse = 0
    print(f"\nmedian of {args.samples} interleaved samples; base {trees['base']}, head {trees['head']}")
    print(f"{'bench':16} {'ratio':20} {'base':>8} {'head':>8} {'head/base':>10}")
    for bench, key, side in series:
        if side != "base":
            continue
        base = statistics.median(series[(bench, key, "base")])
        head = statistics.median(series[(bench, key, "head")])
        change = head / base
        flag = "" if change <= 1 + args.tolerance else f"  worse than {args.tolerance:.0%}"
        worse += bool(flag)
        print(f"{bench:16} {key:20} {base:8.3f} {head:8.3f} {change:10.3f}{flag}")
    return 1 if worse else 0


if __name__ == "__main__":
    raise SystemExit(main())
