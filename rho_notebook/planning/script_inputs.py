"""A script's ``INPUTS`` declaration (docs/scripts.md), read with :mod:`ast` and never imported.

``INPUTS`` must be a module-level literal dict (``ast.literal_eval``); each entry is
``{"type": "string"|"integer"|"bool"|"enum"|"path", "required": bool, "default": ..., "choices": [...]}``
(``required`` defaults to "no default given"; ``choices`` only, and always, for ``enum``). ``"int"``
is read as ``"integer"`` (CAO's name for it, :data:`TYPE_SYNONYMS`): the declaration is normalised
before anything uses it, so the plan, its digest and every message say ``integer``.
Problems are ``script.inputs_literal`` (INPUTS is not a literal dict, or is assigned more than
once) and ``script.inputs_entry`` (an entry has the wrong shape); a script that does not parse is
``python.syntax``.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from rho_notebook.errors import InvalidWorkflow
from rho_notebook.model.graph import NAME_PATTERN
from rho_notebook.planning._findings import Finding, Severity

__all__ = [
    "INPUT_TYPES",
    "NAME",
    "TYPE_SYNONYMS",
    "declaration",
    "finding_at",
    "parse_inputs_declaration",
    "parse_script",
]

INPUT_TYPES = ("string", "integer", "bool", "enum", "path")
"""The types an ``INPUTS`` entry may declare: those of Starlark inputs, plus ``path``."""
TYPE_SYNONYMS = {"int": "integer"}
"""Other names an ``INPUTS`` entry may give a type by (CAO scripts declare ``int``), and the type."""

NAME = re.compile(NAME_PATTERN)
"""The node-name grammar: input keys, step ids and workflow names."""

_ENTRY_KEYS = frozenset({"type", "required", "default", "choices"})


def parse_script(text: str, display: str) -> ast.Module | Finding:
    """The script's syntax tree, or the ``python.syntax`` finding that stops it."""
    try:
        return ast.parse(text, filename=display)
    except SyntaxError as err:
        return Finding(
            rule="python.syntax",
            severity="error",
            message=f"Python syntax error: {err.msg or 'invalid syntax'}",
            file=display,
            line=err.lineno or 1,
            column=err.offset or 1,
        )
    except (ValueError, RecursionError, MemoryError) as err:
        return Finding("python.syntax", "error", f"the script cannot be parsed: {err}", display, 1, 1)


def finding_at(node: ast.AST, display: str, rule: str, message: str, severity: Severity = "error") -> Finding:
    """A finding located at ``node`` (1-based column)."""
    return Finding(
        rule=rule,
        severity=severity,
        message=message,
        file=display,
        line=getattr(node, "lineno", 1),
        column=getattr(node, "col_offset", 0) + 1,
    )


def _kind_of(value: Any) -> str:
    return "bool" if isinstance(value, bool) else type(value).__name__


def _required_problem(key: str, entry: dict[Any, Any]) -> str | None:
    required = entry.get("required", "default" not in entry)
    if not isinstance(required, bool):
        return f"INPUTS[{key!r}]: required must be True or False, got {required!r}"
    if required and entry.get("default") is not None:
        return f"INPUTS[{key!r}] is required and has a default; drop the default or set required to False"
    return None


def _choices_problem(key: str, kind: str, choices: Any) -> str | None:
    if kind == "enum":
        if not isinstance(choices, list | tuple) or not choices:
            return f'INPUTS[{key!r}] is an enum and needs a non-empty list of choices, e.g. "choices": ["a", "b"]'
        if any(c is not None and not isinstance(c, bool | int | str) for c in choices):
            return f"INPUTS[{key!r}]: enum choices must be strings, integers or booleans"
    elif choices is not None:
        return f'INPUTS[{key!r}] has choices but type {kind!r}; choices belong to "type": "enum"'
    return None


def _default_problem(key: str, kind: str, default: Any, choices: Any) -> str | None:
    if default is None:
        return None
    fits = {
        "string": isinstance(default, str),
        "path": isinstance(default, str),
        "integer": isinstance(default, int) and not isinstance(default, bool),
        "bool": isinstance(default, bool),
        "enum": any(type(default) is type(c) and default == c for c in choices or ()),
    }[kind]
    if fits:
        return None
    article = "an" if kind[0] in "aeiou" else "a"
    wanted = f"one of {list(choices or ())!r}" if kind == "enum" else f"{article} {kind}"
    return f"INPUTS[{key!r}] default {default!r} must be {wanted}"


