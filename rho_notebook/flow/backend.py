"""Where a flow's model and tool calls go: the script tier inside a run, a callable outside one.

**Inside a run** (the runner put ``$RHO_SCRIPT_CHANNEL`` and ``$RHO_SCRIPT_TOKEN`` in the
environment: ``rho-notebook run FILE.py --flow NAME``, a ``%%flow`` cell) every call is a step of
the script tier under its flow key (:mod:`rho_notebook.flow.keys`), sent through the shim's keyed
entry (:func:`rho_notebook.script.channel.keyed_step`): a model call is a ``model`` step (its
messages, provider, model and tools in the step's digest), a catalog agent's call an ``agent``
step, a tool call a verified ``command`` step.
The runner journals each, replays it on resume, stops the run with
:class:`~rho_notebook.script.ReplayDivergenceError` when its inputs changed and halts with
:class:`~rho_notebook.script.DecisionRequired` when an earlier attempt never settled.

**Outside a run** (a plain kernel or interpreter) model calls go to the callable installed with
:func:`use_backend`, which takes a :class:`ModelCall` and returns a :class:`ModelReply` (or just
the reply text); the notebook extension installs one built on the service's completion client.
With none installed a call raises :class:`~rho_notebook.flow.FlowError` saying how to get one.
Tool commands run as a plain subprocess (no shell, the tool's timeout, output capped): nothing is
journaled or verified there, as OpenRath runs them in memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rho_notebook.flow._errors import FlowError
from rho_notebook.flow.session import Message, ToolCall
from rho_notebook.script.channel import CHANNEL_VARIABLE, TOKEN_VARIABLE, StepHandle
from rho_notebook.script.channel import keyed_step as _keyed_step

__all__ = ["ModelCall", "ModelReply", "Backend", "Tool", "use_backend", "in_run", "ask", "run_tool"]


@dataclass(frozen=True)
class ModelCall:
    """One model request of a flow, as an in-memory backend receives it."""

    key: str
    """The call's flow step key (``team.writer/f1#2``)."""
    messages: tuple[dict[str, Any], ...]
    """The messages, system prompt first (``{"role", "content", ...}`` as a model step takes them)."""
    provider: str | None
    """The provider's name in settings; None: the settings' default provider."""
    model: str | None
    """The model (a name or ``@alias``); None: the settings' default model."""
    tools: tuple[dict[str, Any], ...] | None = None
    """Tool definitions ``{"name", "description", "parameters"}`` offered, or None (tools disabled)."""
    agent: str | None = None
    """Set when the call is a catalog agent's (``AgentParam(agent=ID)``): the backend runs that
    agent on the conversation instead of a plain completion; ``messages`` hold no system prompt."""


@dataclass(frozen=True)
class ModelReply:
    """A model's answer: its text and the tool calls it asked for."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()


Backend = Callable[[ModelCall], "ModelReply | str"]
"""An in-memory model backend: :class:`ModelCall` -> :class:`ModelReply` or the reply text."""


@dataclass(frozen=True)
class Tool:
    """A tool an agent may call: a command run with the call's arguments as its last argv item.

    The model asks for ``name`` with a JSON object of arguments (described by ``parameters``, a
    JSON Schema); the call runs ``[*argv, ARGUMENTS_JSON]`` (no shell) as a verified command step
    inside a run. The arguments are model output, so the runner treats that item as data: a tool
    whose ``argv`` would read it as code (``["sh", "-c"]``, ``["python3", "-c"]``) is refused. The
    tool's stdout is the tool message the model sees next; a non-zero exit marks it as an error.
    """

    name: str
    description: str
    argv: tuple[str, ...]
    """The executable and its fixed arguments (``argv[0]`` is resolved and verified by the runner)."""
    parameters: dict[str, Any] | None = None
    """JSON Schema of the arguments object; None: ``{"type": "object"}``."""
    cwd: str | None = None
    """A ``//``-relative workspace folder inside a run (None: the run's working directory); outside
    a run the command runs in the current directory and this is not used."""
    timeout_seconds: int = 60
    max_output_bytes: int = 65536

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            msg = f"a tool needs a name, got {self.name!r}"
            raise ValueError(msg)
        if isinstance(self.argv, str) or not self.argv or not all(isinstance(a, str) for a in self.argv):
            msg = f"tool {self.name!r}: argv must be a non-empty sequence of strings, got {self.argv!r:.80}"
            raise TypeError(msg)
        object.__setattr__(self, "argv", tuple(self.argv))

    def spec(self) -> dict[str, Any]:
        """The definition offered to the model: ``{"name", "description", "parameters"}``."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters if self.parameters is not None else {"type": "object"},
        }


_LOCK = threading.Lock()
_backend: Backend | None = None


