"""What the worker reads in source text before Starlark does: number literals and ``load`` sites."""

from __future__ import annotations

import io
import json
import tokenize

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_RADIX_PREFIXES = ("0x", "0o", "0b")


def bad_literal(label: str, text: str) -> tuple[str, str, list[Any]] | None:
    """The first float literal or integer literal outside int64 in ``text`` as (rule, message,
    [file, line, column]); None when there is none or the text does not tokenize (the Starlark
    parser reports syntax errors with better messages)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    for tok in tokens:
        if tok.type != tokenize.NUMBER:
            continue
        literal = tok.string.replace("_", "")
        at = [label, tok.start[0], tok.start[1] + 1]
        lowered = literal.lower()
        is_int = lowered.startswith(_RADIX_PREFIXES) or not any(c in lowered for c in ".ej")
        if not is_int:
            return "value.float", f"float literal {tok.string} is not supported; use integers", at
        try:
            number = int(lowered, 0) if lowered.startswith(_RADIX_PREFIXES) else int(lowered)
        except ValueError:
            continue
        if number > INT64_MAX:
            return "value.int64", f"integer literal {tok.string} is outside signed 64-bit range", at
    return None


def find_load(text: str, label: str) -> list[int]:
    """Line and column (1-based) of the ``load`` of ``label`` in ``text`` (1, 1 if not found)."""
    for number, line in enumerate(text.splitlines(), start=1):
        col = line.find(json.dumps(label))
        if col < 0:
            col = line.find(f"'{label}'")
        if col >= 0 and "load" in line:
            return [number, col + 1]
    return [1, 1]
