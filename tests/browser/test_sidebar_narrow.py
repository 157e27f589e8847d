"""The Workflows sidebar at JupyterLab's default width (250 px), in a real lab with chromium.

Runs come from the terminal CLI (subprocesses), as a person's would. At the default width: the
selected run's DAG is fitted whole inside the panel, its waiting step (a human step's form, a
supervised launch's approval card) is scrolled into view, the DAG view's zoom controls sit on one
line, approval facts are laid out (the sha256 on one line, whole in its title) instead of raw JSON;
the search box and the state filter narrow the run lists; two ticked runs open the compare view
with the plan diff and the node whose value changed. Screenshots: jupyterlab-sidebar-narrow*.png
and jupyterlab-sidebar-compare.png (into docs/img/ with RHO_DOCS_SCREENSHOTS=1).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.browser.conftest import REPO, Lab
from tests.browser.test_sidebar import _box, _cli, _installed, _journal, _plan, _shot
from tests.conftest import star
from tests.kernel.helpers import owner_pid

pytestmark = pytest.mark.browser

C = "timeout_seconds = 120, max_output_bytes = 10000"
EXAMPLES = REPO / "examples" / "graphs"
SIDEBAR_MAX_W = 262  # JupyterLab's default left area is 250 px wide (plus its tab bar border)


def _greeting(word: str) -> str:
    return star(f"""
