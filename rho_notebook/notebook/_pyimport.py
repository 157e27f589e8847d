"""``%%py`` modules importable in the kernel by their dotted names, as Python nodes import them.

A ``%%py //nodes/calc.py`` module is ``nodes.calc`` for the other frozen modules of a plan; so
that a ``%%py`` cell which imports it also runs in the kernel, the session's cells are importable
there under the same names:

- a finder first on ``sys.meta_path`` answers for the cells' own names (a cell shadows a file with
  the same name, as it does in a plan), compiling the cell's text as its module;
- a finder last answers for the packages those names imply (``nodes`` for ``nodes.calc``) when
  nothing else provides them, with an empty package.

Modules imported from cells are dropped from ``sys.modules`` whenever a ``%%py`` cell runs, so
the next import reads the latest cells (names already bound by ``from ... import`` keep what they
were bound to, as with any re-import). The finders are installed when the first ``%%py`` cell runs
and removed when the extension is unloaded.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from rho_notebook.service.cells import PythonCell

__all__ = ["CellModules"]


class _CellLoader(importlib.abc.Loader):
    """Runs a cell's module text (padded so that its lines are the cell's lines)."""

    def __init__(self, cell: PythonCell | None, *, loaded: set[str]) -> None:
        self.cell = cell
        self.loaded = loaded

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        self.loaded.add(module.__name__)
        if self.cell is None:  # a package implied by a cell's name
            return
        text = "\n" + self.cell.text
        filename = f"<%%py {self.cell.label}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
        module.__file__ = filename
        exec(compile(text, filename, "exec", dont_inherit=True), module.__dict__)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, owner: CellModules, *, parents: bool) -> None:
        self.owner = owner
        self.parents = parents

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        cells = {cell.module_name: cell for cell in self.owner.cells().values()}
        if not self.parents:
            cell = cells.get(fullname)
            if cell is None:
                return None
            package = cell.label.endswith("/__init__.py")
            loader = _CellLoader(cell, loaded=self.owner.loaded)
            return importlib.util.spec_from_loader(fullname, loader, origin=cell.label, is_package=package)
        if any(name.startswith(fullname + ".") for name in cells):
            loader = _CellLoader(None, loaded=self.owner.loaded)
            return importlib.util.spec_from_loader(fullname, loader, is_package=True)
        return None


class CellModules:
    """The ``%%py`` modules of one session, importable in this process (see the module docstring)."""

    def __init__(self, cells: Callable[[], Mapping[str, PythonCell]]) -> None:
        self.cells = cells
        """label -> cell, read at each import."""
        self.loaded: set[str] = set()
        """Names this process imported from cells (or as their implied packages)."""
        self._finders: tuple[Any, Any] | None = None

    def install(self) -> None:
        """Put the finders on ``sys.meta_path`` (once)."""
        if self._finders is not None:
            return
        first, last = _Finder(self, parents=False), _Finder(self, parents=True)
        sys.meta_path.insert(0, first)
        sys.meta_path.append(last)
        self._finders = (first, last)

    def forget(self) -> None:
        """Drop every module imported from cells, so that the next import reads the cells again."""
        for name in sorted(self.loaded, reverse=True):
            sys.modules.pop(name, None)
        self.loaded.clear()
        importlib.invalidate_caches()

    def uninstall(self) -> None:
        """Remove the finders and forget the modules they imported."""
        if self._finders is not None:
            for finder in self._finders:
                if finder in sys.meta_path:
                    sys.meta_path.remove(finder)
            self._finders = None
        self.forget()
