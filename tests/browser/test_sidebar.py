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


PIPELINE = star(f"""
return workflow(name = "pipeline", nodes = [
    command(name = "fetch-sources", argv = ["echo", "fetched 12 repositories"], {C}),
    command(name = "compile-backend", argv = ["echo", "backend built"], needs = ["fetch-sources"], {C}),
    command(name = "compile-frontend", argv = ["echo", "frontend built"], needs = ["fetch-sources"], {C}),
    command(name = "integration-tests", argv = ["sh", "-c", "echo 128 passed; echo 2 skipped >&2"],
        needs = ["compile-backend", "compile-frontend"], {C}),
    command(name = "package-release", argv = ["echo", "packaged"], needs = ["integration-tests"], {C}),
    command(name = "publish-artifacts", argv = ["echo", "published"], needs = ["package-release"], {C}),
])
""")

# the page's size (conftest's browser context) and the smallest DAG the selected run may get
PAGE_W, PAGE_H = 1500, 1000
MIN_DAG_HEIGHT = 220
MIN_LABEL_PX = 11
DOCS_IMG = REPO / "docs" / "img"


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
        # the approval node waits for a person: drawn "waiting for approval" (shown), not running
        dag.locator(
            "g.rho-node[data-name='ship-it']:is([data-state='waiting_for_approval'], [data-state='running'])"
        ).wait_for(timeout=30_000)
        page.locator(f".rho-sb-run[data-run-id='{run_id}'][data-lifecycle='waiting']").wait_for(timeout=15_000)

        card = page.locator(".rho-sb-approval[data-node='ship-it']")
        card.wait_for(timeout=15_000)
        assert "Ship" in card.locator(".rho-sb-facts").inner_text() and "production" in card.inner_text()
        card.locator(".rho-sb-comment").fill("green across the board")
        page.screenshot(path=str(_artifact("sidebar-approval.png")))
        _shot(page, "jupyterlab-sidebar.png")
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
    _shot(page, "jupyterlab-run-view.png")

    # a saved plan runs from the sidebar only after its exact digest is shown and confirmed; while a
    # run is shown, Saved plans is folded: unfold it first
    plans = page.locator(".rho-sb-section:has(.rho-sb-plans)")
    assert plans.get_attribute("data-collapsed") == "true"
    plans.locator("> h3").click()
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


# -- layout: the selected run gets the room -------------------------------------------------------


def _box(locator: Any) -> dict[str, float]:
    box = locator.bounding_box()
    assert box is not None, f"{locator} has no box (not visible)"
    return dict(box)


def _intersection(a: dict[str, float], b: dict[str, float]) -> dict[str, float] | None:
    x0, y0 = max(a["x"], b["x"]), max(a["y"], b["y"])
    x1 = min(a["x"] + a["width"], b["x"] + b["width"])
    y1 = min(a["y"] + a["height"], b["y"] + b["height"])
    if x1 - x0 < 0.5 or y1 - y0 < 0.5:
        return None
    return {"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0}


def _label_px(dag: Any) -> float:
    """The drawn size of node labels: their CSS font size times the graph's scale on screen."""
    return float(
        dag.evaluate(
            """(el) => {
                const svg = el.querySelector('svg.rho-graph');
                const label = svg.querySelector('text.rho-label');
                const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
                return parseFloat(getComputedStyle(label).fontSize) * scale;
            }"""
        )
    )


def _assert_dag_readable(dag: Any) -> dict[str, float]:
    view = _box(dag.locator(".rho-viewport"))
    assert view["x"] >= 0 and view["y"] >= 0, view
    assert view["x"] + view["width"] <= PAGE_W + 0.5 and view["y"] + view["height"] <= PAGE_H + 0.5, view
    assert view["height"] >= MIN_DAG_HEIGHT, view
    assert _label_px(dag) >= MIN_LABEL_PX
    return view


def _assert_dag_fitted(dag: Any) -> dict[str, float]:
    """The sidebar's DAG starts fitted: the whole graph inside its viewport, the viewport on the page."""
    view = _box(dag.locator(".rho-viewport"))
    assert view["x"] >= 0 and view["y"] >= 0, view
    assert view["x"] + view["width"] <= PAGE_W + 0.5 and view["y"] + view["height"] <= PAGE_H + 0.5, view
    assert view["height"] >= MIN_DAG_HEIGHT, view
    graph = _box(dag.locator("svg.rho-graph"))
    assert graph["width"] <= view["width"] + 1 and graph["height"] <= view["height"] + 1, (graph, view)
    nodes = dag.locator("g.rho-node rect")
    for i in range(nodes.count()):
        box = _box(nodes.nth(i))
        assert box["x"] >= view["x"] - 1 and box["x"] + box["width"] <= view["x"] + view["width"] + 1, (i, box, view)
        assert box["y"] >= view["y"] - 1 and box["y"] + box["height"] <= view["y"] + view["height"] + 1, (i, box, view)
    return view


def _assert_pane_hides_no_node(dag: Any) -> None:
    """The node pane's box overlaps no node where the node is shown (inside the graph's viewport)."""
    pane = _box(dag.locator(".rho-pane"))
    view = _box(dag.locator(".rho-viewport"))
    nodes = dag.locator("g.rho-node")
    seen = 0
    for i in range(nodes.count()):
        shown = _intersection(_box(nodes.nth(i).locator("rect")), view)
        if shown is None:
            continue
        seen += 1
        assert _intersection(shown, pane) is None, (nodes.nth(i).get_attribute("data-name"), shown, pane)
    assert seen, "no node in sight"


def _zoom(dag: Any) -> float:
    return float(dag.get_attribute("data-zoom") or "nan")


def _settled_zoom(page: Any, dag: Any) -> float:
    """The DAG's zoom once it stops changing (a resize refits it an animation frame or two later)."""
    last = _zoom(dag)
    for _ in range(50):
        page.wait_for_timeout(100)
        now = _zoom(dag)
        if now == last:
            return now
        last = now
    return last


def _widen(page: Any, width: float) -> None:
    """Drag the splitter between the left area and the main area to `width` px from the page's left."""
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle:visible").first
    box = _box(handle)
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 300)
    page.mouse.down()
    page.mouse.move(width, box["y"] + 300, steps=6)
    page.mouse.up()
    page.wait_for_timeout(300)
    sidebar = _box(page.locator(".rho-sidebar"))
    assert abs(sidebar["x"] + sidebar["width"] - width) < 40, (box, sidebar, width)


