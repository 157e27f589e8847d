"""``--executor local|dask[=ADDRESS]`` on ``run`` and ``resume`` (docs/distributed.md): what the run
manifest records, the defaults ($RHO_NOTEBOOK_DASK_SCHEDULER, settings ``dask_scheduler``), bad
choices, and the error naming ``pip install rho-notebook[dask]`` when ``distributed`` cannot be
imported. Real ``rho-notebook`` processes; a real Dask scheduler where one is needed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.runhelp import plan_id, status
from tests.conftest import Project, star

C = "timeout_seconds = 30, max_output_bytes = 100000"

WORKFLOW = star(
    f'return workflow(name = "x", nodes = [command(name = "a", argv = ["true"], {C}), '
    f'command(name = "b", argv = ["true"], needs = ["a"], placement = "local", {C})])'
)


def manifest_of(project: Project, run_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((project.home / "workflows" / "runs" / run_id / "manifest.json").read_text())
    return data


def runs_of(project: Project) -> list[str]:
    folder = project.home / "workflows" / "runs"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def run_ids(stdout: str) -> set[str]:
    return {json.loads(line)["run_id"] for line in stdout.splitlines() if line.strip()}


def blocked_distributed(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``import distributed`` fails: a package of that name earlier on the
    path whose import raises ImportError, as a missing install does."""
    shadow = tmp_path / "shadow"
    (shadow / "distributed").mkdir(parents=True)
    (shadow / "distributed" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'distributed' (blocked for this test)\")\n"
    )
    return {"PYTHONPATH": str(shadow)}


def test_a_local_run_records_the_local_executor(project: Project) -> None:
    project.write("wf.star", WORKFLOW)
    pid = plan_id(project)
    result = project.cli("run", pid, "--yes", "--output", "jsonl", "--executor", "local")
    assert result.returncode == 0, result.stderr
    (run_id,) = run_ids(result.stdout)
    assert manifest_of(project, run_id)["executor"] == "local"
    assert status(project, run_id)["outcome"] == "success"
    plain = project.cli("run", pid, "--yes", "--output", "jsonl")
    (other,) = run_ids(plain.stdout)
    assert manifest_of(project, other)["executor"] == "local"


def test_an_unknown_executor_is_a_usage_error_and_creates_no_run(project: Project) -> None:
    project.write("wf.star", WORKFLOW)
    pid = plan_id(project)
    for bad in ("ray", "dask=", "dask=tcp://a b", "local=tcp://x:1"):
        result = project.cli("run", pid, "--yes", "--executor", bad)
        assert result.returncode == 2, (bad, result.stderr)
        assert f"executor {bad!r}" in result.stderr, result.stderr
    assert runs_of(project) == []


def test_dask_without_distributed_names_the_extra_and_creates_no_run(project: Project, tmp_path: Path) -> None:
    project.write("wf.star", WORKFLOW)
    pid = plan_id(project)
    blocked = blocked_distributed(tmp_path)
    result = project.cli("run", pid, "--yes", "--executor", "dask=tcp://127.0.0.1:1", env=blocked)
    assert result.returncode == 2, result.stderr
    assert "pip install rho-notebook[dask]" in result.stderr
    assert "blocked for this test" in result.stderr
    assert runs_of(project) == []
    # the same environment runs locally: only the Dask executor needs the extra
    local = project.cli("run", pid, "--yes", "--output", "jsonl", env=blocked)
    assert local.returncode == 0, local.stderr


def test_resume_with_dask_without_distributed_names_the_extra(project: Project, tmp_path: Path) -> None:
    project.write(
        "wf.star",
        star(f'return workflow(name = "y", nodes = [command(name = "a", argv = ["false"], {C})])'),
    )
    pid = plan_id(project)
    first = project.cli("run", pid, "--yes", "--output", "jsonl")
    assert first.returncode == 1
    (run_id,) = run_ids(first.stdout)
    result = project.cli("resume", run_id, "--yes", "--executor", "dask", env=blocked_distributed(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "pip install rho-notebook[dask]" in result.stderr


def test_the_help_names_the_flag(project: Project) -> None:
    for verb in ("run", "resume"):
        shown = project.cli(verb, "--help").stdout
        assert "--executor local|dask[=ADDRESS]" in shown


# -- against a real scheduler ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """The address of a real LocalCluster (one worker process) shared by the tests below."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=":0") as cluster:
        yield str(cluster.scheduler_address)


def finished(project: Project, run_id: str) -> dict[str, dict[str, Any]]:
    """node -> the exit record of its node_finished event."""
    events = [json.loads(line) for line in project.cli("events", run_id, check=True).stdout.splitlines()]
    return {e["node"]: e["exit"] for e in events if e["kind"] == "node_finished"}


def test_the_environment_names_the_scheduler_and_local_placement_stays_local(project: Project, scheduler: str) -> None:
    project.write("wf.star", WORKFLOW)
    pid = plan_id(project)
    env = {"RHO_NOTEBOOK_DASK_SCHEDULER": scheduler}
    result = project.cli("run", pid, "--yes", "--output", "jsonl", "--executor", "dask", env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    (run_id,) = run_ids(result.stdout)
    assert manifest_of(project, run_id)["executor"] == f"dask={scheduler}"
    exits = finished(project, run_id)
    assert exits["a"]["worker"].startswith("tcp://")  # ran on the cluster's worker
    assert "worker" not in exits["b"]  # placement = "local"


def test_user_settings_name_the_scheduler(project: Project, scheduler: str) -> None:
    project.home.mkdir(parents=True, exist_ok=True)
    (project.home / "settings.json").write_text(json.dumps({"dask_scheduler": scheduler}))
    project.write("wf.star", WORKFLOW)
    pid = plan_id(project)
    result = project.cli("run", pid, "--yes", "--output", "jsonl", "--executor", "dask", timeout=120)
    assert result.returncode == 0, result.stderr
    (run_id,) = run_ids(result.stdout)
    assert manifest_of(project, run_id)["executor"] == f"dask={scheduler}"
    assert finished(project, run_id)["a"]["worker"].startswith("tcp://")


def test_an_explicit_address_wins_and_a_resume_can_choose_again(project: Project, scheduler: str) -> None:
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "z", nodes = [command(name = "a", argv = ["true"], {C}), '
            f'command(name = "gate", argv = ["sh", "-c", "test -e go"], needs = ["a"], {C})])'
        ),
    )
    pid = plan_id(project)
    env = {"RHO_NOTEBOOK_DASK_SCHEDULER": "tcp://127.0.0.1:1"}  # never used: the flag names one
    result = project.cli(
        "run", pid, "--yes", "--output", "jsonl", "--executor", f"dask={scheduler}", env=env, timeout=120
    )
    assert result.returncode == 1, result.stderr  # gate fails: no go file yet
    (run_id,) = run_ids(result.stdout)
    assert manifest_of(project, run_id)["executor"] == f"dask={scheduler}"
    assert finished(project, run_id)["gate"]["worker"].startswith("tcp://")
    bad = project.cli("resume", run_id, "--yes", "--executor", "ray")
    assert bad.returncode == 2 and "unknown executor 'ray'" in bad.stderr
