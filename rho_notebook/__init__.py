"""rho_notebook: Rho workflows in Jupyter and on the command line.

``import rho_notebook as rho`` gives the Python API (:mod:`rho_notebook.api`): ``rho.validate``,
``rho.plan``, ``rho.run``, ``rho.runs``, ``rho.plans``, ``rho.status``, ``rho.cancel``,
``rho.resume``, ``rho.result``, ``rho.logs``, ``rho.approve`` and ``rho.export``. Names are imported
on first use, so importing the package loads nothing else (in particular neither IPython nor
ipywidgets).

``rho.plan`` and ``rho.run`` share their names with the subpackages :mod:`rho_notebook.plan` and
:mod:`rho_notebook.run`. The package attribute is the API function either way (importing a
subpackage does not replace it); attribute access through it still reaches the subpackage
(``rho_notebook.run.background``), and ``from rho_notebook.run import ...`` is unaffected.

``%load_ext rho_notebook`` (or ``c.InteractiveShellApp.extensions = ["rho_notebook"]`` in an
IPython profile, for every kernel) registers the ``%%workflow``, ``%%star``, ``%%agent`` and
``%workflow`` magics; see docs/notebook.md.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from typing import TYPE_CHECKING, Any

def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension lives (``jupyter labextension develop .`` uses it)."""
    return [{"src": "labextension", "dest": "rho-notebook"}]


if TYPE_CHECKING:
    from rho_notebook.api import (
        ConfirmationRequired,
        approve,
        cancel,
        export,
        logs,
        plan,
        plans,
        result,
        resume,
        run,
        runs,
        status,
        validate,
    )
    from rho_notebook.notebook.cells import NotebookSource
    from rho_notebook.run.background import RunHandle, RunResult

__all__ = [
    "validate",
    "plan",
    "run",
    "runs",
    "plans",
    "status",
    "cancel",
    "resume",
    "result",
    "logs",
    "approve",
    "export",
    "RunHandle",
    "RunResult",
    "NotebookSource",
    "ConfirmationRequired",
    "load_ipython_extension",
    "unload_ipython_extension",
]

_LAZY = {
    "validate": "rho_notebook.api",
    "runs": "rho_notebook.api",
    "plans": "rho_notebook.api",
    "status": "rho_notebook.api",
    "cancel": "rho_notebook.api",
    "resume": "rho_notebook.api",
    "result": "rho_notebook.api",
    "logs": "rho_notebook.api",
    "approve": "rho_notebook.api",
    "export": "rho_notebook.api",
    "ConfirmationRequired": "rho_notebook.api",
    "RunHandle": "rho_notebook.run.background",
    "RunResult": "rho_notebook.run.background",
    "NotebookSource": "rho_notebook.notebook.cells",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        msg = f"module 'rho_notebook' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _FunctionAndPackage:
    """``rho.run`` / ``rho.plan``: calls the API function; other attributes come from the package."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _function(self) -> Any:
        return getattr(importlib.import_module("rho_notebook.api"), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._function()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        package = importlib.import_module(f"rho_notebook.{self._name}")
        try:
            return getattr(package, name)
        except AttributeError:
            return importlib.import_module(f"rho_notebook.{self._name}.{name}")

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        doc: str | None = self._function().__doc__
        return doc

    @property
    def __wrapped__(self) -> Any:
        return self._function()

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self._function())

    def __repr__(self) -> str:
        return f"<function rho_notebook.{self._name} (rho_notebook.api.{self._name})>"


_PLAN = _FunctionAndPackage("plan")
_RUN = _FunctionAndPackage("run")


class _Package(types.ModuleType):
    @property
    def plan(self) -> Any:
        return _PLAN

    @plan.setter
    def plan(self, value: Any) -> None:
        """The import system sets the subpackage here; it stays reachable (see the module doc)."""

    @property
    def run(self) -> Any:
        return _RUN

    @run.setter
    def run(self, value: Any) -> None:
        """The import system sets the subpackage here; it stays reachable (see the module doc)."""


sys.modules[__name__].__class__ = _Package


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext rho_notebook``: register the workflow magics and completions."""
    from rho_notebook.notebook.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext rho_notebook``: remove what :func:`load_ipython_extension` registered."""
    from rho_notebook.notebook.extension import unload_ipython_extension as unload

    unload(ipython)
