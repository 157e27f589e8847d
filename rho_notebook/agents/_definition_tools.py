"""The tool vocabularies of agent frontmatter: Rho capability names and Claude Code tool entries.

Part of :mod:`rho_notebook.agents.definition`: which ``tools`` entries each runtime accepts, and a
message for every entry it does not (duplicates, the other runtime's vocabulary, malformed Claude
Code entries).
"""

from __future__ import annotations

import re
import string

from rho_notebook.agents._definition_values import RHO_EXAMPLE
from rho_notebook.model.agent import RHO_TOOLS

__all__ = ["CLAUDE_EXAMPLE", "claude_tool_problems", "rho_tool_problems"]

CLAUDE_EXAMPLE = 'tools: [Read, Edit, "Bash(git *)"]'
"""An inline list of Claude Code tool entries, for messages."""
_CLAUDE_SHAPE = "Claude Code tool entries are ToolName or ToolName(specifier)"
_EXTENSION_RE = re.compile(r"[a-z][a-z0-9_]*")
_CLAUDE_BASE_RE = re.compile(r"[A-Za-z0-9_-]+")
_RHO_TOOL_SET = frozenset(RHO_TOOLS)


def _duplicate_problems(items: tuple[str, ...]) -> list[str]:
    seen: set[str] = set()
    problems: list[str] = []
    for item in items:
        if item in seen:
            problems.append(f"tools: {item!r} is listed more than once; list each entry once")
        seen.add(item)
    return problems


def _looks_like_claude(item: str) -> bool:
    return "(" in item or ")" in item or item[:1] in string.ascii_uppercase


def rho_tool_problems(items: tuple[str, ...]) -> list[str]:
    """A message for every problem of ``items`` as the tools of a runtime-rho agent."""
    problems = _duplicate_problems(items)
    claude = [item for item in items if item and _looks_like_claude(item)]
    others = [item for item in items if item not in claude]
    if claude and others:
        problems.append(
            f"tools: mixes Claude Code entries ({_names(claude)}) with Rho capability names "
            f"({_names(others)}); runtime rho takes Rho capability names only, e.g. "
            f"{RHO_EXAMPLE}, and Claude Code tools need runtime: claude-cli"
        )
    elif claude:
        what = _is_are(claude, "a Claude Code tool entry", "Claude Code tool entries")
        problems.append(
            f"tools: {_names(claude)} {what}, but runtime is rho; use Rho capability names, "
            f"e.g. {RHO_EXAMPLE}, or set runtime: claude-cli"
        )
    for item in others:
        if item not in _RHO_TOOL_SET and not _EXTENSION_RE.fullmatch(item):
            problems.append(
                f"tools: {item!r} is not a Rho capability name; use a built-in capability "
                f"({', '.join(RHO_TOOLS)}) or an extension capability named like a lowercase "
                "identifier (e.g. acme_custom)"
            )
    return problems


def claude_tool_problems(items: tuple[str, ...]) -> list[str]:
    """A message for every problem of ``items`` as the tools of a runtime-claude-cli agent."""
    problems = _duplicate_problems(items)
    rho = [item for item in items if item in _RHO_TOOL_SET]
    others = [item for item in items if item not in _RHO_TOOL_SET]
    if rho:
        mixed = f" mixed with Claude Code entries ({_names(others)})" if others else ""
        what = _is_are(rho, "a Rho capability name", "Rho capability names")
        problems.append(
            f"tools: {_names(rho)} {what}{mixed}, but runtime is claude-cli; use Claude Code tool "
            f"entries, e.g. {CLAUDE_EXAMPLE}, or set runtime: rho"
        )
    for item in others:
        problem = _claude_entry_problem(item)
        if problem is not None:
            problems.append(f'tools: {problem}; {_CLAUDE_SHAPE} (e.g. Read, "Bash(git *)")')
    return problems


def _claude_entry_problem(item: str) -> str | None:
    """Why ``item`` is not ``ToolName`` or ``ToolName(specifier)``, or None when it is."""
    if not item:
        return "'' is an empty entry"
    if not item.isprintable():
        return f"{item!r} contains control characters"
    open_at = item.find("(")
    if open_at < 0:
        if ")" in item:
            return f"{item!r} has a ')' without a matching '('"
        base, specifier = item, None
    else:
        if not item.endswith(")"):
            return f"{item!r} does not end its specifier with ')'"
        base, specifier = item[:open_at], item[open_at + 1 : -1]
    if not base:
        return f"{item!r} has no tool name before its specifier"
    if not _CLAUDE_BASE_RE.fullmatch(base):
        return f"{item!r} has the tool name {base!r}; tool names use only letters, digits, '_' and '-'"
    if specifier is not None and "," in specifier:
        return (
            f"{item!r} has a comma in its specifier; commas cannot round-trip through Claude's "
            "tool list, so split it into separate entries"
        )
    if specifier is not None and not _balanced(specifier):
        return f"{item!r} has unbalanced parentheses in its specifier"
    return None


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _names(items: list[str]) -> str:
    return ", ".join(repr(item) for item in dict.fromkeys(items))


def _is_are(items: list[str], one: str, many: str) -> str:
    return f"is {one}" if len(items) == 1 else f"are {many}"