def _type_of(entry: dict[Any, Any]) -> Any:
    """The entry's declared type, a synonym read as its type (``int`` -> ``integer``)."""
    kind = entry.get("type")
    return TYPE_SYNONYMS.get(kind, kind) if isinstance(kind, str) else kind


def _check_entry(key: Any, entry: Any) -> str | None:
    """The problem with one ``INPUTS`` entry, or None."""
    if not isinstance(key, str) or not NAME.match(key):
        return f"INPUTS key {key!r} must be a name matching {NAME_PATTERN} (lower case, digits, _ and -)"
    if not isinstance(entry, dict):
        return f'INPUTS[{key!r}] must be a dict such as {{"type": "string", "required": True}}, got {_kind_of(entry)}'
    unknown = sorted(str(k) for k in set(entry) - _ENTRY_KEYS)
    if unknown:
        return f"INPUTS[{key!r}] has unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_ENTRY_KEYS))}"
    kind = _type_of(entry)
    if kind not in INPUT_TYPES:
        allowed = ", ".join([*INPUT_TYPES, *(f"{s} (= {t})" for s, t in TYPE_SYNONYMS.items())])
        return f"INPUTS[{key!r}] has type {entry.get('type')!r}; allowed types: {allowed}"
    choices = entry.get("choices")
    return (
        _required_problem(key, entry)
        or _choices_problem(key, kind, choices)
        or _default_problem(key, kind, entry.get("default"), choices)
    )


def _assignments(tree: ast.Module) -> list[tuple[ast.stmt, ast.expr]]:
    """Every top-level ``INPUTS = ...`` (annotated or not): the statement and its value."""
    found: list[tuple[ast.stmt, ast.expr]] = []
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == "INPUTS" for t in statement.targets):
                found.append((statement, statement.value))
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if statement.target.id == "INPUTS" and statement.value is not None:
                found.append((statement, statement.value))
    return found


def _entries(
    raw: dict[Any, Any], statement: ast.stmt, value: ast.expr, display: str
) -> tuple[dict[str, dict[str, Any]] | None, list[Finding]]:
    """The normalised entries of a literal ``INPUTS`` dict, each problem located at its key."""
    found: list[Finding] = []
    declared: dict[str, dict[str, Any]] = {}
    keys = value.keys if isinstance(value, ast.Dict) else []
    for index, (key, entry) in enumerate(raw.items()):
        where: ast.AST = keys[index] if index < len(keys) and keys[index] is not None else statement  # type: ignore[assignment]
        problem = _check_entry(key, entry)
        if problem is not None:
            found.append(finding_at(where, display, "script.inputs_entry", problem))
            continue
        declared[key] = {
            "type": _type_of(entry),
            "required": entry.get("required", "default" not in entry),
            "default": entry.get("default"),
            "choices": list(entry.get("choices") or ()),
        }
    return (None if found else declared), found


def declaration(tree: ast.Module, display: str) -> tuple[dict[str, dict[str, Any]] | None, list[Finding]]:
    """The ``INPUTS`` declaration (normalised: type, required, default, choices) and the problems
    found; None when there is no usable declaration (no INPUTS at all gives ``{}``)."""
    assignments = _assignments(tree)
    if not assignments:
        return {}, []
    if len(assignments) > 1:
        second = assignments[1][0]
        return None, [
            finding_at(second, display, "script.inputs_literal", "INPUTS is assigned more than once; declare it once")
        ]
    statement, value = assignments[0]
    try:
        raw = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        message = (
            "INPUTS must be a literal dict (strings, numbers, booleans, None, lists and dicts only; no names or calls)"
        )
        return None, [finding_at(value, display, "script.inputs_literal", message)]
    if not isinstance(raw, dict):
        message = f"INPUTS must be a literal dict, got {_kind_of(raw)}"
        return None, [finding_at(value, display, "script.inputs_literal", message)]
    return _entries(raw, statement, value, display)


def parse_inputs_declaration(text: str, label: str, *, display: str | None = None) -> dict[str, dict[str, Any]]:
    """The script's ``INPUTS``, key -> ``{"type", "required", "default", "choices"}`` (``{}``
    when it declares none); read with ``ast.literal_eval``, never imported.

    Raises
    ------
    InvalidWorkflow
        The script does not parse, INPUTS is not a literal dict, or an entry has the wrong shape.
    """
    shown = display or label
    tree = parse_script(text, shown)
    if isinstance(tree, Finding):
        raise InvalidWorkflow([tree.diagnostic()])
    declared, found = declaration(tree, shown)
    if found or declared is None:
        raise InvalidWorkflow([f.diagnostic() for f in found])
    return declared
