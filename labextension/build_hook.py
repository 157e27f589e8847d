"""The hatch-jupyter-builder build function of rho-notebook: build the JupyterLab extension with
npm when Node.js is available, otherwise install the prebuilt one and say so.

pyproject.toml points ``[tool.hatch.build.hooks.jupyter-builder] build-function`` here. With
Node.js and npm on PATH this is ``hatch_jupyter_builder.npm_builder``: ``npm install`` in
``labextension/``, then ``npm run build:prod`` (tsc of the shared ``js/`` package into ``js/lib``,
tsc of the extension, then ``jupyter-builder build .``, which writes ``rho_notebook/labextension/``).

``labextension/`` is a member of the npm workspace whose root is the repository (``package.json``
and the one ``package-lock.json`` there; members ``js/`` and ``labextension/``). npm 8+ run in a
member finds that root by itself, so the ``npm install`` above installs the pinned tree into the
root's ``node_modules/`` and links ``js/`` there as ``@rho-notebook/dagview``, the package the
sidebar imports; on a fresh clone nothing else is needed. This hook checks the link afterwards
(an older npm would not make it) and says what to do when it is missing.

The output is committed and must not depend on where the repository is checked out: a rebuild in
a clean clone gives the committed bytes again, so ``git status`` stays clean after
``pip install -e .``. ``labextension/rspack.config.js`` (named module ids) keeps the absolute
checkout path out of ``remoteEntry.*.js``; ``tests/unit/test_lab_bundle.py`` builds at another
path and compares byte for byte.

Without Node.js and npm the committed build in ``rho_notebook/labextension/`` is installed as it
is, and a warning says so (``pip install -v`` shows build output).
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import Any

PREBUILT = Path("rho_notebook") / "labextension" / "static" / "style.js"
SHARED = Path("node_modules") / "@rho-notebook" / "dagview"
"""Where npm links the workspace package ``js/`` (relative to the workspace root, the repository)."""


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

    try:
        npm_builder(target_name, version, **kwargs)
    finally:
        if not SHARED.exists():
            msg = (
                f"rho-notebook: npm did not link the workspace package js/ at {SHARED}: run `npm install` in the "
                "repository root (npm 8 or newer, which comes with Node.js 20) and build again"
            )
            print(msg, file=sys.stderr)
