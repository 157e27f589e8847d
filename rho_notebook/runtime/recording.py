"""Recorded runs: the recording format, and answering steps and nodes from a recording.

``rho-notebook record RUN DIR`` (:mod:`rho_notebook.service.record`) writes ``DIR/recording.json``
in the format below; a replay re-executes the workflow (the script, or the graph workflow's plan)
with the recorded answers instead of agents, models and (by default) processes, then compares
what happened with what was recorded (:func:`compare`).

``recording.json`` (``format`` ``rho-notebook/recording/v1``)::

    format, run_id, plan_id, graph_digest, workflow,
    kind            "script" | "graph"
    entry           the entry label (``//review.py``, ``//wf.star``)
    notebook        (only when the plan was made from a notebook's cell, whose exported entry is no
                    file of the workspace) that notebook, relative to the workspace root
    workspace       the workspace root, relative to DIR (move both together)
    inputs          the run's resolved inputs
    live_commands   whether the generated test runs command steps for real
    outcome         the run's outcome
    output          the script's emitted output (script runs), else null
    steps           {key or node name: {kind, digest, state, attempt, message, exit, value,
                     stdout, stderr}} in arrival order (graph runs: graph order)

A step's ``digest`` is what a replay must reproduce before it is answered from the recording:
for a script step the execution-affecting digest its ``node_launched`` journaled; for a graph node
:func:`node_digest` (its definition without machine-specific resolutions, plus the argv, prompt or
arguments rendered from the recorded run's outputs). ``value`` is the attempt's ``value.json``.

Matching rule, the same for script steps and graph nodes: a step whose key is not in the recording
or whose digest differs is not answered; it fails with a message naming the step and both digests,
and :func:`compare` reports it first.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rho_notebook.errors import RecordingError, RecordingMismatch, UnavailableValue
from rho_notebook.exec.base import AttemptContext, AttemptResult, Executor, render_template
from rho_notebook.exec.command import render_argv
from rho_notebook.exec.python import render_args
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import AgentNode, CommandNode, Graph, Node, PythonNode, ShellNode
from rho_notebook.model.state import NodeState
from rho_notebook.runtime.script_steps import PreparedStep, StepCall, StepResult, StepRunner
from rho_notebook.store.files import atomic_write, atomic_write_json
from rho_notebook.store.layout import VALUE_FILE

__all__ = [
    "RECORDING_FORMAT",
    "PROCESS_KINDS",
    "Recording",
    "RecordedStep",
    "RecordedExecutor",
    "RecordingStepRunner",
    "Mismatches",
    "compare",
    "load_recording",
    "node_digest",
    "recording_executors",
]

RECORDING_FORMAT = "rho-notebook/recording/v1"
RECORDING_FILE = "recording.json"

PROCESS_KINDS = frozenset({"command", "shell", "python"})
"""Node and step kinds that start a process: replayed by default, run for real with live_commands."""

_MACHINE_FIELDS = {"executable", "origin", "path", "content_sha256"}
"""Resolutions that differ between machines and checkouts; a node digest leaves them out."""


@dataclass(frozen=True)
class RecordedStep:
    """One step (script runs) or node (graph runs) as the recorded run settled it."""

    kind: str
    digest: str
    state: str
    attempt: int = 0
    message: str = ""
    exit: dict[str, Any] | None = None
    value: Any = None
    """The attempt's ``value.json`` (None when it has none)."""
    stdout: str | None = None
    stderr: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "digest": self.digest,
            "state": self.state,
            "attempt": self.attempt,
            "message": self.message,
            "exit": self.exit,
            "value": self.value,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedStep:
        return cls(
            kind=str(data["kind"]),
            digest=str(data["digest"]),
            state=str(data["state"]),
            attempt=int(data.get("attempt", 0)),
            message=str(data.get("message", "")),
            exit=data.get("exit"),
            value=data.get("value"),
            stdout=data.get("stdout"),
            stderr=data.get("stderr"),
        )


