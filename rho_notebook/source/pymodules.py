"""Python modules by label (``//nodes/stats.py``): their import names, reading them, and the
closure of workspace modules each one imports.

A Python module is read like a Starlark one (same label rules, no symlinks, ``%%py`` cells from
the overlay shadow files) and never executed here: its imports are found with :mod:`ast`. For
``import a.b``, ``from a.b import c`` and relative imports, every label that would provide the
module (``//a.py``, ``//a/__init__.py``, ``//a/b.py``, ``//a/b/__init__.py``, and for a
from-import the possible submodule ``//a/b/c.py`` or ``//a/b/c/__init__.py``) and exists in the
overlay or the workspace joins the closure, recursively. Every other import comes from the
interpreter's environment and is not frozen. Imports are found wherever they stand in the module
(inside functions and ``try`` blocks too); an import computed at run time (``importlib``) is not.
"""

from __future__ import annotations

import ast
import hashlib
import keyword
import re
from dataclasses import dataclass
from pathlib import Path

from rho_notebook.errors import SourceError
from rho_notebook.source.labels import FileSourceReader, SourceText, check_label

__all__ = [
    "HARNESS_PATH",
    "PythonSource",
    "ModuleIndex",
    "harness_sha256",
    "module_name",
    "raised_in_modules",
    "check_module_label",
]

HARNESS_PATH = Path(__file__).with_name("_py_harness.py")
"""The script that imports a node's module, calls its function and writes the result. Its digest
is frozen in every plan: changing a byte of it keeps the runs of earlier plans from resuming
(tests/cli/test_old_store.py), so say a refusal better on the parent's side, as planning/flow.py
does."""

_SUFFIX = ".py"


def harness_sha256() -> str:
    """``sha256:<hex>`` of the harness file's bytes, as frozen into every plan with Python nodes."""
    return "sha256:" + hashlib.sha256(HARNESS_PATH.read_bytes()).hexdigest()


def check_module_label(label: str) -> str | None:
    """The problem with a Python module label, or None: the label rules with ``.py``, and every
    part a Python identifier so that the module can be imported by its dotted name."""
    problem = check_label(label, suffix=_SUFFIX)
    if problem is not None:
        return problem
    parts = label[2 : -len(_SUFFIX)].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts:
        return f"label {label!r} names the workspace root's __init__.py, which no import can reach; put it in a package folder"
    for part in parts:
        if not part.isidentifier() or keyword.iskeyword(part):
            return f"label {label!r}: {part!r} is not a Python identifier, so the module cannot be imported as {'.'.join(parts)!r}; rename it (letters, digits, _)"
    return None


def module_name(label: str) -> str:
    """The dotted import name of a module label: ``//nodes/calc.py`` -> ``nodes.calc``,
    ``//pkg/__init__.py`` -> ``pkg``.

    Raises
    ------
    SourceError
        When the label breaks the label rules or a part is not a Python identifier.
    """
    problem = check_module_label(label)
    if problem is not None:
        raise SourceError(problem, rule="python.module")
    parts = label[2 : -len(_SUFFIX)].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _candidates(dotted: str) -> list[str]:
    """Labels that may provide ``dotted`` and its parent packages, outermost first."""
    parts = dotted.split(".")
    found = []
    for end in range(1, len(parts) + 1):
        path = "/".join(parts[:end])
        found += [f"//{path}.py", f"//{path}/__init__.py"]
    return found


def _binds(tree: ast.Module) -> tuple[frozenset[str], bool]:
    """Names bound at the module's top level (in ``if``/``try``/``with`` blocks too), and whether
    a ``from x import *`` may bind more."""
    found = _TopLevelNames()
    found.walk(tree.body)
    return frozenset(found.names), found.star


class _TopLevelNames:
    """The names a module's top-level statements bind, gathered by :meth:`walk`."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.star = False

    def walk(self, body: list[ast.stmt]) -> None:
        for statement in body:
            nested = _nested_bodies(statement)
            if nested is None:
                self.bind(statement)
                continue
            for block in nested:
                self.walk(block)

    def bind(self, statement: ast.stmt) -> None:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.names.add(statement.name)
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                self.target(target)
        elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
            self.target(statement.target)
        elif isinstance(statement, ast.Import):
            self.names.update(alias.asname or alias.name.split(".")[0] for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom):
            for alias in statement.names:
                if alias.name == "*":
                    self.star = True
                else:
                    self.names.add(alias.asname or alias.name)

    def target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.names.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.target(element)
        elif isinstance(target, ast.Starred):
            self.target(target.value)


def _nested_bodies(statement: ast.stmt) -> list[list[ast.stmt]] | None:
    """The blocks of a compound statement whose bindings are top-level too; None for others."""
    if isinstance(statement, (ast.If, ast.While, ast.For, ast.AsyncFor)):
        return [statement.body, statement.orelse]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [statement.body]
    if isinstance(statement, ast.Try):
        return [
            statement.body,
            statement.orelse,
            statement.finalbody,
            *(handler.body for handler in statement.handlers),
        ]
    return None


@dataclass(frozen=True)
class PythonSource:
    """One Python module read at plan time: its text, import name and what it may import."""

    source: SourceText
    name: str
    """The dotted import name (``nodes.calc``)."""
    imports: tuple[str, ...]
    """Dotted names of every import in the module, relative ones made absolute."""
    bound: frozenset[str]
    """Names the module binds at its top level."""
    star_import: bool
    """Whether a ``from x import *`` may bind names not in ``bound``."""

    @property
    def label(self) -> str:
        return self.source.label

    @property
    def sha256(self) -> str:
        return "sha256:" + hashlib.sha256(self.source.text.encode()).hexdigest()

    def defines(self, name: str) -> bool:
        """Whether ``name`` may be bound at the module's top level (a def, class, assignment or import)."""
        return name in self.bound or self.star_import


