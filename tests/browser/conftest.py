"""Browser tests: Playwright (pip package) driving Debian's chromium against a real `jupyter lab`
that the test starts on 127.0.0.1 with private runtime/config/IPython/store directories.

The ``browser`` marker is registered here (pyproject.toml stays untouched). The tests skip only
when /usr/bin/chromium is missing and CI is unset (``scripts/test.sh`` then ends with a notice that
they did not run); with CI set, as ``.ci/run`` does, a missing chromium is a failure.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives chromium against a real jupyter lab (Playwright)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    home: Path
    log: Path
    process: subprocess.Popen[bytes]

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}?token={self.token}", timeout=5) as response:
            return json.loads(response.read())

    def tree(self, relative: str) -> str:
        """A fresh workspace showing only this document (no tabs restored from an earlier test)."""
        return f"{self.url}/lab/workspaces/{secrets.token_hex(6)}/tree/{relative}?reset&token={self.token}"


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(
                f"{CHROMIUM} is missing and CI is set, so the browser tests fail rather than skip; "
                "as root: apt-get update && apt-get install -y chromium (.ci/run does this itself when it can)"
            )
        pytest.skip(
            f"{CHROMIUM} is not installed, so no UI was tested; as root: apt-get update && apt-get install -y chromium"
        )
    return CHROMIUM


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, chromium: Path) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    dirs = {name: base / name for name in ("runtime", "config", "ipython", "home")}
    for path in dirs.values():
        path.mkdir()
    labconfig = dirs["config"] / "labconfig"
    labconfig.mkdir()
    # no "news?" toast over the screenshots (and no request for it)
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    token = secrets.token_hex(16)
    port = _free_port()
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
        "JUPYTER_CONFIG_DIR": str(dirs["config"]),
        "IPYTHONDIR": str(dirs["ipython"]),
        "RHO_NOTEBOOK_HOME": str(dirs["home"]),
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    # the data dir is left alone: lab extensions (widgets manager, anywidget) come from the env
    args = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=",
        "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")
    log = base / "lab.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            args, env=env, cwd=root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    found = Lab(url=f"http://127.0.0.1:{port}", token=token, root=root, home=dirs["home"], log=log, process=process)
    deadline = time.monotonic() + 90
    while True:
        if process.poll() is not None:
            pytest.fail(f"jupyter lab exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            found.api("/api/status")
            break
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer within 90 s:\n{log.read_text()[-4000:]}")
            time.sleep(0.25)
    try:
        yield found
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(log, ARTIFACTS / f"lab-{base.name}.log")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call":
        item.stash[_FAILED] = report.failed


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def page(chromium: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1500, "height": 1000})
        found = context.new_page()
        messages: list[str] = []
        found.on("console", lambda msg: messages.append(f"{msg.type}: {msg.text}"))
        found.on("pageerror", lambda err: messages.append(f"pageerror: {err}"))
        found.console_messages = messages  # type: ignore[attr-defined]
        try:
            yield found
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            if request.node.stash.get(_FAILED, False):
                found.screenshot(path=str(ARTIFACTS / f"failed-{request.node.name}.png"))
                (ARTIFACTS / f"failed-{request.node.name}.console.txt").write_text("\n".join(messages) + "\n")
            context.close()
            browser.close()
