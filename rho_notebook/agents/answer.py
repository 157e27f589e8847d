"""Typed answers: how an output schema is shown to the agent, and how its final answer is read.

An agent node with an output schema must end with exactly one JSON value. The COMPLETE final
answer is parsed with :func:`json.loads` (surrounding whitespace aside): no code-fence stripping,
no substring search, so a fenced answer fails. Duplicate object keys and ``NaN``/``Infinity`` are
rejected. The value is then validated against the frozen schema.
"""

from __future__ import annotations

import json
from typing import Any

from rho_notebook.errors import AnswerError
from rho_notebook.model.schema import (
    BoolSchema,
    EnumSchema,
    IntegerSchema,
    ListSchema,
    NullSchema,
    OptionalSchema,
    RecordSchema,
    Schema,
    StdoutJsonSchema,
    StringSchema,
    validate_value,
)

__all__ = ["answer_instructions", "describe_schema", "parse_typed_answer"]

_PREVIEW = 80


_SCALARS: tuple[tuple[type[object], str], ...] = (
    (NullSchema, "null"),
    (BoolSchema, "true | false"),
    (IntegerSchema, "integer"),
    (StringSchema, "string"),
)


def describe_schema(schema: Schema, indent: int = 0) -> str:
    """A readable rendering of a schema, e.g. ``{"decision": "approve" | "revise", "n": integer}``."""
    for kind, text in _SCALARS:
        if isinstance(schema, kind):
            return text
    if isinstance(schema, StdoutJsonSchema):
        return describe_schema(schema.inner, indent)
    if isinstance(schema, EnumSchema):
        return " | ".join(json.dumps(member) for member in schema.members)
    if isinstance(schema, OptionalSchema):
        return f"{describe_schema(schema.inner, indent)} | null"
    if isinstance(schema, ListSchema):
        return f"[ {describe_schema(schema.items, indent)}, ... ]"
    if isinstance(schema, RecordSchema):
        return _describe_record(schema, indent)
    msg = f"unknown schema kind {schema.kind!r}"
    raise TypeError(msg)


def _describe_record(schema: RecordSchema, indent: int) -> str:
    """A record's fields one per line, indented by ``indent`` levels; ``?`` marks an optional field."""
    if not schema.fields:
        return "{}"
    pad = "  " * indent
    rows = []
    for name, sub in schema.fields:
        mark = "?" if isinstance(sub, OptionalSchema) else ""
        rows.append(f'{pad}  "{name}"{mark}: {describe_schema(sub, indent + 1)}')
    return "{\n" + ",\n".join(rows) + f"\n{pad}}}"


def answer_instructions(schema: Schema) -> str:
    """What the agent is told about its final answer when its node has an output schema."""
    return (
        "Your final answer must be exactly one JSON value matching the schema below, and nothing "
        "else: no text before or after it and no Markdown code fences. Finish your work with tools "
        "first; the reply that has no tool calls is your final answer.\n\n"
        f"{describe_schema(schema)}\n\n"
        'Strings, integers, true/false and null are JSON types; "a" | "b" means exactly one of those '
        "values; a field marked ? may be omitted or null; no other fields are allowed."
    )


def parse_typed_answer(text: str, schema: Schema) -> Any:
    """The validated value of a complete final answer.

    Raises
    ------
    AnswerError
        ``not_json`` when the whole answer is not one JSON value, ``schema`` when the value does
        not match ``schema``.
    """
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError) as err:
        hint = " (a Markdown code fence is not stripped)" if text.lstrip().startswith("```") else ""
        msg = f"the final answer is not one JSON value{hint}: {err}; it starts {_preview(text)}"
        raise AnswerError(msg, kind="not_json") from None
    problems = validate_value(schema, value)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        msg = f"the final answer does not match the output schema: {shown}"
        raise AnswerError(msg, kind="schema")
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            msg = f"duplicate key {key!r} in an object"
            raise ValueError(msg)
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    msg = f"{name} is not JSON"
    raise ValueError(msg)


def _preview(text: str) -> str:
    one_line = " ".join(text.split())
    return json.dumps(one_line[:_PREVIEW] + ("…" if len(one_line) > _PREVIEW else ""))
