"""The hatch-jupyter-builder build function of rho-notebook: build the JupyterLab extension with
npm when Node.js is available, otherwise install the prebuilt one and say so.

pyproject.toml points ``[tool.hatch.build.hooks.jupyter-builder] build-function`` here. With
Node.js and npm on PATH this is ``hatch_jupyter_builder.npm_builder`` (``npm install`` from the
pinned package-lock.json, then ``npm run build:prod``: tsc, then ``jupyter-builder build .``, which
writes ``rho_notebook/labextension/``). Without them the committed build in
``rho_notebook/labextension/`` is installed as it is, and a warning says so (``pip install -v``
shows build output).
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import Any

PREBUILT = Path("rho_notebook") / "labextension" / "static" / "style.js"


def build(target_name: str, version: str, **kwargs: Any) -> None:
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        if not PREBUILT.exists():
            msg = (
                f"{' and '.join(missing)} not found on PATH and there is no prebuilt JupyterLab extension in "
                f"{PREBUILT.parent.parent}: install Node.js 20+ (with npm) and build again"
            )
            raise RuntimeError(msg)
        msg = (
            f"rho-notebook: {' and '.join(missing)} not found on PATH, so the JupyterLab extension was NOT rebuilt; "
            f"installing the prebuilt one from {PREBUILT.parent.parent} (to rebuild it, put Node.js 20+ on PATH and reinstall)"
        )
        logging.getLogger("rho_notebook.build").warning(msg)
        print(msg, file=sys.stderr)
        return
    from hatch_jupyter_builder.utils import npm_builder

    npm_builder(target_name, version, **kwargs)
