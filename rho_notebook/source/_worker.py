"""The supervised Starlark planning worker (a separate process; stdlib + starlark-pyo3 only).

Run as ``python -I _worker.py``. It speaks length-prefixed JSON frames on stdin/stdout (its real
stdout is moved to a private descriptor and fd 1 is pointed at stderr, so nothing evaluated can
write into the channel). It applies RLIMIT_AS and RLIMIT_CPU to itself before it reads any
source, asks the parent for every module it loads (the parent owns the filesystem and the label
rules), asks the parent to validate the declared inputs, calls ``build`` once, and returns the
raw tagged graph. As in Rho, every loaded module is frozen when its evaluation ends, but the entry
module is frozen only after ``build`` returns, so ``build`` may still change its globals. It never
touches the filesystem, the network, the clock as a value, the environment or randomness on
Starlark's behalf.

The same worker runs the ``code`` step of item graphs (docs/graphs.md): the source is evaluated on
its own (standard Starlark, none of the workflow builtins, no ``load``), the item is set as the
global ``item`` and ``run(item)`` is called once, under the same budgets; the dict it returns must
be a JSON object and becomes the new item.

Frames, parent -> worker:
    {"op": "evaluate", "entry": LABEL, "text": SRC, "limits": {...}}
    {"op": "code", "text": SRC, "item": {...}, "limits": {...}}
    {"op": "source", "label": L, "text": SRC} | {"op": "source_error", "rule": R, "message": M}
    {"op": "inputs", "values": {...}} | {"op": "inputs_error", "diagnostics": [...]}
Frames, worker -> parent:
    {"op": "load", "label": L, "from": [file, line, col]}
    {"op": "declared", "inputs": {...}}
    {"op": "result", "graph": {...}, "stats": {...}}
    {"op": "code_result", "item": {...}, "stats": {...}}
    {"op": "error", "diagnostic": {...}, "stats": {...}}
"""

from __future__ import annotations

import io
import json
import keyword
import os
import re
import resource
import struct
import sys
import time
import tokenize
from collections.abc import Callable
from typing import Any, NoReturn

import starlark as sl

_HEADER = struct.Struct(">I")
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
PRELUDE = "<prelude>"
NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


class Budget(Exception):
    def __init__(self, budget: str, limit: int, measured: int, detail: str = "") -> None:
        super().__init__(f"planning budget '{budget}' exceeded")
        self.budget, self.limit, self.measured, self.detail = budget, limit, measured, detail


class RhoBuiltinError(Exception):
    """Raised by a builtin; the worker remembers it because Starlark drops the cause."""

    def __init__(self, rule: str, message: str, at: list[Any] | None = None) -> None:
        super().__init__(message)
        self.rule, self.message, self.at = rule, message, at


class Channel:
    def __init__(self) -> None:
        self._in = sys.stdin.buffer
        out_fd = os.dup(1)
        os.dup2(2, 1)
        self._out = os.fdopen(out_fd, "wb", buffering=0)

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode()
        self._out.write(_HEADER.pack(len(data)) + data)

    def receive(self) -> dict[str, Any]:
        head = self._in.read(_HEADER.size)
        if len(head) < _HEADER.size:
            sys.exit(3)
        (size,) = _HEADER.unpack(head)
        result: dict[str, Any] = json.loads(self._in.read(size))
        return result


# ---------------------------------------------------------------------------------------------
# The evaluation state of one request.


