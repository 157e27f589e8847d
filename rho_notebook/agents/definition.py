"""Parsing of one Rho agent definition file: yaml-like frontmatter plus a Markdown body.

This module owns Rho's agent definition parse contract (``subagents-definition-schema``): the
file shape, the scalar and inline-list grammar of the frontmatter, each field's own constraint
and every runtime / model-policy / tools cross-rule. It reads no files; the catalog does that.

Every problem becomes a :class:`~rho_notebook.errors.Diagnostic` at the line of the offending
key (or of the opening ``---`` for file-level problems), column 1, with one of these rules:

``agent.frontmatter``
    the file does not open or close its frontmatter with a line that is exactly ``---``
``agent.syntax``
    a frontmatter line is not ``key: value`` at column 1 (indented, block list, comment)
``agent.unknown-key`` / ``agent.duplicate-key``
    a key outside the schema, or a key given twice
``agent.<key>``
    the value of ``<key>`` breaks its own rule or a cross-rule (for example ``agent.model``,
    ``agent.tools``, ``agent.inherit_claude_config``)

All independent problems of one file are raised together in one
:class:`~rho_notebook.errors.InvalidWorkflow`. The value grammar (scalars, quotes, inline lists)
is in :mod:`rho_notebook.agents._definition_values`, the ``tools`` vocabularies of both runtimes in
:mod:`rho_notebook.agents._definition_tools`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from rho_notebook.agents._definition_tools import CLAUDE_EXAMPLE, claude_tool_problems, rho_tool_problems
from rho_notebook.agents._definition_values import (
    RHO_EXAMPLE,
    _ValueProblem,
    choose,
    decode_bool,
    decode_scalar,
    decode_tools,
    preview,
)
from rho_notebook.errors import Diagnostic, InvalidWorkflow
from rho_notebook.model.agent import AgentDefinition, AgentOrigin
from rho_notebook.model.spelling import meant

__all__ = ["AGENT_ID_PATTERN", "FRONTMATTER_KEYS", "is_agent_id", "parse_agent_definition"]

AGENT_ID_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
"""Agent ids: lowercase ASCII letters and digits in runs joined by single hyphens (1-64 chars)."""

FRONTMATTER_KEYS: tuple[str, ...] = (
    "id",
    "description",
    "runtime",
    "prompt",
    "model-policy",
    "model",
    "provider",
    "auth",
    "reasoning",
    "tools",
    "inherit_claude_config",
)
"""The only keys an agent frontmatter may contain."""

_Runtime = Literal["rho", "claude-cli"]
_Prompt = Literal["extend", "replace"]
_Policy = Literal["inherit", "prefer", "require", "select"]
_Reasoning = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]

_RUNTIMES: tuple[_Runtime, ...] = ("rho", "claude-cli")
_PROMPTS: tuple[_Prompt, ...] = ("extend", "replace")
_POLICIES: tuple[_Policy, ...] = ("inherit", "prefer", "require", "select")
_REASONING: tuple[_Reasoning, ...] = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
_CLAUDE_EFFORT = "low, medium, high, xhigh, max"

_FENCE = "---"
_FENCE_LINE = 1
_MAX_ID = 64
_MAX_DESCRIPTION = 1024
_ID_RE = re.compile(AGENT_ID_PATTERN)
_ID_RULE = (
    "1-64 lowercase ASCII letters and digits joined by single hyphens, with no leading, "
    "trailing or double hyphen (e.g. security-review)"
)
_KEY_HINTS = {
    "name": "id",
    "effort": "reasoning",
    "allowed-tools": "tools",
    "allowedTools": "tools",
}


@dataclass
class _Front:
    """The frontmatter after decoding: valid values, plus where each key was and what it said."""

    line: dict[str, int] = field(default_factory=dict)
    """Line of every schema key present, valid or not."""
    raw: dict[str, str] = field(default_factory=dict)
    """The text after the colon of every schema key present, for messages."""
    invalid: set[str] = field(default_factory=set)
    """Keys whose value broke their own rule (already reported)."""
    blind: bool = False
    """A line could not be attributed to a key, so "missing key" checks would guess."""
    id: str | None = None
    description: str | None = None
    runtime: _Runtime | None = None
    prompt: _Prompt | None = None
    policy: _Policy | None = None
    model: str | None = None
    provider: str | None = None
    auth: str | None = None
    reasoning: _Reasoning | None = None
    tools: Literal["all"] | tuple[str, ...] | None = None
    inherit_claude_config: bool | None = None


class _Report:
    """Diagnostics collected for one file."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.found: list[Diagnostic] = []

    def add(self, rule: str, line: int, message: str) -> None:
        self.found.append(Diagnostic(rule=rule, message=message, file=self.file, line=line, column=1))