def use_backend(backend: Backend | None) -> Backend | None:
    """Install the backend that answers model calls outside a run (None removes it); the previous one.

    Inside a run the script tier answers every call, whatever is installed here."""
    global _backend
    if backend is not None and not callable(backend):
        msg = f"use_backend takes a callable ModelCall -> ModelReply | str, or None; got {type(backend).__name__}"
        raise TypeError(msg)
    with _LOCK:
        previous, _backend = _backend, backend
    return previous


def in_run() -> bool:
    """Whether this process is a run's script (the runner's channel is in the environment)."""
    return bool(os.environ.get(CHANNEL_VARIABLE)) and bool(os.environ.get(TOKEN_VARIABLE))


def ask(call: ModelCall, *, after: Sequence[str]) -> ModelReply:
    """Send one model (or catalog agent) call; its reply.

    Raises
    ------
    FlowError
        The call failed (the step's message says why), or no backend outside a run.
    RunStopped
        Inside a run: the runner stopped the run at this call (do not catch it).
    """
    if in_run():
        return _ask_runner(call, after=after)
    with _LOCK:
        backend = _backend
    if backend is None:
        msg = (
            f"flow call {call.key!r} has no model backend: outside a run, install one with "
            "rho_notebook.flow.use_backend(fn) (in a notebook, `%load_ext rho_notebook` installs one on "
            "the workspace's providers), or run the flow with `rho-notebook run FILE.py --flow NAME` "
            "or a %%flow cell"
        )
        raise FlowError(msg)
    reply = backend(call)
    if isinstance(reply, str):
        return ModelReply(content=reply)
    if not isinstance(reply, ModelReply):
        msg = f"the flow backend answered call {call.key!r} with {type(reply).__name__}, not a ModelReply or str"
        raise FlowError(msg)
    return reply


def _ask_runner(call: ModelCall, *, after: Sequence[str]) -> ModelReply:
    if call.agent is not None:
        args: dict[str, Any] = {"agent": call.agent, "prompt": transcript(call.messages), "output": None}
        handle = _keyed_step("agent", call.key, args, after=after)
    else:
        args = {
            "messages": list(call.messages),
            "provider": call.provider,
            "model": call.model,
            "tools": None if call.tools is None else list(call.tools),
            "output": None,
        }
        handle = _keyed_step("model", call.key, args, after=after)
    if not handle.ok:
        msg = f"flow call {call.key!r} ended in {handle.state}: {handle.message or 'no message'}"
        raise FlowError(msg)
    calls: tuple[ToolCall, ...] = ()
    if call.tools is not None and isinstance(handle.value, dict):
        calls = tuple(ToolCall.from_dict(item) for item in handle.value.get("tool_calls") or ())
    return ModelReply(content=_as_text(handle), tool_calls=calls)


def _as_text(handle: StepHandle) -> str:
    output = handle.output
    return output if isinstance(output, str) else json.dumps(output)


def run_tool(key: str, tool: Tool, call: ToolCall, *, asked_by: str) -> Message:
    """Run one tool call (key ``key``, asked for by the model step ``asked_by``); the tool message."""
    arguments = call.arguments
    if arguments is None:
        return _tool_message(call, f"tool {call.name!r}: the arguments are not a JSON object", error=True)
    text = call.arguments_json
    if in_run():
        args = {
            "argv": [*tool.argv, {"step": asked_by, "text": text}],
            "cwd": tool.cwd,
            "timeout_seconds": tool.timeout_seconds,
            "max_output_bytes": tool.max_output_bytes,
        }
        handle = _keyed_step("command", key, args, after=[asked_by])
        output = handle.output if isinstance(handle.output, str) else ""
        if handle.ok:
            return _tool_message(call, output, error=False)
        return _tool_message(call, "\n".join(p for p in (handle.message, output) if p), error=True)
    try:
        done = subprocess.run(
            [*tool.argv, text], capture_output=True, timeout=tool.timeout_seconds, check=False, shell=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return _tool_message(call, f"tool {call.name!r} did not run: {err}", error=True)
    output = done.stdout[: tool.max_output_bytes].decode("utf-8", "replace")
    if done.returncode != 0:
        stderr = done.stderr[: tool.max_output_bytes].decode("utf-8", "replace")
        return _tool_message(call, f"exit code {done.returncode}\n{output}{stderr}", error=True)
    return _tool_message(call, output, error=False)


def _tool_message(call: ToolCall, text: str, *, error: bool) -> Message:
    return Message("tool", text, tool_call_id=call.id, tool_name=call.name, is_error=error)


def transcript(messages: Sequence[dict[str, Any]]) -> str:
    """A conversation as plain text (``role: content`` blocks), for a prompt that takes text."""
    blocks = []
    for message in messages:
        text = str(message.get("content", ""))
        for item in message.get("tool_calls") or ():
            text += f"\n[called tool {item.get('name')} with {json.dumps(item.get('arguments'))}]"
        blocks.append(f"{message.get('role')}: {text}")
    return "\n\n".join(blocks)
