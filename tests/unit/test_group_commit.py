"""Group commit in the DAG loop (issue 31 item 6), through the real owner with in-process executors.

A fan (a source, ``width`` read-only Python nodes that need it, a sink that needs them all) runs
through ``create_run`` + ``execute_run`` with an in-process executor instead of the Python one,
so the scheduler, the gate, the journal and its fsyncs are the real ones. ``os.fsync``,
``os.fdatasync`` and ``os.write`` are wrapped in this process to see what reaches the disk when:

- launches decided in one turn are made durable with one fsync, before any of them starts, and
  the attempts that end in one turn are journaled with one write, so neither the fsyncs nor the
  journal writes of a run grow with the fan's width;
- a finish is durable before any node that needs it starts (every attempt, when it starts, finds
  its own ``node_launched`` and the ``node_finished`` of each need in the fsynced part of the
  journal);
- attempts that end while another one runs cost no fsync each.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.exec.base import AttemptContext, AttemptResult
from rho_notebook.model.plan import Plan
from rho_notebook.model.state import NodeState
from rho_notebook.runtime.owner import create_run, execute_run
from rho_notebook.store.layout import StoreLayout
from tests.conftest import Project, star

BUDGET = "access = 'read_only', timeout_seconds = 60, max_output_bytes = 1000"


def _node(name: str, needs: list[str]) -> str:
    return f'python(name = "{name}", module = "//noop.py", function = "noop", needs = {json.dumps(needs)}, {BUDGET})'


def _fan(project: Project, width: int) -> Plan:
    middle = [f"m{i:03d}" for i in range(width)]
    nodes = [_node("a_source", []), *(_node(name, ["a_source"]) for name in middle), _node("z_sink", middle)]
    limits = f'{{"total": {width}, "command": {width}, "checkout_readers": {width}}}'
    project.write("noop.py", "def noop():\n    return None\n")
    project.write(
        "wf.star", star(f'return workflow(name = "fan", nodes = [{", ".join(nodes)}], concurrency = {limits})')
    )
    return project.plan("wf.star")


def _is_journal(fd: int) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").endswith("/events.jsonl")
    except OSError:
        return False


@dataclass
class Disk:
    """What this process asked of the disk while a run executed (fds of the journal only, but
    fsyncs and fdatasyncs of any file)."""

    fsyncs: int = 0
    journal_writes: int = 0
    durable: int = 0
    """Bytes of the journal covered by its last fsync."""
    counting: bool = False

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_fsync, real_fdatasync, real_write = os.fsync, os.fdatasync, os.write

        def fsync(fd: int) -> None:
            size = os.fstat(fd).st_size if _is_journal(fd) else None
            real_fsync(fd)
            self.fsyncs += self.counting
            if size is not None:
                self.durable = size

        def fdatasync(fd: int) -> None:
            real_fdatasync(fd)
            self.fsyncs += self.counting

        def write(fd: int, data: Any) -> int:
            self.journal_writes += self.counting and _is_journal(fd)
            return real_write(fd, data)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "fdatasync", fdatasync)
        monkeypatch.setattr(os, "write", write)


def _durable_records(journal: Path, disk: Disk) -> list[dict[str, Any]]:
    data = journal.read_bytes()[: disk.durable]
    return [json.loads(line) for line in data.splitlines()]


@dataclass
class FanExecutor:
    """Checks, as each attempt starts, that what it depends on is durable; the middle nodes end
    together (the last one to start releases them all), so their finishes arrive in one turn."""

    disk: Disk
    journal: Callable[[], Path]
    width: int
    started: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)
    violations: list[str] = field(default_factory=list)

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        durable = _durable_records(self.journal(), self.disk)
        launched = {(r["node"], r["attempt"]) for r in durable if r["kind"] == "node_launched"}
        finished = {r["node"] for r in durable if r["kind"] == "node_finished"}
        if (ctx.node.name, ctx.attempt) not in launched:
            self.violations.append(f"{ctx.node.name} started before its node_launched was fsynced")
        self.violations.extend(
            f"{ctx.node.name} started before the node_finished of {need} was fsynced"
            for need in ctx.node.needs
            if need not in finished
        )
        if ctx.node.name.startswith("m"):
            self.started += 1
            if self.started == self.width:
                self.release.set()
            await asyncio.wait_for(self.release.wait(), timeout=30)
        return AttemptResult(state=NodeState.SUCCESS)


def _run_fan(project: Project, monkeypatch: pytest.MonkeyPatch, width: int) -> tuple[Disk, FanExecutor]:
    plan = _fan(project, width)
    layout = StoreLayout(home=project.home)
    run_id = create_run(layout, plan)
    disk = Disk()
    disk.install(monkeypatch)
    executor = FanExecutor(disk=disk, journal=lambda: layout.run_dir(run_id) / "events.jsonl", width=width)
    disk.counting = True
    state = asyncio.run(execute_run(layout, run_id, resume=False, executors={"python": executor}))
    disk.counting = False
    assert state.outcome == "success", state
    assert all(record.state is NodeState.SUCCESS for record in state.nodes.values())
    return disk, executor


def test_a_fan_costs_the_same_fsyncs_and_journal_writes_whatever_its_width(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    narrow, _ = _run_fan(project, monkeypatch, 2)
    wide, _ = _run_fan(project, monkeypatch, 40)
    assert narrow.fsyncs > 0 and narrow.journal_writes > 0
    assert wide.fsyncs == narrow.fsyncs
    assert wide.journal_writes == narrow.journal_writes


def test_every_attempt_starts_after_its_launch_and_its_needs_finishes_are_durable(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, executor = _run_fan(project, monkeypatch, 12)
    assert executor.violations == []


@dataclass
class SlowAndQuick:
    """``slow`` runs until every ``q*`` node ended; the ``q*`` nodes end one by one meanwhile."""

    quick: int
    ended: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        if ctx.node.name == "slow":
            await asyncio.wait_for(self.done.wait(), timeout=30)
        else:
            for _ in range(int(ctx.node.name[1:]) + 1):  # end in separate loop turns, in name order
                await asyncio.sleep(0.002)
            self.ended += 1
            if self.ended == self.quick:
                self.done.set()
        return AttemptResult(state=NodeState.SUCCESS)


def _run_slow_and_quick(project: Project, monkeypatch: pytest.MonkeyPatch, quick: int) -> Disk:
    nodes = [_node("slow", []), *(_node(f"q{i:02d}", []) for i in range(quick))]
    limits = f'{{"total": {quick + 1}, "command": {quick + 1}, "checkout_readers": {quick + 1}}}'
    project.write("noop.py", "def noop():\n    return None\n")
    project.write("wf.star", star(f'return workflow(name = "w", nodes = [{", ".join(nodes)}], concurrency = {limits})'))
    return _counted_run(project, monkeypatch, SlowAndQuick(quick))


def _counted_run(project: Project, monkeypatch: pytest.MonkeyPatch, executor: Any) -> Disk:
    """What a successful run of wf.star with ``executor`` for its Python nodes asked of the disk."""
    layout = StoreLayout(home=project.home)
    run_id = create_run(layout, project.plan("wf.star"))
    disk = Disk()
    disk.install(monkeypatch)
    disk.counting = True
    state = asyncio.run(execute_run(layout, run_id, resume=False, executors={"python": executor}))
    disk.counting = False
    assert state.outcome == "success", state
    return disk


def test_attempts_that_end_while_another_runs_cost_no_fsync_each(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    few = _run_slow_and_quick(project, monkeypatch, 1)
    many = _run_slow_and_quick(project, monkeypatch, 8)
    assert many.fsyncs == few.fsyncs


@dataclass
class Quick:
    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        await asyncio.sleep(0)
        return AttemptResult(state=NodeState.SUCCESS)


def _run_chain(project: Project, monkeypatch: pytest.MonkeyPatch, length: int) -> Disk:
    names = [f"c{i:02d}" for i in range(length)]
    nodes = [_node(name, names[index - 1 : index]) for index, name in enumerate(names)]
    project.write("noop.py", "def noop():\n    return None\n")
    project.write("wf.star", star(f'return workflow(name = "chain", nodes = [{", ".join(nodes)}])'))
    return _counted_run(project, monkeypatch, Quick())


def test_a_turn_journals_the_ended_attempt_its_decisions_and_its_launch_with_one_write(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a chain each turn ends one attempt, makes the next node ready and launches it: one
    journal write and one fsync per node, not a write per kind of record."""
    short = _run_chain(project, monkeypatch, 3)
    long = _run_chain(project, monkeypatch, 9)
    assert long.journal_writes - short.journal_writes == 6
    assert long.fsyncs - short.fsyncs == 6
