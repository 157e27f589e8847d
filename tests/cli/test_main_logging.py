"""``main()`` called in-process prints the package's warnings as the CLI's while the verb runs,
and leaves logging as it found it: a handler left on the package's logger printed a widget error
of a later test as ``rho-notebook: error: ...`` at the end of a full test run."""

from __future__ import annotations

import contextlib
import io
import logging

import pytest

from rho_notebook.cli.main import main
from tests.conftest import Project, star

WF = star(
    'return workflow(name = "w", nodes = [command(name = "a", argv = ["true"], timeout_seconds = 10, max_output_bytes = 100)])'
)


def test_main_prints_warnings_while_the_verb_runs_and_then_takes_its_handler_off(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.write("wf.star", WF)
    run_id = project.create_run(project.plan("wf.star"))
    (project.home / "workflows" / "runs" / run_id).chmod(0o707)  # `runs` refuses it, with a warning
    monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(project.home))
    package = logging.getLogger("rho_notebook")
    before = (list(package.handlers), list(logging.getLogger().handlers))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(["runs"]) == 0
        assert (list(package.handlers), list(logging.getLogger().handlers)) == before
        package.warning("logged after main() returned")
    assert err.getvalue().startswith(f"rho-notebook: warning: run {run_id} refused:"), err.getvalue()
    assert "rho-notebook: warning: logged after" not in err.getvalue()
