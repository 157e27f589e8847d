"""rho_notebook: Rho workflows in Jupyter and on the command line.

``import rho_notebook as rho`` gives the Python API (:mod:`rho_notebook.notebook.api`): ``rho.validate``,
``rho.plan``, ``rho.run``, ``rho.fork``, ``rho.runs``, ``rho.plans``, ``rho.status``, ``rho.cancel``,
``rho.resume``, ``rho.attach``, ``rho.result``, ``rho.usage``, ``rho.logs``, ``rho.approve``,
``rho.export`` and ``rho.show``, with ``rho.RunHandle``, ``rho.RunResult``, ``rho.NotebookSource`` and
``rho.ConfirmationRequired``. Every
such name is imported from that module on first use, so importing the package loads nothing but
the standard library (in particular neither IPython nor ipywidgets).

``%load_ext rho_notebook`` (or ``c.InteractiveShellApp.extensions = ["rho_notebook"]`` in an
IPython profile, for every kernel) registers the ``%%workflow``, ``%%star``, ``%%agent`` and
``%workflow`` magics; see docs/notebook.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension lives (``jupyter labextension develop .`` uses it)."""
    return [{"src": "labextension", "dest": "rho-notebook"}]


if TYPE_CHECKING:
    from rho_notebook.notebook.api import (
        ConfirmationRequired,
        NotebookSource,
        RunHandle,
        RunResult,
        approve,
        attach,
        cancel,
        export,
        fork,
        logs,
        plan,
        plans,
        result,
        resume,
        run,
        runs,
        show,
        status,
        validate,
    )

__all__ = [
    "validate",
    "plan",
    "run",
    "fork",
    "runs",
    "plans",
    "status",
    "cancel",
    "resume",
    "attach",
    "result",
    "usage",
    "logs",
    "approve",
    "export",
    "show",
    "RunHandle",
    "RunResult",
    "NotebookSource",
    "ConfirmationRequired",
    "load_ipython_extension",
    "unload_ipython_extension",
]

_API = "rho_notebook.notebook.api"
_LAZY = frozenset(__all__) - {"load_ipython_extension", "unload_ipython_extension"}
"""Names imported from :mod:`rho_notebook.notebook.api` on first use."""


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        msg = f"module 'rho_notebook' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(_API), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The API and the module's dunders: ``rho.<Tab>`` offers what a person may call, not this
    module's own imports (``importlib``, ``Any``)."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext rho_notebook``: register the workflow magics and completions."""
    from rho_notebook.notebook.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext rho_notebook``: remove what :func:`load_ipython_extension` registered."""
    from rho_notebook.notebook.extension import unload_ipython_extension as unload

    unload(ipython)
