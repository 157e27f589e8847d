"""Workflow inputs: parsing ``--input KEY=JSON``, validating values against the declaration,
and (script inputs) canonical ``path`` values and the cap on the resolved map."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rho_notebook.errors import Diagnostic, InputError
from rho_notebook.model.schema import INT64_MAX, INT64_MIN
from rho_notebook.source.limits import Limits

__all__ = ["SCRIPT_INPUT_BYTES", "parse_input_args", "check_inputs", "check_inputs_size", "resolve_path_inputs"]

SCRIPT_INPUT_BYTES = 32 * 1024
"""Cap on a script's resolved inputs, measured as canonical JSON (sorted keys, no spaces, UTF-8)."""


def _too_deep(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (0 for a scalar), without recursing."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list | dict):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _text_depth(raw: str) -> int:
    """How deeply the JSON text ``raw`` nests brackets (outside strings): measured before parsing,
    so a value nested thousands deep is refused by the limit, not by the parser's recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _bad_text(value: Any) -> str | None:
    """What makes a string inside ``value`` (a key or an item, at any depth) unusable: a NUL
    byte (no command argument, path or environment value can hold one) or a lone surrogate (not
    Unicode text: an argument that was not UTF-8, or a ``\\ud800`` escape); None when none does."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "contains a NUL byte (\\u0000), which no argument, path or environment value can hold"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "is not valid UTF-8 text"
    return None


def parse_input_args(args: Sequence[str], *, limits: Limits) -> dict[str, Any]:
    """``["target=\\"src\\"", "full=true"]`` -> ``{"target": "src", "full": True}``."""
    values: dict[str, Any] = {}
    problems: list[Diagnostic] = []
    total = 0
    for arg in args:
        key, sep, raw = arg.partition("=")
        if not sep or not key:
            problems.append(
                Diagnostic(
                    rule="input.syntax",
                    message=f"--input {arg!r} must have the form KEY=JSON, e.g. --input 'target=\"src\"'",
                )
            )
            continue
        try:
            total += len(raw.encode("utf-8"))
        except UnicodeEncodeError:
            problems.append(
                Diagnostic(rule="input.encoding", message=f"--input {key!r}: the value is not valid UTF-8 text")
            )
            continue
        if _text_depth(raw) > limits.limit("value_depth"):
            problems.append(
                Diagnostic(
                    rule="limit.input_depth",
                    message=f"--input {key} is nested deeper than {limits.limit('value_depth')} levels",
                )
            )
            continue
        try:
            value = json.loads(raw, parse_float=_no_float, parse_constant=_no_float)
        except (json.JSONDecodeError, ValueError, RecursionError) as err:
            hint = (
                f" (strings need JSON quotes: --input '{key}=\"{raw}\"')"
                if raw and raw[0] not in '"[{tn0123456789-'
                else ""
            )
            problems.append(
                Diagnostic(rule="input.json", message=f"--input {key}: {raw!r} is not valid JSON: {err}{hint}")
            )
            continue
        if key in values:
            problems.append(Diagnostic(rule="input.duplicate", message=f"--input {key} is given more than once"))
        if _too_deep(value) > limits.limit("value_depth"):
            problems.append(
                Diagnostic(
                    rule="limit.input_depth",
                    message=f"--input {key} is nested deeper than {limits.limit('value_depth')} levels",
                )
            )
        values[key] = value
    if total > limits.limit("input_bytes"):
        problems.append(
            Diagnostic(
                rule="limit.input_bytes",
                message=f"planning budget 'input_bytes' exceeded: accepted limit {limits.limit('input_bytes')}, measured {total}",
            )
        )
    if problems:
        raise InputError(problems)
    return values


def _no_float(text: str) -> Any:
    msg = f"floats are not supported in inputs (got {text}); use an integer or a string"
    raise ValueError(msg)


def _matches(kind: str, value: Any, choices: Sequence[Any]) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "path":
        return isinstance(value, str) and value != ""
    return any(type(value) is type(c) and value == c for c in choices)


def check_inputs(
    declared: Mapping[str, Any], supplied: Mapping[str, Any], *, file: str | None = None, noun: str = "input"
) -> dict[str, Any]:
    """The values ``build`` receives: supplied values checked against the declaration, plus defaults.

    Rejects a string holding a NUL byte or a lone surrogate anywhere in a supplied value (named
    by its input), then missing required inputs, unknown inputs, wrong types and values outside
    an enum. ``noun`` names what is checked in messages and rules: ``input`` (a workflow's inputs:
    ``input.missing``, with the ``--input`` hint) or ``field`` (a human step's form: ``field.missing``).
    """
    problems = _text_problems(supplied, file=file, noun=noun)
    if problems:
        raise InputError(problems)
    for key in sorted(set(supplied) - set(declared)):
        known = ", ".join(sorted(declared)) or "none"
        problems.append(
            Diagnostic(
                rule=f"{noun}.unknown",
                message=f"unknown {noun} {key!r}; "
                + (f"this workflow declares: {known}" if noun == "input" else f"the form has: {known}"),
                file=file,
            )
        )
    values: dict[str, Any] = {}
    for key in sorted(declared):
        decl = declared[key]
        if key not in supplied:
            if decl["required"]:
                problems.append(_missing(key, decl["type"], file=file, noun=noun))
            else:
                values[key] = decl["default"]
            continue
        problem = _value_problem(key, decl, supplied[key], file=file, noun=noun)
        if problem is not None:
            problems.append(problem)
            continue
        values[key] = supplied[key]
    if problems:
        raise InputError(problems)
    return values


def _text_problems(supplied: Mapping[str, Any], *, file: str | None, noun: str) -> list[Diagnostic]:
    """A NUL byte or a lone surrogate anywhere in a supplied key or value, named by its input."""
    problems: list[Diagnostic] = []
    for key in sorted(supplied):
        bad = _bad_text(key) or _bad_text(supplied[key])
        if bad is not None:
            shown = key.encode("utf-8", "backslashreplace").decode() if isinstance(key, str) else repr(key)
            problems.append(Diagnostic(rule=f"{noun}.text", message=f"{noun} {shown!r} {bad}", file=file))
    return problems


def _missing(key: str, kind: str, *, file: str | None, noun: str) -> Diagnostic:
    return Diagnostic(
        rule=f"{noun}.missing",
        message=f"missing required {noun} {key!r} ({kind})"
        + (f"; pass --input '{key}=JSON'" if noun == "input" else ""),
        file=file,
    )


def _value_problem(key: str, decl: Mapping[str, Any], value: Any, *, file: str | None, noun: str) -> Diagnostic | None:
    """A supplied value of the wrong type, or outside an enum's choices; None when it fits."""
    kind = decl["type"]
    choices = decl.get("choices") or []
    if _matches(kind, value, choices):
        return None
    if kind == "enum":
        message = f"{noun} {key!r} is {json.dumps(value)}, which is not one of {json.dumps(choices)}"
        return Diagnostic(rule=f"{noun}.enum", message=message, file=file)
    article = "an" if kind[0] in "aeiou" else "a"
    message = f"{noun} {key!r} must be {article} {kind}, got {json.dumps(value)}"
    return Diagnostic(rule=f"{noun}.type", message=message, file=file)


def resolve_path_inputs(
    declared: Mapping[str, Any], values: Mapping[str, Any], *, workspace: Path, file: str | None = None
) -> dict[str, Any]:
    """``values`` with every ``path`` input made canonical (``realpath``; a relative path is taken
    from the workspace root) and checked to stay inside ``workspace`` (a canonical path).

    Raises
    ------
    InputError
        A path value leaves the workspace (directly, by ``..`` or through a symlink) or is unusable.
    """
    resolved = dict(values)
    problems: list[Diagnostic] = []
    for key in sorted(values):
        if declared.get(key, {}).get("type") != "path" or values[key] is None:
            continue
        raw = values[key]
        try:
            canonical = Path(os.path.realpath(workspace / raw))
        except (ValueError, OSError) as err:
            problems.append(
                Diagnostic(rule="input.path", message=f"input {key!r}: {raw!r} is not a usable path: {err}", file=file)
            )
            continue
        if not canonical.is_relative_to(workspace):
            problems.append(
                Diagnostic(
                    rule="input.path",
                    message=f"input {key!r} is {raw!r}, which resolves to {canonical}, outside the workspace {workspace}; "
                    "path inputs must stay inside the workspace",
                    file=file,
                )
            )
            continue
        resolved[key] = str(canonical)
    if problems:
        raise InputError(problems)
    return resolved


def check_inputs_size(values: Mapping[str, Any], *, cap: int, file: str | None = None) -> None:
    """Refuse resolved inputs whose canonical JSON (sorted keys, no spaces, UTF-8) exceeds ``cap`` bytes.

    Raises
    ------
    InputError
        Naming the measured size and the cap.
    """
    size = len(json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > cap:
        message = (
            f"the resolved inputs are {size} bytes of canonical JSON, over the cap of {cap} bytes; "
            "pass large data as a path input instead"
        )
        raise InputError([Diagnostic(rule="limit.script_inputs", message=message, file=file)])
