"""The fast mode's plain path: node constructors that build the node in Starlark, with no call into
Python, when their arguments are plain (see :mod:`.crossing` for the fast mode itself).

A node constructor's Python side (:func:`.nodes.make_node`) checks the arguments, works out the
call site from ``call_stack()`` and answers ``{"__rho__": "node", "kind": ..., "at": ..., **kwargs}``.
For the plain cases that answer can be given in Starlark, and a call into Python per node (with its
conversions, about a third of evaluating a large graph) is saved:

- every argument is one of the kind's plain ones (:data:`PLAIN`), and its value passes the rule
  written for it there, a rule that implies every check the Python side makes on it
  (:meth:`.session.Session.check_value`'s budgets included); the values are strings, integers
  within int64, booleans, None and lists of strings, so the node is rebuilt exactly (strings are
  immutable, lists are copied);
- the call site is the one :func:`.tags.call_site` finds: the stack's last frame is the
  constructor's (the prelude's), the one before it is in this module's own file (its header
  begins ``\\n  * LABEL:`` for a label with no ``:`` or space), no other ``"* "`` follows it (so the
  regex that finds frames finds nothing else there), and the line's text comes from the module's
  own ``splitlines()``, as the Python side reads it (:func:`plain_globals`).

``workflow`` has a plain path too (``plain_workflow``): its arguments checked as
:func:`.nodes.make_workflow` checks them, and its nodes copied one level down, which copies them
wholly when their values are scalars or lists of scalars (plain nodes are).

Anything else (an argument of another kind, a template, a schema, a condition, a call through
another module's constructor) takes the fast mode's other path, which calls Python as before. The
equality of the two answers, values and errors, is what tests/unit/test_plain_constructors.py
checks over the constructors' argument space (every rule at its edges, random combinations, and
the call shapes that decide a call site).

The plain path is Starlark code (:func:`library_source`) in one frozen module a process
(:func:`load_library`) that the fast prelude loads: each module's constructors call it where the
exact mode calls Python, so the call depth stays the exact mode's, and its code is compiled once,
not into every module (76 modules, each with the plain path of five constructors in its prelude,
took 60 MB more address space).
"""

from __future__ import annotations

import re

import starlark as sl

from rho_notebook.source._starlark.literals import INT64_MAX, INT64_MIN
from rho_notebook.source._starlark.pseudo_files import PRELUDE
from rho_notebook.source._starlark.tags import NAME_RE

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_-"
_COMMON = {
    "name": "name",
    "needs": "strings",
    "allow_failure": "bool",
    "timeout_seconds": "leaf",
    "max_output_bytes": "leaf",
}
PLAIN: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    "command": ({**_COMMON, "argv": "argv", "cwd": "path", "placement": "placement"}, ("name", "argv")),
    "shell": (
        {
            **_COMMON,
            "executable": "nonempty",
            "command": "string",
            "arguments": "strings",
            "cwd": "path",
            "placement": "placement",
        },
        ("name", "executable", "command"),
    ),
    "approval": ({**_COMMON, "prompt": "string", "placement": "local"}, ("name", "prompt")),
    "agent": (
        {
            **_COMMON,
            "agent": "nonempty",
            "prompt": "string",
            "access": "access",
            "reuse": "bool",
            "placement": "local",
        },
        ("name", "agent", "prompt"),
    ),
}
"""Per kind: its plain arguments with the rule of each, and the ones it needs. Every rule holds
only for values the Python side accepts for that argument (:mod:`.nodes`, :mod:`.node_kinds`)."""
_MOST_ARGUMENTS = max(len(rules) for rules, _ in PLAIN.values())
_NAME_MOST = 63
"""The longest node name :data:`.tags.NAME_RE` accepts."""