class Session:
    def __init__(self, channel: Channel, limits: dict[str, int]) -> None:
        self.channel = channel
        self.limits = limits
        self.ticks = 0
        self.started = time.monotonic()
        self.deadline = self.started + limits["evaluator_wall_ms"] / 1000
        self.modules: dict[str, sl.FrozenModule] = {}
        self.sources: dict[str, str] = {}
        self.loading: list[str] = []
        self.max_depth = 0
        self.source_bytes = 0
        self.last_error: RhoBuiltinError | Budget | None = None
        self.globals = sl.Globals.standard()
        self.prelude_globals = sl.Globals.extended_by([sl.LibraryExtension.StructType, sl.LibraryExtension.CallStack])
        self.prelude_ast = sl.parse(PRELUDE, PRELUDE_SOURCE)

    # -- budgets ------------------------------------------------------------------------------

    def check_cancelled(self) -> bool:
        self.ticks += 1
        if self.ticks > self.limits["evaluator_ticks"]:
            self.last_error = Budget("evaluator_ticks", self.limits["evaluator_ticks"], self.ticks)
            return True
        if time.monotonic() > self.deadline:
            elapsed = int((time.monotonic() - self.started) * 1000)
            self.last_error = Budget("evaluator_wall_ms", self.limits["evaluator_wall_ms"], elapsed)
            return True
        return False

    def options(self) -> sl.EvalOptions:
        return sl.EvalOptions(
            check_cancelled=self.check_cancelled,
            max_callstack_size=self.limits["evaluator_call_depth"],
        )

    def fail(self, rule: str, message: str, at: list[Any] | None = None) -> NoReturn:
        err = RhoBuiltinError(rule, message, at)
        self.last_error = err
        raise err

    # -- values crossing into Python ------------------------------------------------------------

    def check_value(self, value: Any, what: str, depth: int = 0) -> None:
        limits = self.limits
        if depth > limits["value_depth"]:
            self.over("value_depth", limits["value_depth"], depth, what)
        if value is None or isinstance(value, bool):
            return
        if isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                self.fail("value.int64", f"{what}: integer {value} is outside signed 64-bit range")
            return
        if isinstance(value, float):
            self.fail("value.float", f"{what}: floats are not supported (got {value!r}); use integers")
        if isinstance(value, str):
            if len(value) > limits["string_bytes"] and len(value.encode()) > limits["string_bytes"]:
                self.over("string_bytes", limits["string_bytes"], len(value.encode()), what)
            return
        if isinstance(value, list):
            if len(value) > limits["list_items"]:
                self.over("list_items", limits["list_items"], len(value), what)
            for item in value:
                self.check_value(item, what, depth + 1)
            return
        if isinstance(value, dict):
            if len(value) > limits["dict_items"]:
                self.over("dict_items", limits["dict_items"], len(value), what)
            for key, item in value.items():
                if not isinstance(key, str):
                    self.fail("value.dict_key", f"{what}: dictionary keys must be strings, got {key!r}")
                self.check_value(item, what, depth + 1)
            return
        self.fail("value.type", f"{what}: values of type {type(value).__name__} are not supported")

    def over(self, budget: str, limit: int, measured: int, what: str) -> NoReturn:
        err = Budget(budget, limit, measured, what)
        self.last_error = err
        raise err

    # -- modules ------------------------------------------------------------------------------

    def scan_literals(self, label: str, text: str) -> None:
        """Reject float literals and integer literals outside int64, with file:line:column."""
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        except (tokenize.TokenError, SyntaxError, IndentationError):
            return  # the Starlark parser reports syntax errors with better messages
        for tok in tokens:
            if tok.type != tokenize.NUMBER:
                continue
            literal = tok.string.replace("_", "")
            at = [label, tok.start[0], tok.start[1] + 1]
            lowered = literal.lower()
            is_int = lowered.startswith(("0x", "0o", "0b")) or not any(c in lowered for c in ".ej")
            if not is_int:
                self.fail("value.float", f"float literal {tok.string} is not supported; use integers", at)
            try:
                number = int(lowered, 0) if lowered.startswith(("0x", "0o", "0b")) else int(lowered)
            except ValueError:
                continue
            if number > INT64_MAX:
                self.fail("value.int64", f"integer literal {tok.string} is outside signed 64-bit range", at)

    def eval_module(self, label: str, text: str) -> sl.FrozenModule:
        """Evaluate a loaded module and freeze it (loaded modules are frozen, as in Rho)."""
        frozen = self.eval_unfrozen(label, text).freeze()
        self.modules[label] = frozen
        return frozen

    def eval_unfrozen(self, label: str, text: str) -> sl.Module:
        """Evaluate a module's top level; its globals stay mutable until the caller freezes it."""
        self.source_bytes += len(text.encode())
        if self.source_bytes > self.limits["source_bytes"]:
            self.over("source_bytes", self.limits["source_bytes"], self.source_bytes, label)
        if len(self.sources) + 1 > self.limits["module_count"]:
            self.over("module_count", self.limits["module_count"], len(self.sources) + 1, label)
        self.sources[label] = text
        self.scan_literals(label, text)
        ast = sl.parse(label, text)
        module = sl.Module()
        install_builtins(module, self)
        sl.eval(module, self.prelude_ast, self.prelude_globals)
        self.loading.append(label)
        self.max_depth = max(self.max_depth, len(self.loading))
        if len(self.loading) > self.limits["module_depth"]:
            self.over("module_depth", self.limits["module_depth"], len(self.loading), label)
        try:
            sl.eval_with(self.options(), module, ast, self.globals, sl.FileLoader(self.load))
        finally:
            self.loading.pop()
        return module

    def run_in(self, module: sl.Module, source: str) -> Any:
        """Evaluate driver ``source`` inside ``module`` (same budgets); the value of its last
        expression, converted to Python."""
        return sl.eval_with(self.options(), module, sl.parse(DRIVER, source), self.globals).value

    def load(self, label: str) -> sl.FrozenModule:
        if label in self.modules:
            return self.modules[label]
        if label in self.loading:
            cycle = " -> ".join([*self.loading[self.loading.index(label) :], label])
            self.fail("load.cycle", f"import cycle: {cycle}", self.load_site(label))
        self.channel.send({"op": "load", "label": label, "from": self.load_site(label)})
        reply = self.channel.receive()
        if reply["op"] == "source_error":
            self.fail(reply["rule"], reply["message"], self.load_site(label))
        return self.eval_module(label, reply["text"])

    def load_site(self, label: str) -> list[Any] | None:
        """Where the module being evaluated loads ``label`` (for diagnostics)."""
        if not self.loading:
            return None
        current = self.loading[-1]
        return [current, *find_load(self.sources.get(current, ""), label)]

    # -- code steps -----------------------------------------------------------------------------

    def run_code(self, text: str, item: dict[str, Any]) -> dict[str, Any]:
        """Evaluate a code step's source, call ``run(item)`` and return the checked new item."""
        self.source_bytes = len(text.encode())
        if self.source_bytes > self.limits["source_bytes"]:
            self.over("source_bytes", self.limits["source_bytes"], self.source_bytes, CODE)
        self.sources[CODE] = text
        ast = sl.parse(CODE, text)
        for load in ast.loads():
            self.fail(
                "code.load",
                f"code steps cannot load modules (load({json.dumps(load.module_id)}, ...)); "
                "write what you need inside the step's source",
                [CODE, *find_load(text, load.module_id)],
            )
        module = sl.Module()
        module["item"] = item
        sl.eval_with(self.options(), module, ast, self.globals)
        try:
            kind = self.run_in(module, "type(run)")
        except sl.StarlarkError as err:
            if _NO_RUN not in str(err):
                raise
            self.fail("code.error", "the source must define the function `def run(item): ... return NEW_ITEM`")
        if kind != "function":
            self.fail("code.error", f"`run` must be a function (def run(item): ...), got a value of type {kind}")
        self.run_in(module, f"{CODE_RESULT} = run(item)")
        kind = self.run_in(module, f"type({CODE_RESULT})")
        if kind != "dict":
            self.fail("code.result", f"run(item) must return a dict (the new item, a JSON object), got {kind}")
        try:
            result = self.run_in(module, CODE_RESULT)
        except sl.StarlarkError as err:
            found = re.search(r"not supported on type `(\w+)`", str(err))
            held = found.group(1) if found else "unknown"
            self.fail("code.result", f"run(item) returned a dict holding a value of type {held}; {ITEM_VALUES}")
        try:
            self.check_value(result, "run(item) result")
        except RhoBuiltinError as err:
            self.fail("code.result", f"{err.message}; {ITEM_VALUES}")
        checked: dict[str, Any] = result
        return checked