return workflow(name = "greetings", nodes = [
    command(name = "prepare", argv = ["echo", "ready"], {C}),
    command(name = "greet", argv = ["echo", "{word}"], needs = ["prepare"], {C}),
    command(name = "archive", argv = ["echo", "archived"], needs = ["greet"], {C}),
])
""")


SUPERVISED = star(f"""
return workflow(name = "guarded", nodes = [
    command(name = "deploy", argv = ["echo", "deployed", "--to", "staging-cluster-eu-west-1"], {C}),
])
""")


def _terminal(lab: Lab, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(lab.home), "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", *args, "--output", "jsonl"],
        cwd=lab.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _first_run_id(process: subprocess.Popen[str]) -> str:
    line = process.stdout.readline() if process.stdout else ""
    assert line, process.stderr.read() if process.stderr else "no output"
    return str(json.loads(line)["run_id"])


def _inside(inner: dict[str, float], outer: dict[str, float], slack: float = 1.0) -> bool:
    return (
        inner["x"] >= outer["x"] - slack
        and inner["y"] >= outer["y"] - slack
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + slack
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + slack
    )


def _assert_whole_dag_fits(dag: Any, sidebar: dict[str, float]) -> None:
    """Every node of the graph is drawn inside the viewport, and the viewport inside the panel."""
    view = _box(dag.locator(".rho-viewport"))
    assert _inside(view, sidebar), (view, sidebar)
    nodes = dag.locator("g.rho-node rect")
    assert nodes.count() > 0
    for i in range(nodes.count()):
        box = _box(nodes.nth(i))
        assert _inside(box, view), (i, box, view)


def _assert_zoom_bar_on_one_line(dag: Any) -> None:
    boxes = [_box(dag.locator(sel)) for sel in (".rho-zoom-out", ".rho-zoom-level", ".rho-zoom-fit", ".rho-zoom-in")]
    top = min(b["y"] for b in boxes)
    bottom = max(b["y"] + b["height"] for b in boxes)
    tallest = max(b["height"] for b in boxes)
    assert bottom - top <= tallest + 4, boxes  # one row: no control wrapped under another
    for box in boxes[1:]:
        assert box["x"] > boxes[0]["x"], boxes  # left to right, in order


def _open(lab: Lab, page: Any) -> dict[str, float]:
    page.goto(lab.tree("greetings-old.star"))
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='rho-workflows']")
    tab.wait_for(timeout=60_000)
    tab.click()
    page.locator(".rho-sidebar").wait_for(state="visible")
    page.wait_for_timeout(300)
    sidebar = _box(page.locator(".rho-sidebar"))
    assert sidebar["width"] <= SIDEBAR_MAX_W, sidebar  # the default width, not widened
    return sidebar


def _rows(page: Any) -> list[str]:
    ids = page.locator(".rho-sb-run").evaluate_all("(rows) => rows.map((r) => r.dataset.runId)")
    return [str(i) for i in ids]


def test_the_sidebar_at_250_px(lab: Lab, page: Any) -> None:
    _installed(lab)
    for source in EXAMPLES.iterdir():
        if source.is_file():
            shutil.copy(source, lab.root / source.name)
    old_plan = _plan(lab, "greetings-old", _greeting("hello"))
    new_plan = _plan(lab, "greetings-new", _greeting("bonjour"))
    old_run = new_run = ""
    for plan in (old_plan, new_plan):
        ran = _cli(lab, "run", plan["plan_id"], "--yes", "--output", "jsonl")
        assert ran.returncode == 0, ran.stderr
        run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
        old_run, new_run = (run_id, "") if not old_run else (old_run, run_id)

    triage = _terminal(lab, "run", "triage.graph.yaml", "--input", "score=70", "--yes")
    guarded = None
    try:
        triage_run = _first_run_id(triage)
        sidebar = _open(lab, page)

        # -- the waiting form and the whole DAG, at 250 px ------------------------------------------
        page.locator(f".rho-sb-run[data-run-id='{triage_run}'][data-lifecycle='waiting']").wait_for(timeout=60_000)
        page.locator(f".rho-sb-live-runs .rho-sb-run[data-run-id='{triage_run}']").click()
        dag = page.locator(f".rho-sb-selected[data-run-id='{triage_run}'] .rho-dag")
        form = dag.locator("form.rho-form[data-node='escalate']")
        form.wait_for(timeout=30_000)
        page.wait_for_function(
            "document.querySelector('.rho-sb-selected').dataset.revealed !== undefined", timeout=15_000
        )
        page.wait_for_timeout(400)  # the fit follows the view's first layout frame
        sidebar = _box(page.locator(".rho-sidebar"))
        assert _inside(_box(form.locator(".rho-form-head")), sidebar), "the waiting form is scrolled into view"
        assert _inside(_box(form.locator(".rho-submit")), sidebar)
        _assert_whole_dag_fits(dag, sidebar)
        _assert_zoom_bar_on_one_line(dag)
        # a row's buttons stay on its first line
        row = page.locator(f".rho-sb-run[data-run-id='{triage_run}']")
        first_line = _box(row.locator(".rho-sb-line").first)
        assert first_line["height"] <= 26, first_line
        _shot(page, "jupyterlab-sidebar-narrow.png")

        # -- search and filter narrow the lists -----------------------------------------------------
        search = page.locator(".rho-sb-search")
        state = page.locator(".rho-sb-filter")
        assert set(_rows(page)) >= {old_run, new_run, triage_run}
        search.fill("greetings")
        page.wait_for_timeout(100)
        assert set(_rows(page)) == {old_run, new_run}
        search.fill(new_run[:13])
        assert _rows(page) == [new_run]
        search.fill("")
        state.select_option("person")
        assert _rows(page) == [triage_run]
        state.select_option("finished")
        assert set(_rows(page)) == {old_run, new_run}
        state.select_option("all")
        assert set(_rows(page)) >= {old_run, new_run, triage_run}

        # answer the form so the triage run ends
        form.locator("select.rho-field-input[name='assignee']").select_option(label="oncall")
        form.locator(".rho-submit").click()
        page.locator(f".rho-sb-run[data-run-id='{triage_run}'][data-outcome='success']").wait_for(timeout=60_000)
        assert triage.wait(timeout=60) == 0

        # -- a supervised launch: its facts laid out, the sha256 on one line --------------------------
        guarded_plan = _plan(lab, "guarded", SUPERVISED)
        guarded = _terminal(
            lab, "run", guarded_plan["plan_id"], "--yes", "--mode", "supervised", "--approval-timeout", "120"
        )
        guarded_run = _first_run_id(guarded)
        page.locator(f".rho-sb-run[data-run-id='{guarded_run}'][data-lifecycle='waiting']").wait_for(timeout=60_000)
        page.locator(f".rho-sb-run[data-run-id='{guarded_run}']").click()
        card = page.locator(".rho-sb-approval[data-node='deploy']")
        card.wait_for(timeout=30_000)
        page.wait_for_timeout(300)
        assert card.locator("pre").count() == 0, "facts are laid out, not raw JSON"
        facts = card.locator("dl.rho-sb-launch")
        assert "staging-cluster-eu-west-1" in facts.inner_text()
        sha = facts.locator(".rho-sb-hash code").first
        digest = sha.get_attribute("title") or ""
        assert len(digest) >= 64 and sha.inner_text().strip() == digest
        line_height = float(sha.evaluate("(c) => parseFloat(getComputedStyle(c).lineHeight) || 16"))
        assert _box(sha)["height"] <= line_height * 1.5, "the sha256 stays on one line"
        assert _inside(_box(card.locator(".rho-sb-approve")), _box(page.locator(".rho-sidebar")))
        _shot(page, "jupyterlab-sidebar-narrow-approval.png")
        card.locator(".rho-sb-approve").click()
        page.locator(f".rho-sb-run[data-run-id='{guarded_run}'][data-outcome='success']").wait_for(timeout=60_000)
        assert guarded.wait(timeout=60) == 0
    finally:
        for process in (triage, guarded):
            if process is not None and process.poll() is None:
                process.kill()
            if process is not None:
                process.wait()

    # -- compare two runs: the plan diff and the node whose value changed ---------------------------
    search = page.locator(".rho-sb-search")
    search.fill("greetings")
    for run_id in (new_run, old_run):
        page.locator(f".rho-sb-run[data-run-id='{run_id}'] .rho-sb-pick").check()
    compare = page.locator(".rho-sb-compare")
    assert compare.is_enabled()
    compare.click()
    view = page.locator(f".rho-sb-compare-view[data-old='{old_run}'][data-new='{new_run}'][data-loaded='true']")
    view.wait_for(timeout=30_000)
    assert "~ greet: argv" in view.locator(".rho-sb-diff").inner_text()
    greet = view.locator(".rho-sb-cmp-nodes > li.rho-sb-cmp-node[data-node='greet']").first
    assert "value" in (greet.get_attribute("data-changed") or "").split()
    assert "hello" in greet.locator(".rho-sb-cmp-old").inner_text()
    assert "bonjour" in greet.locator(".rho-sb-cmp-new").inner_text()
    assert view.locator(".rho-sb-cmp-same li[data-node='prepare']").count() == 1
    assert _inside(_box(greet), _box(page.locator(".rho-sidebar")), slack=2)
    _shot(page, "jupyterlab-sidebar-compare.png")

    errors = [m for m in page.console_messages if m.startswith("pageerror")]  # type: ignore[attr-defined]
    assert not errors, errors


LONG = star(f"""
return workflow(name = "stranded", nodes = [
    command(name = "wait", argv = ["sleep", "60"], {C}),
])
""")


def test_a_run_that_needs_recovery_is_listed_live_with_the_command(lab: Lab, page: Any) -> None:
    _installed(lab)
    plan = _plan(lab, "stranded", LONG)
    (lab.root / "greetings-old.star").write_text(_greeting("hello"))
    terminal = _terminal(lab, "run", plan["plan_id"], "--yes")
    leftover = 0
    try:
        run_id = _first_run_id(terminal)
        deadline = time.monotonic() + 60
        while not leftover:
            assert time.monotonic() < deadline, "the sleep never started"
            started = [e for e in _journal(lab, run_id) if e["kind"] == "process_started"]
            leftover = int(started[0]["pid"]) if started else 0
            time.sleep(0.1)
        owner = owner_pid(lab.home, run_id)
        assert owner
        os.kill(owner, signal.SIGKILL)  # the owner dies uncleanly: its `sleep` is left uncertain
        terminal.wait(timeout=30)

        _open(lab, page)
        row = page.locator(f".rho-sb-live-runs .rho-sb-run[data-run-id='{run_id}'][data-lifecycle='needs_recovery']")
        row.wait_for(timeout=30_000)
        assert "needs recovery" in row.inner_text()
        assert row.locator(".rho-sb-act").inner_text().strip() == f"rho-notebook resume {run_id} --recover-uncertain"
        assert row.locator(".rho-sb-delete").count() == 0  # listed live: never deleted from here
        page.locator(".rho-sb-filter").select_option("person")
        assert _rows(page) == [run_id]
        page.locator(".rho-sb-filter").select_option("finished")
        assert run_id not in _rows(page)
    finally:
        if terminal.poll() is None:
            terminal.kill()
        terminal.wait()
        if leftover:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(leftover, signal.SIGKILL)


def test_a_run_its_budget_halted_is_listed_with_the_raise_that_moves_it_on(lab: Lab, page: Any) -> None:
    """The sidebar said ``resume RUN --decide STEP=rerun|skip`` for every run that needs a decision,
    which a graph run refuses; for a run its budget halted it now shows the server's ``next``,
    ``--raise-budget tokens=N``, as ``rho-notebook runs`` does."""
    from tests.agents.fakeserver import OPENAI, ScriptedServer
    from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
    from tests.cli.test_budget import CHAIN

    _installed(lab)
    (lab.root / "greetings-old.star").write_text(_greeting("hello"))
    (lab.root / "chain.star").write_text(CHAIN)
    with ScriptedServer([OPENAI.answer("done")], repeat_last=True) as server:
        write_settings_for(lab.home, server)
        settings = json.loads((lab.home / "settings.json").read_text())
        settings["providers"]["local"]["max_tokens"] = 10  # the third call could pass 40: the run halts before it
        (lab.home / "settings.json").write_text(json.dumps(settings))
        env = {**os.environ, "RHO_NOTEBOOK_HOME": str(lab.home), "PYTHONPATH": str(REPO), KEY_ENV: SECRET}
        ran = subprocess.run(
            [
                sys.executable,
                "-m",
                "rho_notebook",
                "run",
                "chain.star",
                "--yes",
                "--max-tokens",
                "40",
                "--output",
                "jsonl",
            ],
            cwd=lab.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert ran.returncode == 1, ran.stderr
    run_id = str(json.loads(ran.stdout.splitlines()[0])["run_id"])

    _open(lab, page)
    row = page.locator(f".rho-sb-run[data-run-id='{run_id}'][data-lifecycle='needs_decision']")
    row.wait_for(timeout=30_000)
    assert row.locator(".rho-sb-act").inner_text().strip() == f"rho-notebook resume {run_id} --raise-budget tokens=N"
    assert "--decide" not in row.inner_text()
    row.click()  # its DAG view says the same, and so does the Resume dialog
    message = page.locator(".rho-dag .rho-message").last
    message.wait_for(timeout=30_000)
    assert message.inner_text().endswith(f"rho-notebook resume {run_id} --raise-budget tokens=N"), message.inner_text()
    page.locator(".rho-dag button", has_text="Resume").last.click()
    dialog = page.locator(".jp-Dialog .rho-sb-decide")
    dialog.wait_for(timeout=30_000)
    assert dialog.inner_text().strip() == f"rho-notebook resume {run_id} --raise-budget tokens=N"
