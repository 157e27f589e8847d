"""The ``input.*`` declarations and ``define(inputs = ..., build = ...)`` (docs/workflows.md)."""

from __future__ import annotations

import json
from functools import partial

import starlark as sl

from rho_notebook.source._starlark.tags import NAME_RE, call_site, is_tag, tag

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

    from rho_notebook.source._starlark.session import Session

_DEFAULT_TYPES = {"string": str, "integer": int, "bool": bool}


def make_input(s: Session, kind: str, /, choices: Any = None, **kw: Any) -> dict[str, Any]:
    """The declaration of one input of type ``kind`` (``choices`` only for ``enum``)."""
    unknown = sorted(set(kw) - {"default"})
    s.need(not unknown, "input.argument", f"input.{kind}() got unknown argument(s): {', '.join(unknown)}")
    default = kw.get("default")
    s.check_value(default, f"input.{kind} default")
    decl = tag("input", type=kind, required="default" not in kw or default is None, default=default)
    if kind == "enum":
        decl["choices"] = _enum_choices(s, choices, default)
    elif default is not None:
        expected = _DEFAULT_TYPES[kind]
        ok = isinstance(default, expected) and (kind == "bool" or not isinstance(default, bool))
        article = "an" if kind[0] in "aeiou" else "a"
        s.need(ok, "input.default", f"input.{kind}() default must be {article} {kind}, got {json.dumps(default)}")
    return decl


def _enum_choices(s: Session, choices: Any, default: Any) -> list[Any]:
    s.check_value(choices, "input.enum choices")
    s.need(
        isinstance(choices, list) and len(choices) > 0,
        "input.enum",
        "input.enum() needs a non-empty list of choices",
    )
    for c in choices:
        s.need(
            c is None or isinstance(c, (bool, int, str)),
            "input.enum",
            f"input.enum() choices must be scalars, got {json.dumps(c)}",
        )
    if default is not None:
        s.need(
            any(type(default) is type(c) and default == c for c in choices),
            "input.enum",
            f"input.enum() default {json.dumps(default)} is not one of {json.dumps(choices)}",
        )
    checked: list[Any] = choices
    return checked


def check_define(s: Session, inputs: Any, build_type: str, extra: Any, stack: str) -> dict[str, Any]:
    """The declared inputs of ``define(...)``, after checking its arguments."""
    at = call_site(stack, "define", s.sources, s.lines)
    s.need(not extra, "define.argument", f"define() got unknown argument(s): {', '.join(sorted(extra))}", at)
    s.need(build_type == "function", "define.build", f"define(build=...) must be a function, got {build_type}", at)
    s.need(isinstance(inputs, dict), "define.inputs", "define(inputs=...) must be a dictionary", at)
    for key, decl in inputs.items():
        s.need(
            NAME_RE.match(key) is not None,
            "input.name",
            f"input name {key!r} must match [a-z][a-z0-9_-]{{0,62}}",
            at,
        )
        s.need(
            is_tag(decl, "input"),
            "define.inputs",
            f"input {key!r} must be declared with input.string/integer/bool/enum",
            at,
        )
    declared: dict[str, Any] = inputs
    return declared


def install_builtins(module: sl.Module, s: Session) -> None:
    # Python names these lambdas in the TypeError of a call with wrong arguments, which becomes the
    # diagnostic's message ("install_builtins.<locals>.<lambda>() takes 0 positional arguments").
    module.add_callable("_input_string", lambda **kw: make_input(s, "string", **kw))
    module.add_callable("_input_integer", lambda **kw: make_input(s, "integer", **kw))
    module.add_callable("_input_bool", lambda **kw: make_input(s, "bool", **kw))
    module.add_callable("_input_enum", lambda choices=None, **kw: make_input(s, "enum", choices, **kw))
    module.add_callable("_check_define", partial(check_define, s))