def find_load(text: str, label: str) -> list[int]:
    """Line and column (1-based) of the ``load`` of ``label`` in ``text`` (1, 1 if not found)."""
    for number, line in enumerate(text.splitlines(), start=1):
        col = line.find(json.dumps(label))
        if col < 0:
            col = line.find(f"'{label}'")
        if col >= 0 and "load" in line:
            return [number, col + 1]
    return [1, 1]


# ---------------------------------------------------------------------------------------------
# Builtins. Node constructors go through a Starlark wrapper that passes call_stack() so that the
# Python side knows the call site; the others are plain callables whose errors Starlark locates.


def call_site(stack: str, name: str, session: Session) -> list[Any]:
    frames = re.findall(r"\* (.+?):(\d+), in ", stack)
    for file, line in reversed(frames):
        if file != PRELUDE:
            lines = session.sources.get(file, "").splitlines()
            number = int(line)
            text = lines[number - 1] if 0 < number <= len(lines) else ""
            col = text.find(name + "(")
            return [file, number, col + 1 if col >= 0 else 1]
    return [None, None, None]


def tag(tag_kind: str, /, **fields: Any) -> dict[str, Any]:
    return {"__rho__": tag_kind, **fields}


def is_tag(value: Any, *kinds: str) -> bool:
    return isinstance(value, dict) and value.get("__rho__") in kinds


def has_tag(value: Any) -> bool:
    """Whether ``value`` is or holds a tagged value (a reference, template, schema, ...)."""
    if isinstance(value, dict):
        return "__rho__" in value or any(has_tag(item) for item in value.values())
    if isinstance(value, list):
        return any(has_tag(item) for item in value)
    return False


