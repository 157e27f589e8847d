"""The lab extension follows JupyterLab's conventions, in a real JupyterLab driven by chromium.

- Palette: the "Workflows" commands are found and run from JupyterLab's command palette: Show
  Workflows opens the sidebar, Refresh Workflows reads the run list now (the poll interval is set to
  10 minutes first, so only the command can make a new run appear), Cancel the Selected Run cancels
  a running run, Approve the Selected Request approves a waiting approval. Cancel and Approve are
  greyed out while they do not apply.
- Settings: the Settings Editor shows the extension's settings (labextension/schema/plugin.json).
- Status bar and notifications: a run waiting for a person makes the status-bar item say
  "1 waiting" and raises a JupyterLab notification whose Show button selects the run; its end
  raises another.
- Theme: the sidebar in the light and the dark theme (``apputils:change-theme``), screenshots to
  test-artifacts/ (and docs/img/jupyterlab-sidebar-{light,dark}.png with RHO_DOCS_SCREENSHOTS=1);
  in the dark theme the sidebar's background and a finished node's fill are dark (computed
  styles), so no light colour is hard-coded where the theme should decide.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, REPO, Lab
from tests.conftest import star

pytestmark = pytest.mark.browser

C = "timeout_seconds = 300, max_output_bytes = 10000"

SLOW = star(f"""
return workflow(name = "slow", nodes = [
    command(name = "warm-up", argv = ["echo", "warming up"], {C}),
    command(name = "long-job", argv = ["sleep", "240"], needs = ["warm-up"], {C}),
])
""")

GATE = star(f"""
return workflow(name = "gate", nodes = [
    command(name = "prepare", argv = ["echo", "prepared"], {C}),
    approval(name = "go-ahead", prompt = template(["Go ahead with the **release**?"]),
        needs = ["prepare"], timeout_seconds = 300, max_output_bytes = 1000),
    command(name = "finish", argv = ["echo", "finished"], needs = ["go-ahead"], {C}),
])
""")

SHOWCASE = star(f"""
return workflow(name = "showcase", nodes = [
    command(name = "fetch", argv = ["echo", "fetched"], {C}),
    command(name = "build", argv = ["echo", "built"], needs = ["fetch"], {C}),
    command(name = "check", argv = ["sh", "-c", "echo checking; exit 3"], needs = ["fetch"], {C}),
    command(name = "publish", argv = ["echo", "published"], needs = ["build", "check"], {C}),
])
""")

DOCS_IMG = REPO / "docs" / "img"
PLUGIN = "rho-notebook:plugin"
SHOW, REFRESH = "Show Workflows", "Refresh Workflows"
CANCEL, APPROVE = "Cancel the Selected Run", "Approve the Selected Request"
COMMANDS = {
    SHOW: "rho-notebook:show-workflows",
    REFRESH: "rho-notebook:refresh",
    CANCEL: "rho-notebook:cancel-selected-run",
    APPROVE: "rho-notebook:approve-selected-request",
}

# the computed colour of an element's property, normalised through a canvas to [r, g, b] 0..255
# (chromium reports color-mix() results as color(srgb ...), theme colours as rgb(...))
RGB = """([selector, property]) => {
  const element = document.querySelector(selector);
  if (!element) return null;
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  const context = canvas.getContext('2d');
  context.fillStyle = getComputedStyle(element)[property];
  context.fillRect(0, 0, 1, 1);
  return Array.from(context.getImageData(0, 0, 1, 1).data.slice(0, 3));
}"""


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
    (lab.root / f"{name}.star").write_text(source)
    planned = _cli(lab, "plan", f"{name}.star", "--output", "json")
    assert planned.returncode == 0, planned.stderr
    data: dict[str, Any] = json.loads(planned.stdout)
    return data


def _installed(lab: Lab) -> None:
    try:
        lab.api("/rho/api/plans")
    except OSError as err:
        pytest.fail(f"the rho_notebook server extension does not answer ({err}); `pip install -e .` enables it")


def _artifact(name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name


def _shot(page: Any, name: str, clip: dict[str, float]) -> None:
    """A screenshot into test-artifacts/, and into docs/img/ with RHO_DOCS_SCREENSHOTS=1."""
    targets = [_artifact(name)] + ([DOCS_IMG / name] if os.environ.get("RHO_DOCS_SCREENSHOTS") else [])
    for target in targets:
        page.screenshot(path=str(target), clip=clip)


def _luminance(rgb: list[int]) -> float:
    red, green, blue = rgb
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def _put_settings(lab: Lab, raw: dict[str, Any]) -> None:
    """Write the user settings of the plugin through JupyterLab's settings API (before the page loads)."""
    request = urllib.request.Request(
        f"{lab.url}/lab/api/settings/{PLUGIN}?token={lab.token}",
        data=json.dumps({"raw": json.dumps(raw)}).encode(),
        headers={"Content-Type": "application/json"},
        method="PUT",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status in (200, 204)


def _start(lab: Lab, plan_id: str) -> tuple[subprocess.Popen[str], str]:
    """A run started from a terminal (the CLI follows it); its run id from the first JSON line."""
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(lab.home), "PYTHONPATH": str(REPO)}
    terminal = subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "run", plan_id, "--yes", "--output", "jsonl"],
        cwd=lab.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    first = json.loads(terminal.stdout.readline() if terminal.stdout else "{}")
    return terminal, str(first["run_id"])


