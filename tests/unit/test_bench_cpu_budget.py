"""bench/cpu_budget.py splits a stretch's processor time by who spent it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from bench.cpu_budget import CpuBudget, row

BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"


def _burn_in_thread(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_child_process_is_counted_as_children_and_another_thread_as_threads() -> None:
    with CpuBudget.measure() as budget:
        subprocess.run([sys.executable, "-c", BURN], check=True)
        worker = threading.Thread(target=_burn_in_thread, args=(0.3,))
        worker.start()
        worker.join()
    assert budget.children >= 0.25  # the child's 0.3 s (clock ticks: allow one or two short)
    assert budget.threads >= 0.25
    assert budget.thread < 0.2  # this thread only started and waited
    assert budget.wall >= 0.55
    assert 0 < budget.busy <= budget.processors + 0.5


def test_the_calling_threads_own_time_is_thread() -> None:
    with CpuBudget.measure() as budget:
        _burn_in_thread(0.2)
    assert budget.thread >= 0.19
    assert budget.children < 0.05
    if budget.waiting is not None:
        assert budget.waiting >= 0


def test_a_row_gives_medians_per_node() -> None:
    budgets = [CpuBudget(wall=w, thread=0.1, threads=0.0, children=0.2, waiting=0.05) for w in (0.4, 0.5, 0.9)]
    line = row("chain", budgets, per=100)
    assert line.split()[:6] == ["chain", "5.00", "1.00", "0.50", "0.00", "2.00"]
