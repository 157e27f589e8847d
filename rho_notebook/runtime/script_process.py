"""The script's own process in a script run: its launch facts, its process spec, its logs, and
what its end means for the run.

The script is one launch per execution (kind ``script``, node :data:`SCRIPT_NODE`), started in
the frozen interpreter with the harness in script mode, supervised like a Python node (verified
interpreter, process group, timeout, bounded output). Its stdout and stderr are appended to
``<run>/script/stdout|stderr`` across executions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rho_notebook.errors import PlanError
from rho_notebook.exec.base import EnvironmentSnapshot, node_environment
from rho_notebook.exec.process import ProcessResult, ProcessSpec
from rho_notebook.exec.python import materialise
from rho_notebook.exec.supervised import exit_record
from rho_notebook.model.graph import Graph, ScriptSpec
from rho_notebook.model.identity import FileIdentity
from rho_notebook.policy.gate import Launch
from rho_notebook.policy.permission import LaunchKind
from rho_notebook.source.pymodules import raised_in_modules
from rho_notebook.store.files import atomic_write_json

__all__ = [
    "SCRIPT_NODE",
    "ScriptLogs",
    "exit_of",
    "exited_ok",
    "outcome_of",
    "script_facts",
    "script_launch",
    "script_process_spec",
    "script_spec",
]

SCRIPT_NODE = "(script)"
"""The name approval requests and orphan records use for the script's own process (never a step
key: those follow the node-name grammar)."""

_STDERR_TAIL = 4096

_REQUEST_FILE = "request.json"
"""The harness's request, in ``<run>/script/``: what to run and where to import from."""

_PACKAGE_DIR = Path(__file__).resolve().parents[2]
"""The folder holding this ``rho_notebook`` package: the script's interpreter imports the
standard-library ``rho_notebook.script`` from there when it has no rho_notebook of its own."""


def script_facts(graph: Graph) -> dict[str, Any]:
    """The frozen launch facts of a script run: what ``supervised`` asks a person about.

    Raises
    ------
    PlanError
        The graph has no script or no frozen interpreter.
    KeyError
        The script's module is not frozen in the graph.
    """
    spec, runtime = graph.script, graph.python
    if spec is None or runtime is None:
        msg = f"script run {graph.name!r} has no frozen script or interpreter; plan again"
        raise PlanError(msg)
    return {
        "script": spec.module,
        "sha256": graph.python_module(spec.module).sha256,
        "interpreter": runtime.interpreter.file.path,
        "interpreter_sha256": runtime.interpreter.file.sha256,
        "cwd": spec.cwd,
        "environment": {"names": list(graph.environment.names), "prefixes": list(graph.environment.prefixes)},
    }


def script_spec(graph: Graph) -> ScriptSpec:
    """The graph's script (a TypeError when it has none: only script runs get here)."""
    spec = graph.script
    if spec is None:
        msg = "ScriptDriver needs a graph with a script"
        raise TypeError(msg)
    return spec


def script_launch(graph: Graph) -> Launch:
    """The script's own process as a launch (one per execution)."""
    return Launch(
        kind=LaunchKind.SCRIPT, node=SCRIPT_NODE, attempt=1, approval_seconds=float(script_spec(graph).timeout_seconds)
    )


