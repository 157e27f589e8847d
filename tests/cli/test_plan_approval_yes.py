"""An ``approve-plan`` record of a graph digest is the confirmation of that digest: headless
``rho-notebook run`` starts without ``--yes`` and says why; any other digest still needs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from rho_notebook.policy.approvals import who_am_i
from tests.cli.runhelp import only_run_id, plan_id
from tests.conftest import REPO, Project, star

C = "timeout_seconds = 30, max_output_bytes = 1000"


def touch(name: str) -> str:
    return star(f'return workflow(name = "w", nodes = [command(name = "write", argv = ["touch", "{name}"], {C})])')


def headless(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """``rho-notebook ARGS`` with no terminal to ask on (stdin is /dev/null) and no ``--yes``."""
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "rho_notebook", *args],
        cwd=project.root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def digest_of(project: Project, pid: str) -> str:
    shown = project.cli("plan", "wf.star", "--output", "json")
    data = json.loads(shown.stdout)
    assert data["plan_id"] == pid  # one plan per graph
    return str(data["graph_digest"])


def test_an_approved_digest_runs_without_yes_and_says_why(project: Project) -> None:
    project.write("wf.star", touch("approved.txt"))
    pid = plan_id(project)
    digest = digest_of(project, pid)
    refused = headless(project, "run", pid)
    assert refused.returncode == 3 and not (project.root / "approved.txt").exists()

    approved = project.cli("approve-plan", digest)
    assert approved.returncode == 0, approved.stderr
    ran = headless(project, "run", pid)
    assert ran.returncode == 0, ran.stderr
    assert f"starting without --yes: graph digest {digest} was approved by {who_am_i()} at " in ran.stdout
    assert (project.root / "approved.txt").exists()
    run_id = only_run_id(project)  # the refused run created nothing
    assert f"run {run_id}  outcome success" in ran.stdout
    events = [json.loads(line) for line in project.cli("events", run_id).stdout.splitlines()]
    assert any(e["kind"] == "plan_approval" and e["graph_digest"] == digest for e in events)

    # machine output stays machine-readable: the notice goes to stderr
    jsonl = headless(project, "run", pid, "--output", "jsonl")
    assert jsonl.returncode == 0, jsonl.stderr
    assert all(json.loads(line)["run_id"] for line in jsonl.stdout.splitlines())
    assert "starting without --yes" in jsonl.stderr and digest in jsonl.stderr


def test_another_digest_still_needs_yes(project: Project) -> None:
    project.write("wf.star", touch("approved.txt"))
    approved_pid = plan_id(project)
    assert project.cli("approve-plan", approved_pid).returncode == 0
    project.write("wf.star", touch("other.txt"))
    other_pid = plan_id(project)
    other_digest = digest_of(project, other_pid)

    refused = headless(project, "run", other_pid)
    assert refused.returncode == 3
    assert (
        f"refusing to run plan {other_pid[:13]} without confirmation: no terminal to ask; "
        f"pass --yes to confirm digest {other_digest}"
    ) in refused.stderr
    assert "starting without --yes" not in refused.stdout + refused.stderr
    assert not (project.root / "other.txt").exists()
    assert headless(project, "run", other_pid, "--yes").returncode == 0
    assert (project.root / "other.txt").exists()
