"""Fork from here (issue 35) in the Workflows sidebar of a real JupyterLab, driven by chromium.

A chain a -> b -> c -> d (plus a side node not downstream of c) runs to completion from a terminal.
In the sidebar the test opens the node pane of c, edits c's value in "fork from here", first to a
value that does not match c's output schema (refused inline, naming the field, before anything
starts), then to a valid one; the derived plan's digest is confirmed and the fork starts through
``POST /rho/api/runs/<run>/fork``. The new run appears in the run list with its lineage ("forked
from RUN at c"), and its d got the edited value while a, b and c were never launched in it.
Screenshot: test-artifacts/fork.png (and docs/img/fork.png with RHO_DOCS_SCREENSHOTS=1).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.conftest import Lab
from tests.browser.test_sidebar import _cli, _installed, _plan, _shot, _widen
from tests.fork_chain import fork_chain, launched

pytestmark = pytest.mark.browser


def _stdout(lab: Lab, run_id: str, node: str) -> str:
    detail = lab.api(f"/rho/api/runs/{run_id}/nodes/{node}")
    return str((detail.get("stdout") or {}).get("text", ""))


def _completed_chain(lab: Lab) -> str:
    chain = _plan(lab, "what_if", fork_chain("what-if", timeout_seconds=120))
    ran = _cli(lab, "run", chain["plan_id"], "--yes", "--output", "jsonl")
    assert ran.returncode == 0, ran.stderr
    run_id = str(json.loads(ran.stdout.splitlines()[0])["run_id"])
    assert lab.api(f"/rho/api/runs/{run_id}")["lifecycle"] == "completed"
    assert "d got two" in _stdout(lab, run_id, "d")
    return run_id


def test_fork_from_here_in_the_sidebar_starts_a_fork_with_the_edited_value(lab: Lab, page: Any) -> None:
    _installed(lab)
    run_id = _completed_chain(lab)

    page.goto(lab.tree("what_if.star"))
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='rho-workflows']")
    tab.wait_for(timeout=60_000)
    tab.click()
    page.locator(".rho-sidebar").wait_for(state="visible")
    _widen(page, 640)
    page.locator(f".rho-sb-finished-runs .rho-sb-run[data-run-id='{run_id}']").click()
    dag = page.locator(f".rho-sb-selected[data-run-id='{run_id}'] .rho-dag[data-lifecycle='completed']")
    dag.locator("svg.rho-graph").wait_for(timeout=15_000)

    # the node pane of c: its value, and "fork from here" with the value in the editor
    dag.locator("g.rho-node[data-name='c']").click()
    pane = dag.locator(".rho-pane")
    pane.locator(".rho-section-value").wait_for(timeout=15_000)
    fork = pane.locator(".rho-section-fork[data-node='c']")
    fork.locator("summary").click()
    editor = fork.locator("textarea.rho-fork-value")
    editor.wait_for()
    assert json.loads(editor.input_value()) == {"word": "two", "count": 2}

    # a value that does not match c's output schema: refused inline, naming the field; nothing starts
    runs_before = {r["run_id"] for r in lab.api("/rho/api/runs")}
    editor.fill('{"word": "seven", "count": "seven"}')
    fork.locator(".rho-fork-edit").click()
    error = fork.locator(".rho-fork-error")
    error.wait_for(state="visible", timeout=30_000)
    assert "count" in error.inner_text()
    assert fork.locator(".rho-fork-confirm").is_hidden()
    assert {r["run_id"] for r in lab.api("/rho/api/runs")} == runs_before

    # a valid edit: the derived plan's digest is shown for consent, then the fork starts
    editor.fill('{"word": "seven", "count": 7}')
    fork.locator(".rho-fork-edit").click()
    confirm = fork.locator(".rho-fork-confirm")
    confirm.wait_for(state="visible", timeout=30_000)
    digest = confirm.locator(".rho-fork-digest").inner_text().strip()
    assert digest.startswith("sha256:")
    assert {r["run_id"] for r in lab.api("/rho/api/runs")} == runs_before, "planning a fork starts nothing"
    confirm.locator(".rho-fork-start").click()
    page.wait_for_function(
        "document.querySelector('.rho-sb-selected .rho-section-fork[data-node=\"c\"]')?.dataset.forkRun",
        timeout=60_000,
    )
    fork_id = fork.get_attribute("data-fork-run")
    assert fork_id and fork_id != run_id

    # the new run appears with its lineage, and finishes
    row = page.locator(f".rho-sb-run[data-run-id='{fork_id}']")
    row.wait_for(timeout=30_000)
    lineage = row.locator(".rho-sb-lineage")
    assert lineage.get_attribute("data-forked-from") == run_id and lineage.get_attribute("data-forked-at") == "c"
    assert "forked from" in lineage.inner_text() and "at c" in lineage.inner_text()
    page.locator(f".rho-sb-finished-runs .rho-sb-run[data-run-id='{fork_id}'][data-outcome='success']").wait_for(
        timeout=60_000
    )
    fork.scroll_into_view_if_needed()
    _shot(page, "fork.png")

    # the fork's own DAG: c's pane says it was edited and holds the edited value
    row.click()
    forked = page.locator(f".rho-sb-selected[data-run-id='{fork_id}'] .rho-dag[data-lifecycle='completed']")
    forked.locator("svg.rho-graph").wait_for(timeout=15_000)
    forked.locator("g.rho-node[data-name='c']").click()
    forked.locator(".rho-pane .rho-section-value").wait_for(timeout=15_000)
    assert "edited" in forked.locator(".rho-pane .rho-reason").inner_text()
    assert "seven" in forked.locator(".rho-pane .rho-section-value").inner_text()

    # the fork: a, b, side taken and c edited (none launched); d launched once with the edited value
    assert launched(lab.home, fork_id) == ["d"]
    assert "d got seven" in _stdout(lab, fork_id, "d")
    manifest = json.loads((lab.home / "workflows" / "runs" / fork_id / "manifest.json").read_text())
    assert manifest["forked_from"] == {"run": run_id, "node": "c"}
    assert manifest["graph_digest"] == digest and manifest["origin"] == "server"
    # the source run is unchanged
    assert "d got two" in _stdout(lab, run_id, "d")

    errors = [m for m in page.console_messages if m.startswith("pageerror")]  # type: ignore[attr-defined]
    assert not errors, errors