def install_builtins(module: sl.Module, s: Session) -> None:
    def need(cond: object, rule: str, message: str, at: list[Any] | None = None) -> None:
        if not cond:
            s.fail(rule, message, at)

    # -- inputs --------------------------------------------------------------------------------
    def make_input(kind: str, choices: Any = None, **kw: Any) -> dict[str, Any]:
        unknown = sorted(set(kw) - {"default"})
        need(not unknown, "input.argument", f"input.{kind}() got unknown argument(s): {', '.join(unknown)}")
        default = kw.get("default")
        s.check_value(default, f"input.{kind} default")
        decl = tag("input", type=kind, required="default" not in kw or default is None, default=default)
        if kind == "enum":
            s.check_value(choices, "input.enum choices")
            need(
                isinstance(choices, list) and len(choices) > 0,
                "input.enum",
                "input.enum() needs a non-empty list of choices",
            )
            for c in choices:
                need(
                    c is None or isinstance(c, (bool, int, str)),
                    "input.enum",
                    f"input.enum() choices must be scalars, got {json.dumps(c)}",
                )
            decl["choices"] = choices
            if default is not None:
                need(
                    any(type(default) is type(c) and default == c for c in choices),
                    "input.enum",
                    f"input.enum() default {json.dumps(default)} is not one of {json.dumps(choices)}",
                )
        elif default is not None:
            expected = {"string": str, "integer": int, "bool": bool}[kind]
            ok = isinstance(default, expected) and (kind == "bool" or not isinstance(default, bool))
            article = "an" if kind[0] in "aeiou" else "a"
            need(ok, "input.default", f"input.{kind}() default must be {article} {kind}, got {json.dumps(default)}")
        return decl

    module.add_callable("_input_string", lambda **kw: make_input("string", **kw))
    module.add_callable("_input_integer", lambda **kw: make_input("integer", **kw))
    module.add_callable("_input_bool", lambda **kw: make_input("bool", **kw))
    module.add_callable("_input_enum", lambda choices=None, **kw: make_input("enum", choices, **kw))

    def check_define(inputs: Any, build_type: str, extra: Any, stack: str) -> dict[str, Any]:
        at = call_site(stack, "define", s)
        need(not extra, "define.argument", f"define() got unknown argument(s): {', '.join(sorted(extra))}", at)
        need(build_type == "function", "define.build", f"define(build=...) must be a function, got {build_type}", at)
        need(isinstance(inputs, dict), "define.inputs", "define(inputs=...) must be a dictionary", at)
        for key, decl in inputs.items():
            need(
                NAME_RE.match(key) is not None,
                "input.name",
                f"input name {key!r} must match [a-z][a-z0-9_-]{{0,62}}",
                at,
            )
            need(
                is_tag(decl, "input"),
                "define.inputs",
                f"input {key!r} must be declared with input.string/integer/bool/enum",
                at,
            )
        declared: dict[str, Any] = inputs
        return declared

    module.add_callable("_check_define", check_define)

    # -- schemas ---------------------------------------------------------------------------------
    def schema_arg(value: Any, what: str) -> Any:
        need(
            is_tag(value, "schema"),
            "schema.argument",
            f"{what} must be a schema (schema.string(), ...), got {json.dumps(value)[:80]}",
        )
        return value

    def schema_enum(members: Any = None) -> dict[str, Any]:
        s.check_value(members, "schema.enum_")
        need(isinstance(members, list) and members, "schema.enum", "schema.enum_() needs a non-empty list of members")
        for m in members:
            need(
                m is None or isinstance(m, (bool, int, str)),
                "schema.enum",
                f"schema.enum_() members must be scalars (null, bool, integer, string), got {json.dumps(m)}",
            )
        seen: list[Any] = []
        for m in members:
            need(
                not any(type(m) is type(x) and m == x for x in seen),
                "schema.enum",
                f"schema.enum_() lists {json.dumps(m)} twice",
            )
            seen.append(m)
        return tag("schema", type="enum", members=members)

    def schema_record(fields: Any = None) -> dict[str, Any]:
        need(isinstance(fields, dict), "schema.record", "schema.record() needs a dictionary of field name to schema")
        for key, sub in fields.items():
            need(
                isinstance(key, str) and key != "",
                "schema.record",
                "schema.record() field names must be non-empty strings",
            )
            schema_arg(sub, f"schema.record() field {key!r}")
            need(
                sub.get("type") != "stdout_json",
                "schema.stdout_json",
                "schema.stdout_json() may only wrap a whole node output, not a record field",
            )
        return tag("schema", type="record", fields=fields)

    def wrap(kind: str) -> Callable[[Any], dict[str, Any]]:
        def build(inner: Any = None) -> dict[str, Any]:
            schema_arg(inner, f"schema.{kind}()")
            if kind in ("list", "optional", "stdout_json"):
                need(
                    inner.get("type") != "stdout_json",
                    "schema.stdout_json",
                    f"schema.{kind}() cannot wrap schema.stdout_json(); it wraps a whole node output",
                )
            return tag("schema", type=kind, inner=inner)

        return build

    module.add_callable("_schema_null", lambda: tag("schema", type="null"))
    module.add_callable("_schema_bool", lambda: tag("schema", type="bool"))
    module.add_callable("_schema_integer", lambda: tag("schema", type="integer"))
    module.add_callable("_schema_string", lambda: tag("schema", type="string"))
    module.add_callable("_schema_enum", schema_enum)
    module.add_callable("_schema_list", wrap("list"))
    module.add_callable("_schema_optional", wrap("optional"))
    module.add_callable("_schema_record", schema_record)
    module.add_callable("_schema_stdout_json", wrap("stdout_json"))

    # -- references, templates, conditions ----------------------------------------------------------
    def node_name(value: Any, fn: str) -> str:
        need(
            isinstance(value, str) and NAME_RE.match(value) is not None,
            "reference.node",
            f"{fn}() needs a node name matching [a-z][a-z0-9_-]{{0,62}}, got {json.dumps(value)}",
        )
        return str(value)

    def output_ref(node: Any = None, path: Any = None) -> dict[str, Any]:
        node = node_name(node, "output")
        path = [] if path is None else path
        need(
            isinstance(path, list),
            "reference.path",
            "output(node, path) path must be a list of field names and list indexes",
        )
        for step in path:
            need(
                isinstance(step, (str, int)) and not isinstance(step, bool),
                "reference.path",
                f"output() path steps must be strings or integers, got {json.dumps(step)}",
            )
        return tag("ref", ref="output", node=node, path=path)

    module.add_callable("output", output_ref)
    module.add_callable("status", lambda node=None: tag("ref", ref="status", node=node_name(node, "status")))
    module.add_callable("exit_code", lambda node=None: tag("ref", ref="exit_code", node=node_name(node, "exit_code")))

    def template(parts: Any = None) -> dict[str, Any]:
        need(
            isinstance(parts, list),
            "template.parts",
            "template() needs a list of strings, values and output() references",
        )
        for p in parts:
            s.check_value(p, "template part")
            if isinstance(p, dict) and "__rho__" in p:
                need(
                    is_tag(p, "ref") and p.get("ref") == "output",
                    "template.part",
                    "template() parts may be strings, scalars, lists, records, or output() references; status() and exit_code() belong in conditions",
                )
        return tag("template", parts=parts)

    module.add_callable("template", template)

    def operand(value: Any, fn: str) -> Any:
        need(
            is_tag(value, "ref"),
            "condition.operand",
            f"condition.{fn}() compares an output(), status() or exit_code() reference, got {json.dumps(value)[:80]}",
        )
        return value

    def scalar(value: Any, fn: str) -> Any:
        s.check_value(value, f"condition.{fn}")
        need(
            value is None or isinstance(value, (bool, int, str)),
            "condition.value",
            f"condition.{fn}() compares against scalars (null, bool, integer, string), got {json.dumps(value)[:80]}",
        )
        return value

    def cond_list(items: Any, fn: str) -> Any:
        need(
            isinstance(items, list) and items,
            "condition.items",
            f"condition.{fn}() needs a non-empty list of conditions",
        )
        for c in items:
            need(
                is_tag(c, "condition"),
                "condition.items",
                f"condition.{fn}() items must be conditions, got {json.dumps(c)[:80]}",
            )
        return items

    def cond_not(item: Any = None) -> dict[str, Any]:
        need(is_tag(item, "condition"), "condition.items", "condition.not_() needs a condition")
        return tag("condition", op="not", item=item)

    def is_one_of(ref: Any = None, values: Any = None) -> dict[str, Any]:
        need(
            isinstance(values, list) and values,
            "condition.value",
            "condition.is_one_of() needs a non-empty list of values",
        )
        return tag(
            "condition", op="is_one_of", left=operand(ref, "is_one_of"), values=[scalar(v, "is_one_of") for v in values]
        )

    module.add_callable(
        "_cond_equals",
        lambda ref=None, value=None: tag(
            "condition", op="equals", left=operand(ref, "equals"), right=scalar(value, "equals")
        ),
    )
    module.add_callable("_cond_is_one_of", is_one_of)
    module.add_callable("_cond_all", lambda items=None: tag("condition", op="all", items=cond_list(items, "all")))
    module.add_callable("_cond_any", lambda items=None: tag("condition", op="any", items=cond_list(items, "any")))
    module.add_callable("_cond_not", cond_not)

    # -- nodes -----------------------------------------------------------------------------------
    common = {
        "name",
        "needs",
        "when",
        "allow_failure",
        "timeout_seconds",
        "max_output_bytes",
        "output",
        "placement",
        "resources",
    }
    specific = {
        "agent": {"agent", "prompt", "access", "reuse"},
        "command": {"argv", "cwd"},
        "shell": {"executable", "arguments", "command", "cwd"},
        "approval": {"prompt"},
        "python": {"module", "function", "args", "cwd", "access", "reuse", "reuse_inputs"},
    }
    required = {
        "agent": {"agent", "prompt"},
        "command": {"argv"},
        "shell": {"executable", "command"},
        "approval": {"prompt"},
        "python": {"module", "function"},
    }

    def check_python(kw: dict[str, Any], where: str, at: list[Any]) -> None:
        module = kw["module"]
        need(
            isinstance(module, str) and module.startswith("//") and module.endswith(".py"),
            "python.module",
            f'{where}: module must be the label of a Python module, such as "//nodes/stats.py", got {json.dumps(module)[:80]}',
            at,
        )
        function = kw["function"]
        need(
            isinstance(function, str) and function.isidentifier() and not keyword.iskeyword(function),
            "python.function",
            f"{where}: function must name a function of the module (a Python identifier), got {json.dumps(function)[:80]}",
            at,
        )
        args = kw.get("args", {})
        need(
            isinstance(args, dict),
            "python.args",
            f"{where}: args must be a dictionary of argument name to value or output() reference",
            at,
        )
        for key, value in args.items():
            need(
                key.isidentifier() and not keyword.iskeyword(key),
                "python.args",
                f"{where}: args key {key!r} must be a Python identifier (a keyword argument of {function})",
                at,
            )
            if is_tag(value, "ref"):
                need(
                    value.get("ref") == "output",
                    "python.args",
                    f"{where}: args[{key!r}] may be an output() reference; status() and exit_code() belong in conditions",
                    at,
                )
                continue
            need(
                not has_tag(value),
                "python.args",
                f"{where}: args[{key!r}] must be a literal value (None, bool, int, string, list, dict) or an output() reference; references cannot be nested inside lists, dicts or templates",
                at,
            )
        need(
            kw.get("access", "mutating") in ("read_only", "mutating"),
            "python.access",
            f'{where}: access must be "read_only" or "mutating"',
            at,
        )
        inputs = kw.get("reuse_inputs", [])
        need(
            isinstance(inputs, list)
            and all(isinstance(label, str) and label.startswith("//") and label != "//" for label in inputs),
            "python.reuse_inputs",
            f'{where}: reuse_inputs must be a list of workspace file labels, such as ["//data/x.csv"]',
            at,
        )

    def check_placement(kind: str, kw: dict[str, Any], where: str, at: list[Any]) -> None:
        """``placement`` and ``resources`` (docs/distributed.md): agent and approval nodes run with
        the run owner, so only ``placement = "local"`` is accepted on them, and no resources."""
        remotable = kind in ("command", "shell", "python")
        if "placement" in kw:
            placement = kw["placement"]
            need(
                placement in ("local", "any"),
                "node.placement",
                f'{where}: placement must be "local" or "any", got {json.dumps(placement)[:80]}',
                at,
            )
            need(
                remotable or placement == "local",
                "node.placement",
                f'{where}: placement = "any" is for command, shell and python nodes; {kind} nodes always run '
                'with the run owner (drop placement or write placement = "local")',
                at,
            )
        if "resources" in kw:
            need(
                remotable,
                "node.resources",
                f"{where}: resources are for command, shell and python nodes; {kind} nodes always run with the run owner",
                at,
            )
            resources = kw["resources"]
            need(
                isinstance(resources, dict),
                "node.resources",
                f'{where}: resources must be a dictionary of resource name to amount, such as {{"GPU": 1}}',
                at,
            )
            for key, amount in resources.items():
                need(
                    isinstance(key, str) and key != "",
                    "node.resources",
                    f"{where}: resources keys must be non-empty resource names (strings), got {json.dumps(key)[:80]}",
                    at,
                )
                need(
                    isinstance(amount, int) and not isinstance(amount, bool) and amount > 0,
                    "node.resources",
                    f"{where}: resources[{json.dumps(key)}] must be a positive integer, got {json.dumps(amount)[:80]}",
                    at,
                )

    def make_node(kind: str, stack: str, kw: dict[str, Any]) -> dict[str, Any]:
        at = call_site(stack, kind, s)
        s.check_value(kw, f"{kind}()")
        unknown = sorted(set(kw) - common - specific[kind] - {"reuse"})
        need(not unknown, "node.argument", f"{kind}() got unknown argument(s): {', '.join(unknown)}", at)
        name = kw.get("name")
        need(isinstance(name, str), "node.name", f'{kind}() needs name = "..."', at)
        need(
            NAME_RE.match(str(name)) is not None,
            "node.name",
            f"node name {name!r} must start with a-z, use only a-z 0-9 _ -, and be at most 63 bytes",
            at,
        )
        where = f"{kind} {name!r}"
        if "reuse" in kw:
            need(
                kind in ("agent", "python"),
                "node.reuse",
                f"{where}: reuse is for read-only agent and python nodes; "
                + (
                    "approval nodes always ask a person"
                    if kind == "approval"
                    else f"{kind} nodes are mutating (as in Rho) and never reused"
                ),
                at,
            )
            need(isinstance(kw["reuse"], bool), "node.reuse", f"{where}: reuse must be True or False", at)
        # timeout_seconds and max_output_bytes (required, positive integers) are checked with the
        # graph rules (planning/normalize.py), so that a missing one does not hide other problems.
        missing = sorted(f for f in required[kind] if f not in kw)
        need(not missing, "node.argument", f"{where} needs {', '.join(missing)}", at)
        needs = kw.get("needs", [])
        need(
            isinstance(needs, list) and all(isinstance(n, str) for n in needs),
            "node.needs",
            f"{where}: needs must be a list of node names",
            at,
        )
        when = kw.get("when")
        need(
            when is None or is_tag(when, "condition"),
            "node.when",
            f"{where}: when must be a condition (condition.equals(...), ...)",
            at,
        )
        need(
            isinstance(kw.get("allow_failure", False), bool),
            "node.allow_failure",
            f"{where}: allow_failure must be True or False",
            at,
        )
        out = kw.get("output")
        if out is not None:
            need(is_tag(out, "schema"), "node.output", f"{where}: output must be a schema", at)
            if kind in ("command", "shell"):
                need(
                    out.get("type") == "stdout_json",
                    "node.output",
                    f"{where}: a {kind} node's output schema must be wrapped in schema.stdout_json(...)",
                    at,
                )
            elif kind == "approval":
                need(
                    False,
                    "node.output",
                    f"{where}: an approval node's output is always the record {{by, comment, at}}; do not declare output",
                    at,
                )
            elif kind == "python":
                need(
                    out.get("type") != "stdout_json",
                    "node.output",
                    f"{where}: schema.stdout_json() is for command and shell nodes; a python node's output is its function's return value, so give the schema itself",
                    at,
                )
            else:
                need(
                    out.get("type") != "stdout_json",
                    "node.output",
                    f"{where}: schema.stdout_json() is for command and shell nodes; give the agent the schema itself",
                    at,
                )
        if kind == "approval":
            need(
                is_tag(kw["prompt"], "template") or isinstance(kw["prompt"], str),
                "approval.prompt",
                f"{where}: prompt must be a template([...]) or a string",
                at,
            )
        if kind == "agent":
            need(
                isinstance(kw["agent"], str) and kw["agent"] != "",
                "agent.id",
                f"{where}: agent must name an agent definition",
                at,
            )
            need(
                is_tag(kw["prompt"], "template") or isinstance(kw["prompt"], str),
                "agent.prompt",
                f"{where}: prompt must be a template([...]) or a string",
                at,
            )
            need(
                kw.get("access", "mutating") in ("read_only", "mutating"),
                "agent.access",
                f'{where}: access must be "read_only" or "mutating"',
                at,
            )
        if kind == "command":
            argv = kw["argv"]
            need(isinstance(argv, list) and argv, "command.argv", f"{where}: argv must be a non-empty list", at)
            need(
                isinstance(argv[0], str) and argv[0] != "",
                "command.argv",
                f"{where}: argv[0] must be a literal executable name or path; it cannot come from an output",
                at,
            )
            for i, part in enumerate(argv):
                ok = (
                    isinstance(part, str)
                    or is_tag(part, "template")
                    or (is_tag(part, "ref") and part.get("ref") == "output")
                )
                need(
                    ok,
                    "command.argv",
                    f"{where}: argv[{i}] must be a string, an output() reference or a template, got {json.dumps(part)[:80]}; convert numbers with str()",
                    at,
                )
        if kind == "shell":
            need(
                isinstance(kw["executable"], str) and kw["executable"] != "",
                "shell.executable",
                f"{where}: executable must be a non-empty string",
                at,
            )
            need(
                isinstance(kw["command"], str),
                "shell.command",
                f"{where}: command must be static text (a string); outputs cannot change shell source",
                at,
            )
            args = kw.get("arguments", [])
            need(
                isinstance(args, list) and all(isinstance(a, str) for a in args),
                "shell.arguments",
                f"{where}: arguments must be a list of static strings",
                at,
            )
        if kind == "python":
            check_python(kw, where, at)
        check_placement(kind, kw, where, at)
        if "cwd" in kw:
            need(
                isinstance(kw["cwd"], str) and kw["cwd"] != "",
                "node.cwd",
                f"{where}: cwd must be a non-empty relative path string",
                at,
            )
        return tag("node", kind=kind, at=at, **kw)

    module.add_callable("_node", make_node)

    def make_workflow(stack: str, kw: dict[str, Any]) -> dict[str, Any]:
        at = call_site(stack, "workflow", s)
        unknown = sorted(set(kw) - {"name", "nodes", "concurrency", "checkout"})
        need(not unknown, "workflow.argument", f"workflow() got unknown argument(s): {', '.join(unknown)}", at)
        name = kw.get("name")
        need(
            isinstance(name, str) and NAME_RE.match(name) is not None,
            "workflow.name",
            f"workflow name {json.dumps(name)} must start with a-z, use only a-z 0-9 _ -, and be at most 63 bytes",
            at,
        )
        nodes = kw.get("nodes")
        need(isinstance(nodes, list), "workflow.nodes", "workflow(nodes=...) must be a list of nodes", at)
        for n in nodes or []:
            need(
                is_tag(n, "node"),
                "workflow.nodes",
                f"workflow nodes must be agent(), command(), shell(), python() or approval() values, got {json.dumps(n)[:80]}",
                at,
            )
        conc = kw.get("concurrency")
        if conc is not None:
            need(isinstance(conc, dict), "workflow.concurrency", "workflow(concurrency=...) must be a dictionary", at)
            for key, value in conc.items():
                need(
                    key in ("total", "agent", "command", "checkout_readers"),
                    "workflow.concurrency",
                    f"unknown concurrency key {key!r} (total, agent, command, checkout_readers)",
                    at,
                )
                need(
                    isinstance(value, int) and not isinstance(value, bool) and value > 0,
                    "workflow.concurrency",
                    f"concurrency {key} must be a positive integer",
                    at,
                )
        need(
            kw.get("checkout", "exclusive") in ("exclusive", "shared"),
            "workflow.checkout",
            f'workflow {json.dumps(name)}: checkout must be "exclusive" or "shared", got {json.dumps(kw.get("checkout"))[:80]}',
            at,
        )
        return tag("workflow", at=at, **kw)

    module.add_callable("_workflow", make_workflow)

    def no_float(*args: Any, **kw: Any) -> None:
        s.fail("value.float", "float() is not supported; workflow values are None, bool, int64, string, list and dict")

    module.add_callable("float", no_float)


