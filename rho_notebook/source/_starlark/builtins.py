"""The builtins every evaluated module sees, and the prelude that groups them.

The Python callables are installed under ``_names``; the prelude (evaluated into each module after
them) builds the public surface from those: the ``input``, ``schema`` and ``condition`` structs and
the constructors, which pass ``call_stack()`` so that diagnostics name the user's call site.

The constructors come in two versions (:mod:`.crossing`): the exact mode's, whose arguments and
results cross between Starlark and Python value by value, and the fast mode's, which cross as one
JSON text where that is provably the same.
"""

from __future__ import annotations

import starlark as sl

from rho_notebook.source._starlark import conditions, crossing, inputs, nodes, schema, templates
from rho_notebook.source._starlark.crossing import EXACT_CONSTRUCTORS, FAST_CONSTRUCTORS

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

    from rho_notebook.source._starlark.session import Session

STRUCTS_SOURCE = """
input = struct(string = _input_string, integer = _input_integer, bool = _input_bool,
               enum = _input_enum, enum_ = _input_enum)
schema = struct(null = _schema_null, bool = _schema_bool, integer = _schema_integer,
                string = _schema_string, enum_ = _schema_enum, enum = _schema_enum,
                list = _schema_list, optional = _schema_optional, record = _schema_record,
                stdout_json = _schema_stdout_json)
condition = struct(equals = _cond_equals, is_one_of = _cond_is_one_of, all = _cond_all,
                   any = _cond_any, not_ = _cond_not, negate = _cond_not)
def define(inputs = {}, build = None, budget = None, **kwargs):
    checked = _check_define(inputs, type(build), kwargs, call_stack())
    return {"__rho__": "define", "inputs": checked, "build": build, "budget": budget}
def _rho_budgeted(graph, defined):
    return dict(graph, budget = defined["budget"]) if defined.get("budget") != None and type(graph) == "dict" else graph
"""
PRELUDE_SOURCE = STRUCTS_SOURCE + EXACT_CONSTRUCTORS
"""The prelude of the exact mode: every argument crosses into Python value by value."""
FAST_PRELUDE_SOURCE = STRUCTS_SOURCE + FAST_CONSTRUCTORS
"""The prelude of the fast mode (:mod:`.crossing`); it needs the ``json`` library in its globals."""


def install_builtins(module: sl.Module, s: Session) -> None:
    """Install every builtin of the workflow language into ``module`` (before the prelude runs)."""
    inputs.install_builtins(module, s)
    schema.install_builtins(module, s)
    templates.install_builtins(module, s)
    conditions.install_builtins(module, s)
    nodes.install_builtins(module, s)
    if s.fast:
        crossing.install_builtins(module, s)

    def no_float(*args: Any, **kw: Any) -> None:
        s.fail("value.float", "float() is not supported; workflow values are None, bool, int64, string, list and dict")

    module.add_callable("float", no_float)