def _shot(page: Any, name: str, clip: dict[str, float] | None = None) -> None:
    """A screenshot into test-artifacts/, and into docs/img/ with RHO_DOCS_SCREENSHOTS=1."""
    targets = [_artifact(name)]
    if os.environ.get("RHO_DOCS_SCREENSHOTS"):
        targets.append(DOCS_IMG / name)
    for target in targets:
        page.screenshot(path=str(target), clip=clip)


def test_sidebar_layout_gives_the_selected_run_a_readable_dag(lab: Lab, page: Any) -> None:
    _installed(lab)
    pipeline = _plan(lab, "pipeline", PIPELINE)
    _plan(lab, "hello", HELLO)
    for _ in range(6):
        ran = _cli(lab, "run", pipeline["plan_id"], "--yes", "--output", "jsonl")
        assert ran.returncode == 0, ran.stderr
    runs = [r for r in lab.api("/rho/api/runs") if r.get("workflow") == "pipeline"]
    assert len(runs) >= 6

    page.goto(lab.tree("pipeline.star"))
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='rho-workflows']")
    tab.wait_for(timeout=60_000)
    tab.click()
    sidebar = page.locator(".rho-sidebar")
    sidebar.wait_for(state="visible")
    finished = page.locator(".rho-sb-finished-runs .rho-sb-run")
    page.wait_for_function("document.querySelectorAll('.rho-sb-finished-runs .rho-sb-run').length >= 6", timeout=20_000)
    _widen(page, 620)
    plans = page.locator(".rho-sb-section:has(.rho-sb-plans)")
    assert plans.get_attribute("data-collapsed") == "false"

    # select a run far down the list: the lists shorten, the plans fold, the DAG gets the room
    finished.nth(5).click()
    selected = page.locator(".rho-sb-selected[data-run-id]")
    dag = selected.locator(".rho-dag[data-lifecycle='completed']")
    dag.locator("svg.rho-graph").wait_for(timeout=15_000)
    page.wait_for_timeout(300)
    assert "rho-sb-focus" in (sidebar.get_attribute("class") or "")
    assert plans.get_attribute("data-collapsed") == "true"
    view = _assert_dag_fitted(dag)  # the sidebar starts at "fit" (the default zoom setting)
    lists = _box(page.locator(".rho-sb-lists"))
    assert lists["height"] <= 0.4 * _box(sidebar)["height"], lists
    _shot(page, "jupyterlab-sidebar-runs.png")

    # folding a list gives the DAG more height; unfolding gives it back
    live_heading = page.locator(".rho-sb-section:has(.rho-sb-live-runs) > h3")
    finished_heading = page.locator(".rho-sb-section:has(.rho-sb-finished-runs) > h3")
    live_heading.click()
    finished_heading.click()
    page.wait_for_timeout(200)
    assert finished.first.is_hidden()
    assert _box(dag.locator(".rho-viewport"))["height"] > view["height"]
    live_heading.click()
    finished_heading.click()
    finished.first.wait_for(state="visible")

    # zoom: + and Ctrl+wheel scale the graph up, drag pans, fit shows it whole
    before = _settled_zoom(page, dag)  # the unfolded lists shrank the view: the DAG is fitted again first
    label_before = _label_px(dag)
    dag.locator(".rho-zoom-in").click()
    assert _zoom(dag) > before and _label_px(dag) > label_before
    viewport = dag.locator(".rho-viewport")
    view = _box(viewport)
    page.mouse.move(view["x"] + view["width"] / 2, view["y"] + view["height"] / 2)
    stepped = _zoom(dag)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -300)
    page.keyboard.up("Control")
    page.wait_for_function(f"Number(document.querySelector('.rho-sb-selected .rho-dag').dataset.zoom) > {stepped}")
    scroll = viewport.evaluate(
        "(v) => [v.scrollLeft, v.scrollTop, v.scrollWidth > v.clientWidth || v.scrollHeight > v.clientHeight]"
    )
    assert scroll[2], "zoomed in, the graph is larger than its viewport"
    page.mouse.down()
    page.mouse.move(view["x"] + view["width"] / 2 + 90, view["y"] + view["height"] / 2 + 70, steps=6)
    page.mouse.up()
    panned = viewport.evaluate("(v) => [v.scrollLeft, v.scrollTop]")
    assert panned != scroll[:2], (scroll, panned)
    assert dag.locator(".rho-pane").is_hidden(), "a drag is not a click on a node"
    dag.locator(".rho-zoom-fit").click()
    graph = _box(dag.locator("svg.rho-graph"))
    view = _box(viewport)
    assert graph["width"] <= view["width"] + 1 and graph["height"] <= view["height"] + 1, (graph, view)
    fitted = _zoom(dag)
    dag.locator(".rho-zoom-out").click()
    assert _zoom(dag) < fitted
    # closed and selected again, the run's view starts fitted again
    selected.locator(".rho-sb-close").click()
    assert "rho-sb-focus" not in (sidebar.get_attribute("class") or "")
    assert plans.get_attribute("data-collapsed") == "false"
    finished.nth(5).click()
    dag.locator("svg.rho-graph").wait_for(timeout=15_000)
    page.wait_for_timeout(300)
    _assert_dag_fitted(dag)

    # the node pane goes below the graph in the sidebar and hides no node
    dag.locator("g.rho-node[data-name='integration-tests']").click()
    pane = dag.locator(".rho-pane")
    pane.locator(".rho-section-stdout pre").wait_for(timeout=15_000)
    assert dag.get_attribute("data-pane") == "below"
    _assert_pane_hides_no_node(dag)
    _assert_dag_fitted(dag)
    _shot(page, "jupyterlab-sidebar-node-pane.png")

    # a wide sidebar puts the pane beside the graph; the attempts table scrolls, it keeps its columns
    _widen(page, 1250)
    page.wait_for_function("document.querySelector('.rho-sb-selected .rho-dag').dataset.pane === 'side'", timeout=5_000)
    _assert_pane_hides_no_node(dag)
    _assert_dag_fitted(dag)
    attempts = pane.locator(".rho-section-attempts")
    attempts.wait_for(timeout=15_000)
    _shot(page, "jupyterlab-sidebar-wide.png")
    wrap = attempts.locator(".rho-table-scroll")
    assert wrap.evaluate("(w) => getComputedStyle(w).overflowX") == "auto"
    headers = attempts.locator("th")
    assert headers.count() == 6
    widths = [_box(headers.nth(i))["width"] for i in range(6)]
    assert min(widths) > 8, widths
    # squeezed narrow, the table scrolls instead of dropping columns
    _widen(page, 700)
    page.wait_for_function(
        "document.querySelector('.rho-sb-selected .rho-dag').dataset.pane === 'below'", timeout=5_000
    )
    _assert_pane_hides_no_node(dag)
    cells = wrap.evaluate("(w) => Array.from(w.querySelectorAll('th')).map((th) => th.getBoundingClientRect().width)")
    assert len(cells) == 6 and min(cells) > 8, cells

    # the run in a main-area tab: the graph fills the tab, readable, the pane beside it; plain wheel zooms
    selected.locator(".rho-sb-open").click()
    main = page.locator(".rho-main-run.rho-dag[data-lifecycle='completed']")
    main.locator("svg.rho-graph").wait_for(timeout=15_000)
    page.wait_for_timeout(300)
    _assert_dag_readable(main)  # the main-area tab starts at the readable zoom
    main_view = _box(main.locator(".rho-viewport"))
    assert main_view["height"] >= 400 and main_view["y"] + main_view["height"] <= PAGE_H, main_view
    zoom = _zoom(main)
    page.mouse.move(main_view["x"] + main_view["width"] / 2, main_view["y"] + main_view["height"] / 2)
    page.mouse.wheel(0, -200)
    page.wait_for_function(f"Number(document.querySelector('.rho-main-run').dataset.zoom) > {zoom}")
    main.locator("g.rho-node[data-name='integration-tests']").click()
    main.locator(".rho-pane .rho-section-attempts").wait_for(timeout=15_000)
    main.locator(".rho-zoom-fit").click()
    graph = _box(main.locator("svg.rho-graph"))
    main_view = _box(main.locator(".rho-viewport"))
    assert graph["height"] <= main_view["height"] + 1 and graph["width"] <= main_view["width"] + 1
    _assert_pane_hides_no_node(main)
    _shot(page, "jupyterlab-run-tab.png")

    errors = [m for m in page.console_messages if m.startswith("pageerror")]  # type: ignore[attr-defined]
    assert not errors, errors
