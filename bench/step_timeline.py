"""Where one step of a chain waits, mark by mark: the critical path of a script step or a graph node.

    from bench.step_timeline import marked_steps
    with marked_steps() as live:
        ... execute_run(..., on_event=live.on_event) ...
        runs.take_run(live)          # runs = StepMarks(), one per kind of run
    print(runs.table("label"))

CPU budgets (bench/cpu_budget.py) say how much processor time each party spends; a chain's wall
time is its critical path, which they do not show. Here every step of the path is stamped
(``time.perf_counter``) as the owner passes it: the journal records a chain step writes
(``node_ready``, ``node_launched``, ``process_started``, ``node_finished``, through ``on_event``),
the launch fsync, and for a script run the request from the script's channel, its handling, the
step's task, storing its value and writing the answer. :meth:`StepMarks.table` cuts the stamps into
cycles, one ``node_finished`` to the next, and gives the median of each interval between two
consecutive marks (an interval seen in fewer than a third of the cycles is left out); the first and
last ``edge`` cycles are left out too (the script interpreter's start, the run's end). The wrapped
functions are looked up through their modules and classes, as bench/run_phases.py does, and
restored when the context ends (``bench.run_phases.patched``). Used by ``bench/script_overhead.py --timeline N``.
"""

from __future__ import annotations

import functools
import inspect
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.run_phases import patched
from rho_notebook.runtime import script_attempts, script_channel, script_driver
from rho_notebook.store.journal import JournalWriter

_RECORDS = ("node_ready", "node_launched", "process_started", "node_finished")
"""The journal records stamped as the owner emits them."""

_CALLS: list[tuple[Any, str, str | None, str | None]] = [
    # (holder, attribute, mark before the call, mark after it)
    (script_channel._Connection, "buffer_updated", "request read", None),
    (script_driver.ScriptDriver, "_handle", None, "request handled"),
    (script_attempts.StepAttempts, "execute", "step task runs", None),
    (JournalWriter, "sync", "fsync", "fsynced"),
    (script_attempts, "_store_value", "value stored", None),
    (script_channel._Connection, "_write", "answer", "answer written"),
]


@dataclass
class StepMarks:
    """Stamps as they are made (``marks``), and the cycles of the runs taken from them."""

    marks: list[tuple[str, float]] = field(default_factory=list)
    intervals: dict[str, list[float]] = field(default_factory=dict)
    cycles: list[float] = field(default_factory=list)

    def mark(self, name: str) -> None:
        self.marks.append((name, time.perf_counter()))

    def on_event(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind in _RECORDS:
            self.mark(str(kind))

    def take_run(self, live: StepMarks, *, edge: int = 20) -> None:
        """Fold the stamps of the run ``live`` holds into this one's intervals and cycles, and
        clear them there (one :func:`marked_steps` stamps runs of several kinds in turn)."""
        marks, live.marks = live.marks, []
        ends = [index for index, (name, _) in enumerate(marks) if name == "node_finished"]
        kept = ends[edge : len(ends) - edge]
        for start, end in zip(kept, kept[1:], strict=False):
            cycle = marks[start : end + 1]
            self.cycles.append(cycle[-1][1] - cycle[0][1])
            for (first, began), (then, ended) in zip(cycle, cycle[1:], strict=False):
                self.intervals.setdefault(f"{first} -> {then}", []).append(ended - began)

    def table(self, label: str) -> str:
        """Each interval's median (ms) and how many cycles saw it, under the median cycle."""
        if not self.cycles:
            return f"{label}: no complete cycle"
        lines = [f"{label}: {statistics.median(self.cycles) * 1e3:.3f} ms a cycle (median of {len(self.cycles)})"]
        for name, values in self.intervals.items():
            if len(values) * 3 >= len(self.cycles):
                lines.append(f"  {statistics.median(values) * 1e3:8.3f} ms  {name}  (n={len(values)})")
        return "\n".join(lines)


def _marked(marks: StepMarks, fn: Callable[..., Any], *, before: str | None, after: str | None) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def marked_async(*args: Any, **kwargs: Any) -> Any:
            if before:
                marks.mark(before)
            try:
                return await fn(*args, **kwargs)
            finally:
                if after:
                    marks.mark(after)

        return marked_async

    @functools.wraps(fn)
    def marked(*args: Any, **kwargs: Any) -> Any:
        if before:
            marks.mark(before)
        try:
            return fn(*args, **kwargs)
        finally:
            if after:
                marks.mark(after)

    return marked


@contextmanager
def marked_steps() -> Iterator[StepMarks]:
    """Stamp the steps of the runs executed meanwhile (pass ``live.on_event`` to ``execute_run``)."""
    live = StepMarks()
    wrappers = [
        (holder, attr, functools.partial(_marked, live, before=before, after=after))
        for holder, attr, before, after in _CALLS
    ]
    with patched(wrappers):
        yield live
