"""One line for people per journal record: the live progress of CLI and notebook runs.

Each kind with its own wording has one small function in :data:`_LINES`; any other kind reads as
its name (and its request ID when it has one). The record kinds are typed in
:mod:`rho_notebook.model.events`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rho_notebook.model.budget import is_budget_halt

__all__ = ["PROGRESS_KINDS", "TERMINAL_PROGRESS_KINDS", "describe_event"]

PROGRESS_KINDS = frozenset(
    {
        "node_launched",
        "node_reused",
        "node_finished",
        "node_skipped",
        "node_blocked",
        "run_completed",
        "cancel_requested",
        "cancel_acknowledged",
        "needs_recovery",
        "run_halted",
        "step_diverged",
        "step_replayed",
        "approval_requested",
        "approval_decided",
        "approval_carried",
    }
)
"""Journal kinds a progress display gives one line (:func:`describe_event`): what a notebook shows."""

TERMINAL_PROGRESS_KINDS = PROGRESS_KINDS | {"run_started", "hook_ran", "hook_ignored"}
"""A terminal also shows when the owner started and every hook it ran or ignored."""

_Line = Callable[[dict[str, Any], str], str]
"""(record, approve command) -> the line."""


def _finished(record: dict[str, Any], _approve: str) -> str:
    return str(record["state"]) + (f"  {record['message']}" if record.get("message") else "")


def _launched(record: dict[str, Any], _approve: str) -> str:
    return f"running (attempt {record['attempt']})"


def _reused(record: dict[str, Any], _approve: str) -> str:
    return f"reused from run {record['source_run']} ({record['source_node']}, attempt {record['source_attempt']})"


def _carried(record: dict[str, Any], _approve: str) -> str:
    return f"launch approved earlier by {record['by']} in run {record['from_run']} (same facts): not asked again"


def _not_run(record: dict[str, Any], _approve: str) -> str:
    return str(record["kind"]).removeprefix("node_") + (f"  {record['reason']}" if record.get("reason") else "")


def _completed(record: dict[str, Any], _approve: str) -> str:
    return f"run completed: {record['outcome']}"


def _requested(record: dict[str, Any], approve: str) -> str:
    if record.get("approval") == "form":
        step = (record.get("facts") or {}).get("step", record.get("node"))
        answer = approve.replace(" approve", " answer").replace(" workflow approve", " workflow answer")
        return f"waiting for a person: {answer} {record['run_id'][:13]} {step} FIELD=VALUE...  (or approve --deny)"
    return f"waiting for a person: {approve} {record['run_id'][:13]} {record['request_id'][:13]}  (or --deny)"


def _decided(record: dict[str, Any], _approve: str) -> str:
    if "answer" in record:
        return f"answered by {record['by']} via {record['via']}: {json.dumps(record['answer'], sort_keys=True)}"
    return f"{record['decision']} by {record['by']} via {record['via']}" + (
        f": {record['comment']}" if record.get("comment") else ""
    )


def _halted(record: dict[str, Any], _approve: str) -> str:
    steps = ", ".join(f"{s['step']} ({s['why']})" for s in record.get("steps", []))
    budget = all(is_budget_halt(s["why"]) for s in record.get("steps", []))
    return f"needs a decision: {steps}; resume with " + ("--raise-budget" if budget else "--decide STEP=rerun|skip")


def _diverged(record: dict[str, Any], _approve: str) -> str:
    return f"diverged: inputs were {record['stored_digest']}, now {record['digest']}"


def _replayed(record: dict[str, Any], _approve: str) -> str:
    return f"replayed (attempt {record['attempt']}): nothing ran"


def _started(record: dict[str, Any], _approve: str) -> str:
    return f"run {record['run_id']} started (owner pid {record['pid']})"


_LINES: dict[str, _Line] = {
    "node_finished": _finished,
    "node_launched": _launched,
    "node_reused": _reused,
    "approval_carried": _carried,
    "node_skipped": _not_run,
    "node_blocked": _not_run,
    "run_completed": _completed,
    "approval_requested": _requested,
    "approval_decided": _decided,
    "run_halted": _halted,
    "step_diverged": _diverged,
    "step_replayed": _replayed,
    "run_started": _started,
}


def describe_event(record: dict[str, Any], *, approve_command: str = "rho-notebook approve") -> str:
    """One line for people about a journal record (the live progress of CLI and notebook runs)."""
    kind = str(record["kind"])
    line = _LINES.get(kind)
    if line is not None:
        return line(record, approve_command)
    return kind.replace("_", " ") + (f" {record['request_id']}" if "request_id" in record else "")