def script_process_spec(
    graph: Graph,
    run_folder: Path,
    *,
    run_id: str,
    workspace: Path,
    identities: Mapping[str, FileIdentity],
    environ: EnvironmentSnapshot,
    channel_environment: dict[str, str],
) -> ProcessSpec:
    """How to start the script: the harness in script mode in the frozen interpreter, with the
    request it reads written to ``<run>/script/request.json`` (blocking: call it in a thread).

    Raises
    ------
    PlanError
        No frozen interpreter.
    KeyError
        The script's module is not frozen (plan again).
    """
    spec = script_spec(graph)
    runtime = graph.python
    if runtime is None:
        msg = f"script run {graph.name!r} has no frozen interpreter; plan again"
        raise PlanError(msg)
    folder = materialise(run_folder, graph)
    graph.python_module(spec.module)  # frozen, or KeyError: plan again
    request = {
        "script": spec.module,
        "sys_path": list(runtime.sys_path),
        "site_dirs": list(runtime.site_dirs),
        "package_dir": str(_PACKAGE_DIR),
    }
    if spec.flow is not None:  # a flow run (docs/flows.md): the harness runs this workflow
        request["flow"] = spec.flow
    script_dir = run_folder / "script"
    atomic_write_json(script_dir / _REQUEST_FILE, request, durable=False)
    env = node_environment(graph.environment, environ, run_id=run_id, node=SCRIPT_NODE)
    env.update(channel_environment)
    executable = runtime.interpreter
    frozen = [executable.file.path, *(i.path for i in executable.interpreters)]
    return ProcessSpec.model_validate(
        {
            "argv": (
                executable.file.path,
                "-I",
                str(folder / "_rho_harness.py"),
                "--script",
                str(folder / "modules"),
                str(script_dir / _REQUEST_FILE),
            ),
            "executable": executable,
            "executable_identities": {p: identities[p] for p in frozen if p in identities},
            "cwd": workspace / spec.cwd[2:] if spec.cwd != "//" else workspace,
            "cwd_identity": identities.get(spec.cwd),
            "env": env,
            "timeout_seconds": spec.timeout_seconds,
            "max_output_bytes": spec.max_output_bytes,
            "workspace": workspace,
        }
    )


class _LogSink:
    """Appends one stream of the script process to ``<run>/script/<stream>``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.tail = b""

    async def __call__(self, chunk: bytes) -> None:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        view = memoryview(chunk)
        while view:
            view = view[os.write(self.fd, view) :]
        self.tail = (self.tail + chunk)[-_STDERR_TAIL:]


class ScriptLogs:
    """The script process's stdout and stderr logs, opened on their first byte and closed together."""

    def __init__(self, script_dir: Path, *, modules: Path | None = None) -> None:
        self.stdout = _LogSink(script_dir / "stdout")
        self.stderr = _LogSink(script_dir / "stderr")
        self.modules = modules
        """Where the run's workspace modules are frozen (``<run>/python/modules``), to name the
        script's line that raised."""

    def close(self) -> None:
        for sink in (self.stdout, self.stderr):
            if sink.fd is not None:
                os.close(sink.fd)
                sink.fd = None

    def last_line(self) -> str:
        """The last non-blank line of stderr (at most 500 characters)."""
        text = self.stderr.tail.decode("utf-8", "replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1][:500] if lines else ""

    def raised_at(self) -> str:
        """Where the script's traceback (in the stderr tail) last was in a workspace module,
        ``//review.py:12``; empty when it shows none."""
        if self.modules is None:
            return ""
        text = self.stderr.tail.decode("utf-8", "replace")
        _, frames = raised_in_modules(text.splitlines(), self.modules)
        return f"{frames[-1][0]}:{frames[-1][1]}" if frames else ""


def exit_of(result: ProcessResult | str) -> dict[str, Any]:
    """The ``script_exited`` exit record; ``result`` is why the script did not start when it did not."""
    if isinstance(result, str):
        return {"kind": "not_started", "code": None, "signal": None, "detail": result}
    return exit_record(result)


def exited_ok(result: ProcessResult | str) -> bool:
    return not isinstance(result, str) and result.kind == "exit" and result.exit_code == 0


def outcome_of(result: ProcessResult | str, logs: ScriptLogs, *, timeout_seconds: float) -> tuple[str, str]:
    """(outcome, message) of an execution whose script ended with ``result`` (nothing halted,
    diverged or was cancelled): the outcome follows the script, as CAO's does (issue 33). A script
    that exited 0 succeeded, whatever its steps did: a step that failed or was denied while the
    script went on was the script's to handle (it is shown ``failure (handled)``); a script that
    raised, exited non-zero, was killed or timed out failed."""
    if isinstance(result, str):
        return "failure", f"the script could not be started: {result}"
    if result.kind != "exit":
        how = {
            "timeout": f"timed out after {timeout_seconds} s",
            "signal": f"was killed by signal {result.signal}",
        }.get(result.kind, f"ended abnormally: {result.detail}")
        return "failure", f"the script {how}"
    if result.exit_code != 0:
        last, where = logs.last_line(), logs.raised_at()
        said = (f": {last}" if last else "") + (f" (at {where})" if where and where not in last else "")
        return "failure", f"the script exited with code {result.exit_code}{said}"
    return "success", ""
