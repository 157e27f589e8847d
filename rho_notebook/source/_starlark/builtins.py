"""The builtins every evaluated module sees, and the prelude that groups them.

The Python callables are installed under ``_names``; the prelude (evaluated into each module after
them) builds the public surface from those: the ``input``, ``schema`` and ``condition`` structs and
the constructors, which pass ``call_stack()`` so that diagnostics name the user's call site.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import starlark as sl

from rho_notebook.source._starlark import conditions, inputs, nodes, schema, templates

if TYPE_CHECKING:
    from rho_notebook.source._starlark.session import Session

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


def install_builtins(module: sl.Module, s: Session) -> None:
    """Install every builtin of the workflow language into ``module`` (before the prelude runs)."""
    inputs.install_builtins(module, s)
    schema.install_builtins(module, s)
    templates.install_builtins(module, s)
    conditions.install_builtins(module, s)
    nodes.install_builtins(module, s)

    def no_float(*args: Any, **kw: Any) -> None:
        s.fail("value.float", "float() is not supported; workflow values are None, bool, int64, string, list and dict")

    module.add_callable("float", no_float)
