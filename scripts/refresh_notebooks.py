"""Re-execute the shipped notebooks and store their outputs (what `pytest --nbval` compares).

    PATH="$PWD/.venv/bin:$PATH" python scripts/refresh_notebooks.py [notebooks/01_quickstart.ipynb ...]

Runs each notebook in a real kernel the way notebooks/conftest.py sets nbval up: a fresh temporary
RHO_NOTEBOOK_HOME, the scripted local model endpoint for agent nodes, the repository root as the
working directory. The live widget views (``application/vnd.jupyter.widget-view+json``) and the
widget state are dropped before saving: they only mean something to the kernel that made them, and
nbval ignores them; every display keeps its text, HTML and SVG. Review the diff before committing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _strip_widgets(nb: nbformat.NotebookNode) -> None:
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(WIDGET_MIME, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    paths = args.notebooks or sorted((REPO / "notebooks").glob("*.ipynb"))
    sys.path.insert(0, str(REPO))
    from notebooks.conftest import _start_scripted_endpoint  # the same endpoint nbval uses

    home = Path(tempfile.mkdtemp(prefix="rho-notebook-refresh-"))
    os.environ["RHO_NOTEBOOK_HOME"] = str(home)
    server = _start_scripted_endpoint(home)
    try:
        for path in paths:
            nb = nbformat.read(path, as_version=4)
            NotebookClient(
                nb, timeout=300, kernel_name="python3", record_timing=False, resources={"metadata": {"path": str(REPO)}}
            ).execute()
            _strip_widgets(nb)
            nbformat.write(nb, path)
            print(f"refreshed {path}")
    finally:
        server.__exit__(None, None, None)
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
