"""Workflow inputs: parsing ``--input KEY=JSON``, validating values against the declaration,
and (script inputs) canonical ``path`` values and the cap on the resolved map.

**Bare words.** ``--input KEY=VALUE`` takes JSON, but a VALUE that is not JSON at all
(``--input target_file=docs/report.md``, ``--input mode=quick``) is kept as its text, marked as a
:class:`BareWord`. Parsing cannot know the declared types, so the rule is applied where values
meet the declaration (:func:`check_inputs`, which every planner and the human-step forms use, for
the CLI, the notebook verbs and MCP alike): a string, path or enum input takes the text; any other
type refuses it, naming the input and its type. A value that *is* JSON keeps its JSON meaning
(``--input name=true`` is the boolean ``true``, which a string input refuses), so a bare word never
changes what valid JSON meant before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rho_notebook.errors import Diagnostic, InputError
from rho_notebook.model.schema import INT64_MAX, INT64_MIN
from rho_notebook.model.spelling import meant
from rho_notebook.source.limits import Limits

__all__ = [
    "PASS_INPUT",
    "SCRIPT_INPUT_BYTES",
    "TEXT_TYPES",
    "BareWord",
    "parse_input_args",
    "check_inputs",
    "check_inputs_size",
    "unknown_input",
    "resolve_path_inputs",
]

PASS_INPUT = "; pass --input '{key}=JSON'"
"""How the CLI and the magics say to give a missing input (an ``input.missing`` message's end);
front ends that take inputs otherwise say it their own way (the diagnostic's ``input``)."""
SCRIPT_INPUT_BYTES = 32 * 1024
"""Cap on a script's resolved inputs, measured as canonical JSON (sorted keys, no spaces, UTF-8)."""
TEXT_TYPES = frozenset({"string", "path", "enum"})
"""The declared types a :class:`BareWord` may fill (an enum still checks its choices)."""


class BareWord(str):
    """An ``--input`` value that is not JSON, kept as its text until :func:`check_inputs` sees the
    declared type (module docstring); it is plain text to everything else."""

    __slots__ = ()


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


def parse_input_args(args: Sequence[str], *, limits: Limits, flag: str = "--input") -> dict[str, Any]:
    """``["target=\\"src\\"", "full=true", "mode=quick"]`` -> ``{"target": "src", "full": True,
    "mode": BareWord("quick")}``: JSON values, and the text of values that are not JSON.

    ``flag`` is how the problems name where a value was given: ``--input`` (the default), or the
    ``FIELD=VALUE`` arguments of ``answer``."""
    values: dict[str, Any] = {}
    problems: list[Diagnostic] = []
    total = 0
    for arg in args:
        key, sep, raw = arg.partition("=")
        if not sep or not key:
            problems.append(
                Diagnostic(
                    rule="input.syntax",
                    message=f"{flag} {arg!r} must have the form KEY=VALUE (JSON, or a bare word for a string, "
                    f"path or enum input), e.g. {flag} target=src",
                )
            )
            continue
        try:
            total += len(raw.encode("utf-8"))
        except UnicodeEncodeError:
            problems.append(
                Diagnostic(rule="input.encoding", message=f"{flag} {key!r}: the value is not valid UTF-8 text")
            )
            continue
        value, problem = _parse_value(key, raw, limits, flag=flag)
        if problem is not None:
            problems.append(problem)
            continue
        if key in values:
            problems.append(Diagnostic(rule="input.duplicate", message=f"{flag} {key} is given more than once"))
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


def _parse_value(key: str, raw: str, limits: Limits, *, flag: str) -> tuple[Any, Diagnostic | None]:
    """One ``--input`` value: its JSON meaning, a :class:`BareWord` when it is not JSON, or the
    problem (nested too deep; a float, which inputs do not take)."""
    depth = limits.limit("value_depth")
    too_deep = Diagnostic(rule="limit.input_depth", message=f"{flag} {key} is nested deeper than {depth} levels")
    if _text_depth(raw) > depth:
        return None, too_deep
    floats: list[str] = []
    try:
        value = json.loads(raw, parse_float=floats.append, parse_constant=floats.append)
    except json.JSONDecodeError:
        return BareWord(raw), None
    except (ValueError, RecursionError) as err:
        return None, Diagnostic(rule="input.json", message=f"{flag} {key}: {raw!r} cannot be read: {err}")
    if floats:
        message = (
            f"{flag} {key}: floats are not supported in inputs (got {floats[0]}); use an integer, "
            f"or for text quote it as JSON: {flag} '{key}=\"{raw}\"'"
        )
        return None, Diagnostic(rule="input.json", message=message)
    if _too_deep(value) > depth:
        return None, too_deep
    return value, None


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
    problems += [unknown_input(key, declared, file=file, noun=noun) for key in sorted(set(supplied) - set(declared))]
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
        value = supplied[key]
        values[key] = str(value) if isinstance(value, BareWord) else value
    if problems:
        raise InputError(problems)
    return values


def unknown_input(key: str, declared: Iterable[str], *, file: str | None = None, noun: str = "input") -> Diagnostic:
    """``input.unknown`` (``field.unknown``: a form's): ``key`` is none of ``declared``, which it lists.
    Also what ``fork --input`` says of an input the run's workflow does not declare."""
    known = ", ".join(sorted(declared)) or "none"
    where = f"this workflow declares: {known}" if noun == "input" else f"the form has: {known}"
    return Diagnostic(rule=f"{noun}.unknown", message=f"unknown {noun} {key!r}; {where}", file=file)


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
    if noun != "input":
        return Diagnostic(rule=f"{noun}.missing", message=f"missing required {noun} {key!r} ({kind})", file=file)
    message = f"missing required input {key!r} ({kind})" + PASS_INPUT.format(key=key)
    return Diagnostic(rule="input.missing", message=message, file=file, input=key)


_EXAMPLES = {"integer": "3", "bool": "true"}


def _value_problem(key: str, decl: Mapping[str, Any], value: Any, *, file: str | None, noun: str) -> Diagnostic | None:
    """A supplied value of the wrong type, or outside an enum's choices; None when it fits."""
    kind = decl["type"]
    choices = decl.get("choices") or []
    if _matches(kind, str(value) if isinstance(value, BareWord) else value, choices):
        return None
    article = "an" if kind[0] in "aeiou" else "a"
    if isinstance(value, BareWord) and kind not in TEXT_TYPES:
        message = (
            f"{noun} {key!r} is {article} {kind}, and {str(value)!r} is not JSON: a bare word is taken as text "
            f"only by string, path and enum {noun}s; give {article} {kind} as JSON"
            + (f", e.g. {'--input ' if noun == 'input' else ''}{key}={_EXAMPLES[kind]}" if kind in _EXAMPLES else "")
        )
        return Diagnostic(rule=f"{noun}.type", message=message, file=file)
    if kind == "enum":
        message = f"{noun} {key!r} is {json.dumps(value)}, which is not one of {json.dumps(choices)}"
        close = meant(str(value), [str(choice) for choice in choices]) if isinstance(value, str) else None
        if close is not None:
            message += f"; did you mean {json.dumps(close)}?"
        return Diagnostic(rule=f"{noun}.enum", message=message, file=file)
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