def _parse(source: SourceText, name: str) -> PythonSource:
    try:
        tree = ast.parse(source.text, filename=source.display)
    except SyntaxError as err:
        detail = err.msg or "invalid syntax"
        raise SourceError(
            f"Python syntax error: {detail}",
            rule="python.syntax",
            file=source.display,
            line=err.lineno,
            column=err.offset,
        ) from None
    except (ValueError, RecursionError, MemoryError) as err:  # NUL bytes (older Pythons), nesting
        raise SourceError(f"Python module cannot be parsed: {err}", rule="python.syntax", file=source.display) from None
    is_package = source.label.endswith("/__init__.py")
    package = name if is_package else name.rpartition(".")[0]
    imports: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            if base is None:
                continue  # beyond the top-level package: an ImportError when it runs, not ours to freeze
            if base:
                imports.append(base)
            imports.extend(f"{base}.{alias.name}" if base else alias.name for alias in node.names if alias.name != "*")
    bound, star = _binds(tree)
    return PythonSource(source=source, name=name, imports=tuple(imports), bound=bound, star_import=star)


def _absolute(module: str | None, level: int, package: str) -> str | None:
    """The absolute dotted name of ``from <level dots><module> import ...``; None when it climbs
    above the top-level package."""
    if level == 0:
        return module or ""
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (level - 1)]
    if level - 1 >= len(parts) or not base:
        return None
    return ".".join([*base, *([module] if module else [])])


class ModuleIndex:
    """The Python modules of one plan, each read and parsed once, and their import closures."""

    def __init__(self, reader: FileSourceReader) -> None:
        self.reader = reader
        self._modules: dict[str, PythonSource] = {}
        self._closures: dict[str, tuple[str, ...]] = {}

    def module(self, label: str) -> PythonSource:
        """The module at ``label``, read (overlay first) and parsed.

        Raises
        ------
        SourceError
            A label the rules refuse, a missing or linked file, text that is not UTF-8, a syntax error.
        """
        found = self._modules.get(label)
        if found is None:
            name = module_name(label)
            found = _parse(self.reader.read(label, suffix=_SUFFIX), name)
            self._modules[label] = found
        return found

    def closure(self, label: str) -> tuple[str, ...]:
        """``label`` and every workspace or overlay module it imports, directly or not; sorted."""
        known = self._closures.get(label)
        if known is not None:
            return known
        seen: set[str] = set()
        pending = [label]
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            for dotted in self.module(current).imports:
                for candidate in _candidates(dotted):
                    if candidate not in seen and self.reader.has(candidate):
                        pending.append(candidate)
        self._closures[label] = tuple(sorted(seen))
        return self._closures[label]

    def modules(self) -> tuple[PythonSource, ...]:
        """Every module read so far, sorted by label."""
        return tuple(self._modules[label] for label in sorted(self._modules))


_FRAME = re.compile(r'  File "(?P<file>[^"]+)", line (?P<line>[0-9]+)')


def raised_in_modules(lines: list[str], modules: Path) -> tuple[str, list[tuple[str, int]]]:
    """What a Python traceback (``lines``, as printed to stderr) says to the module's author:
    the exception (its lines after the last frame, without the frames' source and carets, joined
    with `` | ``), and the ``(label, line)`` of each frame in a module frozen under the folder
    ``modules``, outermost first (none when no frame is in one, e.g. a crash inside Python)."""
    frames: list[tuple[str, int]] = []
    last_frame = -1
    for index, text in enumerate(lines):
        frame = _FRAME.match(text)
        if frame is None:
            continue
        last_frame = index
        path = Path(frame["file"])
        if path.is_relative_to(modules):
            frames.append(("//" + path.relative_to(modules).as_posix(), int(frame["line"])))
    after = lines[last_frame + 1 :] if last_frame >= 0 else lines
    raised = [t for t in after if t.strip() and not t.startswith(" ")] or lines[-1:]
    return " | ".join(raised), frames
