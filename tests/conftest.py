"""Shared fixtures: a private store home and a throwaway workspace per test; waiting on the
run journal (:func:`journaled`, :func:`wait_journaled`) instead of sleeping."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.model.plan import Plan
from rho_notebook.model.run_state import RunState
from rho_notebook.service import Consent, Service, StartRun, default_runner
from rho_notebook.source.workspace import Workspace
from rho_notebook.store.journal import follow_journal
from rho_notebook.store.layout import StoreLayout

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Project:
    """A workspace folder (with .rho/) and a store home, both temporary."""

    root: Path
    home: Path

    def write(self, relative: str, text: str, *, mode: int | None = None) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        if mode is not None:
            path.chmod(mode)
        return path

    @property
    def service(self) -> Service:
        return Service(layout=StoreLayout(home=self.home))

    @property
    def workspace(self) -> Workspace:
        return Workspace(root=self.root)

    def plan(self, relative: str, inputs: dict[str, Any] | None = None, *, store: bool = True) -> Plan:
        service = self.service
        request = service.request_for(self.root / relative, inputs=inputs or {}, workspace=self.workspace)
        coro = service.plan(request) if store else service.validate(request)
        return asyncio.run(coro)

    def create_run(self, plan: Plan) -> str:
        """Create (not start) a run of a stored plan, its digest confirmed: the run ID.

        Waits on the background runner's loop, so it also works inside an asyncio test."""
        request = StartRun(plan=plan.plan_id, consent=Consent(yes=True))
        return default_runner().call(self.service.create_run_of(plan, request))

    def status(self, run_id: str) -> RunState:
        return default_runner().call(self.service.status(run_id))

    def stored_plans(self) -> list[str]:
        plans = self.home / "workflows" / "plans"
        return sorted(p.name for p in plans.iterdir()) if plans.exists() else []

    def cli(
        self, *args: str, check: bool = False, timeout: float = 60, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "RHO_NOTEBOOK_HOME": str(self.home), **(env or {})}
        full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
        return subprocess.run(
            [sys.executable, "-m", "rho_notebook", *args],
            cwd=self.root,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = tmp_path / "ws"
    (root / ".rho").mkdir(parents=True)
    return Project(root=root.resolve(), home=(tmp_path / "home").resolve())


def star(body: str) -> str:
    """Wrap a build() body returning nodes into a minimal entry module."""
    return (
        "def build(inputs):\n"
        + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
        + "\n\nWORKFLOW = define(inputs = {}, build = build)\n"
    )


# -- waiting on the run journal -----------------------------------------------------------------


def journal_of(home: Path, run_id: str) -> Path:
    """The ``events.jsonl`` of run ``run_id`` in the store at ``home``."""
    return StoreLayout(home=home).run_dir(run_id) / "events.jsonl"


async def journaled(
    home: Path,
    run_id: str,
    kind: str,
    *,
    node: str | None = None,
    attempt: int | None = None,
    after_seq: int = 0,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Follow the run's journal until a ``kind`` record (of ``node`` / ``attempt`` when given)
    with ``seq > after_seq`` is written, and return it.

    Fails the test with what was journaled instead if none is written within ``timeout`` seconds.
    Use this instead of sleeping and hoping the run got that far.
    """
    path = journal_of(home, run_id)
    seen: list[str] = []

    def wanted(record: dict[str, Any]) -> bool:
        return (
            record.get("kind") == kind
            and (node is None or record.get("node") == node)
            and (attempt is None or record.get("attempt") == attempt)
        )

    async def first() -> dict[str, Any]:
        async with contextlib.aclosing(follow_journal(path, after_seq=after_seq, poll_seconds=0.01)) as records:
            async for record in records:
                if wanted(record):
                    return record
                seen.append(
                    f"{record['seq']}:{record.get('kind')}" + (f"({record['node']})" if "node" in record else "")
                )
        raise AssertionError(f"following {path} ended")  # never: no stop condition

    try:
        return await asyncio.wait_for(first(), timeout)
    except TimeoutError:
        what = kind + (f" of node {node!r}" if node is not None else "")
        what += f" attempt {attempt}" if attempt is not None else ""
        so_far = ", ".join(seen) if seen else ("nothing" if path.exists() else "nothing (the journal does not exist)")
        msg = f"no {what} was journaled in {path} within {timeout} s; journaled after seq {after_seq}: {so_far}"
        raise AssertionError(msg) from None


def wait_journaled(home: Path, run_id: str, kind: str, **kwargs: Any) -> dict[str, Any]:
    """:func:`journaled` for synchronous tests (no event loop may be running in this thread)."""
    return asyncio.run(journaled(home, run_id, kind, **kwargs))


GATED = star("""
return workflow(name = "gated", nodes = [
    command(name = "wait", argv = ["sh", "-c", "while [ ! -f go ]; do sleep 0.05; done"], timeout_seconds = 60,
            max_output_bytes = 4096),
])
""")
"""A run whose one node waits until the workspace holds a file ``go``."""


def started_gated_run(project: Project) -> tuple[Plan, str, int]:
    """A run of :data:`GATED` whose owner process is waiting on its node: (plan, run ID, owner pid)."""
    project.write("gated.star", GATED)
    plan = project.plan("gated.star")
    run_id = project.create_run(plan)
    owner = asyncio.run(project.service.start_detached(run_id))
    wait_journaled(project.home, run_id, "process_started", node="wait")
    return plan, run_id, owner


def cancelled_gated_run(project: Project) -> tuple[Plan, str]:
    """A run of :data:`GATED` cancelled while its node waited, its owner gone: resumable."""
    from tests.processes import wait_gone

    plan, run_id, owner = started_gated_run(project)
    asyncio.run(project.service.cancel(run_id, wait_seconds=10))
    assert wait_gone(owner), f"owner {owner} is still alive after 30 s"
    return plan, run_id
