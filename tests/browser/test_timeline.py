"""The Timeline tab of the Workflows sidebar in a real JupyterLab (chromium through Playwright).

A six-node run with a retry: `flaky` is cancelled while its first attempt runs and `resume` starts
it again (command nodes have no retry setting: a graph node's attempt is started again on resume
after a cancellation, or on --recover-uncertain after a crash). The sidebar's run view gets the
Timeline tab beside the DAG: six rows, one bar per attempt, the first attempt of `flaky` marked as
an earlier attempt, the critical path marked. Screenshot: test-artifacts/timeline.png, and
docs/img/timeline.png with RHO_DOCS_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, REPO, Lab
from tests.conftest import star

pytestmark = pytest.mark.browser

C = "timeout_seconds = 120, max_output_bytes = 10000"

SIX = star(f"""
return workflow(name = "nightly", nodes = [
    command(name = "fetch", argv = ["sleep", "0.6"], {C}),
    command(name = "lint", argv = ["sleep", "0.4"], needs = ["fetch"], {C}),
    command(name = "flaky-tests", argv = ["sh", "-c", "if [ -e tried ]; then sleep 0.8; else touch tried; sleep 120; fi"],
        needs = ["fetch"], {C}),
    command(name = "unit-tests", argv = ["sleep", "1"], needs = ["fetch"], {C}),
    command(name = "package", argv = ["sleep", "0.3"], needs = ["flaky-tests", "lint", "unit-tests"], {C}),
    command(name = "publish", argv = ["sleep", "0.2"], needs = ["package"], {C}),
])
""")

DOCS_IMG = REPO / "docs" / "img"


def _env(lab: Lab) -> dict[str, str]:
    return {**os.environ, "RHO_NOTEBOOK_HOME": str(lab.home), "PYTHONPATH": str(REPO)}


def _cli(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rho_notebook", *args],
        cwd=lab.root,
        env=_env(lab),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _run_with_a_retry(lab: Lab) -> str:
    """Run SIX, cancel it while flaky-tests' first attempt runs, resume it to success: the run ID."""
    (lab.root / ".rho").mkdir(exist_ok=True)
    (lab.root / "nightly.star").write_text(SIX)
    planned = _cli(lab, "plan", "nightly.star", "--output", "json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)["plan_id"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "run", plan, "--yes", "--output", "jsonl"],
        cwd=lab.root,
        env=_env(lab),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    run_id = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        record = json.loads(proc.stdout.readline() or "{}")
        run_id = record.get("run_id", run_id)
        if record.get("kind") == "process_started" and record.get("node") == "flaky-tests":
            break
    else:
        pytest.fail("flaky-tests never started")
    time.sleep(0.5)
    assert _cli(lab, "cancel", run_id).returncode == 0
    proc.wait(timeout=60)
    resumed = _cli(lab, "resume", run_id, "--yes", "--output", "json")
    assert resumed.returncode == 0, resumed.stderr
    return run_id


def _shot(page: Any, name: str, clip: dict[str, float] | None) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    targets = [ARTIFACTS / name]
    if os.environ.get("RHO_DOCS_SCREENSHOTS"):
        targets.append(DOCS_IMG / name)
    for target in targets:
        page.screenshot(path=str(target), clip=clip)


def _widen(page: Any, width: float) -> None:
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle:visible").first
    box = handle.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 300)
    page.mouse.down()
    page.mouse.move(width, box["y"] + 300, steps=6)
    page.mouse.up()
    page.wait_for_timeout(300)


def test_timeline_tab_of_a_six_node_run_with_a_retry(lab: Lab, page: Any) -> None:
    try:
        lab.api("/rho/api/plans")
    except OSError as err:
        pytest.fail(f"the rho_notebook server extension does not answer ({err}); `pip install -e .` enables it")
    run_id = _run_with_a_retry(lab)

    page.goto(lab.tree("nightly.star"))
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='rho-workflows']")
    tab.wait_for(timeout=60_000)
    tab.click()
    page.locator(".rho-sidebar").wait_for(state="visible")
    _widen(page, 900)
    row = page.locator(f".rho-sb-finished-runs .rho-sb-run[data-run-id='{run_id}']")
    row.wait_for(timeout=20_000)
    row.click()
    selected = page.locator(f".rho-sb-selected[data-run-id='{run_id}']")
    dag = selected.locator(".rho-dag[data-lifecycle='completed']")
    dag.locator("svg.rho-graph").wait_for(timeout=15_000)

    # the Timeline tab sits beside the DAG; opening it hides the DAG and draws the rows
    dag.locator(".rho-tabs .rho-tab-dag").wait_for()
    dag.locator(".rho-tabs .rho-tab-timeline").click()
    timeline = dag.locator(".rho-timeline")
    timeline.locator("g.rho-tl-row").nth(5).wait_for(timeout=15_000)
    assert dag.locator(".rho-body").is_hidden()
    rows = timeline.locator("g.rho-tl-row")
    names = [rows.nth(i).get_attribute("data-node") for i in range(rows.count())]
    assert sorted(names) == ["fetch", "flaky-tests", "lint", "package", "publish", "unit-tests"]

    # every row ran once, but flaky-tests: its cancelled first attempt is the retry mark
    flaky = timeline.locator("g.rho-tl-row[data-node='flaky-tests']")
    assert flaky.locator("rect.rho-tl-retry[data-attempt='1'][data-state='cancellation']").count() == 1
    assert flaky.locator("rect.rho-tl-run[data-attempt='2'][data-state='success']").count() == 1
    for name in ("fetch", "lint", "unit-tests", "package", "publish"):
        bars = timeline.locator(
            f"g.rho-tl-row[data-node='{name}'] rect.rho-tl-run, g.rho-tl-row[data-node='{name}'] rect.rho-tl-retry"
        )
        assert bars.count() >= 1, name
    hover = flaky.locator("rect.rho-tl-retry title").text_content() or ""
    assert "attempt 1 (earlier attempt: retried): cancellation" in hover

    # the critical path: fetch first, then package and publish, through flaky-tests (resumed last)
    critical = [r.get_attribute("data-node") for r in timeline.locator("g.rho-tl-row.rho-tl-critical").all()]
    assert {"fetch", "package", "publish"} <= set(critical)
    answer = lab.api(f"/rho/api/runs/{run_id}/timeline")
    assert sorted(critical) == sorted(answer["critical_path"])
    assert "critical path" in (timeline.locator(".rho-tl-note").text_content() or "")

    top, drawn = selected.bounding_box(), timeline.bounding_box()
    _shot(page, "timeline.png", clip={**top, "height": drawn["y"] + drawn["height"] + 12 - top["y"]})

    # back to the DAG
    dag.locator(".rho-tabs .rho-tab-dag").click()
    dag.locator(".rho-body").wait_for(state="visible")
    assert timeline.is_hidden()
    assert not [m for m in page.console_messages if m.startswith("pageerror")]