@dataclass(frozen=True)
class Recording:
    """The content of ``recording.json`` (see the module docstring)."""

    run_id: str
    plan_id: str
    graph_digest: str
    workflow: str
    kind: str
    entry: str
    workspace: str
    inputs: dict[str, Any]
    live_commands: bool
    outcome: str | None
    output: Any
    steps: dict[str, RecordedStep]
    notebook: str | None = None
    """The notebook (a path relative to the workspace root) whose cell the run's plan was exported
    from, when the entry is no file of the workspace: a replay plans that notebook's cell."""

    def to_json(self) -> dict[str, Any]:
        notebook = {} if self.notebook is None else {"notebook": self.notebook}
        return {
            "format": RECORDING_FORMAT,
            "run_id": self.run_id,
            "plan_id": self.plan_id,
            "graph_digest": self.graph_digest,
            "workflow": self.workflow,
            "kind": self.kind,
            "entry": self.entry,
            **notebook,
            "workspace": self.workspace,
            "inputs": self.inputs,
            "live_commands": self.live_commands,
            "outcome": self.outcome,
            "output": self.output,
            "steps": {key: step.to_json() for key, step in self.steps.items()},
        }

    def save(self, folder: Path) -> Path:
        path = folder / RECORDING_FILE
        atomic_write(path, (json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n").encode())
        return path

    @classmethod
    def load(cls, folder: Path) -> Recording:
        """Read ``folder/recording.json``.

        Raises
        ------
        RecordingError
            The file is missing, not JSON, or of another format.
        """
        path = folder / RECORDING_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            msg = f"{path} does not exist; write a recording with `rho-notebook record RUN_ID {folder}`"
            raise RecordingError(msg) from None
        except (OSError, ValueError) as err:
            msg = f"{path} cannot be read as a recording ({err}); record the run again"
            raise RecordingError(msg) from None
        if not isinstance(data, dict) or data.get("format") != RECORDING_FORMAT:
            found = data.get("format") if isinstance(data, dict) else None
            msg = f"{path} has format {found!r}, not {RECORDING_FORMAT!r}; record the run again with this version"
            raise RecordingError(msg)
        return cls(
            run_id=str(data["run_id"]),
            plan_id=str(data["plan_id"]),
            graph_digest=str(data["graph_digest"]),
            workflow=str(data["workflow"]),
            kind=str(data["kind"]),
            entry=str(data["entry"]),
            workspace=str(data["workspace"]),
            inputs=dict(data.get("inputs") or {}),
            live_commands=bool(data.get("live_commands", False)),
            outcome=data.get("outcome"),
            output=data.get("output"),
            steps={str(key): RecordedStep.from_json(step) for key, step in dict(data["steps"]).items()},
            notebook=None if data.get("notebook") is None else str(data["notebook"]),
        )

    def workspace_root(self, folder: Path) -> Path:
        """The workspace the recording replays in (``workspace`` is relative to ``folder``)."""
        return (folder / self.workspace).resolve()


# -- digests of graph nodes ---------------------------------------------------------------------------


def _without_machine_fields(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_machine_fields(v) for k, v in value.items() if k not in _MACHINE_FIELDS}
    if isinstance(value, list):
        return [_without_machine_fields(v) for v in value]
    return value


def _rendered(node: Node, graph: Graph, outputs: Callable[[str], Any]) -> Any:
    """What the node would launch with these outputs (None when a reference is unavailable)."""
    try:
        if isinstance(node, (CommandNode, ShellNode)):
            return list(render_argv(node, outputs))
        if isinstance(node, AgentNode):
            return render_template(node.prompt, outputs)
        if isinstance(node, PythonNode):
            return {"args": render_args(node, outputs), "module_sha256": graph.python_module(node.module).sha256}
    except UnavailableValue:
        return None
    return None


def node_digest(graph: Graph, node: Node, outputs: Callable[[str], Any]) -> str:
    """The digest a replayed graph node must reproduce: its definition (machine-specific
    resolutions such as executable paths left out), its agent's definition, and the argv, prompt
    or arguments rendered from ``outputs``."""
    facts: dict[str, Any] = {
        "node": _without_machine_fields(node.model_dump(mode="json")),
        "rendered": _rendered(node, graph, outputs),
    }
    if isinstance(node, AgentNode):
        facts["agent"] = _without_machine_fields(graph.agent(node.agent).model_dump(mode="json"))
    encoded = json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(encoded.encode()).hexdigest()


# -- what differed ------------------------------------------------------------------------------------


@dataclass
class Mismatches:
    """Steps a replay could not answer (diverged digests, unknown keys), in the order met."""

    found: list[str] = field(default_factory=list)

    def diverged(self, key: str, *, recorded: str, now: str) -> str:
        message = (
            f"step {key!r} diverged from the recording: recorded digest {recorded}, replayed digest {now} "
            f"(its inputs changed: prompt, argv, agent, schema or cwd)"
        )
        self.found.append(message)
        return message

    def unknown(self, key: str, digest: str) -> str:
        message = f"step {key!r} (digest {digest}) is not in the recording: the workflow now calls a step it did not"
        self.found.append(message)
        return message


def compare(
    recording: Recording,
    *,
    states: Mapping[str, str],
    values: Mapping[str, Any],
    mismatches: Mismatches,
    output: Any = None,
) -> None:
    """Check a replay against the recording: the same step keys, each with the same final state
    and value (and, for scripts, the same emitted output).

    Raises
    ------
    RecordingMismatch
        Something differed; the message names every step that did, diverged digests first.
    """
    problems = list(mismatches.found)
    recorded = recording.steps
    for key, step in recorded.items():
        if key not in states:
            problems.append(f"step {key!r} was recorded ({step.state}) but the replay never reached it")
            continue
        if states[key] != step.state:
            problems.append(f"step {key!r} ended {states[key]}, recorded {step.state}")
        elif values.get(key) != step.value:
            problems.append(
                f"step {key!r} has another output: recorded {_short(step.value)}, replayed {_short(values.get(key))}"
            )
    for key in states:
        if key not in recorded:
            problems.append(f"step {key!r} ran ({states[key]}) but is not in the recording")
    if recording.kind == "script" and output != recording.output:
        problems.append(f"the script emitted {_short(output)}, recorded {_short(recording.output)}")
    if problems:
        unique = list(dict.fromkeys(problems))
        msg = f"replay of run {recording.run_id[:13]} ({recording.workflow}) differs from its recording:\n  " + (
            "\n  ".join(unique)
        )
        raise RecordingMismatch(msg, steps=tuple(_step_names(unique)))


def _step_names(problems: list[str]) -> list[str]:
    names: list[str] = []
    for problem in problems:
        if problem.startswith("step '"):
            names.append(problem.split("'", 2)[1])
    return list(dict.fromkeys(names))


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- graph runs: recording-backed executors -----------------------------------------------------------


async def _write_answer(folder: Path, step: RecordedStep) -> dict[str, str]:
    """The recorded artifacts of a replayed attempt (value, stdout, stderr) in its folder."""
    artifacts: dict[str, str] = {}

    def write() -> None:
        if step.value is not None:
            atomic_write_json(folder / VALUE_FILE, step.value, durable=False)
            artifacts["value"] = VALUE_FILE
        for name in ("stdout", "stderr"):
            text = getattr(step, name)
            if text:
                atomic_write(folder / name, text.encode(), durable=False)
                artifacts[name] = name

    await asyncio.to_thread(write)
    return artifacts


class RecordedExecutor:
    """Answers a graph node from the recording when its digest matches; with ``live`` set, runs it
    with ``live`` (the real executor) after the same check."""

    def __init__(self, recording: Recording, mismatches: Mismatches, *, live: Executor | None = None) -> None:
        self.recording = recording
        self.mismatches = mismatches
        self.live = live

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        node = ctx.node
        graph = ctx.graph
        if graph is None:
            return AttemptResult(state=NodeState.FAILURE, message="a replay needs the run's frozen graph")
        digest = node_digest(graph, node, ctx.outputs)
        step = self.recording.steps.get(node.name)
        if step is None:
            return AttemptResult(state=NodeState.FAILURE, message=self.mismatches.unknown(node.name, digest))
        if step.digest != digest:
            message = self.mismatches.diverged(node.name, recorded=step.digest, now=digest)
            return AttemptResult(state=NodeState.FAILURE, message=message)
        if self.live is not None:
            return await self.live.execute(ctx)
        artifacts = await _write_answer(await ctx.directory(), step)
        return AttemptResult(
            state=NodeState(step.state),
            message=f"replayed from recording (run {self.recording.run_id[:13]})",
            exit=step.exit,
            value=UNAVAILABLE if step.value is None else step.value,
            artifacts=artifacts,
        )


def recording_executors(
    recording: Recording, mismatches: Mismatches, *, real: Mapping[str, Executor], live_commands: bool
) -> dict[str, Executor]:
    """One executor per node kind: every kind answered from the recording; process kinds
    (command, shell, python) run by ``real`` when ``live_commands``."""
    return {
        kind: RecordedExecutor(
            recording, mismatches, live=executor if live_commands and kind in PROCESS_KINDS else None
        )
        for kind, executor in real.items()
    }


# -- script runs: a recording-backed step runner --------------------------------------------------------


class RecordingStepRunner:
    """A script run's step runner that answers steps from a recording.

    ``prepare`` is the wrapped runner's (so each digest is recomputed from the current script);
    ``run`` answers agent and model steps from the recording when the key is recorded with the same
    digest, and command steps too unless ``live_commands`` (then the wrapped runner runs them after
    the same check). A step that does not match fails, naming the step and both digests.
    """

    def __init__(
        self, inner: StepRunner, recording: Recording, mismatches: Mismatches, *, live_commands: bool = False
    ) -> None:
        self.inner = inner
        self.recording = recording
        self.mismatches = mismatches
        self.live_commands = live_commands

    def prepare(self, call: StepCall) -> PreparedStep:
        return self.inner.prepare(call)

    async def run(
        self,
        prepared: PreparedStep,
        *,
        attempt_dir: Path,
        cancel: asyncio.Event,
        on_started: Callable[[int], Awaitable[None]] | None = None,
    ) -> StepResult:
        key, kind, digest = prepared.call.key, prepared.call.kind, prepared.digest
        step = self.recording.steps.get(key)
        if step is None or step.digest != digest:
            message = (
                self.mismatches.unknown(key, digest)
                if step is None
                else self.mismatches.diverged(key, recorded=step.digest, now=digest)
            )
            return StepResult(state=NodeState.FAILURE, message=message)
        if self.live_commands and kind in PROCESS_KINDS:
            return await self.inner.run(prepared, attempt_dir=attempt_dir, cancel=cancel, on_started=on_started)
        await asyncio.to_thread(attempt_dir.mkdir, parents=True, exist_ok=True)
        artifacts = await _write_answer(attempt_dir, step)
        payload = step.value if isinstance(step.value, dict) else {}
        return StepResult(
            state=NodeState(step.state),
            message=f"replayed from recording (run {self.recording.run_id[:13]})",
            exit=step.exit,
            output=payload.get("output"),
            value=payload.get("value"),
            artifacts=artifacts,
        )


def load_recording(folder: Path) -> Recording:
    """:meth:`Recording.load`, for callers that import functions."""
    if not folder.is_dir():
        msg = f"{folder} is not a folder; give the DIR that `rho-notebook record` wrote"
        raise RecordingError(msg)
    return Recording.load(folder)
