"""The ``flow.unnamed`` rule: a module that only defines a flow, checked or run as a script.

``rho-notebook run review.py`` without ``--flow Review`` runs the module's top-level code as a
script; a module written as OpenRath writes flows only defines its ``Workflow`` subclasses, so the
run ends in success having called no model. The linter (read with :mod:`ast`, never imported)
warns when the module defines a flow (a top-level ``Workflow`` subclass, or an instance of one
assigned at the top level) and its top-level code calls nothing but constructors: no function
call, no ``if``/``for``/``while``/``with``/``try`` (an ``if __name__ == "__main__":`` block counts
as doing something). The warning names the ``--flow`` to pass.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from rho_notebook.planning._findings import Finding
from rho_notebook.planning.script_inputs import finding_at

__all__ = ["CLI_FLOWS", "FlowSpelling", "flows_defined", "required_arguments", "unnamed_flow"]


@dataclass(frozen=True)
class FlowSpelling:
    """How a front end names a flow in ``flow.unnamed`` and ``flow.name``: the findings say it as
    :data:`CLI_FLOWS` (the CLI and the magics); a front end that names a flow otherwise (MCP's
    ``workflow`` argument) words them with :func:`~rho_notebook.service.checks.flows_spelled`, by
    the findings' ``flows``."""

    flag: str
    """What names a flow: ``--flow``."""
    lead: str
    """How passing one starts: ``pass ``."""
    each: str
    """One flow passed, a format of ``{name}``: ``--flow {name}``."""

    def passing(self, flows: Sequence[str]) -> str:
        """``pass --flow A or --flow B``: how ``flow.unnamed`` ends, naming at most three of ``flows``."""
        return self.lead + " or ".join(self.each.format(name=name) for name in flows[:3])


CLI_FLOWS = FlowSpelling(flag="--flow", lead="pass ", each="--flow {name}")

_FLOW_MODULE = "rho_notebook.flow"
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Pass)


def _flow_imports(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """(each name bound to something ``rho_notebook.flow`` exports -> that export's name, the names
    bound to that module itself)."""
    names: dict[str, str] = {}
    modules: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module == _FLOW_MODULE:
            names.update((alias.asname or alias.name, alias.name) for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom) and statement.module == "rho_notebook":
            modules.update(alias.asname or alias.name for alias in statement.names if alias.name == "flow")
        elif isinstance(statement, ast.Import):
            modules.update(alias.asname for alias in statement.names if alias.name == _FLOW_MODULE and alias.asname)
    return names, modules


def _is_flow_export(node: ast.expr, names: dict[str, str], modules: set[str], *, exported: str | None = None) -> bool:
    """Whether ``node`` names something of ``rho_notebook.flow`` (``exported``: that one name)."""
    if isinstance(node, ast.Name):
        return node.id in names and (exported is None or names[node.id] == exported)
    if isinstance(node, ast.Attribute) and (exported is None or node.attr == exported):
        value = node.value
        return (isinstance(value, ast.Name) and value.id in modules) or ast.unparse(value) == _FLOW_MODULE
    return False


def _flow_classes(tree: ast.Module, names: dict[str, str], modules: set[str]) -> list[str]:
    """Top-level classes deriving from ``Workflow`` (directly, or from one defined before them)."""
    found: list[str] = []
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef) and any(
            (isinstance(base, ast.Name) and base.id in found)
            or _is_flow_export(base, names, modules, exported="Workflow")
            for base in statement.bases
        ):
            found.append(statement.name)
    return found


_PRESETS = ("Workflow", "Agent", "Compressor", "Selector", "EmptyWorkflow")
"""The workflows ``rho_notebook.flow`` exports, whose instances a module may name to ``--flow``."""


def _flow_instances(tree: ast.Module, classes: list[str], names: dict[str, str], modules: set[str]) -> list[str]:
    """Top-level names assigned an instance of one of ``classes`` (``review = Review()``, or
    annotated: ``review: Review = Review()``) or of a preset (``agent = flow.Agent(...)``), in
    the module's order."""
    found: list[str] = []
    for statement in tree.body:
        if not isinstance(statement, ast.Assign | ast.AnnAssign):
            continue
        value = statement.value
        if isinstance(value, ast.Call) and (
            (isinstance(value.func, ast.Name) and value.func.id in classes)
            or any(_is_flow_export(value.func, names, modules, exported=preset) for preset in _PRESETS)
        ):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            found.extend(t.id for t in targets if isinstance(t, ast.Name))
    return found


def _constructs_only(node: ast.AST, constructors: set[str], names: dict[str, str], modules: set[str]) -> bool:
    """Whether every call in ``node`` makes a flow, an agent or a tool (nothing runs)."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and not (
            (isinstance(call.func, ast.Name) and call.func.id in constructors)
            or _is_flow_export(call.func, names, modules)
        ):
            return False
    return True


def flows_defined(tree: ast.Module) -> list[str]:
    """The names ``--flow`` can take in ``tree``: its top-level ``Workflow`` subclasses and the
    top-level names assigned one's instance, in the module's order."""
    names, modules = _flow_imports(tree)
    classes = _flow_classes(tree, names, modules)
    return classes + _flow_instances(tree, classes, names, modules)


def required_arguments(tree: ast.Module, name: str) -> list[str]:
    """The arguments the top-level class ``name``'s own ``__init__`` cannot be called without
    (none when the module defines no such class, or the class no ``__init__``): ``--flow NAME``
    makes the workflow as ``NAME()``."""
    for statement in tree.body:
        if not (isinstance(statement, ast.ClassDef) and statement.name == name):
            continue
        for item in statement.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "__init__":
                args = item.args
                positional = [*args.posonlyargs, *args.args]
                undefaulted = positional[: len(positional) - len(args.defaults)][1:]  # (not self)
                keywords = [a for a, default in zip(args.kwonlyargs, args.kw_defaults, strict=True) if default is None]
                return [a.arg for a in (*undefaulted, *keywords)]
    return []


def unnamed_flow(tree: ast.Module, display: str) -> Finding | None:
    """The ``flow.unnamed`` warning for ``tree`` (module docstring), or None."""
    names, modules = _flow_imports(tree)
    if not names and not modules:
        return None
    classes = _flow_classes(tree, names, modules)
    constructors = set(classes)
    for statement in tree.body:
        if isinstance(statement, _DEFINITIONS):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring
        if not isinstance(statement, ast.Assign | ast.AnnAssign) or statement.value is None:
            return None  # top-level code that does something
        if not _constructs_only(statement.value, constructors, names, modules):
            return None
    flows = _flow_instances(tree, classes, names, modules) or classes
    if not flows:
        return None
    where = next(
        (s for s in tree.body if isinstance(s, ast.ClassDef) and s.name in classes)
        if classes
        else (  # a preset's instance
            s
            for s in tree.body
            if isinstance(s, ast.Assign | ast.AnnAssign)
            and any(
                isinstance(t, ast.Name) and t.id in flows
                for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
            )
        ),
        tree,
    )
    message = (
        f"the module defines the flow {', '.join(flows)} and its top-level code runs nothing: as a script, a run "
        f"of it calls no step; to validate, plan or run the flow, {CLI_FLOWS.passing(flows)}"
    )
    return dataclasses.replace(finding_at(where, display, "flow.unnamed", message, severity="warning"), flows=(*flows,))
