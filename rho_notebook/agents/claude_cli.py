"""The claude-cli runtime: run Claude Code (``claude -p``) as a supervised subprocess.

A claude-cli node is always mutating. The frozen definition maps onto ``claude`` flags as Rho's
schema page says:

- ``tools`` entries: their base names go to ``--tools`` (always passed, empty for none, so Claude
  does not fall back to its default tool set), every entry (specifiers included, one argv element
  each) to ``--allowedTools``; ``Task`` is never offered (``--disallowedTools Task``).
- ``model`` to ``--model`` (omitted = Claude's default); ``reasoning`` to ``--effort``.
- ``prompt: extend`` with a body: ``--append-system-prompt-file``; ``replace``:
  ``--system-prompt-file``. The file is ``system-prompt.txt`` in the attempt directory, so prompt
  text never appears on argv. The task goes to stdin.
- Headless, never prompting: ``--permission-mode dontAsk`` with ``--setting-sources ''`` and
  ``--strict-mcp-config``, so user/project Claude settings, hooks and MCP servers stay unloaded.
  Rho runs dontAsk only when the declared tools keep the child inside the run's approval class;
  under rho_notebook's ``auto`` mode every class is allowed, so what remains is: every base name
  must be a known Claude built-in (unknown, plugin and MCP names fail closed) and
  ``inherit_claude_config: true`` (which would load hooks and MCP servers) fails closed.
- ``--output-format json``: one result object whose ``result`` is the final answer.

``claude`` is looked up on the run's PATH when the attempt starts; if it is missing the node
fails with a message saying so.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from rho_notebook.agents._process import run_supervised
from rho_notebook.agents.provider import CallMeter, Usage
from rho_notebook.agents.session import Session
from rho_notebook.errors import AgentFailure
from rho_notebook.model.agent import AgentDefinition

__all__ = ["CLAUDE_BUILTIN_TOOLS", "CLAUDE_ENV_PREFIXES", "claude_arguments", "run_claude"]

CLAUDE_BUILTIN_TOOLS: frozenset[str] = frozenset(
    {
        "read",
        "glob",
        "grep",
        "lsp",
        "webfetch",
        "websearch",
        "edit",
        "write",
        "notebookedit",
        "bash",
        "powershell",
        "monitor",
        "skill",
    }
)
"""Claude Code built-ins (lower case) with a known capability class; others fail closed."""

CLAUDE_ENV_PREFIXES: tuple[str, ...] = ("ANTHROPIC_", "CLAUDE_", "XDG_")
"""Variables ``claude`` receives on top of the run's environment allowlist (its own login)."""

_STDOUT_FLOOR = 1024 * 1024
_STDERR_TAIL = 2000


def claude_arguments(definition: AgentDefinition, *, prompt_file: Path | None, max_turns: int) -> list[str]:
    """The arguments after the program name (see the module docstring for the mapping)."""
    _check_tools(definition)
    entries = [] if definition.tools == "all" else list(definition.tools)
    entries = [e for e in entries if _base(e).lower() != "task"]
    bases = list(dict.fromkeys(_base(e) for e in entries))
    args = [
        "-p",
        "--output-format",
        "json",
        "--permission-mode",
        "dontAsk",
        "--disallowedTools",
        "Task",
        "--setting-sources",
        "",
        "--strict-mcp-config",
        "--no-session-persistence",
        "--max-turns",
        str(max_turns),
    ]
    if definition.model is not None:
        args += ["--model", definition.model]
    if definition.reasoning is not None:
        args += ["--effort", definition.reasoning]
    args += ["--tools", ",".join(bases)]
    if entries:
        args += ["--allowedTools", *entries]
    if prompt_file is not None:
        flag = "--system-prompt-file" if definition.prompt == "replace" else "--append-system-prompt-file"
        args += [flag, str(prompt_file)]
    return args


