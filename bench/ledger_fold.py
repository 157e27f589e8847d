"""What folding the ledger costs a 750-node run (issue 34: "< 5% of a 750-node run's time").

    PYTHONPATH=. python bench/ledger_fold.py [--samples 5] [--calls 2]

The same plan (``bench.limit_corpus.graph_case``: 750 nodes, 7,500 edges) is run in-process
(``create_run`` + ``execute_run``) with every node's command replaced by an executor that makes
``--calls`` model calls through the run's real spend recorder (``ctx.model_calls``:
:class:`~rho_notebook.runtime.spend.AttemptSpend`, which journals each ``model_called`` record
durably) and succeeds without a process: the runs differ in nothing but whether the journal's
``model_called`` records are folded into the run's state (the ledger's fold,
:func:`rho_notebook.model.tally.add_call`), so the ratio is the fold's share and nothing else.
Runs with and without the fold are interleaved; each figure is the median of ``--samples``.
Whole runs are noisy (their journal's fsyncs, the machine's other work), so the fold is also timed
alone on the same run: its journal folded (every record once, as the owner folds it while it runs)
and its snapshot serialised, with and without the ``model_called`` fold; the difference, as a
share of the run's time without the fold, is what the goal is checked against.

It also times reading the finished run as ``status`` does (fold the journal, build the status
JSON) with the ledger (the fold plus the ``usage`` objects ``status_json`` adds for a run that
made calls, :func:`rho_notebook.service.spend_view.add_spend`) and without (the fold off, so no
call is seen and no ledger built).

The driver gives a spend recorder only to the node kinds that call models (agents, item steps);
while the bench runs, its command nodes get one too, made as the driver makes an agent's.

The executor's calls take no time, so the run is as short as a 750-node run can be and the ratio
is the worst case; with real model calls (hundreds of milliseconds each) the fold's share is
smaller by orders of magnitude. Exit status 1 when the fold's share is not below 5%.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.limit_corpus import graph_case, write_case  # noqa: E402
from bench.run_overhead import make_plan  # noqa: E402
from rho_notebook.exec.base import AttemptContext, AttemptResult  # noqa: E402
from rho_notebook.model import run_fold  # noqa: E402
from rho_notebook.model.plan import Plan  # noqa: E402
from rho_notebook.model.run_fold import replay  # noqa: E402
from rho_notebook.model.run_state import NodeRecord, RunState  # noqa: E402
from rho_notebook.model.state import NodeState  # noqa: E402
from rho_notebook.runtime import driver  # noqa: E402
from rho_notebook.runtime.owner import create_run, execute_run  # noqa: E402
from rho_notebook.runtime.spend import AttemptSpend  # noqa: E402
from rho_notebook.runtime.status import load_state  # noqa: E402
from rho_notebook.service import Service  # noqa: E402
from rho_notebook.service.wire import status_json  # noqa: E402
from rho_notebook.store.journal import read_journal  # noqa: E402
from rho_notebook.store.layout import StoreLayout  # noqa: E402

FOLDS = run_fold._FOLDS  # noqa: SLF001 -- the bench switches one fold off and on again
KIND = "model_called"


class CallingExecutor:
    """Makes ``calls`` model calls through the attempt's spend recorder, then succeeds."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        recorder = ctx.model_calls
        if recorder is None:
            raise SystemExit("the driver gave the attempt no spend recorder")
        for _ in range(self.calls):
            await recorder.before_call(max_output_tokens=256)
            call = {"provider": "bench", "model": "m", "input_tokens": 1200, "output_tokens": 80}
            await recorder.after_call({**call, "cached_tokens": 400, "retries": 0, "tool_calls": 1, "seconds": 0.5})
        return AttemptResult(state=NodeState.SUCCESS)


_CONTEXT = driver.RunDriver._context  # noqa: SLF001


def _context_with_spend(
    self: driver.RunDriver, node: Any, number: int, cancel: asyncio.Event, resume_request: str | None
) -> AttemptContext:
    """The driver gives a spend recorder only to the kinds that call models (agents, item steps);
    the bench's command nodes get one too, made as the driver makes an agent's."""
    ctx = _CONTEXT(self, node, number, cancel, resume_request)
    ex = self.execution
    ctx.model_calls = AttemptSpend(
        self.run_id, node.name, number, ex.state, ex.emit, ex.journal.sync, guard=ex.spend_guard
    )
    return ctx


@contextmanager
def spend_for_commands() -> Iterator[None]:
    """Command attempts get a spend recorder while this holds (see :func:`_context_with_spend`)."""
    driver.RunDriver._context = _context_with_spend  # type: ignore[method-assign]  # noqa: SLF001
    try:
        yield
    finally:
        driver.RunDriver._context = _CONTEXT  # type: ignore[method-assign]  # noqa: SLF001


