"""Where one run's time goes, phase by phase: wall time spent inside the runner's main steps.

    from bench.run_phases import timed_phases
    with timed_phases() as phases:
        ... runs ...
    print(phases.table(runs=N, nodes=K))

Each phase wraps one function (its calls nest: ``launch`` includes the ``append`` and ``fsync``
of its records, so the rows are not meant to add up); a row gives calls and milliseconds per run
and microseconds per node. ``attempt`` is the time attempt tasks spend in the driver's own code
(context, gate, checkout) around the executor. Used by bench/fan_overhead.py ``--phases``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.runtime import execution, owner
from rho_notebook.runtime.driver import RunDriver
from rho_notebook.runtime.scheduler import Scheduler
from rho_notebook.store.journal import JournalWriter

_PHASES: list[tuple[str, Any, str, str]] = [
    ("create_run (before execute)", owner, "create_run", "sync"),
    ("journal append (all records)", JournalWriter, "append", "sync"),
    ("journal fsync", JournalWriter, "sync", "sync"),
    ("scheduler decide", Scheduler, "decide", "sync"),
    ("decisions journaled (_apply)", RunDriver, "_apply", "sync"),
    ("launch (records, fsync, tasks)", RunDriver, "_launch", "sync"),
    ("attempt context", RunDriver, "_context", "sync"),
    ("ended attempts journaled", RunDriver, "_journal_ended", "sync"),
    ("completion (run_completed, snapshot)", execution.Execution, "complete", "sync"),
    ("execute_run (whole execution)", owner, "execute_run", "async"),
]


@dataclass
class Phases:
    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, spent: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + spent
        self.calls[name] = self.calls.get(name, 0) + 1

    def table(self, *, runs: int, nodes: int) -> str:
        lines = [f"{'phase':40} {'calls/run':>9} {'ms/run':>8} {'us/node':>8}"]
        for name, _, _, _ in _PHASES:
            if name in self.seconds:
                per_run = self.seconds[name] / runs
                lines.append(
                    f"{name:40} {self.calls[name] / runs:9.1f} {per_run * 1000:8.2f} {per_run / nodes * 1e6:8.1f}"
                )
        return "\n".join(lines)


def _timed_sync(phases: Phases, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            phases.add(name, time.perf_counter() - began)

    return wrapper


def _timed_async(phases: Phases, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            phases.add(name, time.perf_counter() - began)

    return wrapper


@contextmanager
def patched(wrappers: Sequence[tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]) -> Iterator[None]:
    """Each ``(holder, attribute, wrap)``: the attribute replaced by ``wrap(original)`` meanwhile,
    restored after (also used by bench/step_timeline.py)."""
    saved = [(holder, attr, getattr(holder, attr)) for holder, attr, _ in wrappers]
    try:
        for holder, attr, wrap in wrappers:
            setattr(holder, attr, wrap(getattr(holder, attr)))
        yield
    finally:
        for holder, attr, original in saved:
            setattr(holder, attr, original)


@contextmanager
def timed_phases() -> Iterator[Phases]:
    """Time the runner's phases (module attributes patched meanwhile, restored after).

    Callers must look functions up through their modules (``owner.create_run``), not names
    imported before this context was entered."""
    phases = Phases()
    wrappers = [
        (holder, attr, functools.partial(_timed_async if kind == "async" else _timed_sync, phases, name))
        for name, holder, attr, kind in _PHASES
    ]
    with patched(wrappers):
        yield phases
