"""Package faces that import on first use (PEP 562 module ``__getattr__``).

A package's ``__init__`` names its public face -- which name lives in which module -- without
importing those modules: ``from rho_notebook.service import Service`` imports the service's modules,
while ``import rho_notebook.service.paths`` imports only what that module needs. This keeps a
CLI verb, the kernel extension and the MCP server from paying for modules they never use::

    from rho_notebook.lazy import lazy_face

    __getattr__, __dir__ = lazy_face(__name__, {"Service": "service", "RunResult": "results"})
    __all__ = ["RunResult", "Service"]

Module paths are relative to the package, or absolute (``rho_notebook.store.runs``): a module
that re-exports names of other packages (``service/core_names.py``) is a lazy face too.

:class:`LazyModule` does the same for a module a facade calls into: ``planning =
LazyModule("rho_notebook.service.planning")`` imports it when ``planning.plan`` is first read, so
the service's ``status`` does not pay for its planning verbs. Standard library only (base layer).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["LazyModule", "lazy_face", "lazy_modules"]

_ROOT = "rho_notebook."


def lazy_face(package: str, face: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (a package or a module), whose public
    ``face`` maps each name to the module that defines it (relative to ``package``, or absolute
    when it starts with ``rho_notebook.``); a name is imported the first time it is asked for, then
    cached in the package's namespace."""
    names = dict(face)

    def load(name: str) -> Any:
        module = names.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module if module.startswith(_ROOT) else f"{package}.{module}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def listing() -> list[str]:
        return sorted({*names, *vars(importlib.import_module(package))})

    return load, listing


class LazyModule:
    """Module ``name``, imported the first time one of its attributes is read (through
    :func:`importlib.import_module`, so two threads that ask at once import it once)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_modules(package: str, names: str) -> tuple[LazyModule, ...]:
    """A :class:`LazyModule` for each module of ``package`` that ``names`` lists (space-separated)."""
    return tuple(LazyModule(f"{package}.{name}") for name in names.split())