def is_agent_id(value: str) -> bool:
    """True when ``value`` is a valid agent id (see :data:`AGENT_ID_PATTERN`)."""
    return len(value) <= _MAX_ID and _ID_RE.match(value) is not None


def parse_agent_definition(
    text: str,
    *,
    file: str,
    default_id: str,
    origin: AgentOrigin,
    content_sha256: str | None = None,
) -> AgentDefinition:
    """Parse and validate one agent definition file.

    Parameters
    ----------
    text
        The whole file: ``---``, frontmatter keys, ``---``, Markdown body.
    file
        Label used in diagnostics (a path, or a notebook cell label).
    default_id
        The id when the frontmatter has no ``id`` key (the file stem).
    origin
        Which catalog root supplied the file.
    content_sha256
        sha256 of the file's bytes, recorded on the definition.

    Returns
    -------
    AgentDefinition
        The frozen definition; ``model-policy`` and ``tools`` defaults are resolved.

    Raises
    ------
    InvalidWorkflow
        With one diagnostic per independent problem (rules ``agent.*``).
    """
    report = _Report(file)
    split = _split_file(text, report)
    if split is None:
        raise InvalidWorkflow(report.found)
    lines, body = split
    front = _read_frontmatter(lines, report)
    _check_rules(front, default_id=default_id, body=body, report=report)
    if report.found:
        raise InvalidWorkflow(sorted(report.found, key=lambda found: found.line or 0))
    return _build(front, default_id=default_id, body=body, origin=origin, content_sha256=content_sha256)


# -- file shape ---------------------------------------------------------------------------------


def _split_file(text: str, report: _Report) -> tuple[list[tuple[int, str]], str] | None:
    """Numbered frontmatter lines and the trimmed body, or None after reporting a fence problem."""
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    if lines[0] != _FENCE:
        report.add("agent.frontmatter", _FENCE_LINE, _opening_problem(text, lines[0]))
        return None
    for index in range(1, len(lines)):
        if lines[index] == _FENCE:
            numbered = [(number + 1, lines[number]) for number in range(1, index)]
            return numbered, "\n".join(lines[index + 1 :]).strip()
    report.add("agent.frontmatter", _FENCE_LINE, _unclosed_problem(lines))
    return None


def _opening_problem(text: str, first: str) -> str:
    if not text.strip():
        return (
            "the file is empty; an agent definition is a line '---', frontmatter keys "
            "(description is required), a closing '---', then the Markdown body"
        )
    if first.lstrip("\ufeff") == _FENCE:
        return "the file starts with a byte-order mark before '---'; save it as UTF-8 without BOM"
    if first.strip() == _FENCE:
        return f"line 1 is {first!r}; the opening fence must be exactly '---' with no spaces"
    return f"line 1 must be exactly '---' to open the frontmatter, found {preview(first)}"


def _unclosed_problem(lines: list[str]) -> str:
    message = (
        "the frontmatter opened by '---' on line 1 is never closed; add a line that is "
        "exactly '---' after the last key, before the Markdown body"
    )
    for index in range(1, len(lines)):
        if lines[index].strip() == _FENCE:
            return f"{message} (line {index + 1} is {lines[index]!r}, which has extra spaces)"
    return message


# -- frontmatter lines --------------------------------------------------------------------------


def _read_frontmatter(lines: list[tuple[int, str]], report: _Report) -> _Front:
    front = _Front()
    for number, line in lines:
        if not line.strip():
            continue
        key_value = _split_line(number, line, report)
        if key_value is None:
            front.blind = True
            continue
        key, raw = key_value
        if key not in FRONTMATTER_KEYS:
            report.add("agent.unknown-key", number, _unknown_key_message(key))
        elif key in front.line:
            report.add(
                "agent.duplicate-key",
                number,
                f"duplicate key {key!r}: first set on line {front.line[key]}; give each key once",
            )
        else:
            _record(front, key=key, raw=raw, number=number, report=report)
    return front


def _split_line(number: int, line: str, report: _Report) -> tuple[str, str] | None:
    """``(key, raw value)`` of a ``key: value`` line, or None after reporting its syntax."""
    if line[0] in " \t":
        problem = (
            f"line {number} is indented ({preview(line.strip())}); nested maps and block lists "
            "are not accepted: every line is 'key: value' at column 1, lists are inline, "
            f"e.g. {RHO_EXAMPLE}"
        )
    elif line.startswith("#"):
        problem = f"line {number} is a comment ({preview(line)}); agent frontmatter takes no comments"
    elif line.startswith("-"):
        problem = f"line {number} is a block list item ({preview(line)}); write lists inline, e.g. {RHO_EXAMPLE}"
    elif ":" not in line:
        problem = f"line {number} is {preview(line)}; expected 'key: value'"
    else:
        key, _, raw = line.partition(":")
        return key.strip(), raw.strip()
    report.add("agent.syntax", number, problem)
    return None


