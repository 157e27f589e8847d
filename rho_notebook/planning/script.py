"""The script form (the script tier, docs/scripts.md): reading a ``.py`` workflow script and
freezing it into a graph that has no nodes and a :class:`~rho_notebook.model.graph.ScriptSpec`
(:func:`to_graph`; :mod:`~rho_notebook.planning.seal` makes the plan).

The script is never imported or executed here: everything is read with :mod:`ast`. Its ``INPUTS``
declaration is read by :mod:`~rho_notebook.planning.script_inputs`; :func:`lint_script`
(:mod:`~rho_notebook.planning.script_lint`, which lists the rules) reports :class:`Finding` s for
``validate SCRIPT.py``, and a plan is refused while any of them is an error. Planning adds
``script.name`` (error): the file name is not a workflow name.

Flow plans (``--flow NAME``, docs/flows.md) add ``flow.name`` (error): ``NAME`` is not a class or
a name assigned at the module's top level (its ``Diagnostic.suggestion``: the closest flow the module
defines, else its first). Without ``INPUTS`` a flow takes one required string input, ``prompt``.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
from pathlib import Path
from typing import Any

from rho_notebook.errors import Diagnostic, InvalidWorkflow, PlanError, SourceError
from rho_notebook.model.graph import NAME_PATTERN, Graph, InputDecl, ScriptSpec
from rho_notebook.model.spelling import meant
from rho_notebook.planning._findings import Finding
from rho_notebook.planning.budgets import script_budget
from rho_notebook.planning.forms import is_script_request
from rho_notebook.planning.inputs import SCRIPT_INPUT_BYTES, check_inputs, check_inputs_size, resolve_path_inputs
from rho_notebook.planning.python import freeze_runtime, frozen_modules
from rho_notebook.planning.request import PlanRequest
from rho_notebook.planning.resolve import Resolver
from rho_notebook.planning.script_flows import CLI_FLOWS, flows_defined, required_arguments
from rho_notebook.planning.script_inputs import INPUT_TYPES, NAME, parse_inputs_declaration, parse_script
from rho_notebook.planning.script_lint import lint_script
from rho_notebook.planning.seal import FrozenGraph
from rho_notebook.source.labels import FileSourceReader, SourceText
from rho_notebook.source.limits import Limits
from rho_notebook.source.pymodules import ModuleIndex, check_module_label
from rho_notebook.source.workspace import Workspace

__all__ = [
    "FLOW_INPUTS",
    "INPUT_TYPES",
    "Finding",
    "freeze_script",
    "is_script_request",
    "lint_script",
    "parse_inputs_declaration",
    "script_entry",
    "to_graph",
    "workspace_label",
]

# -- reading the script ----------------------------------------------------------------------------


def workspace_label(path: Path, workspace: Workspace, *, what: str, rule: str) -> str:
    """The ``//`` label of the entry file at ``path`` (its folder's symlinks resolved, not the
    file's own: reading it refuses a symlink).

    Raises
    ------
    SourceError
        ``path`` is outside the workspace (``rule``; the message calls the file ``what``).
    """
    absolute = Path(os.path.realpath(Path(path).absolute().parent)) / Path(path).name
    try:
        relative = absolute.relative_to(workspace.root)
    except ValueError:
        msg = (
            f"{path} is outside the workspace {workspace.root}; {what} must live inside its workspace "
            "(move it under that folder, or plan it from the workspace that holds it)"
        )
        raise SourceError(msg, rule=rule, file=str(path)) from None
    return "//" + relative.as_posix()


def script_entry(path: Path, workspace: Workspace) -> SourceText:
    """Read the script at ``path`` under the label rules (inside ``workspace``, no symlinks, a
    module label whose parts are Python identifiers).

    Raises
    ------
    SourceError
        The script is outside the workspace, its label is not importable, or it cannot be read.
    """
    label = workspace_label(path, workspace, what="a script", rule="script.outside_workspace")
    problem = check_module_label(label)
    if problem is not None:
        raise SourceError(f"{path}: {problem}", rule="script.label", file=str(path))
    return FileSourceReader(workspace.root).read(label, suffix=".py")


# -- planning --------------------------------------------------------------------------------------


def _name_of(label: str, display: str) -> str:
    stem = label.rsplit("/", 1)[-1].removesuffix(".py")
    if not NAME.match(stem):
        fixed = re.sub(r"[^a-z0-9_-]", "_", stem.lower()).lstrip("0123456789_-")[:63] or "script"
        msg = (
            f"the script's name {stem!r} (its file name) is not a workflow name: it must match {NAME_PATTERN} "
            f"(start with a-z, then a-z 0-9 _ -); rename the file, e.g. to {fixed}.py"
        )
        raise InvalidWorkflow([Diagnostic(rule="script.name", message=msg, file=display)])
    return stem


def _script_inputs(
    declared: dict[str, dict[str, Any]], request: PlanRequest, *, display: str, limits: Limits
) -> tuple[InputDecl, ...]:
    if len(declared) > limits.limit("input_count"):
        msg = f"planning budget 'input_count' exceeded: accepted limit {limits.limit('input_count')}, measured {len(declared)}"
        raise InvalidWorkflow([Diagnostic(rule="limit.input_count", message=msg, file=display)])
    values = check_inputs(declared, request.inputs, file=display)
    values = resolve_path_inputs(declared, values, workspace=request.workspace.root, file=display)
    check_inputs_size(values, cap=SCRIPT_INPUT_BYTES, file=display)
    return tuple(
        InputDecl(
            name=key,
            type=decl["type"],
            choices=tuple(decl["choices"]),
            required=decl["required"],
            default=decl["default"],
            value=values[key],
        )
        for key, decl in sorted(declared.items())
    )


FLOW_INPUTS: dict[str, dict[str, Any]] = {
    "prompt": {"type": "string", "required": True, "default": None, "choices": []}
}
"""The inputs of a flow whose module declares no ``INPUTS``: the prompt of its first user message."""


def _flow_defined(tree: ast.Module, name: str) -> bool:
    """Whether ``name`` is bound at the module's top level (a class, an assignment, an import)."""
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef | ast.FunctionDef) and statement.name == name:
            return True
        if isinstance(statement, ast.Assign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(statement, ast.ImportFrom | ast.Import):
            if any((alias.asname or alias.name.split(".")[0]) == name for alias in statement.names):
                return True
    return False


def _check_flow_name(text: str, flow: str, display: str) -> None:
    """Refuse (``flow.name``) a ``--flow`` that names no workflow the module makes without arguments;
    the finding's ``flows`` are those the module defines (a front end words ``--flow`` its own way)."""
    tree = parse_script(text, display)
    defined = flows_defined(tree) if isinstance(tree, ast.Module) else []

    def refused(msg: str, suggestion: str | None = None) -> InvalidWorkflow:
        found = Diagnostic(rule="flow.name", message=msg, file=display, suggestion=suggestion, flows=(*defined,))
        return InvalidWorkflow([found])

    if not flow.isidentifier():
        what = "give the name of the Workflow class (or instance) the module defines"
        raise refused(f"{CLI_FLOWS.flag} {flow!r} is not a Python name; {what}")
    if isinstance(tree, ast.Module) and not _flow_defined(tree, flow):
        close = meant(flow, defined)
        hint = f" (did you mean {close}?)" if close else ""
        listed = f": {', '.join(defined)}" if defined else " (it defines none)"
        names = f"{CLI_FLOWS.flag} names a Workflow subclass or instance the module defines{listed}"
        # the suggestion: the closest name, else the first the module defines
        raise refused(
            f"{display} defines no {flow} at its top level{hint}; {names}", close or next(iter(defined), None)
        )
    needs = required_arguments(tree, flow) if isinstance(tree, ast.Module) else []
    if needs:
        raise refused(
            f"{flow}() needs arguments ({', '.join(needs)}), and {CLI_FLOWS.flag} makes it without any: give them defaults, "
            f"or make the instance at the module's top level (flow = {flow}(...)) and pass its name to {CLI_FLOWS.flag}"
        )


def _freeze(request: PlanRequest, *, name: str, inputs: tuple[InputDecl, ...], shown: str) -> FrozenGraph:
    """The script's graph: its interpreter and every workspace module it imports frozen (blocking:
    it reads modules, hashes files and probes the interpreter)."""
    label = request.entry.label
    overlay = {label: request.entry, **request.overlay_sources}
    index = ModuleIndex(FileSourceReader(request.workspace.root, overlay))
    resolver = Resolver(workspace=request.workspace.root, search_path=request.search_path)
    try:
        labels = set(index.closure(label))
        runtime = freeze_runtime(request.python_interpreter, resolver=resolver, node=name)
    except PlanError as err:
        raise InvalidWorkflow([Diagnostic(rule="python.interpreter", message=err.message, file=shown)]) from None
    graph = Graph(
        name=name,
        inputs=inputs,
        nodes=(),
        python=runtime,
        python_modules=frozen_modules(index, labels),
        script=ScriptSpec(module=label, flow=request.flow),
        budget=script_budget(request.entry.text, shown),
    )
    sources = [index.module(module.label).source for module in graph.python_modules]
    return FrozenGraph(graph=graph, resolver=resolver, sources=sources, display=shown)


async def freeze_script(request: PlanRequest, *, limits: Limits) -> FrozenGraph:
    """Lint, check inputs and freeze ``request.entry`` (see :func:`to_graph`); a flow request
    (``request.flow``) is frozen with ``ScriptSpec.flow`` and, without ``INPUTS``, a ``prompt``.

    Raises
    ------
    InvalidWorkflow
        As :func:`to_graph`.
    """
    entry = request.entry
    label, shown = entry.label, entry.display
    errors = [f for f in lint_script(entry.text, label, display=shown, flow=request.flow) if f.severity == "error"]
    if errors:
        raise InvalidWorkflow([f.diagnostic() for f in errors])
    if request.flow is not None:
        _check_flow_name(entry.text, request.flow, shown)
    name = _name_of(label, shown)
    declared = parse_inputs_declaration(entry.text, label, display=shown)
    if request.flow is not None and not declared:
        declared = FLOW_INPUTS
    inputs = _script_inputs(declared, request, display=shown, limits=limits)
    return await asyncio.to_thread(_freeze, request, name=name, inputs=inputs, shown=shown)


async def to_graph(request: PlanRequest, *, limits: Limits) -> FrozenGraph:
    """Freeze the script ``request.entry`` (a ``.py`` module); nothing is stored here.

    The graph has no nodes and ``script=ScriptSpec(module=label)``; ``python`` is the frozen
    interpreter (``request.python_interpreter``, else this process's) and ``python_modules`` the
    script and every workspace module it imports. Inputs are checked against ``INPUTS``, ``path``
    values made canonical absolute paths inside the workspace (relative ones are taken from the
    workspace root), and the resolved map is capped at :data:`SCRIPT_INPUT_BYTES`. A flow request
    is planned by :mod:`rho_notebook.planning.flow`, which also compiles it.

    Raises
    ------
    InvalidWorkflow
        A lint error, a bad name, bad inputs (InputError), a module that cannot be read, or the
        interpreter that cannot be frozen.
    """
    return await freeze_script(request, limits=limits)
