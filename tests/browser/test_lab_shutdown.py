"""JupyterLab shut down from its own File menu leaves a notebook's run going (issue 30).

A real ``jupyter lab`` (the ``lab`` fixture of tests/browser/conftest.py) driven by chromium: a
notebook loads the extension, defines a workflow whose ``slow`` node waits for a ``go`` file, and
starts it with ``%workflow run``; Run All runs the cells. Once the store says ``slow`` is running,
File > Shut Down (confirmed in JupyterLab's dialog) shuts every kernel down and stops the server.
The run's owner is a process of its own, so the run is still ``running`` (not ``needs_recovery``)
after the server and the kernel are gone; the test then writes ``go`` and the run ends in
``success``, each node having appended its one line to ``marker.txt`` exactly once.

The ``go`` file makes the order certain: the slow node cannot end before the shutdown, however
long the browser takes. Any owner left behind by a failure is cancelled (then killed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.run_locks import OwnerLock
from tests.browser.conftest import REPO, Lab
from tests.browser.test_lab import _notebook, _open, _run_all
from tests.processes import alive

pytestmark = pytest.mark.browser

C = "timeout_seconds = 120, max_output_bytes = 4096"

WORKFLOW_CELL = f"""%%workflow outlives_lab
def build(inputs):
    slow = shell(name = "slow", executable = "sh", arguments = ["-c"],
        command = "while [ ! -e go ]; do sleep 0.05; done; sleep 1; echo slow >> marker.txt", {C})
    after = command(name = "after", argv = ["sh", "-c", "echo after >> marker.txt"], needs = ["slow"], {C})
    return workflow(name = "outlives_lab", nodes = [slow, after])

WORKFLOW = define(inputs = {{}}, build = build)
"""

CELLS = ["%load_ext rho_notebook", WORKFLOW_CELL, "run = %workflow run outlives_lab --yes\nrun.run_id"]


def _cli(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(lab.home), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "rho_notebook", *args], cwd=lab.root, env=env, capture_output=True, text=True, timeout=60
    )


def _json(lab: Lab, *args: str) -> Any:
    result = _cli(lab, *args, "--output", "json")
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)


def _poll(what: str, probe: Callable[[], Any], *, timeout: float = 60.0) -> Any:
    """``probe()`` until it returns something truthy (that value); fails naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not reached within {timeout:.0f} s")
        time.sleep(0.1)


def _owner(lab: Lab, run_id: str) -> int | None:
    """The pid of run ``run_id``'s owner process while it holds the run, else None."""
    return OwnerLock.holder(StoreLayout(home=lab.home).run_dir(run_id) / "mutation.lock") or None


def _kernel_pids(runtime: Path, kernel_id: str) -> list[int]:
    """Processes started with kernel ``kernel_id``'s connection file (the kernel itself)."""
    needle = str(runtime / f"kernel-{kernel_id}.json").encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            pids.append(int(proc.name))
    return pids


def _shut_down_from_the_file_menu(page: Any) -> None:
    """File > Shut Down, then the confirmation dialog's Shut Down button: what a person clicks."""
    page.locator(".lm-MenuBar-item", has_text="File").click()
    page.locator(".lm-Menu-item[data-command='filemenu:shutdown']").click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator(".jp-Dialog-header", has_text="Shutdown confirmation").wait_for(timeout=30_000)
    dialog.locator("button.jp-mod-warn", has_text="Shut Down").click()


def _stop_left_owners(lab: Lab) -> None:
    """A failed test must not leave an owner process (and its node) behind: cancel, then kill."""
    runs = lab.home / "workflows" / "runs"
    for folder in sorted(runs.iterdir()) if runs.is_dir() else []:
        pid = _owner(lab, folder.name)
        if not pid:
            continue
        _cli(lab, "cancel", folder.name, "--wait", "10")
        deadline = time.monotonic() + 20
        while _owner(lab, folder.name) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_lab_shut_down_from_its_file_menu_leaves_the_run_going(lab: Lab, page: Any) -> None:
    (lab.root / ".rho").mkdir(exist_ok=True)
    nbformat.write(_notebook(CELLS), lab.root / "outlives_lab.ipynb")
    try:
        _open(page, lab, "outlives_lab.ipynb")
        _run_all(page)
        [run] = _poll("a run in the store", lambda: _json(lab, "runs"))
        run_id = run["run_id"]
        _poll(
            "slow running",
            lambda: _json(lab, "status", run_id)["nodes"]["slow"]["state"] == "running",
        )
        owner = _owner(lab, run_id)
        [kernel] = lab.api("/api/kernels")
        kernels = _kernel_pids(lab.log.parent / "runtime", kernel["id"])
        assert owner and kernels and owner not in kernels and owner != lab.process.pid

        _shut_down_from_the_file_menu(page)
        try:
            code = lab.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"jupyter lab still runs 60 s after File > Shut Down:\n{lab.log.read_text()[-4000:]}")
        assert code == 0, lab.log.read_text()[-4000:]
        _poll("the kernel gone", lambda: not any(alive(pid) for pid in kernels), timeout=30)

        # the server and the kernel that started the run are gone; the run is not
        assert alive(owner) and _owner(lab, run_id) == owner
        status = _json(lab, "status", run_id)
        assert status["lifecycle"] == "running", status
        assert status["nodes"]["slow"]["state"] == "running", status
        assert not (lab.root / "marker.txt").exists()

        (lab.root / "go").write_text("")
        final = _poll(
            "the run completed",
            lambda: (s := _json(lab, "status", run_id))["lifecycle"] == "completed" and s,
        )
        assert final["outcome"] == "success", final
        assert {n: (v["state"], v["attempt"]) for n, v in final["nodes"].items()} == {
            "slow": ("success", 1),
            "after": ("success", 1),
        }
        assert (lab.root / "marker.txt").read_text() == "slow\nafter\n"  # each node ran exactly once
        _poll("the owner ended with its run", lambda: not alive(owner), timeout=30)
    finally:
        _stop_left_owners(lab)
