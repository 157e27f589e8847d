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


def test_the_shipped_notebooks_carry_pictures_an_untrusted_viewer_shows() -> None:
    """Every DAG output (the widget view's) carries a PNG, with its display size, and no HTML:
    untrusted JupyterLab shows the first safe MIME type by rank, and HTML outranks PNG
    (tests/browser/test_untrusted_notebooks.py opens them). A run cell's picture has no SVG (nbval
    compares SVG, and the saved one is the run's final DAG), and its text is the run's line."""
    import base64

    import nbformat

    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
        pictures = [o for o in outputs if "image/png" in o.get("data", {})]
        assert len(pictures) >= 2, f"{path.name}: a graph and a run picture expected"
        for output in pictures:
            assert "text/html" not in output["data"], path.name
            png = base64.b64decode(output["data"]["image/png"])
            assert png.startswith(b"\x89PNG") and output["metadata"]["image/png"]["width"] >= 520
        assert not [o for o in outputs if "\u25cb pending" in str(o.get("data", {}).get("text/html", ""))]
        graphs = [o for o in pictures if "image/svg+xml" in o["data"]]
        assert graphs and all('data-state="pending"' in o["data"]["image/svg+xml"] for o in graphs)
        runs = [o for o in pictures if "image/svg+xml" not in o["data"]]
        assert runs and all(o["data"]["text/plain"].startswith("run ") for o in runs), path.name


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