def test_docs_image_is_committed() -> None:
    """docs/usage.md shows docs/img/timeline.png (made by the test above with RHO_DOCS_SCREENSHOTS=1)."""
    assert Path(DOCS_IMG / "timeline.png").is_file()


WIDGET_CELLS = [
    "import pathlib\n"
    "from rho_notebook.service import Consent, Service, StartRun, default_runner\n"
    "from rho_notebook.source.workspace import Workspace\n"
    "from rho_notebook.widgets import run_view\n"
    "from rho_notebook.widgets._testing import ThreadRunHandle\n"
    "root = pathlib.Path('tl-widget').resolve()\n"
    "(root / '.rho').mkdir(parents=True, exist_ok=True)\n"
    "service = Service.default()",
    "plan = await service.plan(service.request_for(root / 'nightly.star', inputs={}, workspace=Workspace(root=root)))\n"
    "run_id = default_runner().call(service.create_run_of(plan, StartRun(plan=plan.plan_id, consent=Consent(yes=True))))\n"
    "handle = ThreadRunHandle(service, run_id)\nview = run_view(handle)\nhandle.start()\nview",
    "handle.wait().outcome",
]


def test_widget_has_the_timeline_tab_and_its_saved_picture(lab: Lab, page: Any) -> None:
    """The notebook widget: the same tab, its rows from the kernel; the saved picture has the timeline."""
    import nbformat

    folder = lab.root / "tl-widget"
    folder.mkdir(exist_ok=True)
    (folder / "nightly.star").write_text(SIX.replace("sleep 120", "sleep 0.5"))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in WIDGET_CELLS]
    nbformat.write(nb, lab.root / "timeline_widget.ipynb")

    page.goto(lab.tree("timeline_widget.ipynb"))
    page.wait_for_function(
        "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        " const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;"
        " return Boolean(k && k.status === 'idle' && w.content && w.content.widgets.length); }",
        timeout=120_000,
    )
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    dag = page.locator(".rho-dag[data-mode='run'][data-lifecycle='completed']").last
    dag.wait_for(timeout=120_000)
    # the final picture replaces the output (and re-renders the widget): wait for it, then use the tab
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.widgets.some(c => c.model.type === 'code'"
        " && Array.from({length: c.model.outputs.length}, (_, i) => c.model.outputs.get(i).metadata)"
        ".some(m => m && m.rho_notebook && m.rho_notebook.picture === 'completed'))",
        timeout=60_000,
    )
    dag = page.locator(".rho-dag[data-mode='run'][data-lifecycle='completed']").last
    dag.locator(".rho-tabs .rho-tab-timeline").click()
    rows = dag.locator(".rho-timeline g.rho-tl-row")
    rows.nth(5).wait_for(timeout=30_000)
    assert sorted(rows.nth(i).get_attribute("data-node") for i in range(rows.count())) == [
        "fetch",
        "flaky-tests",
        "lint",
        "package",
        "publish",
        "unit-tests",
    ]
    assert dag.locator(".rho-timeline g.rho-tl-critical").count() >= 3
    ARTIFACTS.mkdir(exist_ok=True)
    dag.screenshot(path=str(ARTIFACTS / "timeline-widget.png"))

    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    saved = nbformat.read(lab.root / "timeline_widget.ipynb", as_version=4)
    pictures = [
        o for cell in saved.cells for o in cell.get("outputs", []) if (o.get("metadata") or {}).get("rho_notebook")
    ]
    final = [o for o in pictures if o["metadata"]["rho_notebook"].get("picture") == "completed"]
    assert final and "image/png" in final[-1]["data"]
    height = final[-1]["metadata"]["image/png"]["height"]
    assert height > 200  # the DAG with the timeline's six rows under it
