"""``rho-notebook resume``: it asks :func:`~rho_notebook.service.starting.check_resumable` once
(before a person is asked to confirm, nothing stored yet), not again after consent; the limits it
sets are journaled as every front door journals them. Real cancelled runs and real owner processes."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from rho_notebook.cli.main import main
from rho_notebook.service import starting
from rho_notebook.store.journal import read_journal
from tests.conftest import Project, cancelled_gated_run, journal_of, wait_journaled


def test_a_cli_resume_checks_that_the_run_is_resumable_once(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    _, run_id = cancelled_gated_run(project)
    (project.root / "go").write_text("")
    asked: list[str] = []
    checked = starting.check_resumable

    async def counted(layout: Any, run: str, *, executor: str | None) -> None:
        asked.append(run)
        await checked(layout, run, executor=executor)

    monkeypatch.setattr(starting, "check_resumable", counted)
    monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(project.home))
    monkeypatch.chdir(project.root)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(["resume", run_id, "--yes", "--detach"]) == 0, err.getvalue()
    wait_journaled(project.home, run_id, "run_completed")
    assert asked == [run_id]


def test_a_limit_set_on_resume_is_journaled_as_a_raise_whatever_its_flag(project: Project) -> None:
    """``resume --max-tokens`` was journaled with source ``run`` from the CLI (``raise`` when
    ``--raise-budget`` came with it, and always from ``%workflow resume`` and ``rho.resume``): a
    limit set once the run has started is a raise (docs/usage.md#budgets), from every front door."""
    _, run_id = cancelled_gated_run(project)
    (project.root / "go").write_text("")
    resumed = project.cli("resume", run_id, "--yes", "--detach", "--max-tokens", "500", "--max-wall", "60")
    assert resumed.returncode == 0, resumed.stderr
    wait_journaled(project.home, run_id, "run_completed")
    budgets = [r for r in read_journal(journal_of(project.home, run_id)).events if r["kind"] == "budget_set"]
    assert [(r["source"], r.get("max_tokens"), r.get("max_wall_seconds")) for r in budgets] == [("raise", 500, 60.0)]
    status = json.loads(project.cli("status", run_id, "--output", "json").stdout)
    assert [(b["node"], b["source"]) for b in status["budgets"]] == [(None, "raise")]