_RULES = {
    "name": f'type(value) == "string" and 0 < len(value) and len(value) <= {_NAME_MOST} and value[0] >= "a" and value[0] <= "z" and not value.strip("{NAME_CHARS}")',
    "string": 'type(value) == "string" and len(value) <= short',
    "nonempty": 'type(value) == "string" and value != "" and len(value) <= short',
    "path": 'type(value) == "string" and value != "" and len(value) <= short',
    "bool": 'type(value) == "bool"',
    "leaf": (
        f'(type(value) == "int" and value >= {INT64_MIN} and value <= {INT64_MAX}) or type(value) == "bool"'
        ' or value == None or (type(value) == "string" and len(value) <= short)'
    ),
    "placement": 'value == "local" or value == "any"',
    "local": 'value == "local"',
    "access": 'value == "read_only" or value == "mutating"',
    "strings": 'type(value) == "list" and len(value) <= items',
    "argv": 'type(value) == "list" and 0 < len(value) and len(value) <= items and type(value[0]) == "string" and value[0] != ""',
}
"""Each rule as a Starlark expression of ``value`` (``short``: the most characters a string is
certainly within the string budget with; ``items``: the list budget); a list's items are checked
after it."""
_LISTS = ("strings", "argv")
_PRELUDE_HEAD = f"\n  * {PRELUDE}:"
_SCALAR = 'type({0}) == "string" or type({0}) == "int" or type({0}) == "bool" or {0} == None'
_CONCURRENCY = ("total", "agent", "command", "checkout_readers")

_SITE = f"""    head, file, lines, short, items = site
    if head == None:
        return None
    i = stack.rfind("\\n  * ")
    j = stack.rfind("\\n  * ", 0, i)
    if j < 0 or stack[i:i + {len(_PRELUDE_HEAD)}] != {_PRELUDE_HEAD!r} or stack[j:j + len(head)] != head or stack.count("* ", j) != 2:
        return None
    rest = stack[j + len(head):stack.find("\\n", j + 5)]
    k = rest.find(", in ")
    line = rest[:k]
    if k <= 0 or not line.isdigit() or line[0] == "0":
        return None
"""
"""Starlark that returns None unless the frame before the constructor's (the stack's last) is
certainly the one :func:`.tags.call_site` picks, and in this module's own file; then ``line`` is
its line number (text) and ``lines`` the module's lines that name a constructor
(:func:`plain_globals`)."""


def _rule_checks() -> str:
    """Starlark that sets ``ok`` to whether ``value`` passes ``rule`` (an unknown rule: False)."""
    out = []
    for index, (rule, expression) in enumerate(_RULES.items()):
        out += [f'    {"if" if index == 0 else "elif"} rule == "{rule}":', f"        ok = {expression}"]
        if rule in _LISTS:
            out += [
                "        if ok:",
                "            for part in value:",
                '                if type(part) != "string" or len(part) > short:',
                "                    return None",
            ]
    out += ["    else:", "        return None"]
    return "\n".join("    " + line for line in out) + "\n"


def library_source() -> str:
    """The plain path's Starlark: ``plain_node`` and ``plain_workflow``, which answer the node
    (workflow) the Python side would, or None when the arguments are not certainly plain.

    Each is called by its constructor where the exact mode calls Python (``_node``, ``_workflow``),
    one frame deep as that call is, and calls only builtins itself: the call depth of an
    evaluation stays the exact mode's (``evaluator_call_depth``)."""
    rules = {kind: dict(kind_rules) for kind, (kind_rules, _) in PLAIN.items()}
    needed = {kind: list(names) for kind, (_, names) in PLAIN.items()}
    return (
        f"RULES = {rules!r}\nNEEDED = {needed!r}\nCONCURRENCY = {list(_CONCURRENCY)!r}\n"
        + "\ndef plain_node(kind, stack, kwargs, site):\n"
        + _SITE
        + """    rules = RULES[kind]
    for key in NEEDED[kind]:
        if key not in kwargs:
            return None
    for key in kwargs:
        value = kwargs[key]
        rule = rules.get(key)
"""
        + _rule_checks()
        + """        if not ok:
            return None
    col = lines.get(line, "").find(kind + "(")
    made = {"__rho__": "node", "kind": kind, "at": [file, int(line), col + 1 if col >= 0 else 1]}
    for key in kwargs:
        value = kwargs[key]
        made[key] = list(value) if type(value) == "list" else value
    return made
"""
        + "\ndef plain_workflow(stack, kwargs, site):\n"
        + _SITE
        + _WORKFLOW
    )


