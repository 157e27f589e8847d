"""The npm workspace of the TypeScript front ends (``package.json`` at the repository root, packages
``js/`` and ``labextension/``), for the tests that run node: find node or skip, and install the
pinned dependencies with ``npm ci`` when what the tests need is missing or not at the locked version.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JS = REPO / "js"
NODE_MODULES = REPO / "node_modules"
LOCKFILE = REPO / "package-lock.json"
# what the tests run: vitest (with jsdom), tsc, json-schema-to-typescript
NEEDED = ("vitest", "jsdom", "typescript", "json-schema-to-typescript")


def missing_tool(why: str) -> None:
    """Skip for lack of a tool on a developer's machine; fail in CI (``CI`` set), where a skip would
    hide that the TypeScript side was never tested (as tests/browser/conftest.py does for chromium)."""
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI must install it")
    pytest.skip(why)


def node() -> str:
    """The node executable; skips the test when Node.js is not installed (fails in CI)."""
    found = shutil.which("node")
    if found is None:
        missing_tool("node is not installed: the TypeScript tests need Node.js 20+ with npm")
        raise AssertionError("unreachable")
    return found


def _stale() -> list[str]:
    locked = json.loads(LOCKFILE.read_text(encoding="utf-8")).get("packages", {})
    stale = []
    for name in NEEDED:
        want = locked.get(f"node_modules/{name}", {}).get("version")
        manifest = NODE_MODULES / name / "package.json"
        have = json.loads(manifest.read_text(encoding="utf-8")).get("version") if manifest.exists() else None
        if have is None or have != want:
            stale.append(f"{name} {have or 'missing'} (locked {want})")
    if not (NODE_MODULES / "@rho-notebook" / "dagview").exists():
        stale.append("the workspace link node_modules/@rho-notebook/dagview")
    return stale


@contextmanager
def _install_lock() -> Iterator[None]:
    # outside node_modules, which `npm ci` deletes; one lock per checkout
    key = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    with open(Path(tempfile.gettempdir()) / f"rho-notebook-npm-{key}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_installed() -> None:
    """Run ``npm ci`` at the workspace root unless the locked test dependencies are installed."""
    node()
    with _install_lock():
        stale = _stale()
        if not stale:
            return
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail(f"node is installed but npm is not; it is needed to install {', '.join(stale)}")
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
            env={**os.environ, "NO_COLOR": "1"},
        )
        if done.returncode != 0:
            pytest.fail(
                f"`npm ci` in {REPO} failed ({'; '.join(stale)}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        still = _stale()
        if still:
            pytest.fail(f"`npm ci` in {REPO} did not install {', '.join(still)}")