def _stop(terminal: subprocess.Popen[str]) -> None:
    if terminal.poll() is None:
        terminal.kill()
    terminal.wait(timeout=30)


def _open_lab(lab: Lab, page: Any, document: str) -> None:
    page.goto(lab.tree(document))
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='rho-workflows']")
    try:
        tab.wait_for(timeout=60_000)
    except Exception:  # noqa: BLE001 - turn a timeout into the actionable message
        pytest.fail("no Workflows tab: the rho-notebook lab extension is not installed in this environment")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.commands.hasCommand('rho-notebook:refresh')")
    # the document's editor takes the focus when it has loaded, which closes an open modal palette
    page.locator(".jp-FileEditor .cm-content").wait_for(state="visible", timeout=60_000)


def _palette_item(page: Any, label: str) -> Any:
    """Open the command palette, search `label`, return the item of our command of that label."""
    search = page.locator(".lm-CommandPalette-input")
    for _ in range(3):
        # the command toggles the modal palette: let a closing one finish closing first
        search.wait_for(state="hidden", timeout=15_000)
        page.evaluate("() => window.jupyterapp.commands.execute('apputils:activate-command-palette')")
        search.wait_for(state="visible", timeout=15_000)
        try:
            search.fill(label, timeout=5_000)
            break
        except Exception:  # noqa: BLE001 - a document taking focus closed the modal palette: open it again
            continue
    else:
        pytest.fail("the command palette kept closing before it could be searched")
    if label not in COMMANDS:
        return None
    item = page.locator(f".lm-CommandPalette-item[data-command='{COMMANDS[label]}']")
    item.wait_for(state="attached", timeout=15_000)  # JupyterLab hides disabled commands
    return item


def _palette(page: Any, label: str) -> None:
    """Run a command from the command palette, as a person does: search, then Enter on it."""
    item = _palette_item(page, label)
    page.wait_for_function(
        "(command) => { const item = document.querySelector(`.lm-CommandPalette-item[data-command='${command}']`);"
        " return item && item.classList.contains('lm-mod-active'); }",
        arg=COMMANDS[label],
        timeout=15_000,
    )
    assert "lm-mod-disabled" not in (item.get_attribute("class") or ""), f"{label!r} is disabled"
    page.keyboard.press("Enter")


def _palette_disabled(page: Any, label: str) -> bool:
    item = _palette_item(page, label)
    disabled = "lm-mod-disabled" in (item.get_attribute("class") or "")
    page.keyboard.press("Escape")
    page.locator(".lm-CommandPalette-input").wait_for(state="hidden", timeout=15_000)
    return disabled


def test_palette_commands_and_settings(lab: Lab, page: Any) -> None:
    _installed(lab)
    slow = _plan(lab, "slow", SLOW)
    # a poll interval of 10 minutes: a new run can only appear through Refresh
    _put_settings(lab, {"refreshSeconds": 600})
    _open_lab(lab, page, "slow.star")

    # the palette lists the four commands under the "Workflows" category
    _palette_item(page, "")
    headers = page.locator(".lm-CommandPalette-header")
    assert any(headers.nth(i).inner_text().strip() == "Workflows" for i in range(headers.count()))
    for command in COMMANDS.values():
        assert page.locator(f".lm-CommandPalette-item[data-command='{command}']").count() == 1, command
    page.keyboard.press("Escape")

    _palette(page, SHOW)
    page.locator(".rho-sidebar").wait_for(state="visible", timeout=15_000)
    page.locator(".rho-sb-status", has_text="updated").wait_for(timeout=15_000)
    assert _palette_disabled(page, CANCEL), "Cancel is enabled with no run selected"
    assert _palette_disabled(page, APPROVE), "Approve is enabled with no request shown"

    terminal, run_id = _start(lab, slow["plan_id"])
    try:
        row = page.locator(f".rho-sb-live-runs .rho-sb-run[data-run-id='{run_id}']")
        _palette(page, REFRESH)
        row.wait_for(timeout=15_000)
        row.click()
        dag = page.locator(f".rho-sb-selected[data-run-id='{run_id}'] .rho-dag")
        dag.locator("g.rho-node[data-name='long-job'][data-state='running']").wait_for(timeout=30_000)

        _palette(page, CANCEL)
        dag.locator("g.rho-node[data-name='long-job'][data-state='cancellation']").wait_for(timeout=60_000)
        terminal.wait(timeout=60)
    finally:
        _stop(terminal)
    (finished,) = [r for r in lab.api("/rho/api/runs") if r["run_id"] == run_id]
    assert finished["outcome"] == "cancellation" and not finished["live"], finished

    # the Settings Editor shows the extension's settings, titled as in the schema
    page.evaluate("() => window.jupyterapp.commands.execute('settingeditor:open', {query: 'Workflows'})")
    page.locator(".jp-PluginList-entry", has_text="Workflows").first.click(timeout=30_000)
    for title in ("Refresh interval (seconds)", "Default zoom", "Notifications"):
        page.get_by_text(title, exact=True).first.wait_for(timeout=30_000)
    page.screenshot(path=str(_artifact("lab-settings-editor.png")))
    _put_settings(lab, {})

    errors = [m for m in page.console_messages if m.startswith("pageerror")]  # type: ignore[attr-defined]
    assert not errors, errors