_WORKFLOW = f"""    nodes = kwargs.get("nodes")
    if "name" not in kwargs or type(nodes) != "list":
        return None
    for key in kwargs:
        value = kwargs[key]
        if key == "name":
            ok = {_RULES["name"]}
        elif key == "concurrency":
            ok = value == None or type(value) == "dict"
            if ok and value != None:
                for name in value:
                    amount = value[name]
                    if name not in CONCURRENCY or type(amount) != "int" or amount <= 0:
                        return None
        elif key == "checkout":
            ok = value == "exclusive" or value == "shared"
        else:
            ok = key == "nodes"
        if not ok:
            return None
    copies = []
    for node in nodes:
        if type(node) != "dict" or node.get("__rho__") != "node":
            return None
        copy = {{}}
        for name in node:
            value = node[name]
            if type(value) == "list":
                for part in value:
                    if not ({_SCALAR.format("part")}):
                        return None
                value = list(value)
            elif not ({_SCALAR.format("value")}):
                return None
            if type(name) != "string":
                return None
            copy[name] = value
        copies.append(copy)
    col = lines.get(line, "").find("workflow(")
    made = {{"__rho__": "workflow", "at": [file, int(line), col + 1 if col >= 0 else 1]}}
    for key in kwargs:
        value = kwargs[key]
        if key == "nodes":
            made[key] = copies
        else:
            made[key] = dict(value) if type(value) == "dict" else value
    return made
"""
"""``workflow``'s plain path: its arguments checked as :func:`.nodes.make_workflow` checks them,
and every node a tagged node of scalars and lists of scalars, copied one level down (wholly)."""

LIBRARY = "<plain>"
"""The label the fast prelude loads the plain path from (:func:`load_library`)."""
IMPORT = f'load("{LIBRARY}", _rho_plain_node = "plain_node", _rho_plain_workflow = "plain_workflow")\n'
"""The line of the fast prelude that brings the plain path in."""


def node_head(kind: str) -> str:
    """The head of the fast constructor of ``kind``: the plain path's node, when it answers one."""
    if kind not in PLAIN:
        return ""
    return f"""    made = _rho_plain_node("{kind}", call_stack(), kwargs, _rho_site)
    if made != None:
        return made
"""


WORKFLOW_HEAD = """    made = _rho_plain_workflow(call_stack(), kwargs, _rho_site)
    if made != None:
        return made
"""
"""The head of the fast ``workflow``."""

_library: sl.FrozenModule | None = None


def load_library(label: str) -> sl.FrozenModule:
    """The plain path's frozen module (the only module the fast prelude loads), evaluated once per
    process: it is frozen, holds no state of any request, and reads nothing but its arguments."""
    global _library  # noqa: PLW0603  (one frozen module a process)
    if label != LIBRARY:
        raise ValueError(f"the prelude loads only {LIBRARY}, not {label}")
    if _library is None:
        module = sl.Module()
        sl.eval(module, sl.parse(PRELUDE, library_source()), sl.Globals.standard())
        _library = module.freeze()
    return _library


_CALLED = re.compile("(?:" + "|".join([*PLAIN, "workflow"]) + ")\\(")
"""A constructor's name and ``(`` (as :func:`.tags.call_site` looks for it: inside a longer name too)."""


def plain_globals(label: str, text: str, limits: dict[str, int]) -> list[Any]:
    """``_rho_site``, the module global the plain path reads, for the module ``label`` of ``text``:
    ``[head, label, lines, short, items]``.

    ``lines`` holds, by line number (as text), each line of ``text.splitlines()`` that names a
    constructor of :data:`PLAIN` or ``workflow``; any other line has no ``kind(`` in it, so its
    column is 1, as the Python side finds. The plain path is off (``head`` None) for a label a
    frame header could not be matched by without doubt, and under limits its rules do not imply
    (a name or a list of strings past the value budgets).
    """
    short = limits["string_bytes"] // 4
    usable = (
        short >= _NAME_MOST
        and limits["value_depth"] >= 2
        and limits["dict_items"] >= _MOST_ARGUMENTS
        and NAME_RE.pattern == f"^[a-z][a-z0-9_-]{{0,{_NAME_MOST - 1}}}$"
        and not any(c in label for c in ": \n\r")
        and label != PRELUDE
    )
    lines: dict[str, str] = {}
    if usable and _CALLED.search(text) is not None:
        lines = {str(number): line for number, line in enumerate(text.splitlines(), 1) if _CALLED.search(line)}
    return [f"\n  * {label}:" if usable else None, label, lines, short, limits["list_items"]]
