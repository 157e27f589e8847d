"""The ``code`` step of item graphs (docs/graphs.md), run by the same worker under the same budgets.

The source is evaluated on its own (standard Starlark, none of the workflow builtins, no ``load``),
the item is set as the global ``item`` and ``run(item)`` is called once; the dict it returns must be
a JSON object and becomes the new item.
"""

from __future__ import annotations

import json
import re

import starlark as sl

from rho_notebook.source._starlark.literals import find_load
from rho_notebook.source._starlark.pseudo_files import CODE
from rho_notebook.source._starlark.signals import RhoBuiltinError

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

    from rho_notebook.source._starlark.session import Session

CODE_RESULT = "_rho_code_result"
"""The global in which the driver keeps what ``run`` returned."""
_NO_RUN = "Variable `run` not found"
_HELD_TYPE = re.compile(r"not supported on type `(\w+)`")
ITEM_VALUES = "the new item may hold only dicts with string keys, lists, strings, integers, booleans and None"


def run_code(s: Session, text: str, item: dict[str, Any], *, check: bool = False) -> dict[str, Any]:
    """Evaluate a code step's source, call ``run(item)`` and return the checked new item;
    ``check`` (planning): only parse it, evaluating nothing, and return ``{}`` (a ``load`` fails
    the step when it runs, as docs/graphs.md says)."""
    s.source_bytes = len(text.encode())
    if s.source_bytes > s.limits["source_bytes"]:
        s.over("source_bytes", s.limits["source_bytes"], s.source_bytes, CODE)
    s.sources[CODE] = text
    ast = sl.parse(CODE, text)
    if check:
        return {}
    for load in ast.loads():
        s.fail(
            "code.load",
            f"code steps cannot load modules (load({json.dumps(load.module_id)}, ...)); "
            "write what you need inside the step's source",
            [CODE, *find_load(text, load.module_id)],
        )
    module = sl.Module()
    module["item"] = item
    sl.eval_with(s.options(), module, ast, s.globals)
    _check_run(s, module)
    s.run_in(module, f"{CODE_RESULT} = run(item)")
    return _new_item(s, module)


def _check_run(s: Session, module: sl.Module) -> None:
    try:
        kind = s.run_in(module, "type(run)")
    except sl.StarlarkError as err:
        if _NO_RUN not in str(err):
            raise
        s.fail("code.error", "the source must define the function `def run(item): ... return NEW_ITEM`")
    if kind != "function":
        s.fail("code.error", f"`run` must be a function (def run(item): ...), got a value of type {kind}")


def _new_item(s: Session, module: sl.Module) -> dict[str, Any]:
    kind = s.run_in(module, f"type({CODE_RESULT})")
    if kind != "dict":
        s.fail("code.result", f"run(item) must return a dict (the new item, a JSON object), got {kind}")
    try:
        result = s.run_in(module, CODE_RESULT)
    except sl.StarlarkError as err:
        found = _HELD_TYPE.search(str(err))
        held = found.group(1) if found else "unknown"
        s.fail("code.result", f"run(item) returned a dict holding a value of type {held}; {ITEM_VALUES}")
    try:
        s.check_value(result, "run(item) result")
    except RhoBuiltinError as err:
        s.fail("code.result", f"{err.message}; {ITEM_VALUES}")
    checked: dict[str, Any] = result
    return checked
