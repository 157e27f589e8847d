"""A run's result as Python values: :class:`RunResult`, the ``result`` verb's answer.

``rho.result(run_id)`` and ``handle.result()`` return it; :meth:`RunResult.to_json` is exactly the
wire shape of ``rho-notebook result --output json`` (:class:`~rho_notebook.service.wire.ResultJson`,
attempts as a list), so a notebook and a terminal see the same answer.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rho_notebook.model.run_state import RunState
from rho_notebook.service.wire import AttemptJson, ResultJson, result_json
from rho_notebook.store.runs import RunFolder

__all__ = ["NodeResult", "RunResult", "run_result"]


@dataclass(frozen=True)
class NodeResult:
    """One node of a run result: its state, attempts, exit, output and artifact files."""

    state: str
    attempts: list[AttemptJson] = field(default_factory=list)
    """Every attempt, oldest first (``len(attempts)`` is how many there were)."""
    exit: dict[str, Any] | None = None
    reason: str = ""
    output: Any = None
    """The validated output value; None and :attr:`has_output` False when the node has none."""
    has_output: bool = False
    artifacts: dict[str, Path] = field(default_factory=dict)
    """stdout, stderr, exit, value, answer, ... -> file of the latest attempt."""

    def __repr__(self) -> str:
        shown = f", output={self.output!r}" if self.has_output else ""
        return f"NodeResult(state={self.state!r}, attempts={len(self.attempts)}{shown})"


@dataclass(frozen=True)
class RunResult:
    """What ``rho-notebook result`` reports: per node state, attempts, exit, output, artifacts."""

    run_id: str
    workflow: str
    lifecycle: str
    outcome: str | None
    nodes: dict[str, NodeResult]
    wire: ResultJson = field(repr=False)

    @property
    def outputs(self) -> dict[str, Any]:
        """Node name -> validated output, for the nodes that have one."""
        return {name: node.output for name, node in self.nodes.items() if node.has_output}

    @property
    def output(self) -> Any:
        """A script or flow run: the value it emitted with ``emit_output`` (a flow's is ``{"text",
        "messages"}``, its final session); None when it emitted none."""
        return copy.deepcopy(self.wire.get("output"))

    def to_json(self) -> ResultJson:
        """Exactly ``rho-notebook result --output json``."""
        return copy.deepcopy(self.wire)

    def __str__(self) -> str:
        lines = [
            f"run {self.run_id}  {self.workflow}  {self.lifecycle}"
            + (f"  outcome {self.outcome}" if self.outcome else "")
        ]
        for name, node in self.nodes.items():
            code = node.exit.get("code") if node.exit and node.exit.get("kind") == "exit" else None
            extra = f"  exit {code}" if code is not None else ""
            lines.append(f"  {name:<24} {node.state:<13} attempts {len(node.attempts)}{extra}")
            if node.has_output:
                lines.append(f"      output: {json.dumps(node.output, sort_keys=True)}")
        return "\n".join(lines)


def run_result(folder: RunFolder, state: RunState) -> RunResult:
    """The result of a run from its state and its attempt artifacts in the run store."""
    wire = result_json(folder, state)
    nodes: dict[str, NodeResult] = {}
    for name, entry in wire["nodes"].items():
        nodes[name] = NodeResult(
            state=entry["state"],
            attempts=list(entry.get("attempts", [])),
            exit=entry.get("exit"),
            reason=state.nodes[name].reason,
            output=entry.get("output"),
            has_output="output" in entry,
            artifacts={key: Path(path) for key, path in entry.get("artifacts", {}).items()},
        )
    return RunResult(
        run_id=state.run_id,
        workflow=state.workflow,
        lifecycle=state.lifecycle.value,
        outcome=state.outcome,
        nodes=nodes,
        wire=wire,
    )