PRELUDE_SOURCE = """
input = struct(string = _input_string, integer = _input_integer, bool = _input_bool,
               enum = _input_enum, enum_ = _input_enum)
schema = struct(null = _schema_null, bool = _schema_bool, integer = _schema_integer,
                string = _schema_string, enum_ = _schema_enum, enum = _schema_enum,
                list = _schema_list, optional = _schema_optional, record = _schema_record,
                stdout_json = _schema_stdout_json)
condition = struct(equals = _cond_equals, is_one_of = _cond_is_one_of, all = _cond_all,
                   any = _cond_any, not_ = _cond_not, negate = _cond_not)
def define(inputs = {}, build = None, **kwargs):
    return {"__rho__": "define", "inputs": _check_define(inputs, type(build), kwargs, call_stack()), "build": build}
def workflow(**kwargs):
    return _workflow(call_stack(), kwargs)
def agent(**kwargs):
    return _node("agent", call_stack(), kwargs)
def command(**kwargs):
    return _node("command", call_stack(), kwargs)
def shell(**kwargs):
    return _node("shell", call_stack(), kwargs)
def approval(**kwargs):
    return _node("approval", call_stack(), kwargs)
def python(**kwargs):
    return _node("python", call_stack(), kwargs)
"""

# The driver runs inside the entry module, before it is frozen, so that ``build`` sees the entry
# module's globals still mutable (Rho calls build, then freezes); loaded modules are frozen already.
DRIVER = "<driver>"
INPUTS_GLOBAL = "_rho_build_inputs"
DECLARED_SOURCE = """
WORKFLOW["inputs"] if type(WORKFLOW) == "dict" and WORKFLOW.get("__rho__") == "define" else fail(
    "WORKFLOW must be the value of define(inputs = ..., build = ...)")
"""
BUILD_SOURCE = f'WORKFLOW["build"]({INPUTS_GLOBAL})'
_NO_WORKFLOW = "Variable `WORKFLOW` not found"
# A code step's source is evaluated as the module CODE; the driver keeps run's result in CODE_RESULT.
CODE = "<code>"
CODE_RESULT = "_rho_code_result"
_NO_RUN = "Variable `run` not found"
ITEM_VALUES = "the new item may hold only dicts with string keys, lists, strings, integers, booleans and None"

