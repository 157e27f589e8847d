"""The command operation, and the executor for command and shell nodes.

A command node, a shell node, an item-graph command step and a script's command step all run one
:class:`~rho_notebook.exec.supervised.ProcessOperation` through :func:`run_command` (verified launch,
supervision, artifacts); :func:`command_facts` is what a person or a hook decides on before it.

Artifacts of an attempt: ``stdout`` and ``stderr`` (retained bytes; created on the first byte) and,
for nodes with an output schema, ``value.json`` (the validated value). The exit record is journaled
with ``node_finished``; when the attempt has a folder anyway it also gets a copy, ``exit.json``. A
silent command that succeeds leaves no folder at all: creating three directories was the largest
cost of a launch on the filesystems we measured (bench/run_overhead.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from rho_notebook.errors import UnavailableValue
from rho_notebook.exec.base import Attempt, AttemptContext, AttemptResult, render_template
from rho_notebook.exec.supervised import Ended, Judge, ProcessOperation, supervise
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import CommandNode, FrozenExecutable, ShellNode
from rho_notebook.model.schema import validate_value
from rho_notebook.model.state import NodeState
from rho_notebook.store.files import atomic_write_json
from rho_notebook.store.layout import VALUE_FILE

__all__ = [
    "CommandExecutor",
    "command_facts",
    "command_operation",
    "frozen_process_facts",
    "process_facts",
    "render_argv",
    "run_command",
]


def render_argv(node: CommandNode | ShellNode, outputs: Any) -> tuple[str, ...]:
    """The exact argv a command or shell node will launch (references rendered to single elements)."""
    if isinstance(node, ShellNode):
        return (node.executable.file.path.rsplit("/", 1)[-1], *node.arguments, node.command)
    return tuple(p if isinstance(p, str) else render_template(p, outputs) for p in node.argv)


def process_facts(node: CommandNode | ShellNode, outputs: Any) -> dict[str, Any]:
    """The frozen process facts a person or a hook decides on: executable and digest, argv, cwd."""
    return frozen_process_facts(node.executable, render_argv(node, outputs), node.cwd)


def frozen_process_facts(exe: FrozenExecutable, argv: Sequence[str], cwd: str) -> dict[str, Any]:
    """The facts of one launch of ``exe`` (and its interpreters) with ``argv`` in ``cwd``: what a
    supervised launch asks a person about, for command nodes and item-graph command steps."""
    return {
        "executable": exe.file.path,
        "sha256": exe.file.sha256,
        "interpreters": [{"path": i.path, "sha256": i.sha256} for i in exe.interpreters],
        "argv": list(argv),
        "cwd": cwd,
    }


def command_facts(operation: ProcessOperation) -> dict[str, Any]:
    """The facts of the launch ``operation`` will make (:func:`frozen_process_facts`)."""
    return frozen_process_facts(operation.executable, operation.argv, operation.cwd)


def command_operation(node: CommandNode | ShellNode, argv: tuple[str, ...]) -> ProcessOperation:
    """The launch a command or shell node makes with its rendered ``argv``."""
    return ProcessOperation(
        name=node.name,
        executable=node.executable,
        argv=argv,
        cwd=node.cwd,
        timeout_seconds=node.timeout_seconds,
        max_output_bytes=node.max_output_bytes,
        output=node.output,
    )


async def run_command(
    attempt: Attempt, operation: ProcessOperation, *, judge: Judge | None = None, kill_grace_seconds: float = 2.0
) -> AttemptResult:
    """Launch ``operation`` once; ``judge`` decides an exit (default: :func:`judge_exit`)."""
    return await supervise(attempt, operation, judge=judge or judge_exit, kill_grace_seconds=kill_grace_seconds)


async def judge_exit(ended: Ended) -> AttemptResult:
    """A command's exit: success iff code 0; with an output schema, stdout must be one JSON value
    matching it (kept as ``value.json``)."""
    if ended.result.exit_code != 0:
        return ended.failure(f"exited with code {ended.result.exit_code}")
    operation = ended.operation
    if operation.output is None:
        return ended.success(UNAVAILABLE)
    if ended.record["stdout_truncated"]:
        msg = f"stdout_json: stdout was truncated at max_output_bytes={operation.max_output_bytes}; the complete value could not be parsed"
        return ended.failure(msg)
    raw = bytes(ended.stdout.kept or b"")
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return ended.failure(f"stdout_json: stdout is not one JSON value ({err})")
    problems = validate_value(operation.output, value)
    if problems:
        return ended.failure("stdout_json: output does not match the schema: " + "; ".join(problems[:5]))
    await asyncio.to_thread(atomic_write_json, await ended.ctx.directory() / VALUE_FILE, value)
    ended.artifacts["value"] = VALUE_FILE
    return ended.success(value)


class CommandExecutor:
    """Runs command and shell nodes as verified, supervised process trees."""

    def __init__(self, *, kill_grace_seconds: float = 2.0) -> None:
        self.kill_grace_seconds = kill_grace_seconds

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        node = ctx.node
        if not isinstance(node, (CommandNode, ShellNode)):
            msg = f"CommandExecutor cannot run a {node.kind} node"
            raise TypeError(msg)
        try:
            argv = render_argv(node, ctx.outputs)
        except UnavailableValue as err:
            return AttemptResult(state=NodeState.FAILURE, message=f"cannot render argv: {err}")
        return await run_command(
            ctx, command_operation(node, argv), judge=judge_exit, kill_grace_seconds=self.kill_grace_seconds
        )

    async def judge(self, ended: Ended) -> AttemptResult:
        """How a command node's process that exited ended (:func:`judge_exit`)."""
        return await judge_exit(ended)