async def run_claude(
    definition: AgentDefinition,
    *,
    task: str,
    workspace: Path,
    attempt_dir: Path,
    environ: Mapping[str, str],
    session: Session,
    max_turns: int,
    max_output_bytes: int,
    on_started: Callable[[int], Awaitable[None]],
    calls: CallMeter | None = None,
) -> str:
    """Run ``claude`` to its final answer.

    ``claude`` runs its own loop and reports usage only at the end, so ``calls`` is asked once
    before it starts (a budget may refuse the whole attempt) and told the totals once it printed
    its result: one ``model_called`` record, provider ``claude-cli``.

    Raises
    ------
    AgentFailure
        ``config`` (claude not on PATH, tools that fail closed), ``claude`` (non-zero exit or an
        error result), ``malformed`` (stdout is not Claude's JSON result).
    """
    program = shutil.which("claude", path=environ.get("PATH", os.defpath))
    if program is None:
        msg = (
            "agent runtime claude-cli needs the `claude` program (Claude Code), but it is not on the "
            "PATH of this run; install Claude Code or put it on PATH"
        )
        raise AgentFailure(msg, kind="config")
    prompt_file: Path | None = None
    if definition.body:
        prompt_file = attempt_dir / "system-prompt.txt"
        await asyncio.to_thread(prompt_file.write_text, definition.body, encoding="utf-8")
    args = claude_arguments(definition, prompt_file=prompt_file, max_turns=max_turns)
    session.system = definition.body
    session.model = definition.model
    session.tools = tuple(definition.tools) if definition.tools != "all" else ()
    session.extra["argv"] = [program, *args]
    session.extra["task"] = task
    if calls is not None:
        await calls.before_call(max_output_tokens=None)
    began = time.monotonic()
    try:
        outcome = await run_supervised(
            [program, *args],
            cwd=workspace,
            env=environ,
            stdin=task.encode(),
            timeout=None,
            max_bytes=max(max_output_bytes * 4, _STDOUT_FLOOR),
            on_started=on_started,
        )
    except OSError as err:
        raise AgentFailure(f"cannot start {program}: {err.strerror or err}", kind="claude") from None
    stderr = outcome.stderr.decode("utf-8", errors="replace")[-_STDERR_TAIL:]
    session.extra["exit"] = {"code": outcome.exit_code, "signal": outcome.signal, "pid": outcome.pid}
    session.extra["stderr"] = stderr
    result = _result_object(outcome.stdout)
    session.extra["result"] = result
    if result is not None:
        _record_usage(session, result)
        if calls is not None:
            await calls.after_call(_call(session, result, began))
    if outcome.exit_code != 0 or result is None or result.get("is_error") is True:
        raise _failure(outcome.exit_code, result, signal=outcome.signal, stderr=stderr, stdout=outcome.stdout)
    answer = result.get("result")
    if not isinstance(answer, str):
        msg = "claude printed a JSON result without a text `result` field"
        raise AgentFailure(msg, kind="malformed")
    return answer


def _check_tools(definition: AgentDefinition) -> None:
    if definition.inherit_claude_config:
        msg = (
            f"agent {definition.id!r} sets inherit_claude_config: true, which would load the user's Claude "
            "settings, hooks and MCP servers into a run that cannot prompt; rho_notebook fails closed. Set it "
            "to false"
        )
        raise AgentFailure(msg, kind="config")
    entries = () if definition.tools == "all" else definition.tools
    unknown = [e for e in entries if _base(e).lower() not in CLAUDE_BUILTIN_TOOLS and _base(e).lower() != "task"]
    if unknown:
        msg = (
            f"agent {definition.id!r} lists Claude tools {', '.join(map(repr, unknown))} whose effects are "
            "not known (plugin, MCP or unknown names); headless claude-cli runs fail closed on them. "
            f"Use Claude built-ins: {', '.join(sorted(CLAUDE_BUILTIN_TOOLS))}"
        )
        raise AgentFailure(msg, kind="config")


def _base(entry: str) -> str:
    return entry.split("(", 1)[0]


def _result_object(stdout: bytes) -> dict[str, Any] | None:
    """Claude's JSON result: the whole stdout, or its last JSON line."""
    text = stdout.decode("utf-8", errors="replace").strip()
    for candidate in (text, *reversed(text.splitlines())):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and ("result" in value or value.get("type") == "result"):
            return value
    return None


def _record_usage(session: Session, result: dict[str, Any]) -> None:
    usage = result.get("usage")
    if isinstance(usage, dict):
        tokens = [usage.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
        output = usage.get("output_tokens")
        cached = usage.get("cache_read_input_tokens")
        session.usage = Usage(
            input_tokens=sum(t for t in tokens if isinstance(t, int)),
            output_tokens=output if isinstance(output, int) else 0,
            cached_tokens=cached if isinstance(cached, int) else None,
        )
    turns = result.get("num_turns")
    count = turns if isinstance(turns, int) and turns > 0 else 1
    session.turns = [{"turn": n} for n in range(1, count + 1)]
    model_usage = result.get("modelUsage")
    if session.model is None and isinstance(model_usage, dict) and len(model_usage) == 1:
        session.model = next(iter(model_usage))


def _call(session: Session, result: dict[str, Any], began: float) -> dict[str, Any]:
    """The ``model_called`` fields of a whole claude run (its totals, as one call)."""
    record: dict[str, Any] = {
        "provider": "claude-cli",
        "model": session.model or "",
        **session.usage.reported_fields(),
        "retries": 0,
        "tool_calls": 0,
        "seconds": round(time.monotonic() - began, 6),
    }
    return record


def _failure(
    code: int | None, result: dict[str, Any] | None, *, signal: int | None, stderr: str, stdout: bytes
) -> AgentFailure:
    if result is not None and (code == 0 or result.get("is_error") is True):
        detail = result.get("result") if isinstance(result.get("result"), str) else result.get("subtype")
        return AgentFailure(f"claude reported an error ({result.get('subtype', 'error')}): {detail}", kind="claude")
    if code == 0:
        start = stdout.decode("utf-8", errors="replace").strip()[:120]
        return AgentFailure(
            f"claude exited 0 but its output is not a JSON result; it starts {start!r}", kind="malformed"
        )
    how = f"was killed by signal {signal}" if signal is not None else f"exited with code {code}"
    tail = " ".join(stderr.split())[-400:]
    return AgentFailure(f"claude {how}" + (f": {tail}" if tail else ""), kind="claude")
