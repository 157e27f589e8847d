"""Runs and plans written before issue 29 ("One core under every authoring form") still read and
resume: ``status``, ``result``, ``events`` and ``resume`` through the CLI of this checkout, on the
store tests/fixtures/make_old_store.py wrote with main at 464af1e (its docstring says how).

The fixture is unpacked where it was made (manifests record absolute paths). File identities
(device, inode, mtime) are what this machine's copy has, not what the machine that made it had:
:func:`restamp` records them anew, as planning on this machine would have, and changes nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "old_store.tar.gz"
ROOT = Path("/tmp/rho-notebook-old-store")
WORKSPACE = ROOT / "ws"
HOME = ROOT / "home"


def restamp(manifest: Path) -> None:
    document = json.loads(manifest.read_text())
    for key, identity in document.get("identities", {}).items():
        path = WORKSPACE / key.removeprefix("//") if key.startswith("//") else Path(key)
        info = path.stat()
        identity.update(dev=info.st_dev, ino=info.st_ino, size=info.st_size, mtime_ns=info.st_mtime_ns)
    manifest.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


@pytest.fixture
def old_store() -> Iterator[dict[str, str]]:
    shutil.rmtree(ROOT, ignore_errors=True)
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(ROOT, filter="tar")
    for manifest in [*HOME.glob("workflows/plans/*/manifest.json"), *HOME.glob("workflows/runs/*/manifest.json")]:
        restamp(manifest)
    yield json.loads((ROOT / "runs.json").read_text())
    shutil.rmtree(ROOT, ignore_errors=True)


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(HOME), "PYTHONPATH": str(REPO)}
    env.pop("RHO_NOTEBOOK_FAILPOINT", None)
    return subprocess.run(
        [sys.executable, "-m", "rho_notebook", *args],
        cwd=WORKSPACE,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def as_json(*args: str) -> Any:
    done = cli(*args, "--output", "json")
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def effects(name: str) -> int:
    path = WORKSPACE / "effects" / f"{name}.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_finished_runs_of_every_form_read_as_they_did(old_store: dict[str, str]) -> None:
    for form in ("starlark_done", "script_done", "graph_done"):
        run = old_store[form]
        state = as_json("status", run)
        assert (state["lifecycle"], state["outcome"]) == ("completed", "success"), form
        result = cli("result", run)
        assert result.returncode == 0, result.stderr
        assert "success" in result.stdout
        events = cli("events", run)
        assert events.returncode == 0, events.stderr
        shown = [json.loads(line) for line in events.stdout.splitlines()]
        stored = [
            json.loads(line) for line in (HOME / "workflows" / "runs" / run / "events.jsonl").read_text().splitlines()
        ]
        assert shown == stored, f"{form}: events shows what the journal holds"
        assert (shown[0]["kind"], shown[-1]["kind"]) == ("run_created", "run_completed"), form
    hello = as_json("status", old_store["starlark_done"])
    assert set(hello["nodes"]) == {"count", "big"}
    assert all(node["state"] == "success" for node in hello["nodes"].values())
    graph = as_json("status", old_store["graph_done"])
    assert {name for name, node in graph["nodes"].items() if node["state"] == "success"} >= {"start", "shout", "done"}


def test_a_starlark_run_killed_after_a_result_resumes_without_rerunning_it(old_store: dict[str, str]) -> None:
    run = old_store["starlark_crashed"]
    before = as_json("status", run)
    assert before["lifecycle"] == "needs_recovery", before
    succeeded = {name for name, node in before["nodes"].items() if node["state"] == "success"}
    counts = {name: effects(name) for name in "abc"}
    resumed = cli("resume", run, "--yes", "--recover-uncertain")
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    after = as_json("status", run)
    assert (after["lifecycle"], after["outcome"]) == ("completed", "success"), after
    for name in succeeded:
        assert effects(name) == counts[name], f"{name} succeeded before the crash and ran again"
    assert all(effects(name) >= 1 for name in "abc")


def test_a_script_run_killed_mid_step_replays_its_first_step_and_finishes(old_store: dict[str, str]) -> None:
    run = old_store["script_killed"]
    before = as_json("status", run)
    assert before["lifecycle"] == "needs_recovery", before
    assert effects("s1") == 2  # the finished script_done run and this one
    halted = cli("resume", run, "--yes")
    assert halted.returncode != 0 and "--decide call-2=rerun|skip" in halted.stdout, halted.stdout + halted.stderr
    assert "call-1" in halted.stdout and "replayed" in halted.stdout
    resumed = cli("resume", run, "--yes", "--decide", "call-2=rerun")
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    after = as_json("status", run)
    assert (after["lifecycle"], after["outcome"]) == ("completed", "success"), after
    assert effects("s1") == 2, "the first step was journaled before the kill and must replay, not run"
    assert effects("s2") == 2
    result = cli("result", run)
    assert '"first"' in result.stdout and '"second"' in result.stdout, result.stdout


USAGE_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "old_usage_store.tar.gz"
USAGE_ROOT = Path("/tmp/rho-notebook-old-usage")
"""Agent and model-step runs written before issue 34 (tests/fixtures/make_old_usage_store.py):
no ``model_called`` records; the agents' usage is in ``usage.json``."""


