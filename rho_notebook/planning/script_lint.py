"""Linting a workflow script before it runs (``validate SCRIPT.py``, docs/scripts.md): read with
:mod:`ast`, never imported or executed. A plan is refused while any finding is an error. The rules:

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
``script.recovery_unverifiable`` (warning)
    A step call passing ``**kwargs`` and no ``recovery=``: whether a policy is inside cannot be
    seen before the run (CAO's ``unverifiable-recovery-policy``). A splat the linter can read is
    not flagged, and a ``"recovery"`` in it is checked like ``recovery=``: a literal dict
    (``**{...}``), or a name bound once, at module level, to a literal dict with string keys and
    used nowhere but in ``**NAME`` (``LIMITS = {"timeout_seconds": 60, ...}``).
``script.import_name`` / ``script.step_argument`` (errors)
    A name ``rho_notebook.script`` or ``rho_notebook.flow`` does not provide, imported; a step
    call with a keyword its function does not take, or more positional arguments than it takes
    (:mod:`~rho_notebook.planning.script_api`).
``script.step_id`` (error)
    A literal ``step_id=`` (a string, or the literal parts of an f-string) that breaks the
    step-id grammar ``[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}`` or is a reserved ``call-N``: the
    shim's own rule (:func:`rho_notebook.script.channel.step_id_problem`).
``script.inputs_undeclared`` (error)
    ``get_inputs()["k"]``, ``get_inputs().get("k")``, or ``inputs["k"]``/``inputs.get("k")`` where
    ``inputs = get_inputs()``, for a literal key ``k`` that ``INPUTS`` does not declare.
``script.inputs_literal`` / ``script.inputs_entry`` (errors)
    ``INPUTS`` is not a literal dict (or is assigned more than once); an entry has the wrong shape
    (:mod:`~rho_notebook.planning.script_inputs`).
``python.syntax`` (error)
    The script does not parse.
``flow.unnamed`` (warning)
    Checked as a script (no ``--flow``), a module that defines a flow and whose top-level code runs
    nothing (:mod:`~rho_notebook.planning.script_flows`): the warning names the ``--flow`` to pass.
``flow.fork`` (warning)
    A module that imports ``rho_notebook.flow`` creates threads or a pool (``ThreadPoolExecutor``,
    ``Thread``, ``.submit``/``.map`` of an executor) and never calls ``.fork(``: a session sent to
    two branches without ``Session.fork()`` shares one branch, so the call counters of its steps
    follow thread timing and a resume may replay another branch's answer (docs/flows.md).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from rho_notebook.planning._findings import Finding, Severity
from rho_notebook.planning.script_api import argument_problems, missing_name
from rho_notebook.planning.script_flows import unnamed_flow
from rho_notebook.planning.script_inputs import declaration, finding_at, parse_script
from rho_notebook.script.channel import STEP_ID_PATTERN, STEP_ID_TEXT, step_id_problem

__all__ = ["lint_script"]

_STEP_CALLS = frozenset({"run_step", "run_command", "run_model"})
_RECOVERY = (None, "rerun", "manual")
_ALLOWED_IMPORTS = ("rho_notebook.script", "rho_notebook.flow")
_NONDETERMINISTIC = ("random", "time", "datetime", "uuid", "secrets")
_EXECUTORS = frozenset({"ThreadPoolExecutor"})
_ID_START = re.compile(r"[A-Za-z0-9]")


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
        self.splat_dicts: dict[str, ast.Dict] = {}
        """Names whose ``**NAME`` the linter reads: see :meth:`readable_splats`."""
        self.step_functions: dict[str, str] = {}
        """Local name -> step function of ``rho_notebook.script`` it names (``from ... import run_step``)."""
        self.script_modules: set[str] = set()
        """Dotted names that are the ``rho_notebook.script`` module (``import rho_notebook.script as rs``)."""

    def add(self, node: ast.AST, rule: str, message: str, severity: Severity = "error") -> None:
        self.found.append(finding_at(node, self.display, rule, message, severity))

    def run(self) -> list[Finding]:
        nodes = list(ast.walk(self.tree))
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                self.imports(node)
        for node in nodes:
            self.bindings(node)
        self.readable_splats(nodes)
        for node in nodes:
            if isinstance(node, ast.Call):
                self.submissions(node)
        in_executor = self.executor_calls()
        for node in nodes:
            if isinstance(node, ast.Call):
                self.call(node, in_executor=id(node) in in_executor)
            elif isinstance(node, ast.Subscript):
                self.subscript(node)
        self.unforked_threads()
        return sorted(self.found, key=lambda f: (f.line, f.column, f.rule))

    def unforked_threads(self) -> None:
        """``flow.fork``: a flow module that hands work to threads and never forks a session."""
        if not self.imports_flow or not self.threads or self.forks:
            return
        for call in self.threads:
            self.add(
                call,
                "flow.fork",
                f"line {call.lineno} runs work on threads, but this flow never calls Session.fork(): branches that "
                "share one session share its step counters, so which call gets which key follows thread timing; "
                "give each branch its own session with session.fork()",
                "warning",
            )

    # imports
    def imports(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            self.plain_import(node)
            return
        if node.level or not node.module:
            return
        if node.module == "rho_notebook":
            for alias in node.names:
                self.rho_import(node, f"rho_notebook.{alias.name}")
                if alias.name == "script":
                    self.script_modules.add(alias.asname or alias.name)
        else:
            self.rho_import(node, node.module)
        for alias in node.names:
            self.imported_name(node, node.module, alias)
            if node.module in _ALLOWED_IMPORTS:
                self.api_name(node, node.module, alias)

    def api_name(self, node: ast.ImportFrom, module: str, alias: ast.alias) -> None:
        """``script.import_name``; a step function imported under a name of its own."""
        problem = missing_name(module, alias.name)
        if problem is not None:
            self.add(node, "script.import_name", f"from {module} import {alias.name}: {problem}")
        elif module == "rho_notebook.script" and alias.name in _STEP_CALLS:
            self.step_functions[alias.asname or alias.name] = alias.name

    def plain_import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.rho_import(node, alias.name)
            if alias.name == "rho_notebook.script":
                self.script_modules.add(alias.asname or alias.name)
            root = alias.name.split(".")[0]
            if root in _NONDETERMINISTIC:
                self.module_alias[alias.asname or root] = root
                self.nondeterministic(node, f"import {alias.name}")

    def imported_name(self, node: ast.ImportFrom, module: str, alias: ast.alias) -> None:
        """``from module import name``: an executor class, or a nondeterministic name."""
        if alias.name in _EXECUTORS:
            self.executor_classes.add(alias.asname or alias.name)
        if module.split(".")[0] in _NONDETERMINISTIC:
            self.imported_names[alias.asname or alias.name] = f"{module}.{alias.name}"
            self.nondeterministic(node, f"from {module} import {alias.name}")
        elif module == "os" and alias.name == "urandom":
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
        if isinstance(call.func, ast.Name) and call.func.id in self.step_functions:
            callee = self.step_functions[call.func.id]  # imported under another name
        if callee in _STEP_CALLS:
            self.step_call(call, callee, in_executor=in_executor)
        elif callee == "get" and isinstance(call.func, ast.Attribute) and self.is_inputs(call.func.value):
            if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
                self.input_key(call.args[0], call.args[0].value)

    def step_call(self, call: ast.Call, callee: str, *, in_executor: bool) -> None:
        function = self.step_function(call)
        if function is not None:
            for problem in argument_problems(function, call, self.splat_entries(call)):
                self.add(call, "script.step_argument", problem)
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
        given = _keyword(call, "recovery")
        policy = given.value if given is not None else None
        if given is None:
            entries = self.splat_entries(call)
            if entries is None:
                self.add(
                    call,
                    "script.recovery_unverifiable",
                    f"{callee}() passes **kwargs and no recovery=: whether a recovery policy is inside cannot be "
                    "checked before the run; pass recovery= explicitly (None, 'rerun' or 'manual')",
                    "warning",
                )
            policy = None if entries is None else entries.get("recovery")
        if policy is not None:
            self.recovery(policy)

    def step_function(self, call: ast.Call) -> str | None:
        """The step function of ``rho_notebook.script`` that ``call`` calls, if it is one."""
        if isinstance(call.func, ast.Name):
            return self.step_functions.get(call.func.id)
        if isinstance(call.func, ast.Attribute) and call.func.attr in _STEP_CALLS:
            return call.func.attr if _dotted(call.func.value) in self.script_modules else None
        return None

    def readable_splats(self, nodes: list[ast.AST]) -> None:
        """The names bound once, at module level, to a literal dict with string keys, and used
        nowhere but as ``**NAME``: what such a splat passes is known before the run."""
        found: dict[str, ast.Dict] = {}
        for statement in self.tree.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0], statement.value
                if isinstance(target, ast.Name) and isinstance(value, ast.Dict) and _literal_keys(value) is not None:
                    found[target.id] = value
        splatted = {id(k.value) for n in nodes if isinstance(n, ast.Call) for k in n.keywords if k.arg is None}
        stores: dict[str, int] = {}
        for node in nodes:
            if isinstance(node, ast.arg) and node.arg in found:
                stores[node.arg] = 2  # a parameter of that name: another binding
            elif isinstance(node, ast.Name) and node.id in found:
                if isinstance(node.ctx, ast.Store | ast.Del):
                    stores[node.id] = stores.get(node.id, 0) + 1
                elif id(node) not in splatted:
                    stores[node.id] = 2  # read some other way: it may be changed or passed on
        self.splat_dicts = {name: value for name, value in found.items() if stores.get(name) == 1}

    def splat_entries(self, call: ast.Call) -> dict[str, ast.expr] | None:
        """The keywords the call's ``**`` splats pass, by name; None when one cannot be read."""
        entries: dict[str, ast.expr] = {}
        for keyword in call.keywords:
            if keyword.arg is not None:
                continue
            value = keyword.value
            literal = self.splat_dicts.get(value.id) if isinstance(value, ast.Name) else value
            keys = _literal_keys(literal)
            if keys is None or not isinstance(literal, ast.Dict):
                return None
            entries.update(zip(keys, literal.values, strict=True))
        return entries

    def recovery(self, policy: ast.expr) -> None:
        """``script.recovery`` / ``script.recovery_unchecked`` for a step's ``recovery`` value."""
        try:
            value = ast.literal_eval(policy)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            self.add(
                policy,
                "script.recovery_unchecked",
                "recovery= is not a literal, so it cannot be checked before the run; write None, 'rerun' or 'manual'",
                "warning",
            )
            return
        if value not in _RECOVERY or not (value is None or isinstance(value, str)):
            self.add(
                policy,
                "script.recovery",
                f"recovery={value!r} is not a recovery policy; use None (halt when unsure), 'rerun' "
                "(re-execute an unsettled step) or 'manual' (always ask)",
            )

    def step_id(self, value: ast.expr) -> None:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            problem = step_id_problem(value.value)
            if problem is not None:
                self.add(value, "script.step_id", problem)
        elif isinstance(value, ast.JoinedStr):
            parts = [p.value for p in value.values if isinstance(p, ast.Constant) and isinstance(p.value, str)]
            first = value.values[0] if value.values else None
            starts_bad = (
                isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and _ID_START.match(first.value) is None
            )
            bad = [p for p in parts if STEP_ID_TEXT.fullmatch(p) is None]
            if bad or starts_bad:
                self.add(
                    value,
                    "script.step_id",
                    f"step_id f-string has literal text {(bad or parts)[0]!r} that breaks {STEP_ID_PATTERN}: "
                    "step ids start with a letter or digit and use only letters, digits and . _ : @ / -",
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
        entry = f'{json.dumps(key)}: {{"type": "string"}}'  # the type is a guess; the docs list the others
        example = f"{entry} in INPUTS" if self.declared else f"INPUTS = {{{entry}}} at the top of the script"
        self.add(
            node,
            "script.inputs_undeclared",
            f"input {key!r} is not declared in INPUTS (declared: {known}); declare it (e.g. {example}; "
            "types: string, integer, bool, enum, path) or fix the key",
        )


def _literal_keys(node: ast.expr | None) -> list[str] | None:
    """The keys of a dict display whose keys are all string literals (no ``**`` inside); None else."""
    if not isinstance(node, ast.Dict):
        return None
    keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return keys if len(keys) == len(node.keys) else None


def _is_get_inputs(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Call) and _callee(expr) == "get_inputs" and not expr.args


def lint_script(text: str, label: str, *, display: str | None = None, flow: str | None = None) -> list[Finding]:
    """Every finding of the rules in this module's docstring, sorted by position; never imports
    or runs the script. ``display`` names the file in findings (default ``label``); ``flow`` is
    the ``--flow`` it is checked as (None: as a script, which adds ``flow.unnamed``)."""
    shown = display or label
    tree = parse_script(text, shown)
    if isinstance(tree, Finding):
        return [tree]
    declared, found = declaration(tree, shown)
    found += _Linter(tree, shown, declared).run()
    unnamed = unnamed_flow(tree, shown) if flow is None else None
    return sorted([*found, *([unnamed] if unnamed else [])], key=lambda f: (f.line, f.column, f.rule))
