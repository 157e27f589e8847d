"""Script plans (the script tier, docs/scripts.md): reading a ``.py`` workflow script, linting it,
its ``INPUTS`` declaration, and freezing it into a plan whose graph has no nodes and a
:class:`~rho_notebook.model.graph.ScriptSpec`.

The script is never imported or executed here: everything is read with :mod:`ast`. ``INPUTS`` must
be a module-level literal dict (``ast.literal_eval``); each entry is
``{"type": "string"|"integer"|"bool"|"enum"|"path", "required": bool, "default": ..., "choices": [...]}``
(``required`` defaults to "no default given"; ``choices`` only, and always, for ``enum``).

:func:`lint_script` reports :class:`Finding` s (``validate SCRIPT.py``); a plan is refused while
any of them is an error. The rules:

``script.import`` (error)
    An import of a ``rho_notebook`` module other than ``rho_notebook.script`` and
    ``rho_notebook.flow`` (and their submodules), or of the bare ``rho_notebook`` package.
``script.nondeterminism`` (warning)
    An import of ``random``, ``time``, ``datetime``, ``uuid`` or ``secrets`` (or of
    ``os.urandom``), and every call through one of those names: a resumed run re-executes the
    script, and a value that differs diverges the step it feeds.
``script.executor_step_id`` (warning)
    A ``run_step``/``run_command``/``run_model`` call without ``step_id=`` that may run on an
    executor's thread: lexically inside a ``with ThreadPoolExecutor(...)`` block, inside a lambda
    passed to ``.submit``/``.map``, or in the body of a function (by name, anywhere in the module)
    passed to ``.submit``/``.map`` of an executor (a name bound by ``with ThreadPoolExecutor(...)
    as pool`` or ``pool = ThreadPoolExecutor(...)``). Functions those functions call are not
    followed. A call passing ``**kwargs`` is not flagged (the id may be inside).
``script.recovery`` (error) / ``script.recovery_unchecked`` (warning)
    ``recovery=`` of a step call is a literal other than None, ``"rerun"``, ``"manual"`` / is not
    a literal, so it cannot be checked before the run.
``script.step_id`` (error)
    A literal ``step_id=`` (a string, or the literal parts of an f-string) that breaks the
    node-name grammar ``^[a-z][a-z0-9_-]{0,62}$``.
``script.inputs_undeclared`` (error)
    ``get_inputs()["k"]``, ``get_inputs().get("k")``, or ``inputs["k"]``/``inputs.get("k")`` where
    ``inputs = get_inputs()``, for a literal key ``k`` that ``INPUTS`` does not declare.
``script.inputs_literal`` / ``script.inputs_entry`` (errors)
    ``INPUTS`` is not a literal dict (or is assigned more than once); an entry has the wrong shape.
``python.syntax`` (error)
    The script does not parse.
``flow.fork`` (warning)
    A module that imports ``rho_notebook.flow`` creates threads or a pool (``ThreadPoolExecutor``,
    ``Thread``, ``.submit``/``.map`` of an executor) and never calls ``.fork(``: a session sent to
    two branches without ``Session.fork()`` shares one branch, so the call counters of its steps
    follow thread timing and a resume may replay another branch's answer (docs/flows.md).

Flow plans (``--flow NAME``, docs/flows.md) add ``flow.name`` (error): ``NAME`` is not a class or
a name assigned at the module's top level. Without ``INPUTS`` a flow takes one required string
input, ``prompt``.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rho_notebook.errors import Diagnostic, InvalidWorkflow, PlanError, SourceError
from rho_notebook.model.canonical import ENCODING_VERSION, graph_bytes
from rho_notebook.model.graph import GRAPH_FORMAT, NAME_PATTERN, Graph, InputDecl, ScriptSpec
from rho_notebook.model.plan import PLAN_FORMAT, AuthorityItem, Plan, PlanManifest
from rho_notebook.planning._findings import Finding, Severity
from rho_notebook.planning.inputs import SCRIPT_INPUT_BYTES, check_inputs, check_inputs_size, resolve_path_inputs
from rho_notebook.planning.plan import PlanRequest, source_records
from rho_notebook.planning.python import freeze_runtime, frozen_modules
from rho_notebook.planning.resolve import Resolver
from rho_notebook.source.labels import FileSourceReader, SourceText
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.pymodules import ModuleIndex, check_module_label
from rho_notebook.source.workspace import Workspace

__all__ = [
    "FLOW_INPUTS",
    "INPUT_TYPES",
    "Finding",
    "FrozenScript",
    "freeze_script",
    "script_plan",
    "is_script_request",
    "lint_script",
    "parse_inputs_declaration",
    "plan_script",
    "script_entry",
]

INPUT_TYPES = ("string", "integer", "bool", "enum", "path")
"""The types an ``INPUTS`` entry may declare: those of Starlark inputs, plus ``path``."""

_ENTRY_KEYS = frozenset({"type", "required", "default", "choices"})
_STEP_CALLS = frozenset({"run_step", "run_command", "run_model"})
_RECOVERY = (None, "rerun", "manual")
_ALLOWED_IMPORTS = ("rho_notebook.script", "rho_notebook.flow")
_NONDETERMINISTIC = ("random", "time", "datetime", "uuid", "secrets")
_EXECUTORS = frozenset({"ThreadPoolExecutor"})
_NAME = re.compile(NAME_PATTERN)
_ID_PART = re.compile(r"^[a-z0-9_-]*$")

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


def is_script_request(request: PlanRequest) -> bool:
    """Whether ``request`` plans a script (its entry is a ``.py`` module)."""
    return request.entry.label.endswith(".py")


def _parse(text: str, display: str) -> ast.Module | Finding:
    try:
        return ast.parse(text, filename=display)
    except SyntaxError as err:
        return Finding(
            rule="python.syntax",
            severity="error",
            message=f"Python syntax error: {err.msg or 'invalid syntax'}",
            file=display,
            line=err.lineno or 1,
            column=err.offset or 1,
        )
    except (ValueError, RecursionError, MemoryError) as err:
        return Finding("python.syntax", "error", f"the script cannot be parsed: {err}", display, 1, 1)


# -- INPUTS ----------------------------------------------------------------------------------------


def _at(node: ast.AST, display: str, rule: str, message: str, severity: Severity = "error") -> Finding:
    return Finding(
        rule=rule,
        severity=severity,
        message=message,
        file=display,
        line=getattr(node, "lineno", 1),
        column=getattr(node, "col_offset", 0) + 1,
    )


def _kind_of(value: Any) -> str:
    return "bool" if isinstance(value, bool) else type(value).__name__


def _check_entry(key: Any, entry: Any) -> str | None:
    """The problem with one ``INPUTS`` entry, or None."""
    if not isinstance(key, str) or not _NAME.match(key):
        return f"INPUTS key {key!r} must be a name matching {NAME_PATTERN} (lower case, digits, _ and -)"
    if not isinstance(entry, dict):
        return f'INPUTS[{key!r}] must be a dict such as {{"type": "string", "required": True}}, got {_kind_of(entry)}'
    unknown = sorted(str(k) for k in set(entry) - _ENTRY_KEYS)
    if unknown:
        return f"INPUTS[{key!r}] has unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_ENTRY_KEYS))}"
    kind = entry.get("type")
    if kind not in INPUT_TYPES:
        return f"INPUTS[{key!r}] has type {kind!r}; allowed types: {', '.join(INPUT_TYPES)}"
    required = entry.get("required", "default" not in entry)
    if not isinstance(required, bool):
        return f"INPUTS[{key!r}]: required must be True or False, got {required!r}"
    if required and entry.get("default") is not None:
        return f"INPUTS[{key!r}] is required and has a default; drop the default or set required to False"
    choices = entry.get("choices")
    if kind == "enum":
        if not isinstance(choices, list | tuple) or not choices:
            return f'INPUTS[{key!r}] is an enum and needs a non-empty list of choices, e.g. "choices": ["a", "b"]'
        if any(c is not None and not isinstance(c, bool | int | str) for c in choices):
            return f"INPUTS[{key!r}]: enum choices must be strings, integers or booleans"
    elif choices is not None:
        return f'INPUTS[{key!r}] has choices but type {kind!r}; choices belong to "type": "enum"'
    default = entry.get("default")
    if default is None:
        return None
    fits = {
        "string": isinstance(default, str),
        "path": isinstance(default, str),
        "integer": isinstance(default, int) and not isinstance(default, bool),
        "bool": isinstance(default, bool),
        "enum": any(type(default) is type(c) and default == c for c in choices or ()),
    }[kind]
    if not fits:
        article = "an" if kind[0] in "aeiou" else "a"
        wanted = f"one of {list(choices or ())!r}" if kind == "enum" else f"{article} {kind}"
        return f"INPUTS[{key!r}] default {default!r} must be {wanted}"
    return None


def _declaration(tree: ast.Module, display: str) -> tuple[dict[str, dict[str, Any]] | None, list[Finding]]:
    """The ``INPUTS`` declaration (normalised: type, required, default, choices) and the problems
    found; None when there is no usable declaration (no INPUTS at all gives ``{}``)."""
    assignments: list[tuple[ast.stmt, ast.expr]] = []
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == "INPUTS" for t in statement.targets):
                assignments.append((statement, statement.value))
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if statement.target.id == "INPUTS" and statement.value is not None:
                assignments.append((statement, statement.value))
    if not assignments:
        return {}, []
    if len(assignments) > 1:
        second = assignments[1][0]
        return None, [
            _at(second, display, "script.inputs_literal", "INPUTS is assigned more than once; declare it once")
        ]
    statement, value = assignments[0]
    try:
        raw = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        message = (
            "INPUTS must be a literal dict (strings, numbers, booleans, None, lists and dicts only; no names or calls)"
        )
        return None, [_at(value, display, "script.inputs_literal", message)]
    if not isinstance(raw, dict):
        message = f"INPUTS must be a literal dict, got {_kind_of(raw)}"
        return None, [_at(value, display, "script.inputs_literal", message)]
    found: list[Finding] = []
    declared: dict[str, dict[str, Any]] = {}
    keys = value.keys if isinstance(value, ast.Dict) else []
    for index, (key, entry) in enumerate(raw.items()):
        where: ast.AST = keys[index] if index < len(keys) and keys[index] is not None else statement  # type: ignore[assignment]
        problem = _check_entry(key, entry)
        if problem is not None:
            found.append(_at(where, display, "script.inputs_entry", problem))
            continue
        declared[key] = {
            "type": entry["type"],
            "required": entry.get("required", "default" not in entry),
            "default": entry.get("default"),
            "choices": list(entry.get("choices") or ()),
        }
    return (None if found else declared), found


def parse_inputs_declaration(text: str, label: str, *, display: str | None = None) -> dict[str, dict[str, Any]]:
    """The script's ``INPUTS``, key -> ``{"type", "required", "default", "choices"}`` (``{}``
    when it declares none); read with ``ast.literal_eval``, never imported.

    Raises
    ------
    InvalidWorkflow
        The script does not parse, INPUTS is not a literal dict, or an entry has the wrong shape.
    """
    shown = display or label
    tree = _parse(text, shown)
    if isinstance(tree, Finding):
        raise InvalidWorkflow([tree.diagnostic()])
    declared, found = _declaration(tree, shown)
    if found or declared is None:
        raise InvalidWorkflow([f.diagnostic() for f in found])
    return declared


# -- lint ------------------------------------------------------------------------------------------


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attributes on a name; None otherwise."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _callee(call: ast.Call) -> str | None:
    """The last name of what is called: ``run_step`` for ``run_step(...)`` and ``s.run_step(...)``."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def _has_splat(call: ast.Call) -> bool:
    return any(k.arg is None for k in call.keywords)