@contextmanager
def fold(enabled: bool) -> Iterator[None]:
    """The ledger's fold on (as shipped) or off (``model_called`` records journaled, not folded)."""
    saved = FOLDS[KIND]
    if not enabled:
        del FOLDS[KIND]
    try:
        yield
    finally:
        FOLDS[KIND] = saved


def run_once(layout: StoreLayout, plan: Plan, calls: int, *, ledger: bool) -> tuple[float, str]:
    with fold(ledger), spend_for_commands():
        began = time.perf_counter()
        run_id = create_run(layout, plan)
        state = asyncio.run(execute_run(layout, run_id, resume=False, executors={"command": CallingExecutor(calls)}))
        seconds = time.perf_counter() - began
    if state.outcome != "success":
        raise SystemExit(f"run {run_id} ended {state.outcome}")
    return seconds, run_id


def fold_once(layout: StoreLayout, run_id: str, *, ledger: bool) -> float:
    """The owner's share of the ledger: fold the run's journal (every record, once, as the owner
    did while it ran) and write its snapshot (``state.json``, which carries each attempt's tally)."""
    events = read_journal(layout.run_dir(run_id) / "events.jsonl").events
    names = list(load_state(layout, run_id).nodes)
    with fold(ledger):
        began = time.perf_counter()
        empty = RunState(
            run_id=run_id, plan_id="", graph_digest="", workflow="", nodes={n: NodeRecord() for n in names}
        )
        state = replay(empty, events)
        if ledger and not any(a.usage for r in state.nodes.values() for a in r.attempts):
            raise SystemExit("the fold folded no model call")
        json.dumps(state.to_json())
        return time.perf_counter() - began


def read_once(layout: StoreLayout, run_id: str, *, ledger: bool) -> float:
    with fold(ledger):
        began = time.perf_counter()
        state = load_state(layout, run_id)
        answer = status_json(state, layout=layout)  # its usage only when the fold kept a call
        seconds = time.perf_counter() - began
    if ledger and not answer.get("usage", {}).get("calls"):
        raise SystemExit("the ledger counted no call")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2, help="model calls per node")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rho-ledger-") as tmp_name:
        tmp = Path(tmp_name)
        service = Service(layout=StoreLayout(home=tmp / "home"))
        case = graph_case()
        write_case(case, tmp / "graph")
        plan = make_plan(service, tmp / "graph", case.files)
        layout = service.layout
        series: dict[str, list[float]] = {
            key: [] for key in ("run_with", "run_without", "fold_with", "fold_without", "read_with", "read_without")
        }
        last_run = ""
        for index in range(args.samples):
            order = (True, False) if index % 2 == 0 else (False, True)  # interleaved, alternating first
            for ledger in order:
                seconds, last_run = run_once(layout, plan, args.calls, ledger=ledger)
                series["run_with" if ledger else "run_without"].append(seconds)
            for ledger in order:
                series["fold_with" if ledger else "fold_without"].append(fold_once(layout, last_run, ledger=ledger))
                series["read_with" if ledger else "read_without"].append(read_once(layout, last_run, ledger=ledger))
            print(f"sample {index + 1}: " + "  ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in series.items()))
    m = {k: statistics.median(v) for k, v in series.items()}
    run_ratio, read_ratio = m["run_with"] / m["run_without"], m["read_with"] / m["read_without"]
    fold_share = (m["fold_with"] - m["fold_without"]) / m["run_without"]
    print(f"\n750 nodes x {args.calls} model calls, median of {args.samples} interleaved samples")
    print(
        f"fold   the journal and snapshot with the ledger {m['fold_with'] * 1000:.1f} ms, without "
        f"{m['fold_without'] * 1000:.1f} ms: the ledger's fold is {fold_share * 100:.1f}% of the run's time"
    )
    print(f"run    with the ledger fold {m['run_with']:.3f} s, without {m['run_without']:.3f} s: ratio {run_ratio:.3f}")
    print(
        f"status with the ledger      {m['read_with']:.3f} s, without {m['read_without']:.3f} s: ratio {read_ratio:.3f}"
    )
    share = (m["read_with"] - m["read_without"]) / m["run_without"]
    print(f"status's ledger work as a share of the run's time: {share * 100:.1f}%")
    ok = fold_share < 0.05
    print(f"goal: the fold costs < 5% of the run's time (the fold measured alone): {'met' if ok else 'NOT met'}")
    print(f"      the whole-run ratio {run_ratio:.3f} carries the noise of {len(series['run_with'])} runs' I/O")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
