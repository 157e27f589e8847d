"""The value grammar of agent frontmatter: plain and quoted scalars, booleans, choices, inline lists.

Part of :mod:`rho_notebook.agents.definition` (the parse contract and its diagnostics live there).
A value that breaks its grammar raises :class:`_ValueProblem`, whose text names the value and what
is allowed; the definition parser reports it at the key's line under rule ``agent.<key>``.
"""

from __future__ import annotations

from typing import Literal, TypeVar

__all__ = ["RHO_EXAMPLE", "RHO_LIST", "choose", "decode_bool", "decode_scalar", "decode_tools", "preview"]

_Choice = TypeVar("_Choice", bound=str)

RHO_LIST = "[read_file, grep, bash]"
"""An inline list of Rho capability names, for messages."""
RHO_EXAMPLE = f"tools: {RHO_LIST}"


class _ValueProblem(Exception):
    """A value that breaks its key's rule; the text names the value and what is allowed."""


def preview(value: str, limit: int = 40) -> str:
    """``value`` quoted for a message, shortened when long."""
    if len(value) <= limit:
        return repr(value)
    return repr(value[:limit]) + "..."


def decode_scalar(raw: str) -> str:
    """A plain or single/double-quoted scalar (quotes removed, content kept verbatim)."""
    if not raw:
        raise _ValueProblem("has no value; write it on the same line (nested maps and block values are not accepted)")
    quote = raw[0]
    if quote in "\"'":
        if len(raw) < 2 or raw[-1] != quote:
            raise _ValueProblem(f"quoted value {preview(raw)} is not closed; end it with {quote}")
        return raw[1:-1]
    if quote == "[":
        raise _ValueProblem(f"{preview(raw)} is a list; only tools takes a list, other keys take one value")
    if quote == "{":
        raise _ValueProblem(f"{preview(raw)} is a map; nested maps are not accepted")
    if quote in "|>":
        raise _ValueProblem(f"{preview(raw)} starts a block scalar, which is not accepted; write one line")
    return raw


def decode_bool(value: str) -> bool:
    """``true`` or ``false``."""
    if value == "true":
        return True
    if value == "false":
        return False
    raise _ValueProblem(f"{value!r} is not a boolean; expected true or false")


def choose(value: str, allowed: tuple[_Choice, ...]) -> _Choice:
    """``value`` as the member of ``allowed`` it equals."""
    for option in allowed:
        if option == value:
            return option
    raise _ValueProblem(f"{value!r} is not allowed; expected one of: {', '.join(allowed)}")


def decode_tools(raw: str) -> Literal["all"] | tuple[str, ...]:
    """The ``tools`` value: ``all`` or the entries of an inline list (checked against a vocabulary later)."""
    if not raw:
        raise _ValueProblem(
            f"has no value; write tools: all or an inline list such as {RHO_LIST} (block lists are not accepted)"
        )
    if raw.startswith("["):
        return tuple(_split_list(raw))
    value = decode_scalar(raw)
    if value == "all":
        return "all"
    raise _ValueProblem(f"{preview(value)} is not a tools value; expected all or an inline list such as {RHO_LIST}")


def _split_list(raw: str) -> list[str]:
    """Entries of an inline ``[a, "b c", 'd']`` list.

    Quotes open a quoted entry only at the start of an entry. Inside a plain entry, parentheses
    nest and commas within them do not split, so ``Bash(a, b)`` stays one (invalid) entry.
    """
    if not raw.endswith("]"):
        raise _ValueProblem(f"list {preview(raw)} is not closed; end it with ']'")
    inner = raw[1:-1]
    items: list[str] = []
    if not inner.strip():
        return items
    index = 0
    while True:
        item, index = _list_item(inner, index, raw)
        items.append(item)
        if index >= len(inner):
            return items
        index += 1  # the comma


def _list_item(inner: str, index: int, raw: str) -> tuple[str, int]:
    """One entry starting at ``index``; returns it and the index of the following comma or end."""
    while index < len(inner) and inner[index] in " \t":
        index += 1
    if index >= len(inner) or inner[index] == ",":
        raise _ValueProblem(f"{preview(raw)} has an empty entry; remove the extra comma")
    quote = inner[index]
    if quote in "\"'":
        close = inner.find(quote, index + 1)
        if close < 0:
            raise _ValueProblem(f"a quoted entry in {preview(raw)} is not closed; end it with {quote}")
        item = inner[index + 1 : close]
        rest = close + 1
        while rest < len(inner) and inner[rest] in " \t":
            rest += 1
        if rest < len(inner) and inner[rest] != ",":
            raise _ValueProblem(
                f"unexpected text after the quoted entry {item!r} in {preview(raw)}; separate entries with commas"
            )
        return item, rest
    end, depth = index, 0
    while end < len(inner) and not (inner[end] == "," and depth <= 0):
        depth += {"(": 1, ")": -1}.get(inner[end], 0)
        end += 1
    item = inner[index:end].strip()
    if item[0] in "[{":
        raise _ValueProblem(f"entry {item!r} in {preview(raw)} is a nested list or map, which is not accepted")
    return item, end
