"""Tagged values (``{"__rho__": kind, ...}``: references, templates, schemas, nodes) and call sites.

Node constructors go through a Starlark wrapper that passes ``call_stack()`` so that the Python side
knows the call site; the other builtins are plain callables whose errors Starlark locates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rho_notebook.source._starlark.pseudo_files import PRELUDE

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_STACK_FRAME = re.compile(r"\* (.+?):(\d+), in ")


def call_site(stack: str, name: str, sources: Mapping[str, str], lines: dict[str, list[str]]) -> list[Any]:
    """[file, line, column] of the innermost call of ``name(`` outside the prelude in ``stack``.

    ``lines`` keeps each source split into lines for the request (every node constructor asks).
    """
    frames = _STACK_FRAME.findall(stack)
    for file, line in reversed(frames):
        if file != PRELUDE:
            if file not in lines:
                lines[file] = sources.get(file, "").splitlines()
            number = int(line)
            text = lines[file][number - 1] if 0 < number <= len(lines[file]) else ""
            col = text.find(name + "(")
            return [file, number, col + 1 if col >= 0 else 1]
    return [None, None, None]


def tag(tag_kind: str, /, **fields: Any) -> dict[str, Any]:
    return {"__rho__": tag_kind, **fields}


def is_tag(value: Any, *kinds: str) -> bool:
    return isinstance(value, dict) and value.get("__rho__") in kinds


def has_tag(value: Any) -> bool:
    """Whether ``value`` is or holds a tagged value (a reference, template, schema, ...)."""
    if isinstance(value, dict):
        return "__rho__" in value or any(has_tag(item) for item in value.values())
    if isinstance(value, list):
        return any(has_tag(item) for item in value)
    return False