class _Linter:
    def __init__(self, tree: ast.Module, display: str, declared: dict[str, dict[str, Any]] | None) -> None:
        self.tree = tree
        self.display = display
        self.declared = declared
        self.found: list[Finding] = []
        self.module_alias: dict[str, str] = {}
        """Local name -> nondeterministic module it names (``import time as t``)."""
        self.imported_names: dict[str, str] = {}
        """Local name -> ``module.name`` imported from a nondeterministic module."""
        self.executor_names: set[str] = set()
        self.executor_classes: set[str] = set(_EXECUTORS)
        self.inputs_names: set[str] = set()
        self.submitted: set[str] = set()
        self.executor_spans: list[ast.AST] = []
        self.submitted_lambdas: list[ast.Lambda] = []
        self.imports_flow = False
        self.threads: list[ast.Call] = []
        """Calls that create a thread or pool, or hand work to one (for ``flow.fork``)."""
        self.forks = False

    def add(self, node: ast.AST, rule: str, message: str, severity: Severity = "error") -> None:
        self.found.append(_at(node, self.display, rule, message, severity))

    def run(self) -> list[Finding]:
        nodes = list(ast.walk(self.tree))
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                self.imports(node)
        for node in nodes:
            self.bindings(node)
        for node in nodes:
            if isinstance(node, ast.Call):
                self.submissions(node)
        in_executor = self.executor_calls()
        for node in nodes:
            if isinstance(node, ast.Call):
                self.call(node, in_executor=id(node) in in_executor)
            elif isinstance(node, ast.Subscript):
                self.subscript(node)
        if self.imports_flow and self.threads and not self.forks:
            for call in self.threads:
                self.add(
                    call,
                    "flow.fork",
                    f"line {call.lineno} runs work on threads, but this flow never calls Session.fork(): branches that "
                    "share one session share its step counters, so which call gets which key follows thread timing; "
                    "give each branch its own session with session.fork()",
                    "warning",
                )
        return sorted(self.found, key=lambda f: (f.line, f.column, f.rule))

    # imports
    def imports(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.rho_import(node, alias.name)
                root = alias.name.split(".")[0]
                if root in _NONDETERMINISTIC:
                    self.module_alias[alias.asname or root] = root
                    self.nondeterministic(node, f"import {alias.name}")
            return
        if node.level or not node.module:
            return
        if node.module == "rho_notebook":
            for alias in node.names:
                self.rho_import(node, f"rho_notebook.{alias.name}")
        else:
            self.rho_import(node, node.module)
        root = node.module.split(".")[0]
        for alias in node.names:
            if alias.name in _EXECUTORS:
                self.executor_classes.add(alias.asname or alias.name)
            if root in _NONDETERMINISTIC:
                self.imported_names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                self.nondeterministic(node, f"from {node.module} import {alias.name}")
            elif node.module == "os" and alias.name == "urandom":
                self.imported_names[alias.asname or alias.name] = "os.urandom"
                self.nondeterministic(node, "from os import urandom")

    def rho_import(self, node: ast.AST, name: str) -> None:
        if name != "rho_notebook" and not name.startswith("rho_notebook."):
            return
        if name == "rho_notebook.flow" or name.startswith("rho_notebook.flow."):
            self.imports_flow = True
        if any(name == allowed or name.startswith(allowed + ".") for allowed in _ALLOWED_IMPORTS):
            return
        self.add(
            node,
            "script.import",
            f"import of {name}: a script may import only rho_notebook.script and rho_notebook.flow "
            "(the rest is the runner's, not the script's); use the API of rho_notebook.script",
        )

    def nondeterministic(self, node: ast.AST, what: str) -> None:
        self.add(
            node,
            "script.nondeterminism",
            f"{what} (line {getattr(node, 'lineno', 1)}): a resumed run re-executes the script, and a value that "
            "differs between runs diverges the step it feeds; derive values from the inputs or from step results",
            "warning",
        )

    # bindings: executors and get_inputs() results
    def is_executor(self, expr: ast.expr | None) -> bool:
        if not isinstance(expr, ast.Call):
            return False
        name = _dotted(expr.func)
        return name is not None and (name in self.executor_classes or name.split(".")[-1] in _EXECUTORS)

    def bindings(self, node: ast.AST) -> None:
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if self.is_executor(item.context_expr):
                    self.executor_spans.append(node)
                    if isinstance(item.optional_vars, ast.Name):
                        self.executor_names.add(item.optional_vars.id)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
            if self.is_executor(node.value):
                self.executor_names.add(target)
            elif _is_get_inputs(node.value):
                self.inputs_names.add(target)

    def submissions(self, call: ast.Call) -> None:
        name = _dotted(call.func)
        if self.is_executor(call) or (name is not None and name.split(".")[-1] == "Thread"):
            self.threads.append(call)
        if isinstance(call.func, ast.Attribute) and call.func.attr == "fork":
            self.forks = True
        if not isinstance(call.func, ast.Attribute) or call.func.attr not in ("submit", "map") or not call.args:
            return
        owner = call.func.value
        if not (isinstance(owner, ast.Name) and owner.id in self.executor_names) and not self.is_executor(owner):
            return
        self.threads.append(call)
        first = call.args[0]
        if isinstance(first, ast.Name):
            self.submitted.add(first.id)
        elif isinstance(first, ast.Lambda):
            self.submitted_lambdas.append(first)

    def executor_calls(self) -> set[int]:
        """ids of the call nodes that may run on an executor's thread."""
        spans: list[ast.AST] = [*self.executor_spans, *self.submitted_lambdas]
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in self.submitted:
                spans.append(node)
        inside: set[int] = set()
        for span in spans:
            body = span.body if isinstance(span, ast.With | ast.AsyncWith) else [span]
            for statement in body:
                inside.update(id(n) for n in ast.walk(statement) if isinstance(n, ast.Call))
        return inside

    # calls
    def call(self, call: ast.Call, *, in_executor: bool) -> None:
        name = _dotted(call.func)
        if name is not None:
            head = name.split(".")[0]
            if head in self.module_alias and "." in name:
                self.nondeterministic(call, f"call of {self.module_alias[head]}{name[len(head) :]}()")
            elif head in self.imported_names:
                self.nondeterministic(call, f"call of {self.imported_names[head]}{name[len(head) :]}()")
            elif name.endswith(".urandom") and name.count(".") == 1 and head == "os":
                self.nondeterministic(call, "call of os.urandom()")
        callee = _callee(call)
        if callee in _STEP_CALLS:
            self.step_call(call, callee, in_executor=in_executor)
        elif callee == "get" and isinstance(call.func, ast.Attribute) and self.is_inputs(call.func.value):
            if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
                self.input_key(call.args[0], call.args[0].value)

    def step_call(self, call: ast.Call, callee: str, *, in_executor: bool) -> None:
        step_id = _keyword(call, "step_id")
        if step_id is None or (isinstance(step_id.value, ast.Constant) and step_id.value.value is None):
            if in_executor and not _has_splat(call):
                self.add(
                    call,
                    "script.executor_step_id",
                    f"{callee}() may run on an executor's thread without step_id=: call-N keys follow thread timing, "
                    "so a resume may replay another call's result; pass a stable step_id (e.g. derived from the item)",
                    "warning",
                )
        else:
            self.step_id(step_id.value)
        recovery = _keyword(call, "recovery")
        if recovery is None:
            return
        try:
            value = ast.literal_eval(recovery.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            self.add(
                recovery.value,
                "script.recovery_unchecked",
                "recovery= is not a literal, so it cannot be checked before the run; write None, 'rerun' or 'manual'",
                "warning",
            )
            return
        if value not in _RECOVERY or not (value is None or isinstance(value, str)):
            self.add(
                recovery.value,
                "script.recovery",
                f"recovery={value!r} is not a recovery policy; use None (halt when unsure), 'rerun' "
                "(re-execute an unsettled step) or 'manual' (always ask)",
            )

    def step_id(self, value: ast.expr) -> None:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            if not _NAME.match(value.value):
                self.add(
                    value,
                    "script.step_id",
                    f"step_id {value.value!r} does not match {NAME_PATTERN}: start with a-z, then a-z 0-9 _ -, "
                    "at most 63 characters",
                )
        elif isinstance(value, ast.JoinedStr):
            parts = [p.value for p in value.values if isinstance(p, ast.Constant) and isinstance(p.value, str)]
            first = value.values[0] if value.values else None
            starts_bad = (
                isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and not re.match(r"^[a-z]", first.value)
            )
            bad = [p for p in parts if not _ID_PART.match(p)]
            if bad or starts_bad:
                self.add(
                    value,
                    "script.step_id",
                    f"step_id f-string has literal text {(bad or parts)[0]!r} that breaks {NAME_PATTERN}: "
                    "step ids start with a-z and use only a-z 0-9 _ -",
                )

    # get_inputs() keys
    def is_inputs(self, expr: ast.expr) -> bool:
        return _is_get_inputs(expr) or (isinstance(expr, ast.Name) and expr.id in self.inputs_names)

    def subscript(self, node: ast.Subscript) -> None:
        if not self.is_inputs(node.value):
            return
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            self.input_key(key, key.value)

    def input_key(self, node: ast.AST, key: str) -> None:
        if self.declared is None or key in self.declared:
            return
        known = ", ".join(sorted(self.declared)) or "none"
        self.add(
            node,
            "script.inputs_undeclared",
            f"input {key!r} is not declared in INPUTS (declared: {known}); add it to INPUTS or fix the key",
        )


def _is_get_inputs(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Call) and _callee(expr) == "get_inputs" and not expr.args


def lint_script(text: str, label: str, *, display: str | None = None) -> list[Finding]:
    """Every finding of the rules in this module's docstring, sorted by position; never imports
    or runs the script. ``display`` names the file in findings (default ``label``)."""
    shown = display or label
    tree = _parse(text, shown)
    if isinstance(tree, Finding):
        return [tree]
    declared, found = _declaration(tree, shown)
    return sorted([*found, *_Linter(tree, shown, declared).run()], key=lambda f: (f.line, f.column, f.rule))


# -- planning --------------------------------------------------------------------------------------


def _name_of(label: str, display: str) -> str:
    stem = label.rsplit("/", 1)[-1].removesuffix(".py")
    if not _NAME.match(stem):
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
    if not flow.isidentifier():
        msg = f"--flow {flow!r} is not a Python name; give the name of the Workflow class (or instance) the module defines"
        raise InvalidWorkflow([Diagnostic(rule="flow.name", message=msg, file=display)])
    tree = _parse(text, display)
    if isinstance(tree, ast.Module) and not _flow_defined(tree, flow):
        msg = (
            f"{display} defines no {flow} at its top level; --flow names a Workflow subclass or instance of the module"
        )
        raise InvalidWorkflow([Diagnostic(rule="flow.name", message=msg, file=display)])


@dataclass(frozen=True)
class FrozenScript:
    """A script (or flow) frozen but not yet a plan: the graph and what the manifest needs."""

    graph: Graph
    index: ModuleIndex
    resolver: Resolver
    display: str


async def freeze_script(request: PlanRequest, *, limits: Limits) -> FrozenScript:
    """Lint, check inputs and freeze ``request.entry`` (see :func:`plan_script`); a flow request
    (``request.flow``) is frozen with ``ScriptSpec.flow`` and, without ``INPUTS``, a ``prompt``.

    Raises
    ------
    InvalidWorkflow
        As :func:`plan_script`.
    """
    entry = request.entry
    label, shown = entry.label, entry.display
    errors = [f for f in lint_script(entry.text, label, display=shown) if f.severity == "error"]
    if errors:
        raise InvalidWorkflow([f.diagnostic() for f in errors])
    if request.flow is not None:
        _check_flow_name(entry.text, request.flow, shown)
    name = _name_of(label, shown)
    declared = parse_inputs_declaration(entry.text, label, display=shown)
    if request.flow is not None and not declared:
        declared = FLOW_INPUTS
    inputs = _script_inputs(declared, request, display=shown, limits=limits)
    overlay = {label: entry, **request.overlay_sources}
    index = ModuleIndex(FileSourceReader(request.workspace.root, overlay))
    resolver = Resolver(workspace=request.workspace.root, search_path=request.search_path)

    def freeze() -> Graph:
        try:
            labels = set(index.closure(label))
            runtime = freeze_runtime(request.python_interpreter, resolver=resolver, node=name)
        except PlanError as err:
            raise InvalidWorkflow([Diagnostic(rule="python.interpreter", message=err.message, file=shown)]) from None
        return Graph(
            name=name,
            inputs=inputs,
            nodes=(),
            python=runtime,
            python_modules=frozen_modules(index, labels),
            script=ScriptSpec(module=label, flow=request.flow),
        )

    graph = await asyncio.to_thread(freeze)  # reads modules, hashes and probes the interpreter
    return FrozenScript(graph=graph, index=index, resolver=resolver, display=shown)


def script_plan(
    frozen: FrozenScript,
    request: PlanRequest,
    *,
    plan_id: str,
    limits: Limits,
    flow_manifest: dict[str, Any] | None = None,
) -> Plan:
    """The plan of a frozen script: its digest, authority and manifest (``flow_manifest``: a flow's
    compiled manifest, kept in the plan manifest for views).

    Raises
    ------
    InvalidWorkflow
        The graph is over the ``graph_bytes`` budget.
    """
    graph, resolver, shown = frozen.graph, frozen.resolver, frozen.display
    label = request.entry.label
    encoded = graph_bytes(graph)
    if len(encoded) > limits.limit("graph_bytes"):
        msg = f"planning budget 'graph_bytes' exceeded: accepted limit {limits.limit('graph_bytes')}, measured {len(encoded)}"
        raise InvalidWorkflow([Diagnostic(rule="limit.graph_bytes", message=msg, file=shown)])
    if graph.python is None:  # freeze() always sets it; narrows the type
        msg = f"script {label} was frozen without an interpreter"
        raise PlanError(msg)
    interp = graph.python.interpreter.file
    authority = (
        AuthorityItem(kind="capability", value="process", detail="run the script and the steps it asks for"),
        AuthorityItem(kind="directory", value="//", detail="working directory of the script (mutating)"),
        AuthorityItem(
            kind="interpreter", value=interp.path, detail="; ".join((interp.sha256, *resolver.via(interp.path)))
        ),
    )
    sources = [frozen.index.module(module.label).source for module in graph.python_modules]
    manifest = PlanManifest(
        plan_id=plan_id,
        created_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        graph_digest="sha256:" + hashlib.sha256(encoded).hexdigest(),
        workflow=graph.name,
        entry=label,
        workspace_root=str(request.workspace.root),
        workspace_key=request.workspace.key,
        workspace_trusted=request.workspace_trusted,
        sources=source_records(sources),
        inputs=graph.input_values(),
        identities=dict(sorted(resolver.identities.items())),
        authority=authority,
        limits=limits.as_dict(),
        planner={"graph_format": GRAPH_FORMAT, "encoding_version": ENCODING_VERSION, "plan_format": PLAN_FORMAT},
        stats={"graph_bytes": len(encoded), "input_bytes": len(json.dumps(graph.input_values()).encode())},
        flow=flow_manifest,
    )
    return Plan(manifest=manifest, graph=graph, sources=sources)


async def plan_script(request: PlanRequest, *, plan_id: str, limits: Limits | None = None) -> Plan:
    """Freeze the script ``request.entry`` (a ``.py`` module) into a plan; nothing is stored here.

    The graph has no nodes and ``script=ScriptSpec(module=label)``; ``python`` is the frozen
    interpreter (``request.python_interpreter``, else this process's) and ``python_modules`` the
    script and every workspace module it imports. Inputs are checked against ``INPUTS``, ``path``
    values made canonical absolute paths inside the workspace (relative ones are taken from the
    workspace root), and the resolved map is capped at :data:`SCRIPT_INPUT_BYTES`. A flow request
    is planned by :func:`rho_notebook.planning.flow.plan_flow`, which also compiles it.

    Raises
    ------
    InvalidWorkflow
        A lint error, a bad name, bad inputs (InputError), a module that cannot be read, or the
        interpreter that cannot be frozen.
    """
    limits = limits or load_limits()
    frozen = await freeze_script(request, limits=limits)
    return script_plan(frozen, request, plan_id=plan_id, limits=limits)