_SPAN = re.compile(r"--> (.+?):(\d+):(\d+)")
_PARSE_ERROR = re.compile(r"^(Parse error: unexpected .+? here), expected one of (.+)$", re.S)
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"')
_EXPRESSION_START = frozenset(
    {"(", "+", "-", "~", "...", "[", "{", "FLOAT", "FSTRING", "IDENTIFIER", "INTEGER", "STRING", "lambda", "not"}
)
# What a person most often meant to type where a token was unexpected, most likely first.
_WORTH_NAMING = (",", "]", ")", "}", ":", "=", "\\n", "(", "[", ".", "for", "if", "else", "in")
_SHOWN_TOKENS = 5


def short_parse_error(message: str) -> str:
    """A parse error with the few expected tokens that matter, not the parser's whole list.

    starlark-rust lists every token the grammar allows (up to ~50: each operator and augmented
    assignment); a list that long hides the one a person forgot. An expression-start set becomes
    "an expression"; otherwise the separators and closing brackets are named, at most five.
    """
    match = _PARSE_ERROR.match(message)
    if match is None:
        return message
    head, listed = match.groups()
    tokens = _TOKEN.findall(listed)
    if len(tokens) <= _SHOWN_TOKENS:
        return message

    def join(names: list[str]) -> str:
        quoted = [f'"{name}"' for name in names]
        return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]

    if "IDENTIFIER" in tokens and _EXPRESSION_START & set(tokens) >= {"IDENTIFIER", "INTEGER", "STRING"}:
        others = [t for t in _WORTH_NAMING if t in tokens and t not in _EXPRESSION_START][: _SHOWN_TOKENS - 1]
        tail = f" or {join(others)}" if others else ""
        return f"{head}, expected an expression (a name, number, string, list, dict or call){tail}"
    named = [t for t in _WORTH_NAMING if t in tokens][:_SHOWN_TOKENS] or tokens[:_SHOWN_TOKENS]
    rest = len(tokens) - len(named)
    return f"{head}, expected {join(named)} (or one of {rest} other operators and keywords)"


