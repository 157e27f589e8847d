"""Package faces that import on first use (PEP 562 module ``__getattr__``).

A package's ``__init__`` names its public face -- which name lives in which module -- without
importing those modules: ``from rho_notebook.service import Service`` imports the service's modules,
while ``import rho_notebook.service.paths`` imports only what that module needs. This keeps a
CLI verb, the kernel extension and the MCP server from paying for modules they never use::

    from rho_notebook.lazy import lazy_face

    __getattr__, __dir__ = lazy_face(__name__, {"Service": "service", "RunResult": "results"})
    __all__ = ["RunResult", "Service"]

Module paths are relative to the package. Standard library only (base layer).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(package: str, face: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public ``face`` maps each name to
    the module (relative to the package) that defines it; a name is imported the first time it is
    asked for, then cached in the package's namespace."""
    names = dict(face)

    def load(name: str) -> Any:
        module = names.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def listing() -> list[str]:
        return sorted({*names, *vars(importlib.import_module(package))})

    return load, listing