def _unknown_key_message(key: str) -> str:
    message = f"unknown key {key!r}; agent frontmatter accepts only: {', '.join(FRONTMATTER_KEYS)}"
    hint = _KEY_HINTS.get(key)
    if hint is None:
        hint = meant(key, FRONTMATTER_KEYS)
    return f"{message} (did you mean {hint!r}?)" if hint else message


def _record(front: _Front, *, key: str, raw: str, number: int, report: _Report) -> None:
    front.line[key] = number
    front.raw[key] = raw
    try:
        _decode(front, key, raw)
    except _ValueProblem as problem:
        front.invalid.add(key)
        report.add(f"agent.{key}", number, f"{key}: {problem}")


# -- values -------------------------------------------------------------------------------------


def _decode(front: _Front, key: str, raw: str) -> None:
    """Store the decoded value of one key on ``front``; raise :class:`_ValueProblem` if invalid."""
    if key == "tools":
        front.tools = decode_tools(raw)
        return
    attribute, check = _SCALAR_KEYS[key]
    setattr(front, attribute, check(decode_scalar(raw)))


def _check_id(value: str) -> str:
    if len(value) > _MAX_ID:
        raise _ValueProblem(f"{preview(value)} is {len(value)} characters long; ids are {_ID_RULE}")
    if not is_agent_id(value):
        raise _ValueProblem(f"{value!r} is not a valid id; ids are {_ID_RULE}")
    return value


def _check_description(value: str) -> str:
    text = value.strip()
    if not text:
        raise _ValueProblem(f"{value!r} is empty; describe what the agent does in 1-1024 characters")
    if len(text) > _MAX_DESCRIPTION:
        raise _ValueProblem(f"{preview(text)} is {len(text)} characters long after trimming; the limit is 1024")
    return text


def _check_name(value: str, what: str) -> str:
    if not value:
        raise _ValueProblem(f"'' is empty; expected {what}, non-empty with no whitespace")
    if any(char.isspace() for char in value):
        raise _ValueProblem(f"{value!r} contains whitespace; expected {what}, non-empty with no whitespace")
    return value


_SCALAR_KEYS: dict[str, tuple[str, Callable[[str], object]]] = {
    "id": ("id", _check_id),
    "description": ("description", _check_description),
    "runtime": ("runtime", partial(choose, allowed=_RUNTIMES)),
    "prompt": ("prompt", partial(choose, allowed=_PROMPTS)),
    "model-policy": ("policy", partial(choose, allowed=_POLICIES)),
    "reasoning": ("reasoning", partial(choose, allowed=_REASONING)),
    "inherit_claude_config": ("inherit_claude_config", decode_bool),
    "model": ("model", partial(_check_name, what="a model name (Rho also accepts an @alias)")),
    "provider": ("provider", partial(_check_name, what="a provider id such as xai")),
    "auth": ("auth", partial(_check_name, what="an auth profile id such as xai-oauth")),
}
"""Every frontmatter key but ``tools``: the :class:`_Front` attribute it sets and its value's check."""


# -- cross-rules --------------------------------------------------------------------------------


def _check_rules(front: _Front, *, default_id: str, body: str, report: _Report) -> None:
    _check_required(front, default_id=default_id, report=report)
    runtime: _Runtime | None = None if "runtime" in front.invalid else front.runtime or "rho"
    _check_model_policy(front, runtime=runtime, report=report)
    if runtime == "claude-cli":
        _check_claude(front, report)
    elif runtime == "rho":
        _check_rho(front, report)
    if front.prompt == "replace" and not body:
        report.add(
            "agent.prompt",
            front.line["prompt"],
            "prompt: 'replace' needs a non-empty Markdown body after the closing '---' (the body "
            "becomes the whole system prompt); write the body or use prompt: extend",
        )


def _check_required(front: _Front, *, default_id: str, report: _Report) -> None:
    if "id" not in front.line and not is_agent_id(default_id):
        report.add(
            "agent.id",
            _FENCE_LINE,
            f"id: the file name gives the id {default_id!r}, which is not a valid id; rename the "
            f"file or add an id key. Ids are {_ID_RULE}",
        )
    if "description" not in front.line and not front.blind:
        report.add(
            "agent.description",
            _FENCE_LINE,
            "description is required: add 'description: <what this agent does>' (1-1024 characters) to the frontmatter",
        )


