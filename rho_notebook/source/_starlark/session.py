"""The evaluation state of one request: budgets, values crossing into Python, module loading.

A session is made for one request and dropped after it: a warm worker (``_worker.py --warm``)
serves each request with a new session, so no Starlark global, module or budget count outlives it.
"""

from __future__ import annotations

import json
import time

import starlark as sl

from rho_notebook.source._starlark.builtins import FAST_PRELUDE_SOURCE, PRELUDE_SOURCE, install_builtins
from rho_notebook.source._starlark.channel import Channel
from rho_notebook.source._starlark.literals import INT64_MAX, INT64_MIN, bad_literal, find_load
from rho_notebook.source._starlark.plain import load_library, plain_globals
from rho_notebook.source._starlark.pseudo_files import DRIVER, PRELUDE
from rho_notebook.source._starlark.signals import Budget, RhoBuiltinError
from rho_notebook.source._starlark.tags import call_site

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any, NoReturn


_PRELUDES: dict[bool, sl.AstModule] = {}
_PLAIN_LOADER = sl.FileLoader(load_library)
"""What the fast prelude loads: the plain path (:mod:`.plain`)."""


def _prelude(fast: bool) -> sl.AstModule:
    """The prelude's syntax tree (the fast mode's, or the exact mode's), parsed once per process:
    a tree holds no evaluation state (each module evaluates it afresh), and parsing the fast one
    costs about a millisecond a request."""
    ast = _PRELUDES.get(fast)
    if ast is None:
        ast = _PRELUDES[fast] = sl.parse(PRELUDE, FAST_PRELUDE_SOURCE if fast else PRELUDE_SOURCE)
    return ast


