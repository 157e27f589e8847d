"""Where the end of a forked Python attempt waits: from the node's function returning to the owner
knowing the attempt is over.

    from bench.attempt_ends import ENDS_STEP, EndStamps, watched_ends
    with watched_ends() as stamps:
        ... a run of Python nodes whose function returns time.monotonic_ns() (ENDS_STEP) ...
        stamps.take_run(events)          # the run's journal records
    print(stamps.table())

A forked attempt ends in three stages, each on the chain's critical path: the harness writes the
result and ends the child (threads joined, ``atexit``, streams flushed, ``os._exit``); the kernel
tears the process down (unmaps what it shares with the fork server, closes its descriptors) and
only then makes it a zombie, which turns its pidfd readable; the fork server, the child's parent
and the only process that can reap it, wakes, reaps it and reports the status to the owner, whose
loop then takes it (:meth:`rho_notebook.exec.forked.Forked.finish`). The owner's side is stamped
here (``time.monotonic_ns``, the clock every process shares): a reader on each attempt's pidfd
and the report's arrival, with :class:`~rho_notebook.exec.forked.Forked` patched meanwhile
(``bench.run_phases.patched``); the node's side is its own return value. Each attempt is matched
to its node by the ``process_started`` record's pid. An attempt whose report the loop took before
its pidfd's reader, in the same pass, has no exit stamp (when it exited is not known) and counts
in neither stage, so a stage's ``n`` can be below the attempts run; more of them left out means a
busier loop. Used by ``bench/python_nodes.py --ends N``.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.run_phases import patched
from rho_notebook.exec.forked import Forked

ENDS_STEP = "import time\n\n\ndef step(i, prev):\n    return time.monotonic_ns()\n"
"""The chain's module: each node returns the moment its function returned (an integer)."""

_STAGES = (
    ("returned", "exited", "result written, child ended, the kernel's teardown"),
    ("exited", "reported", "the server reaps it, its report reaches the owner"),
)


@dataclass
class EndStamps:
    """Stamps (ns) of the attempts of the runs taken so far, and the live ones of the current run."""

    exited: dict[int, int] = field(default_factory=dict)
    """pid -> when the attempt's pidfd turned readable (live, emptied by :meth:`take_run`)."""
    reported: dict[int, int] = field(default_factory=dict)
    """pid -> when the server's report of its reap reached the owner (live)."""
    stages: dict[str, list[float]] = field(default_factory=dict)
    """Stage -> its length (ms) in each attempt taken."""
    cycles: list[float] = field(default_factory=list)
    """One function return to the next one along the chain (ms)."""

    def take_run(self, events: Sequence[dict[str, Any]]) -> None:
        """Match the live stamps to the run's attempts (``process_started`` pid, ``node_finished``
        value) and add each attempt's stages; the live stamps are cleared."""
        pids = {e["node"]: e["pid"] for e in events if e["kind"] == "process_started"}
        returned = {
            pids[e["node"]]: e["step_value"]
            for e in events
            if e["kind"] == "node_finished" and isinstance(e.get("step_value"), int) and e["node"] in pids
        }
        at = {"returned": returned, "exited": self.exited, "reported": self.reported}
        for start, end, _ in _STAGES:
            shared = [pid for pid in returned if pid in at[start] and pid in at[end]]
            self.stages.setdefault(f"{start} -> {end}", []).extend(
                (at[end][pid] - at[start][pid]) / 1e6 for pid in shared
            )
        self.cycles.extend((b - a) / 1e6 for a, b in itertools.pairwise(sorted(returned.values())))
        self.exited, self.reported = {}, {}

    def table(self) -> str:
        """One line per stage: its median and 90th percentile (ms), and the cycle it is part of."""
        lines = [f"one node to the next (function return to function return): {_median(self.cycles)}"]
        for start, end, what in _STAGES:
            spent = self.stages.get(f"{start} -> {end}", [])
            lines.append(f"  {start} -> {end} ({what}): {_median(spent)}")
        return "\n".join(lines)


def _median(values: list[float]) -> str:
    if not values:
        return "no attempts"
    p90 = sorted(values)[int(len(values) * 0.9)]
    return f"{statistics.median(values):.3f} ms (p90 {p90:.3f}, n={len(values)})"


@contextmanager
def watched_ends() -> Iterator[EndStamps]:
    """Stamp each forked attempt's exit and report while the context lasts (restored after)."""
    stamps = EndStamps()

    def watch_start(original: Callable[..., None]) -> Callable[..., None]:
        def start(self: Forked, loop: asyncio.AbstractEventLoop, pid: int, pidfd: int) -> None:
            original(self, loop, pid, pidfd)

            def exited() -> None:
                loop.remove_reader(pidfd)
                if pid not in stamps.reported:  # a report taken first, in the same pass: its exit is not known
                    stamps.exited.setdefault(pid, time.monotonic_ns())

            loop.add_reader(pidfd, exited)

        return start

    def watch_report(original: Callable[..., None]) -> Callable[..., None]:
        def finish(self: Forked, si_code: int, si_status: int) -> None:
            stamps.reported[self.pid] = time.monotonic_ns()
            original(self, si_code, si_status)

        return finish

    def unwatch(original: Callable[[Forked], None]) -> Callable[[Forked], None]:
        def close(self: Forked) -> None:
            if self._pidfd >= 0:  # the reader goes before its descriptor, on every path that closes it
                self.exited.get_loop().remove_reader(self._pidfd)
            original(self)

        return close

    with patched([(Forked, "__init__", watch_start), (Forked, "finish", watch_report), (Forked, "_close", unwatch)]):
        yield stamps
