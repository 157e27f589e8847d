"""The package tells Jupyter where its prebuilt lab extension is (``jupyter labextension develop``)."""

from __future__ import annotations

import json
from pathlib import Path

import rho_notebook


def test_labextension_paths_point_at_the_built_extension() -> None:
    (entry,) = rho_notebook._jupyter_labextension_paths()
    built = Path(rho_notebook.__file__).parent / entry["src"]
    manifest = json.loads((built / "package.json").read_text())
    assert manifest["name"] == entry["dest"] == "rho-notebook"
    assert (built / "static").is_dir() and any((built / "static").glob("remoteEntry.*.js"))
