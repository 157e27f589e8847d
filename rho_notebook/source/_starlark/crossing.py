"""The fast mode's way for constructor arguments and results to cross between Starlark and Python.

starlark-pyo3 converts a value one leaf at a time, both ways (every string, number and dict key
through a call of Python's ``json``), which made evaluating the 750-node case cost several times
the Starlark work itself. In the fast mode (``Session.fast``) the node constructors and
``workflow`` therefore:

1. pass their keyword arguments to Python as one ``json.encode`` text, but only when that text
   decodes to the very same value (``json.decode(text) == kwargs``: no dict with a non-string key,
   no tuple, struct or NaN in it); otherwise they pass the value, as the exact mode does;
2. build the tagged result themselves from that decoded copy (a deep copy, as the exact mode's
   conversion back is) whenever the rebuild keeps every dict's key order (json.decode sorts keys,
   the exact mode keeps the order written): Python checks the arguments as always, and answers
   only what it adds (the call site) when :func:`rebuilds_exactly` says so, else the whole result.
   A node constructor sends its call stack and its text as one string and gets the call site back
   as JSON text: every value that crosses costs a conversion, and this runs once per node.

Before both, a constructor of plain arguments (strings, integers, booleans, None, lists of
strings: most nodes) takes the plain path of :mod:`.plain`: it checks them and works out the call
site in Starlark and calls no Python at all; ``workflow`` does the same when its nodes are plain.

So every value a fast evaluation produces equals the exact mode's, in content and key order. Only
a failure can differ (Starlark refusing to encode an argument the exact mode would have converted
and refused with another message): :mod:`.serve` then evaluates again in the exact mode. The
checks are written inline in each constructor, not in a helper function, so that an evaluation's
call depth is the exact mode's (the plain path is one Starlark call, where the exact mode makes one
call into Python).
"""

from __future__ import annotations

import json
from functools import partial

import starlark as sl

from rho_notebook.source._starlark.nodes import make_node, make_workflow
from rho_notebook.source._starlark.plain import IMPORT, WORKFLOW_HEAD, node_head

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from rho_notebook.source._starlark.session import Session

NODE_KINDS = ("agent", "command", "shell", "approval", "python")

_REBUILD = """    for key in kwargs:
        value = kwargs[key]
        if type(value) == "dict":
            made[key] = {k: copy[key][k] for k in value}
        elif type(value) == "list" and value and type(value[0]) == "dict":
            made[key] = [{k: d[k] for k in v} for v, d in zip(value, copy[key])]
        else:
            made[key] = copy[key]
"""
"""The rebuild of a constructor's result after its head: each argument from the decoded copy,
one level of dicts (a dict argument, the dicts of a list argument) back in the order written."""

EXACT_CONSTRUCTORS = """
def workflow(**kwargs):
    return _workflow(call_stack(), kwargs)
""" + "".join(
    f"""
def {kind}(**kwargs):
    return _node("{kind}", call_stack(), kwargs)
"""
    for kind in NODE_KINDS
)
"""The exact mode's constructors: every argument crosses value by value."""

FAST_CONSTRUCTORS = (
    IMPORT
    + """
def _rho_json(value):
    text = json.encode(value)
    return text if json.decode(text) == value else None
def workflow(**kwargs):
"""
    + WORKFLOW_HEAD
    + """    text = json.encode(kwargs)
    copy = json.decode(text)
    if copy != kwargs:
        return _workflow(call_stack(), kwargs)
    made = _workflow_json(call_stack(), text)
    if "__rho__" in made:
        return made
    made = {"__rho__": "workflow", "at": made["at"]}
"""
    + _REBUILD
    + """    return made
"""
    + "".join(
        f"""
def {kind}(**kwargs):
{node_head(kind)}    text = json.encode(kwargs)
    copy = json.decode(text)
    if copy != kwargs:
        return _node("{kind}", call_stack(), kwargs)
    made = _{kind}_json(call_stack() + "\\n" + text)
    if type(made) == "dict":
        return made
    made = {{"__rho__": "node", "kind": "{kind}", "at": json.decode(made)}}
{_REBUILD}    return made
"""
        for kind in NODE_KINDS
    )
)
"""The fast mode's constructors (``json`` must be in the prelude's globals) and ``_rho_json``,
the driver's way to take build's result as one text (None when that text is not exact)."""


def install_builtins(module: sl.Module, s: Session) -> None:
    """The Python side of :data:`FAST_CONSTRUCTORS`."""
    for kind in NODE_KINDS:  # one callable a kind: a string less to cross on every call
        module.add_callable(f"_{kind}_json", partial(_node_json, s, kind))
    module.add_callable("_workflow_json", lambda stack, text: _answer(make_workflow(s, stack, json.loads(text))))


def _node_json(s: Session, kind: str, sent: str) -> dict[str, Any] | str:
    """A node constructor's Python side (it runs once per node, so what crosses is kept small).

    ``sent`` is the call stack, a newline and the arguments' JSON text (which has no newline of its
    own), one string rather than two. The answer is the call site as JSON text, when Starlark can
    rebuild the rest exactly (:func:`rebuilds_exactly`), else the whole tagged node.
    """
    stack, _, text = sent.rpartition("\n")
    made = make_node(s, kind, stack, json.loads(text))
    return s.site_text(stack, kind) if rebuilds_exactly(made) else made


def _answer(made: dict[str, Any]) -> dict[str, Any]:
    """What crosses back: only the call site when Starlark can rebuild the rest exactly."""
    return {"at": made["at"]} if rebuilds_exactly(made) else made


def rebuilds_exactly(made: dict[str, Any]) -> bool:
    """Whether the fast constructors' rebuild of ``made`` from a ``json.decode`` copy keeps every
    dict's key order: the rebuild restores the order of the top level, of a dict value, and of
    the dicts of a list value whose first item is a dict; anything deeper keeps decode's order."""
    for value in made.values():
        kind = type(value)
        if kind is dict:
            if _any_holds_dict(value.values()):
                return False
        elif kind is list and value and type(value[0]) is dict:
            for item in value:
                if type(item) is not dict or _any_holds_dict(item.values()):
                    return False
        elif kind is list and _any_holds_dict(value):
            return False
    return True


def _any_holds_dict(values: Iterable[Any]) -> bool:
    """Whether any of ``values`` is a dict or a list that holds one, at any depth (JSON values)."""
    for value in values:
        kind = type(value)
        if kind is dict or (kind is list and _any_holds_dict(value)):
            return True
    return False
