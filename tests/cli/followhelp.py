"""A run followed by the CLI's Printer from a process of its own: the terminal's display (live on
a pty, plain lines on a pipe) tested apart from the verbs that will use it.

:data:`DRIVER` is a small program: it creates a run of a stored plan, starts the run's owner in a
process of its own (``Service.start_owner``), follows it with ``Service.follower`` and feeds every
record, tick and the close to a :class:`~rho_notebook.cli._terminal.Printer`, as ``run`` does.
"""

from __future__ import annotations

import os
import sys

from tests.conftest import REPO, Project

DRIVER = """\
import sys

from rho_notebook.cli._terminal import Printer, allowed_failures
from rho_notebook.service import Consent, Service, StartRun
from rho_notebook.service.sync import run_sync

plan_id, live = sys.argv[1], sys.argv[2] == "live"
service = Service.default()
plan = run_sync(service.load_plan(plan_id))
run_id = run_sync(service.create_run_of(plan, StartRun(plan=plan.plan_id, consent=Consent(yes=True))))
print(f"run {run_id}", flush=True)
service.start_owner(run_id)
printer = Printer("text", allowed=allowed_failures(plan.graph), folder=service.run_store.folder(run_id), live=live)
try:
    state = run_sync(service.follower(run_id).follow(printer, on_tick=printer.tick))
finally:
    printer.close()
print(f"outcome {state.outcome}", flush=True)
"""


def driver_command(project: Project, plan_id: str, *, live: bool) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that follow a new run of ``plan_id`` with the Printer."""
    script = project.root.parent / "follow_driver.py"
    script.write_text(DRIVER)
    env = {
        **os.environ,
        "RHO_NOTEBOOK_HOME": str(project.home),
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    return [sys.executable, str(script), plan_id, "live" if live else "plain"], env


def run_id_of(output: str) -> str:
    """The run ID the driver printed first."""
    for line in output.splitlines():
        if line.startswith("run "):
            return line.split()[1]
    raise AssertionError(f"no run ID in:\n{output}")
