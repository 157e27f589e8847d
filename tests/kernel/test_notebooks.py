"""`pytest --nbval notebooks/` as part of the suite: every shipped notebook runs in a real kernel
and its outputs match the stored ones (IDs and digests sanitized; see notebooks/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys

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
