"""The notebook layer: workflow cells, the kernel session, notebook export, and the IPython
extension (magics, completion, display).

Importing this package imports no IPython: :mod:`cells`, :mod:`session` and :mod:`export` are
pure, and :mod:`extension`, :mod:`magics` and :mod:`display` (which need IPython) are imported
only when the extension is loaded.
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
