"""``rho-notebook resume`` asks :func:`~rho_notebook.service.starting.check_resumable` once (before
a person is asked to confirm, nothing stored yet), not again after consent. ``main()`` in-process,
a real cancelled run and a real owner process."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from rho_notebook.cli.main import main
from rho_notebook.service import starting
from tests.conftest import Project, cancelled_gated_run, wait_journaled


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