@pytest.fixture
def old_usage_store() -> Iterator[dict[str, Any]]:
    shutil.rmtree(USAGE_ROOT, ignore_errors=True)
    with tarfile.open(USAGE_FIXTURE) as tar:
        tar.extractall(USAGE_ROOT, filter="tar")
    yield json.loads((USAGE_ROOT / "runs.json").read_text())
    shutil.rmtree(USAGE_ROOT, ignore_errors=True)


def usage_of(run: str, *args: str) -> Any:
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(USAGE_ROOT / "home"), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "rho_notebook", *args, run, "--output", "json"],
        cwd=USAGE_ROOT / "ws",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def test_runs_written_before_the_ledger_still_status_with_their_usage(old_usage_store: dict[str, Any]) -> None:
    """Usage folded from ``usage.json`` (agents, one call per turn) and from a model step's journaled
    record, where the journal has no ``model_called``; priced with today's price table."""
    agents = old_usage_store["agents"]
    events = (USAGE_ROOT / "home" / "workflows" / "runs" / agents / "events.jsonl").read_text()
    assert '"model_called"' not in events
    settings = USAGE_ROOT / "home" / "settings.json"
    document = json.loads(settings.read_text())
    document["prices"] = {"local/test-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
    settings.write_text(json.dumps(document))
    state = usage_of(agents, "status")
    assert state["lifecycle"] == "completed" and state["outcome"] == "success"
    run = state["usage"]
    assert [run["input_tokens"], run["output_tokens"]] == old_usage_store["agents_tokens"]
    assert (run["calls"], run["retries"], run["tool_calls"]) == (3, 1, 1)
    assert run["cost_usd"] == pytest.approx((36 + 2 * 14) / 1e6)
    first = state["nodes"]["first"]["usage"]
    assert (first["calls"], first["input_tokens"], first["output_tokens"]) == (2, 16, 10)
    assert usage_of(agents, "result")["usage"]["calls"] == 3
    # usage.json is what counts: an edited one shows (the journal's summary answers only without it)
    usage_file = (
        USAGE_ROOT / "home" / "workflows" / "runs" / agents / "nodes" / "first" / "attempts" / "1" / "usage.json"
    )
    usage = json.loads(usage_file.read_text())
    usage_file.write_text(json.dumps({**usage, "input_tokens": 1000}))
    assert usage_of(agents, "status")["nodes"]["first"]["usage"]["input_tokens"] == 1000
    usage_file.unlink()
    assert usage_of(agents, "status")["nodes"]["first"]["usage"]["input_tokens"] == 16
    script = usage_of(old_usage_store["script"], "status")
    assert [script["usage"]["input_tokens"], script["usage"]["output_tokens"]] == old_usage_store["script_tokens"]
    assert script["nodes"]["ask"]["usage"]["calls"] == 1
