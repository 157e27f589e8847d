"""Re-execute the shipped notebooks and store their outputs (what `pytest --nbval` compares).

    PATH="$PWD/.venv/bin:$PATH" python scripts/refresh_notebooks.py [notebooks/01_quickstart.ipynb ...]

Runs each notebook in a real kernel the way notebooks/conftest.py sets nbval up: a fresh temporary
RHO_NOTEBOOK_HOME, the scripted local model endpoint for agent nodes, the repository root as the
working directory. The live widget views (``application/vnd.jupyter.widget-view+json``) and the
widget state are dropped before saving: they only mean something to the kernel that made them, and
nbval ignores them; every display keeps its text and static picture (a DAG's PNG and SVG). A run
cell's PNG is its run's final DAG: the kernel sends it when the run stops, and where nbclient did
not take that update (the cell that was running had finished), so it is drawn from the store here.
These are what an untrusted notebook shows (tests/browser/test_untrusted_notebooks.py).
Review the diff before committing.
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


def _final_pictures(nb: nbformat.NotebookNode) -> int:
    """Give every run cell's output the final DAG of its run, read from the store: the kernel's
    update may not have reached nbclient (it only takes an update while the cell that sends it
    runs, and a run may stop, or stop again after a resume, once the cells that wait for it have
    finished); returns how many it set."""
    from rho_notebook.service import Service, wait_for
    from rho_notebook.views.picture import picture_metadata, run_bundle

    service = Service.default()
    fixed = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            shows = (output.get("metadata", {}).get("rho_notebook") or {}).get("picture")
            text = output.get("data", {}).get("text/plain", "")
            if shows in (None, "plan") or not text.startswith("run "):
                continue
            run_id = text.split()[1]
            state = wait_for(service.status(run_id))
            bundle = run_bundle(wait_for(service.run_graph(run_id)), state)
            output["data"]["image/png"] = bundle["image/png"]
            output["metadata"].update(picture_metadata(bundle))
            output["metadata"]["rho_notebook"] = {"picture": state.lifecycle.value}
            fixed += 1
    return fixed


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
            fixed = _final_pictures(nb)
            nbformat.write(nb, path)
            print(f"refreshed {path}" + (f" ({fixed} run picture(s) read from the store)" if fixed else ""))
    finally:
        server.__exit__(None, None, None)
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
