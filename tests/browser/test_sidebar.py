"""The Workflows sidebar in a real JupyterLab, driven by Debian's chromium through Playwright.

The lab (``lab`` fixture of tests/browser/conftest.py) loads the rho_notebook server extension and
the ``rho-notebook`` lab extension from the environment, as installed by ``pip install -e .``. The
test opens the sidebar, starts a run from the terminal CLI in a subprocess, watches it appear and
progress live, approves its approval node from the sidebar, watches it finish, then starts a saved
plan from the sidebar after confirming its digest. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, REPO, Lab
from tests.conftest import star

pytestmark = pytest.mark.browser

C = "timeout_seconds = 120, max_output_bytes = 10000"

RELEASE = star(f"""
return workflow(name = "release", nodes = [
    command(name = "build", argv = ["sh", "-c", "echo compiling; sleep 1; echo built 3 targets"], {C}),
    command(name = "unit-tests", argv = ["sh", "-c", "echo running; sleep 1; echo 42 passed"], needs = ["build"], {C}),
    command(name = "lint", argv = ["sh", "-c", "sleep 0.5; echo clean"], needs = ["build"], {C}),
    approval(name = "ship-it", prompt = template(["Ship **release** to production? Build and tests are green."]),
        needs = ["unit-tests", "lint"], timeout_seconds = 300, max_output_bytes = 1000),
    command(name = "publish", argv = ["echo", "published; approved by", output("ship-it", ["by"])], needs = ["ship-it"], {C}),
    command(name = "announce", argv = ["echo", "announced"], needs = ["publish"], {C}),
])
""")

HELLO = star(f"""
return workflow(name = "hello", nodes = [
    command(name = "greet", argv = ["echo", "hello from the sidebar"], {C}),
])
""")


def _cli(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(lab.home), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "rho_notebook", *args],
        cwd=lab.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _plan(lab: Lab, name: str, source: str) -> dict[str, Any]:
    (lab.root / ".rho").mkdir(exist_ok=True)
    (lab.root / f"{name}.star").write_text(source)
    planned = _cli(lab, "plan", f"{name}.star", "--output", "json")
    assert planned.returncode == 0, planned.stderr
    data: dict[str, Any] = json.loads(planned.stdout)
    return data


def _installed(lab: Lab) -> None:
    """Fail with a useful message when the environment lacks the server extension."""
    try:
        lab.api("/rho/api/plans")
    except OSError as err:
        pytest.fail(f"the rho_notebook server extension does not answer ({err}); `pip install -e .` enables it")


def _artifact(name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name


def _journal(lab: Lab, run_id: str) -> list[dict[str, Any]]:
    path = lab.home / "workflows" / "runs" / run_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_sidebar_follows_a_terminal_run_and_approves_it(lab: Lab, page: Any) -> None:
    _installed(lab)
    release = _plan(lab, "release", RELEASE)
    hello = _plan(lab, "hello", HELLO)

    page.goto(lab.tree("release.star"))
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='rho-workflows']")
    try:
        tab.wait_for(timeout=60_000)
    except Exception:  # noqa: BLE001 - turn a timeout into the actionable message
        pytest.fail(
            "no Workflows tab in the left sidebar: the rho-notebook lab extension is not installed in this environment"
        )
    tab.click()
    sidebar = page.locator(".rho-sidebar")
    sidebar.wait_for(state="visible")
    # widen the left area so the DAG has room (drag the splitter between the sidebar and the main area)
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle").first
    box = handle.bounding_box()
    if box is not None:
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 200)
        page.mouse.down()
        page.mouse.move(box["x"] + 330, box["y"] + 200, steps=5)
        page.mouse.up()
    page.locator(f".rho-sb-plan[data-plan-id='{release['plan_id']}']").wait_for(timeout=20_000)

    # a run started from a terminal appears and updates live
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(lab.home), "PYTHONPATH": str(REPO)}
    terminal = subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "run", release["plan_id"], "--yes", "--output", "jsonl"],
        cwd=lab.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        first = json.loads(terminal.stdout.readline() if terminal.stdout else "{}")
        run_id = first["run_id"]
        row = page.locator(f".rho-sb-live-runs .rho-sb-run[data-run-id='{run_id}']")
        row.wait_for(timeout=15_000)
        assert row.get_attribute("data-lifecycle") in ("planned", "running")
        row.click()
        dag = page.locator(f".rho-sb-selected[data-run-id='{run_id}'] .rho-dag")
        dag.locator("svg.rho-graph").wait_for(timeout=15_000)
        # the DAG shows the nodes finishing one by one while the terminal owns the run
        dag.locator("g.rho-node[data-name='build'][data-state='success']").wait_for(timeout=30_000)
        dag.locator("g.rho-node[data-name='ship-it'][data-state='running']").wait_for(timeout=30_000)
        page.locator(f".rho-sb-run[data-run-id='{run_id}'][data-lifecycle='waiting']").wait_for(timeout=15_000)

        card = page.locator(".rho-sb-approval[data-node='ship-it']")
        card.wait_for(timeout=15_000)
        assert "Ship" in card.locator(".rho-sb-facts").inner_text() and "production" in card.inner_text()
        card.locator(".rho-sb-comment").fill("green across the board")
        page.screenshot(path=str(_artifact("sidebar-approval.png")))
        card.locator(".rho-sb-approve").click()

        finished = page.locator(f".rho-sb-finished-runs .rho-sb-run[data-run-id='{run_id}'][data-outcome='success']")
        finished.wait_for(timeout=30_000)
        dag.locator("g.rho-node[data-name='announce'][data-state='success']").wait_for(timeout=15_000)
        page.locator(".rho-sb-selected .rho-dag[data-lifecycle='completed'][data-outcome='success']").wait_for(
            timeout=15_000
        )
        assert terminal.wait(timeout=30) == 0
    finally:
        if terminal.poll() is None:
            terminal.kill()
        terminal.wait()

    decided = next(e for e in _journal(lab, run_id) if e["kind"] == "approval_decided")
    assert (
        decided["decision"] == "approve"
        and decided["via"] == "server"
        and decided["comment"] == "green across the board"
    )
    assert page.locator(".rho-sb-approval").count() == 0

    # node outputs: click a node of the DAG, its stdout shows in the pane
    dag.locator("g.rho-node[data-name='publish']").click()
    pane = dag.locator(".rho-pane")
    stdout = pane.locator(".rho-section-stdout pre")
    stdout.wait_for(timeout=15_000)
    assert "published; approved by" in stdout.inner_text()

    # the same live view, wide, in the main area
    page.locator(".rho-sb-selected .rho-sb-open").click()
    main = page.locator(".rho-main-run.rho-dag[data-lifecycle='completed']")
    main.locator("svg.rho-graph").wait_for(timeout=15_000)
    main.locator("g.rho-node[data-name='ship-it']").click()
    main.locator(".rho-pane .rho-section-value").wait_for(timeout=15_000)
    assert "green across the board" in main.locator(".rho-pane").inner_text()
    page.screenshot(path=str(_artifact("sidebar.png")))

    # a saved plan runs from the sidebar only after its exact digest is shown and confirmed
    plan_row = page.locator(f".rho-sb-plan[data-plan-id='{hello['plan_id']}']")
    plan_row.locator(".rho-sb-run-plan").click()
    confirm = plan_row.locator(".rho-sb-confirm")
    confirm.wait_for()
    assert confirm.locator(".rho-sb-digest").inner_text().strip() == hello["graph_digest"]
    runs_before = len(list((lab.home / "workflows" / "runs").iterdir()))
    confirm.locator(".rho-sb-confirm-run").click()
    selected = page.locator(f".rho-sb-selected[data-run-id]:not([data-run-id='{run_id}'])")
    selected.wait_for(timeout=30_000)  # the new run is selected as soon as it started
    selected.locator(".rho-dag[data-lifecycle='completed'][data-outcome='success']").wait_for(timeout=30_000)
    assert len(list((lab.home / "workflows" / "runs").iterdir())) == runs_before + 1
    server_run = selected.get_attribute("data-run-id")
    assert server_run
    page.locator(f".rho-sb-finished-runs .rho-sb-run[data-run-id='{server_run}'][data-outcome='success']").wait_for(
        timeout=15_000
    )
    manifest = json.loads((lab.home / "workflows" / "runs" / server_run / "manifest.json").read_text())
    assert manifest["origin"] == "server" and manifest["graph_digest"] == hello["graph_digest"]

    errors = [m for m in page.console_messages if m.startswith("pageerror")]  # type: ignore[attr-defined]
    assert not errors, errors
