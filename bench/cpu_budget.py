"""Where a benchmark's wall time goes in processor time: the calling thread, the process's other
threads, the child processes, and the calling thread's wait for a processor.

    with CpuBudget.measure() as budget:
        run_once(...)
    budget.row(per=100)  # per node of a chain of 100

``thread`` is the calling thread's processor time (``time.thread_time``: the run's event loop when
a run is executed in-process), ``threads`` the rest of this process (``time.process_time`` minus
``thread``: the run's writer thread), ``children`` the processor time of the child processes
reaped meanwhile, their own reaped children included (``os.times``: a fork server and every
attempt it forked, or each command's process), and ``waiting`` the time the calling thread was
ready to run but had no processor (the second field of ``/proc/thread-self/schedstat``; None
where that file does not exist). When the sum of the processor times comes close to the number of
processors times the wall time, the workload is bound by processor time, not by any one step:
then cutting the work of any participant shortens it, and ``waiting`` shows how much of the
loop's own path went to waiting for a processor.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

SCHEDSTAT = Path("/proc/thread-self/schedstat")


def _waited_ns() -> int | None:
    try:
        return int(SCHEDSTAT.read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _children_seconds() -> float:
    times = os.times()
    return times.children_user + times.children_system


@dataclass
class CpuBudget:
    """Seconds of one measured stretch (see the module docstring)."""

    wall: float = 0.0
    thread: float = 0.0
    threads: float = 0.0
    children: float = 0.0
    waiting: float | None = None
    processors: int = field(default_factory=lambda: os.cpu_count() or 1)

    @classmethod
    @contextmanager
    def measure(cls) -> Iterator[CpuBudget]:
        """Measure the ``with`` block; the figures are filled in when it ends."""
        budget = cls()
        wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
        children, waited = _children_seconds(), _waited_ns()
        yield budget
        budget.wall = time.perf_counter() - wall
        budget.thread = time.thread_time() - thread
        budget.threads = max(0.0, time.process_time() - process - budget.thread)  # the clocks' grain
        budget.children = _children_seconds() - children
        after = _waited_ns()
        budget.waiting = None if waited is None or after is None else (after - waited) / 1e9

    @property
    def busy(self) -> float:
        """Processor time of all participants, in processors kept busy over the wall time."""
        return (self.thread + self.threads + self.children) / self.wall if self.wall else 0.0


HEADER = f"{'workload':34} {'wall':>7} {'loop cpu':>9} {'loop waits':>11} {'threads':>8} {'children':>9} {'busy':>10}"


def row(label: str, budgets: list[CpuBudget], per: int) -> str:
    """One line of medians over ``budgets``, each figure in ms per ``per`` (a node of a chain)."""

    def ms(values: list[float]) -> str:
        return f"{median(values) * 1000 / per:.2f}"

    waits = [b.waiting for b in budgets if b.waiting is not None]
    processors = budgets[0].processors if budgets else 1
    return (
        f"{label:34} {ms([b.wall for b in budgets]):>7} {ms([b.thread for b in budgets]):>9}"
        f" {ms(waits) if waits else 'n/a':>11} {ms([b.threads for b in budgets]):>8}"
        f" {ms([b.children for b in budgets]):>9} {median([b.busy for b in budgets]):>5.2f} of {processors}"
    )