def _check_model_policy(front: _Front, *, runtime: _Runtime | None, report: _Report) -> None:
    """model-policy against model / provider / auth (the table of the schema page)."""
    if "model-policy" in front.invalid:
        return
    has_model = "model" in front.line
    policy = front.policy or ("select" if has_model else "inherit")
    if policy != "inherit":
        if not has_model and not front.blind:
            report.add(
                "agent.model",
                front.line["model-policy"],
                f"model-policy: {policy!r} needs a model; add 'model: <name>' or use model-policy: inherit",
            )
        return
    # On claude-cli, provider and auth are rejected outright by _check_claude.
    keys = ("model",) if runtime == "claude-cli" else ("model", "provider", "auth")
    for key in keys:
        if key in front.line:
            report.add(f"agent.{key}", front.line[key], _inherit_conflict(front, key))


def _inherit_conflict(front: _Front, key: str) -> str:
    value = front.raw[key]
    if front.policy is None:
        return (
            f"{key}: {value!r} needs a model; without model the agent inherits the parent's "
            f"provider, model and auth. Add 'model: <name>' or remove {key}"
        )
    return (
        f"{key}: {value!r} is not allowed with model-policy: inherit "
        f"(line {front.line['model-policy']}), which keeps the parent's provider, model and "
        f"auth; remove {key} or use model-policy prefer, require or select with a model"
    )


def _check_claude(front: _Front, report: _Report) -> None:
    for key in ("provider", "auth"):
        if key in front.line:
            report.add(
                f"agent.{key}",
                front.line[key],
                f"{key}: {front.raw[key]!r} is not allowed with runtime: claude-cli ({key} is Rho "
                "only); remove it, Claude Code takes only model (passed to --model)",
            )
    if front.policy in ("prefer", "require"):
        report.add(
            "agent.model-policy",
            front.line["model-policy"],
            f"model-policy: {front.policy!r} is not supported with runtime: claude-cli; expected "
            "inherit or select (or omit model-policy and set model)",
        )
    if front.model is not None and front.model.startswith("@"):
        report.add(
            "agent.model",
            front.line["model"],
            f"model: {front.model!r} is a Rho model alias, which runtime: claude-cli cannot "
            "resolve; set a Claude model name such as opus or claude-opus-5",
        )
    if front.reasoning in ("off", "minimal"):
        report.add(
            "agent.reasoning",
            front.line["reasoning"],
            f"reasoning: {front.reasoning!r} is not a Claude Code effort level; with runtime: "
            f"claude-cli expected one of: {_CLAUDE_EFFORT} (omit to inherit Claude's default)",
        )
    if front.tools == "all":
        report.add(
            "agent.tools",
            front.line["tools"],
            "tools: 'all' is not allowed with runtime: claude-cli; list Claude Code tool entries, "
            f"e.g. {CLAUDE_EXAMPLE}, or omit tools for none",
        )
    elif front.tools is not None:
        for message in claude_tool_problems(front.tools):
            report.add("agent.tools", front.line["tools"], message)


def _check_rho(front: _Front, report: _Report) -> None:
    if front.inherit_claude_config:
        report.add(
            "agent.inherit_claude_config",
            front.line["inherit_claude_config"],
            "inherit_claude_config: true is only allowed with runtime: claude-cli (it loads the "
            "user's Claude Code settings); remove it or set runtime: claude-cli",
        )
    if front.tools is not None and front.tools != "all":
        for message in rho_tool_problems(front.tools):
            report.add("agent.tools", front.line["tools"], message)


# -- tool vocabularies --------------------------------------------------------------------------


# -- result -------------------------------------------------------------------------------------


def _build(
    front: _Front,
    *,
    default_id: str,
    body: str,
    origin: AgentOrigin,
    content_sha256: str | None,
) -> AgentDefinition:
    runtime = front.runtime or "rho"
    tools = front.tools
    if tools is None:
        tools = () if runtime == "claude-cli" else "all"
    if front.description is None:
        msg = "description passed validation but is missing"
        raise RuntimeError(msg)
    return AgentDefinition(
        id=front.id or default_id,
        description=front.description,
        runtime=runtime,
        prompt=front.prompt or "extend",
        model_policy=front.policy or ("select" if front.model is not None else "inherit"),
        model=front.model,
        provider=front.provider,
        auth=front.auth,
        reasoning=front.reasoning,
        tools=tools,
        inherit_claude_config=bool(front.inherit_claude_config),
        body=body,
        origin=origin,
        content_sha256=content_sha256,
    )