def test_status_bar_and_notifications_when_a_person_is_waited_for(lab: Lab, page: Any) -> None:
    _installed(lab)
    gate = _plan(lab, "gate", GATE)
    _put_settings(lab, {"refreshSeconds": 1, "notifications": True})
    _open_lab(lab, page, "gate.star")
    item = page.locator(".rho-status-item")
    item.wait_for(timeout=30_000)
    page.locator(".rho-status-item[data-waiting='0']").wait_for(timeout=15_000)

    terminal, run_id = _start(lab, gate["plan_id"])
    try:
        page.locator(".rho-status-item[data-waiting='1']").wait_for(timeout=60_000)
        assert "1 waiting" in item.inner_text()
        toast = page.locator(".Toastify__toast", has_text="waits for a person")
        toast.wait_for(timeout=30_000)
        assert run_id[:13] in toast.inner_text() and "gate" in toast.inner_text()
        page.screenshot(path=str(_artifact("lab-notification-waiting.png")))

        # the toast's Show selects the run in the sidebar; the palette approves its request
        toast.get_by_text("Show", exact=True).click()
        page.locator(f".rho-sb-selected[data-run-id='{run_id}']").wait_for(timeout=15_000)
        page.locator(".rho-sb-approval[data-node='go-ahead']").wait_for(timeout=30_000)
        _palette(page, APPROVE)
        page.locator(".Toastify__toast", has_text="ended: success").wait_for(timeout=60_000)
        page.locator(".rho-status-item[data-waiting='0']").wait_for(timeout=30_000)
        assert terminal.wait(timeout=60) == 0
    finally:
        _stop(terminal)
    path = lab.home / "workflows" / "runs" / run_id / "events.jsonl"
    decided = [json.loads(line) for line in path.read_text().splitlines() if '"approval_decided"' in line]
    assert decided and decided[0]["decision"] == "approve" and decided[0]["via"] == "server", decided

    # the status-bar item opens the sidebar
    page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
    page.locator(".rho-sidebar").wait_for(state="hidden", timeout=15_000)
    item.click()
    page.locator(".rho-sidebar").wait_for(state="visible", timeout=15_000)
    _put_settings(lab, {})


def _left_area(page: Any) -> dict[str, float]:
    """The left side bar and its open panel, full height: what the theme screenshots show."""
    box = page.locator("#jp-left-stack").bounding_box()
    assert box is not None
    return {"x": 0, "y": 0, "width": box["x"] + box["width"] + 4, "height": 1000}


def test_sidebar_in_the_light_and_dark_theme(lab: Lab, page: Any) -> None:
    _installed(lab)
    showcase = _plan(lab, "showcase", SHOWCASE)
    ran = _cli(lab, "run", showcase["plan_id"], "--yes", "--output", "jsonl")
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    _open_lab(lab, page, "showcase.star")
    page.locator(".jp-SideBar .lm-TabBar-tab[data-id='rho-workflows']").click()
    page.locator(f".rho-sb-run[data-run-id='{run_id}']").click(timeout=30_000)
    dag = page.locator(f".rho-sb-selected[data-run-id='{run_id}'] .rho-dag")
    dag.locator("g.rho-node[data-name='build'][data-state='success']").wait_for(timeout=30_000)
    success_rect = f".rho-sb-selected[data-run-id='{run_id}'] g.rho-node[data-name='build'] rect"

    light_bg = page.evaluate(RGB, [".rho-sidebar", "backgroundColor"])
    assert _luminance(light_bg) > 0.8, light_bg
    _shot(page, "jupyterlab-sidebar-light.png", clip=_left_area(page))

    try:
        page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
        page.wait_for_function(
            f"() => {{ const rgb = ({RGB})(['.rho-sidebar', 'backgroundColor']);"
            " return rgb && (0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]) / 255 < 0.25; }",
            timeout=30_000,
        )
        dark_bg = page.evaluate(RGB, [".rho-sidebar", "backgroundColor"])
        dark_fill = page.evaluate(RGB, [success_rect, "fill"])
        dark_text = page.evaluate(RGB, [".rho-sidebar", "color"])
        assert _luminance(dark_bg) < 0.25, dark_bg
        assert _luminance(dark_fill) < 0.35, f"a success node is drawn light on the dark theme: {dark_fill}"
        assert _luminance(dark_text) > 0.6, f"the sidebar's text is not light on the dark theme: {dark_text}"
        _shot(page, "jupyterlab-sidebar-dark.png", clip=_left_area(page))
    finally:
        page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'", timeout=30_000)