_FRAME = re.compile(r"\* (.+?):(\d+), in ")


def diagnose(err: BaseException, session: Session) -> dict[str, Any]:
    text = str(err)
    known = session.last_error
    if isinstance(known, Budget):
        at = location_of(text)
        return {
            "rule": f"limit.{known.budget}",
            "budget": known.budget,
            "limit": known.limit,
            "measured": known.measured,
            "message": known.detail,
            "file": at[0],
            "line": at[1],
            "column": at[2],
        }
    if isinstance(known, RhoBuiltinError) and known.message in text or known is err:
        at = known.at if known.at and known.at[0] else location_of(text)
        return {"rule": known.rule, "message": known.message, "file": at[0], "line": at[1], "column": at[2]}
    at = location_of(text)
    message = next((ln[len("error: ") :] for ln in text.splitlines() if ln.startswith("error: ")), text.strip())
    rule = "starlark.syntax" if "Parse error" in message else "starlark.error"
    if rule == "starlark.syntax":
        message = short_parse_error(message)
    if "serde::serialize" in message and "function" in message:
        message = "a function cannot be used as a workflow value (only None, bool, int, string, list and dict)"
        rule = "value.type"
    message = re.sub(
        r"^(RhoBuiltinError|ValueError|TypeError): ", "", re.sub(r"(StarlarkError: error: )+", "", message)
    )
    return {"rule": rule, "message": message, "file": at[0], "line": at[1], "column": at[2]}


