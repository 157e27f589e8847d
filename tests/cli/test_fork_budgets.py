"""A fork's budget at start (docs/fork.md, docs/usage.md#budgets): ``fork --max-tokens/--max-cost/
--max-wall`` and ``rho.fork(max_tokens=...)`` take ``run``'s flags with ``run``'s rules and are
journaled as ``run`` journals them (source ``run``), before the fork's owner starts. Real runs of
the chain in :mod:`tests.cli.test_fork`."""

from __future__ import annotations

import subprocess
import sys

from tests.cli.test_fork import _first_run, _journal, _launched, _run_json
from tests.conftest import REPO, Project


def _budgets(project: Project, run_id: str) -> list[tuple[str, int | None, float | None]]:
    return [
        (r["source"], r.get("max_tokens"), r.get("max_wall_seconds"))
        for r in _journal(project, run_id)
        if r["kind"] == "budget_set"
    ]


def test_cli_fork_takes_the_run_budget_flags_and_journals_them_as_run_does(project: Project) -> None:
    log, run = _first_run(project)
    plans = project.stored_plans()
    refused = project.cli("fork", run, "--at", "c", "--yes", "--max-tokens", "0")
    assert refused.returncode == 2 and "--max-tokens: '0': give a whole number, 1 or more" in refused.stderr
    assert project.stored_plans() == plans  # refused before the fork was planned
    forked = _run_json(project, "fork", run, "--at", "c", "--max-tokens", "500", "--max-wall", "60")
    assert _launched(log) == ["c:2", "d:3"]
    assert _budgets(project, str(forked["run_id"])) == [("run", 500, 60.0)]


def test_api_fork_takes_the_budget_keywords_of_run(project: Project) -> None:
    log, run = _first_run(project)
    plans = project.stored_plans()
    script = (
        "import sys\nfrom rho_notebook.notebook import api as rho\n"
        "try:\n    rho.fork(sys.argv[1], at='c', yes=True, max_tokens=0)\n"
        "except Exception as err:\n    print(type(err).__name__, err)\n"
        "handle = rho.fork(sys.argv[1], at='c', yes=True, max_tokens=500, max_wall=60)\n"
        "print(handle.run_id, handle.wait(60).outcome)\n"
    )
    env = {"RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script, run], cwd=project.root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    refusal, started = done.stdout.splitlines()
    assert refusal == "ArgumentError max_tokens=0: give a number above 0", refusal
    fork, outcome = started.split()
    assert outcome == "success" and _launched(log) == ["c:2", "d:3"]
    assert len(project.stored_plans()) == len(plans) + 1  # the refused fork stored no plan
    assert _budgets(project, fork) == [("run", 500, 60.0)]
