"""The executor for command and shell nodes: render argv, verified launch, artifacts, stdout_json.

Artifacts of an attempt: ``stdout`` and ``stderr`` (retained bytes; created on the first byte) and,
for nodes with an output schema, ``value.json`` (the validated value). The exit record is journaled
with ``node_finished``; when the attempt has a folder anyway it also gets a copy, ``exit.json``. A
silent command that succeeds leaves no folder at all: creating three directories was the largest
cost of a launch on the filesystems we measured (bench/run_overhead.py).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from rho_notebook.errors import RhoError
from rho_notebook.exec.base import AttemptContext, AttemptResult, UnavailableValue, node_environment, render_template
from rho_notebook.exec.process import ProcessResult, ProcessSpec, run_process
from rho_notebook.model.graph import CommandNode, ShellNode
from rho_notebook.model.schema import validate_value
from rho_notebook.model.state import NodeState
from rho_notebook.store.files import atomic_write_json, json_bytes

__all__ = ["CommandExecutor", "process_facts", "render_argv"]


def render_argv(node: CommandNode | ShellNode, outputs: Any) -> tuple[str, ...]:
    """The exact argv a command or shell node will launch (references rendered to single elements)."""
    if isinstance(node, ShellNode):
        return (node.executable.file.path.rsplit("/", 1)[-1], *node.arguments, node.command)
    return tuple(p if isinstance(p, str) else render_template(p, outputs) for p in node.argv)


def process_facts(node: CommandNode | ShellNode, outputs: Any) -> dict[str, Any]:
    """The frozen process facts a person or a hook decides on: executable and digest, argv, cwd."""
    exe = node.executable
    return {
        "executable": exe.file.path,
        "sha256": exe.file.sha256,
        "interpreters": [{"path": i.path, "sha256": i.sha256} for i in exe.interpreters],
        "argv": list(render_argv(node, outputs)),
        "cwd": node.cwd,
    }


class _OutputNotStored(Exception):
    """A retained output chunk could not be written to its stream file; run_process then stops the
    process group (a sink failure), and the attempt ends abnormally."""


class _FileSink:
    """Writes a stream's retained bytes to its artifact file, created on the first byte (a silent
    command leaves no empty files behind, which keeps a launch to the syscalls it needs)."""

    def __init__(self, stream: str, ctx: AttemptContext) -> None:
        self.fd: int | None = None
        self.created = False
        self.stream = stream
        self.ctx = ctx
        self.kept = bytearray() if stream == "stdout" else None

    async def __call__(self, chunk: bytes) -> None:
        try:
            if self.fd is None:
                folder = await self.ctx.directory()
                self.fd = os.open(
                    folder / self.stream, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
                )
                self.created = True
            view = memoryview(chunk)
            while view:
                view = view[os.write(self.fd, view) :]
        except (RhoError, OSError) as err:
            detail = err.message if isinstance(err, RhoError) else (err.strerror or str(err))
            raise _OutputNotStored(f"{self.stream} could not be stored ({detail})") from err
        if self.kept is not None:
            self.kept += chunk
        if self.ctx.on_output is not None:
            await self.ctx.on_output(self.stream, chunk)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _exit_record(result: ProcessResult) -> dict[str, Any]:
    return {
        "kind": result.kind,
        "code": result.exit_code,
        "signal": result.signal,
        "pid": result.pid,
        "stdout_bytes": result.stdout_bytes,
        "stderr_bytes": result.stderr_bytes,
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "duration_ms": round(result.duration_ms, 3),
        "detail": result.detail,
    }


class CommandExecutor:
    """Runs command and shell nodes as verified, supervised process trees."""

    def __init__(self, *, kill_grace_seconds: float = 2.0) -> None:
        self.kill_grace_seconds = kill_grace_seconds

    def _argv(self, ctx: AttemptContext) -> tuple[str, ...]:
        node = ctx.node
        if not isinstance(node, (CommandNode, ShellNode)):
            msg = f"CommandExecutor cannot run a {node.kind} node"
            raise TypeError(msg)
        return render_argv(node, ctx.outputs)

    def _spec(self, ctx: AttemptContext, argv: tuple[str, ...]) -> ProcessSpec:
        node = ctx.node
        if not isinstance(node, (CommandNode, ShellNode)):
            msg = f"CommandExecutor cannot run a {node.kind} node"
            raise TypeError(msg)
        cwd = ctx.workspace / node.cwd[2:] if node.cwd != "//" else ctx.workspace
        frozen = [node.executable.file.path, *(i.path for i in node.executable.interpreters)]
        identities = {p: ctx.identities[p] for p in frozen if p in ctx.identities}
        cwd_identity = ctx.identities.get(node.cwd)
        return ProcessSpec.model_validate(
            {
                "argv": argv,
                "executable": node.executable,
                "executable_identities": identities,
                "cwd": cwd,
                "cwd_identity": cwd_identity,
                "env": node_environment(ctx.environment, ctx.source_environ, run_id=ctx.run_id, node=node.name),
                "timeout_seconds": node.timeout_seconds,
                "max_output_bytes": node.max_output_bytes,
                "workspace": ctx.workspace,
                "kill_grace_seconds": self.kill_grace_seconds,
            }
        )

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        try:
            argv = self._argv(ctx)
        except UnavailableValue as err:
            return AttemptResult(state=NodeState.FAILURE, message=f"cannot render argv: {err}")
        stdout = _FileSink("stdout", ctx)
        stderr = _FileSink("stderr", ctx)
        try:
            result = await run_process(
                self._spec(ctx, argv),
                stdout_sink=stdout,
                stderr_sink=stderr,
                cancel=ctx.cancel,
                on_started=ctx.on_started,
                handles=ctx.verified,
            )
        except _OutputNotStored as err:
            detail = f"{err}; the process group was stopped"
            record = {"kind": "abnormal", "code": None, "signal": None, "detail": detail}
            return AttemptResult(state=NodeState.FAILURE, message=detail, exit=record)
        except RhoError as err:
            record = {"kind": "not_started", "code": None, "signal": None, "detail": err.message}
            return AttemptResult(state=NodeState.FAILURE, message=err.message, exit=record)
        finally:
            stdout.close()
            stderr.close()
        record = _exit_record(result)
        artifacts = {sink.stream: sink.stream for sink in (stdout, stderr) if sink.created}
        attempt = await self._judge(ctx, result, stdout, record, artifacts)
        if ctx.has_directory():
            # the journal's node_finished holds the exit durably; a folder that exists anyway
            # (output, value) also gets a copy so that it describes itself
            ctx.write_later("exit.json", json_bytes(record, compact=True))
            attempt.artifacts["exit"] = "exit.json"
        return attempt

    async def _judge(
        self,
        ctx: AttemptContext,
        result: ProcessResult,
        stdout: _FileSink,
        record: dict[str, Any],
        artifacts: dict[str, str],
    ) -> AttemptResult:
        node = ctx.node
        if result.kind == "cancelled":
            return AttemptResult(state=NodeState.CANCELLATION, message="cancelled", exit=record, artifacts=artifacts)
        if result.kind == "timeout":
            return AttemptResult(
                state=NodeState.FAILURE,
                message=f"timed out after {node.timeout_seconds} s; the process tree was stopped",
                exit=record,
                artifacts=artifacts,
            )
        if result.kind == "signal":
            return AttemptResult(
                state=NodeState.FAILURE, message=f"killed by signal {result.signal}", exit=record, artifacts=artifacts
            )
        if result.kind != "exit":
            return AttemptResult(
                state=NodeState.FAILURE, message=f"ended abnormally: {result.detail}", exit=record, artifacts=artifacts
            )
        if result.exit_code != 0:
            return AttemptResult(
                state=NodeState.FAILURE,
                message=f"exited with code {result.exit_code}",
                exit=record,
                artifacts=artifacts,
            )
        if node.output is None:
            return AttemptResult(state=NodeState.SUCCESS, exit=record, artifacts=artifacts)
        return await self._typed(ctx, stdout, record, artifacts)

    async def _typed(
        self, ctx: AttemptContext, stdout: _FileSink, record: dict[str, Any], artifacts: dict[str, str]
    ) -> AttemptResult:
        node = ctx.node
        if record["stdout_truncated"]:
            msg = f"stdout_json: stdout was truncated at max_output_bytes={node.max_output_bytes}; the complete value could not be parsed"
            return AttemptResult(state=NodeState.FAILURE, message=msg, exit=record, artifacts=artifacts)
        raw = bytes(stdout.kept or b"")
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            msg = f"stdout_json: stdout is not one JSON value ({err})"
            return AttemptResult(state=NodeState.FAILURE, message=msg, exit=record, artifacts=artifacts)
        if node.output is None:
            return AttemptResult(state=NodeState.SUCCESS, exit=record, artifacts=artifacts)
        problems = validate_value(node.output, value)
        if problems:
            msg = "stdout_json: output does not match the schema: " + "; ".join(problems[:5])
            return AttemptResult(state=NodeState.FAILURE, message=msg, exit=record, artifacts=artifacts)
        await asyncio.to_thread(atomic_write_json, await ctx.directory() / "value.json", value)
        artifacts["value"] = "value.json"
        return AttemptResult(state=NodeState.SUCCESS, exit=record, value=value, artifacts=artifacts)