def location_of(text: str) -> list[Any]:
    spans = _SPAN.findall(text)
    if spans and spans[-1][0] not in (PRELUDE, DRIVER):
        file, line, col = spans[-1]
        return [file, int(line), int(col)]
    frames = [f for f in _FRAME.findall(text) if f[0] not in (PRELUDE, DRIVER)]
    if frames:
        return [frames[-1][0], int(frames[-1][1]), None]
    return [None, None, None]


def peak_address_space() -> int:
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmPeak:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def stats(session: Session) -> dict[str, Any]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "peak_address_space_bytes": peak_address_space(),
        "ticks": session.ticks,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
        "modules": len(session.sources),
        "module_depth": session.max_depth,
        "source_bytes": session.source_bytes,
        "wall_ms": int((time.monotonic() - session.started) * 1000),
    }


def serve(channel: Channel, request: dict[str, Any]) -> None:
    session = Session(channel, request["limits"])
    code = request.get("op") == "code"
    file = CODE if code else request["entry"]
    try:
        if code:
            item = session.run_code(request["text"], request["item"])
            channel.send({"op": "code_result", "item": item, "stats": stats(session)})
        else:
            evaluate_entry(session, request)
    except (sl.StarlarkError, RhoBuiltinError, Budget) as err:
        found = diagnose(err, session)
        if code and not found["rule"].startswith(("limit.", "code.")):
            found["rule"] = "code.error"  # a Starlark error in the step's source
        if found["file"] is None and "budget" not in found:
            found["file"] = file  # raised by the driver (WORKFLOW or run itself is wrong): the source's fault
        channel.send({"op": "error", "diagnostic": found, "stats": stats(session)})
    except BaseException as err:  # MemoryError, or pyo3's PanicException("out of memory")
        if not isinstance(err, MemoryError) and "out of memory" not in str(err):
            raise
        limit = request["limits"]["evaluator_address_space"]
        in_use = peak_address_space()
        detail = f"an allocation failed with {in_use} bytes of address space in use (peak VmSize)"
        channel.send(
            {
                "op": "error",
                "diagnostic": {
                    "rule": "limit.evaluator_address_space",
                    "budget": "evaluator_address_space",
                    "limit": limit,
                    "measured": in_use,
                    "message": detail,
                    "file": file,
                    "line": None,
                    "column": None,
                },
                "stats": stats(session),
            }
        )


def evaluate_entry(session: Session, request: dict[str, Any]) -> None:
    """Evaluate the entry module, have the parent check the declared inputs, call ``build``."""
    channel = session.channel
    entry = request["entry"]
    module = session.eval_unfrozen(entry, request["text"])
    try:
        declared = session.run_in(module, DECLARED_SOURCE)
    except sl.StarlarkError as err:
        if _NO_WORKFLOW not in str(err):
            raise
        session.fail(
            "starlark.error",
            "Module has no symbol `WORKFLOW`; the entry module must set WORKFLOW = define(...)",
            [entry, None, None],
        )
    channel.send({"op": "declared", "inputs": declared})
    reply = channel.receive()
    if reply["op"] == "inputs_error":
        channel.send({"op": "done"})
        return
    module[INPUTS_GLOBAL] = reply["values"]
    result = session.run_in(module, BUILD_SOURCE)
    module.freeze()  # as in Rho: the entry module is frozen once build has returned
    session.check_value(result, "build() result")
    if not is_tag(result, "workflow"):
        session.fail("define.build", "build(inputs) must return workflow(name = ..., nodes = [...])", [entry, 1, 1])
    channel.send({"op": "result", "graph": result, "stats": stats(session)})


def main() -> None:
    channel = Channel()
    request = channel.receive()
    limits = request["limits"]
    address_space = limits["evaluator_address_space"]
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = max(1, (limits["evaluator_wall_ms"] + 999) // 1000 + 1)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    serve(channel, request)


if __name__ == "__main__":
    main()
