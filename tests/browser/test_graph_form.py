"""An item graph's human step answered in the Workflows sidebar of a real JupyterLab (chromium via
Playwright). The triage example of examples/graphs/ runs from the terminal CLI in a subprocess and
waits at its ``escalate`` step; the test fills the step's form in the sidebar's DAG view (after the
server refused an empty answer, naming the field, inside the form), submits it, and checks the
run's result item and the node pane's input and output items.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from tests.browser.conftest import REPO, Lab
from tests.browser.test_sidebar import _artifact, _cli, _installed, _journal, _shot

pytestmark = pytest.mark.browser

EXAMPLES = REPO / "examples" / "graphs"


def _open_sidebar(lab: Lab, page: Any) -> None:
    page.goto(lab.tree("triage.graph.yaml"))
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='rho-workflows']")
    try:
        tab.wait_for(timeout=60_000)
    except Exception:  # noqa: BLE001 - turn a timeout into the actionable message
        pytest.fail("no Workflows tab in the left sidebar: the rho-notebook lab extension is not installed")
    tab.click()
    page.locator(".rho-sidebar").wait_for(state="visible")
    # widen the left area so the form and the DAG have room
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle").first
    box = handle.bounding_box()
    if box is not None:
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 200)
        page.mouse.down()
        page.mouse.move(box["x"] + 330, box["y"] + 200, steps=5)
        page.mouse.up()


def test_a_human_step_form_is_answered_in_the_sidebar(lab: Lab, page: Any) -> None:
    _installed(lab)
    (lab.root / ".rho").mkdir(exist_ok=True)
    for source in EXAMPLES.iterdir():
        if source.is_file():
            shutil.copy(source, lab.root / source.name)
    _open_sidebar(lab, page)

    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(lab.home), "PYTHONPATH": str(REPO)}
    terminal = subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "run", "triage.graph.yaml", "--input", "score=70", "--yes"]
        + ["--output", "jsonl"],
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
        page.locator(f".rho-sb-run[data-run-id='{run_id}'][data-lifecycle='waiting']").wait_for(timeout=60_000)
        page.locator(f".rho-sb-live-runs .rho-sb-run[data-run-id='{run_id}']").click()
        dag = page.locator(f".rho-sb-selected[data-run-id='{run_id}'] .rho-dag")
        # nothing runs while the step waits for its answer
        dag.locator("g.rho-node[data-name='escalate'][data-state='waiting_for_approval']").wait_for(timeout=30_000)
        # outside the sidebar: the status bar counts the waiting step and a notification says so
        page.locator(".rho-status-item[data-waiting='1']").wait_for(timeout=30_000)
        toast = page.locator(".Toastify__toast", has_text="waits for a person")
        toast.wait_for(timeout=30_000)
        assert run_id[:13] in toast.inner_text(), toast.inner_text()

        # the DAG view draws the waiting step's form (the approvals above it stay for approval nodes)
        form = dag.locator("form.rho-form[data-node='escalate']")
        form.wait_for(timeout=30_000)
        assert page.locator(".rho-sb-approval").count() == 0
        dag.locator("g.rho-node[data-name='escalate'].rho-asking").wait_for(timeout=15_000)
        assert form.locator(".rho-form-prompt").inner_text() == "Escalate ticket 70 (hardware, 3 words)?"
        assignee = form.locator("select.rho-field-input[name='assignee']")
        note = form.locator("input.rho-field-input[name='note'][type='text']")
        assert "Who takes it" in form.locator(".rho-field[data-field='assignee']").inner_text()
        assert assignee.input_value() == "" and note.input_value() == ""  # required enum unset; the default ""

        # the server refuses an answer without the required field; the form says so and stays
        form.locator(".rho-submit").click()
        refusal = form.locator(".rho-form-error")
        refusal.wait_for(state="visible", timeout=15_000)
        assert "assignee" in refusal.inner_text()
        form = dag.locator("form.rho-form[data-node='escalate']")  # drawn again with the message
        form.locator(".rho-submit:enabled").wait_for(timeout=15_000)

        form.locator("select.rho-field-input[name='assignee']").select_option(label="oncall")
        form.locator("input.rho-field-input[name='note']").fill("paged the on-call engineer")
        _shot(page, "jupyterlab-sidebar-form.png")
        form.locator(".rho-submit").click()

        page.locator(f".rho-sb-finished-runs .rho-sb-run[data-run-id='{run_id}'][data-outcome='success']").wait_for(
            timeout=60_000
        )
        assert terminal.wait(timeout=60) == 0
    finally:
        if terminal.poll() is None:
            terminal.kill()
        terminal.wait()

    assert page.locator(".rho-sb-approval").count() == 0
    result = _cli(lab, "result", run_id, "--output", "json")
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)["output"]
    assert output["assignee"] == "oncall" and output["note"] == "paged the on-call engineer"
    assert output["level"] == "high" and output["label"] == "ticket 70"
    answered = next(e for e in _journal(lab, run_id) if e["kind"] == "approval_decided")
    assert answered["via"] == "server" and answered["answer"]["assignee"] == "oncall"

    # the node pane of an item step: the item it received and the item it passed on
    dag.locator("g.rho-node[data-name='escalate']").click()
    pane = dag.locator(".rho-pane")
    received = pane.locator("xpath=.//details[summary[normalize-space(.)='input item']]")
    passed = pane.locator("xpath=.//details[summary[normalize-space(.)='output item']]")
    received.wait_for(timeout=15_000)
    passed.wait_for(timeout=15_000)
    assert "ticket 70" in received.inner_text() and "oncall" not in received.inner_text()
    assert '"oncall"' in passed.inner_text() and '"paged the on-call engineer"' in passed.inner_text()
    page.screenshot(path=str(_artifact("sidebar-graph-items.png")))

    errors = [m for m in page.console_messages if m.startswith("pageerror")]  # type: ignore[attr-defined]
    assert not errors, errors
