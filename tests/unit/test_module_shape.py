"""The shape issue 29 holds the package to: small modules, short functions, private helpers kept
private to their package, every public exception in errors.py, and no function written twice.

Each check reads the sources under rho_notebook/ (the generated and bundled front-end files are not
Python) and names every offender with its file and line, so the failure says what to split, move
or merge.
"""

from __future__ import annotations

import ast
import copy
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rho_notebook"

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
OWN_INTERPRETER = frozenset({"script", "flow"})
"""Packages that run in a script's own interpreter and import only the standard library (and each
other): they keep their own exception classes."""
WORKER_MODULES = ("source/_worker", "source/_starlark")
"""The Starlark planning worker runs as ``python -I`` with the standard library and starlark only;
its exceptions never leave its process."""
CORE_LAYERS = frozenset(
    "errors oshelpers lazy model source store agents policy planning exec runtime service views".split()
)
MIN_DUPLICATE_NODES = 12
"""Bodies smaller than this (``return self._x``, ``pass``, a single call) say too little to be a copy."""


def sources() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def subpackage(path: Path) -> str:
    """The first name under rho_notebook/ (``errors`` for errors.py, ``service`` for service/x.py)."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_module_is_over_600_lines() -> None:
    over = [
        f"{path.relative_to(ROOT)}: {count} lines"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them by concept):\n" + "\n".join(over)


def test_no_function_is_over_80_lines() -> None:
    over = [
        f"{where(path, fn.lineno)} {fn.name}: {fn.end_lineno - fn.lineno + 1} lines"
        for path, tree in sources()
        for fn in functions(tree)
        if fn.end_lineno is not None and fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(over)


def private_imports(path: Path, tree: ast.Module) -> Iterator[str]:
    """Imports of another subpackage's private module (``rho_notebook.x._y``) or private name."""
    own = subpackage(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "rho_notebook" and len(parts) > 1 and parts[1] != own:
                    if any(part.startswith("_") for part in parts[2:]):
                        yield f"{where(path, node.lineno)} import {alias.name}"
            continue
        else:
            continue
        if parts[0] != "rho_notebook" or len(parts) < 2 or parts[1] == own:
            continue
        if any(part.startswith("_") for part in parts[2:]):
            yield f"{where(path, node.lineno)} from {node.module} import ..."
        for name in names:
            if name.startswith("_") and not name.startswith("__"):
                yield f"{where(path, node.lineno)} from {node.module} import {name}"


def test_no_private_import_across_subpackages() -> None:
    found = [line for path, tree in sources() for line in private_imports(path, tree)]
    assert not found, (
        "private modules and names are for their own package; give the other package a public name:\n"
        + "\n".join(found)
    )


def is_exception_class(node: ast.ClassDef, known: set[str]) -> bool:
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if name in known or name.endswith(("Error", "Exception")) or name in {"Exception", "OSError", "RuntimeError"}:
            return True
    return False


def test_public_exceptions_of_the_core_layers_live_in_errors() -> None:
    known = {"Exception", "BaseException"}
    errors_tree = ast.parse((PACKAGE / "errors.py").read_text(encoding="utf-8"))
    known |= {node.name for node in errors_tree.body if isinstance(node, ast.ClassDef)}
    elsewhere = []
    for path, tree in sources():
        relative = path.relative_to(PACKAGE).as_posix()
        if subpackage(path) not in CORE_LAYERS or relative == "errors.py" or relative.startswith(WORKER_MODULES):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and is_exception_class(node, known):
                elsewhere.append(f"{where(path, node.lineno)} {node.name}")
    assert not elsewhere, "public exception classes of the core layers belong in rho_notebook/errors.py:\n" + "\n".join(
        elsewhere
    )


def normalised_body(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, int]:
    """The body without its docstring, as an AST dump without positions, and its node count."""
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    module = ast.Module(body=[copy.deepcopy(statement) for statement in body], type_ignores=[])
    return ast.dump(module, annotate_fields=False), sum(1 for _ in ast.walk(module))


def test_no_two_functions_have_the_same_body() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path, tree in sources():
        for fn in functions(tree):
            body, size = normalised_body(fn)
            if size >= MIN_DUPLICATE_NODES:
                seen[body].append(f"{where(path, fn.lineno)} {fn.name}")
    copies = [places for places in seen.values() if len(places) > 1]
    assert not copies, "functions with the same body (keep one, import it):\n" + "\n\n".join(
        "\n".join(places) for places in copies
    )
