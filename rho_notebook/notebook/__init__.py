"""The notebook front end: the Python API (:mod:`~rho_notebook.notebook.api`), the kernel session,
and the IPython extension (magics, completion, display).

Like every front end it goes through :mod:`rho_notebook.service` (docs/architecture.md); the cell
parsing and notebook export it uses live there (:mod:`rho_notebook.service.cells`,
:mod:`rho_notebook.service.export`). Importing this package imports no IPython: :mod:`api` and
:mod:`session` are pure, and :mod:`extension`, :mod:`magics` and :mod:`display` (which need
IPython) are imported only when the extension is loaded.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """Same as ``%load_ext rho_notebook``."""
    from rho_notebook.notebook.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from rho_notebook.notebook.extension import unload_ipython_extension as unload

    unload(ipython)
