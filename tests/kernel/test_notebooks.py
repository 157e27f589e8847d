"""`pytest --nbval notebooks/` as part of the suite: every shipped notebook runs in a real kernel
and its outputs match the stored ones (IDs and digests sanitized; see notebooks/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_the_notebooks_pass_nbval() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("RHO_NOTEBOOK_TEST_OPENAI_URL", None)  # notebooks/conftest.py starts the scripted endpoint
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "notebooks/", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout


def test_the_quickstart_passes_with_a_broken_python3_first_on_path(tmp_path: Path) -> None:
    """Python nodes never look their interpreter up on PATH: a version-manager shim that breaks
    on ``$0`` (as a misconfigured pyenv does) first on PATH does not touch the quickstart."""
    shims = tmp_path / "shims"
    shims.mkdir()
    for name in ("python3", "python"):
        shim = shims / name
        shim.write_text('#!/bin/sh\nexec "$(dirname "$0")/../nothing/$(basename "$0")" "$@"\n')
        shim.chmod(0o755)
    path = f"{shims}{os.pathsep}{os.environ['PATH']}"
    assert shutil.which("python3", path=path) == str(shims / "python3")
    broken = subprocess.run(["python3", "-c", "print(1)"], env={**os.environ, "PATH": path}, capture_output=True)
    assert broken.returncode != 0  # the shim really breaks whatever runs through it
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": path}
    env.pop("RHO_NOTEBOOK_TEST_OPENAI_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "notebooks/01_quickstart.ipynb", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
