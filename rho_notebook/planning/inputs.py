"""Workflow inputs: parsing ``--input KEY=JSON`` and validating values against the declaration."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rho_notebook.errors import Diagnostic, InputError
from rho_notebook.model.schema import INT64_MAX, INT64_MIN
from rho_notebook.source.limits import Limits

__all__ = ["parse_input_args", "check_inputs"]


def _too_deep(value: Any, depth: int = 0) -> int:
    if isinstance(value, list):
        return max((_too_deep(v, depth + 1) for v in value), default=depth + 1)
    if isinstance(value, dict):
        return max((_too_deep(v, depth + 1) for v in value.values()), default=depth + 1)
    return depth


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
        total += len(raw.encode())
        try:
            value = json.loads(raw, parse_float=_no_float, parse_constant=_no_float)
        except (json.JSONDecodeError, ValueError) as err:
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
    return any(type(value) is type(c) and value == c for c in choices)


def check_inputs(
    declared: Mapping[str, Any], supplied: Mapping[str, Any], *, file: str | None = None
) -> dict[str, Any]:
    """The values ``build`` receives: supplied values checked against the declaration, plus defaults.

    Rejects missing required inputs, unknown inputs, wrong types and values outside an enum.
    """
    problems: list[Diagnostic] = []
    values: dict[str, Any] = {}
    for key in sorted(set(supplied) - set(declared)):
        known = ", ".join(sorted(declared)) or "none"
        problems.append(
            Diagnostic(
                rule="input.unknown", message=f"unknown input {key!r}; this workflow declares: {known}", file=file
            )
        )
    for key in sorted(declared):
        decl = declared[key]
        kind = decl["type"]
        choices = decl.get("choices") or []
        if key not in supplied:
            if decl["required"]:
                problems.append(
                    Diagnostic(
                        rule="input.missing",
                        message=f"missing required input {key!r} ({kind}); pass --input '{key}=JSON'",
                        file=file,
                    )
                )
            else:
                values[key] = decl["default"]
            continue
        value = supplied[key]
        if not _matches(kind, value, choices):
            if kind == "enum":
                message = f"input {key!r} is {json.dumps(value)}, which is not one of {json.dumps(choices)}"
                rule = "input.enum"
            else:
                article = "an" if kind[0] in "aeiou" else "a"
                message = f"input {key!r} must be {article} {kind}, got {json.dumps(value)}"
                rule = "input.type"
            problems.append(Diagnostic(rule=rule, message=message, file=file))
            continue
        values[key] = value
    if problems:
        raise InputError(problems)
    return values