class Session:
    def __init__(
        self, channel: Channel, limits: dict[str, int], *, fast: bool = False, started: float | None = None
    ) -> None:
        self.channel = channel
        self.limits = limits
        self._short = limits["string_bytes"] // 4
        """A string of at most this many characters is within ``string_bytes`` (UTF-8: <= 4 bytes each)."""
        self.fast = fast
        """Whether the constructors pass their arguments as JSON text (:mod:`.builtins`)."""
        self.ticks = 0
        self.started = time.monotonic() if started is None else started
        self.deadline = self.started + limits["evaluator_wall_ms"] / 1000
        self.modules: dict[str, sl.FrozenModule] = {}
        self.sources: dict[str, str] = {}
        self.lines: dict[str, list[str]] = {}
        """Each source split into lines, as call sites are looked up (:func:`.tags.call_site`)."""
        self.sites: dict[tuple[str, str], list[Any]] = {}
        """Call sites by call stack and name: the nodes a loop makes share one (:meth:`call_site`)."""
        self.site_texts: dict[tuple[str, str], str] = {}
        """The same as JSON text (:meth:`site_text`)."""
        self.loading: list[str] = []
        self.max_depth = 0
        self.source_bytes = 0
        self.last_error: RhoBuiltinError | Budget | None = None
        self.globals = sl.Globals.standard()
        extensions = [sl.LibraryExtension.StructType, sl.LibraryExtension.CallStack]
        self.prelude_globals = sl.Globals.extended_by([*extensions, sl.LibraryExtension.Json] if fast else extensions)
        self.prelude_ast = _prelude(fast)

    def close(self) -> None:
        """Drop the modules: their builtins refer back to this session through Starlark's heap,
        a cycle Python's collector cannot see, which a warm worker would otherwise keep."""
        self.modules.clear()
        self.sources.clear()
        self.lines.clear()
        self.sites.clear()
        self.site_texts.clear()
        self.loading.clear()
        self.last_error = None

    def call_site(self, stack: str, name: str) -> list[Any]:
        """:func:`.tags.call_site` of ``name`` in ``stack`` (a new list), worked out once per
        stack and name: a module's text never changes during a request."""
        key = (stack, name)
        site = self.sites.get(key)
        if site is None:
            site = self.sites[key] = call_site(stack, name, self.sources, self.lines)
        return list(site)

    def site_text(self, stack: str, name: str) -> str:
        """:meth:`call_site` as JSON text (what a node constructor's fast answer is), worked out
        once per stack and name."""
        key = (stack, name)
        text = self.site_texts.get(key)
        if text is None:
            text = self.site_texts[key] = json.dumps(self.call_site(stack, name))
        return text

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

    def need(self, cond: object, rule: str, message: str, at: list[Any] | None = None) -> None:
        """Fail with ``rule`` and ``message`` unless ``cond`` holds (what every builtin checks with)."""
        if not cond:
            self.fail(rule, message, at)

    def over(self, budget: str, limit: int, measured: int, what: str) -> NoReturn:
        err = Budget(budget, limit, measured, what)
        self.last_error = err
        raise err

    # -- values crossing into Python ------------------------------------------------------------

    def check_value(self, value: Any, what: str, depth: int = 0) -> None:
        """Refuse what a workflow value may not be (floats, wide integers, non-string keys, other
        types) and what exceeds the value budgets."""
        limits = self.limits
        if depth == 0 and self._fine(value, 0):
            return
        if depth > limits["value_depth"]:
            self.over("value_depth", limits["value_depth"], depth, what)
        if value is None or isinstance(value, bool):
            return
        if isinstance(value, str):
            if len(value) > self._short and len(value.encode()) > limits["string_bytes"]:
                self.over("string_bytes", limits["string_bytes"], len(value.encode()), what)
            return
        if isinstance(value, (list, dict)):
            self._check_container(value, what, depth)
            return
        self._check_number(value, what)

    def _fine(self, value: Any, depth: int) -> bool:  # noqa: C901, PLR0911, PLR0912  (the checks inlined)
        """Whether :meth:`check_value` certainly accepts ``value`` at ``depth``: its checks for the
        plain cases (JSON values well within the budgets), leaves inlined, without a call per
        leaf; False when unsure, and :meth:`check_value` then decides (and names the problem)."""
        limits, short = self.limits, self._short
        if depth >= limits["value_depth"]:  # its items (if any) would be past the depth
            return depth == limits["value_depth"] and self._fine_leaf(value)
        kind = type(value)
        if kind is list:
            if len(value) > limits["list_items"]:
                return False
            items: Any = value
        elif kind is dict:
            if len(value) > limits["dict_items"]:
                return False
            for key in value:
                if type(key) is not str:
                    return False
            items = value.values()
        else:
            return self._fine_leaf(value)
        for item in items:
            kind = type(item)
            if kind is str:
                if len(item) > short:
                    return False
            elif kind is int:
                if not INT64_MIN <= item <= INT64_MAX:
                    return False
            elif kind is list or kind is dict:
                if not self._fine(item, depth + 1):
                    return False
            elif item is not None and kind is not bool:
                return False
        return True

    def _fine_leaf(self, value: Any) -> bool:
        kind = type(value)
        if kind is str:
            return len(value) <= self._short
        if kind is int:
            return bool(INT64_MIN <= value <= INT64_MAX)
        return value is None or kind is bool

    def _check_number(self, value: Any, what: str) -> None:
        if isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                self.fail("value.int64", f"{what}: integer {value} is outside signed 64-bit range")
            return
        if isinstance(value, float):
            self.fail("value.float", f"{what}: floats are not supported (got {value!r}); use integers")
        self.fail("value.type", f"{what}: values of type {type(value).__name__} are not supported")

    def _check_container(self, value: list[Any] | dict[Any, Any], what: str, depth: int) -> None:
        limits = self.limits
        if isinstance(value, list):
            if len(value) > limits["list_items"]:
                self.over("list_items", limits["list_items"], len(value), what)
            for item in value:
                self.check_value(item, what, depth + 1)
            return
        if len(value) > limits["dict_items"]:
            self.over("dict_items", limits["dict_items"], len(value), what)
        for key, item in value.items():
            if not isinstance(key, str):
                self.fail("value.dict_key", f"{what}: dictionary keys must be strings, got {key!r}")
            self.check_value(item, what, depth + 1)

    # -- modules ------------------------------------------------------------------------------

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
        found = bad_literal(label, text)
        if found is not None:
            self.fail(*found)
        ast = sl.parse(label, text)
        module = sl.Module()
        install_builtins(module, self)
        if self.fast:
            module["_rho_site"] = plain_globals(label, text, self.limits)
        sl.eval(module, self.prelude_ast, self.prelude_globals, _PLAIN_LOADER if self.fast else None)
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
        try:
            return self.eval_module(label, reply["text"])
        except sl.StarlarkError as err:
            known = self.last_error
            if isinstance(known, Budget) or isinstance(known, RhoBuiltinError) and known.message in str(err):
                raise  # already a diagnostic of its own, with its place
            # Starlark's own error in the loaded module (a syntax error, fail()): reported at the
            # load statement otherwise, as a traceback; said where it is, as an entry's would be
            from rho_notebook.source._starlark.diagnose import starlark_diagnostic

            found = starlark_diagnostic(str(err))
            self.fail(found["rule"], found["message"], [found["file"], found["line"], found["column"]])

    def load_site(self, label: str) -> list[Any] | None:
        """Where the module being evaluated loads ``label`` (for diagnostics)."""
        if not self.loading:
            return None
        current = self.loading[-1]
        return [current, *find_load(self.sources.get(current, ""), label)]
