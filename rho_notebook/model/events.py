"""Every journal event kind, documented once. All writers and readers use these names.

A journal line is one JSON object: ``{"seq", "run_id", "at", "kind", "node"?, "attempt"?, ...}``
where ``at`` is an ISO-8601 UTC timestamp and extra keys depend on the kind:

run_created          plan_id, graph_digest, mode            the run store was created from a plan
run_started          pid, resumed (bool)                     an owner began executing (or resuming)
owner_exited         pid                                     the owner released the run cleanly
journal_repaired     bytes                                   a torn last line was cut off on open
node_ready           node                                    dependencies decided: it may launch
node_skipped         node, reason                            its condition evaluated false / a need was skipped
node_blocked         node, reason                            a needed value or dependency is unavailable
node_launched        node, attempt, step?                    an attempt is about to start (durable before launch);
                                                             a script step also carries step = {kind, digest,
                                                             facts, after, recovery} and creates its node
node_reused          node, attempt, source_run, source_node,  a read-only node with reuse = True took a stored
                     source_attempt, reuse_key               success with the same reuse key: nothing launched
                                                             (reuse_key null: a ``try`` run took it from its
                                                             source run; node_finished follows at once)
process_started      node, attempt, pid                      the attempt's process exists
output_chunk         node, attempt, stream, bytes            bytes retained from stdout/stderr (size only)
node_finished        node, attempt, state, exit, message     the attempt ended: success, failure, denial, cancellation
node_reset           node, reason                            resume returned a cancelled/recovered node to pending
attempt_uncertain    node, attempt                           recovery found an attempt without a journaled result
orphan_stopped       node, attempt, pid                      recovery stopped a process tree proven to be the run's
recovery_confirmed   nodes                                   --recover-uncertain accepted the uncertain attempts
cancel_requested     request_id                              a cancel request was found
cancel_acknowledged  request_id                              active work stopped and outcomes were stored
approval_requested   node, attempt, request_id, approval,    a person must decide: an approval node, or a
                     facts, facts_sha256                     supervised launch (facts = exact process facts)
approval_decided     node, attempt, request_id, decision,    the decision, who made it, when, through what,
                     by, comment, decided_at, via,           and the digest of the facts they were shown
                     facts_sha256
approval_carried     node, attempt, facts_sha256, from_run,  a supervised launch approved earlier in this
                     by, decided_at                          workspace with the same facts digest: not asked
hook_ran             node, attempt, hook_event, hook,        a before/after_tool_use hook ran: its verdict
                     verdict, reason
hook_ignored         node, attempt, hook_event, hook, keys   a hook tried to do more than deny (ignored)
plan_approval        graph_digest, by, approved_at           the plan approval record this run relied on
artifact_failed      errors                                  non-durable artifact copies (exit.json, a stream
                                                             folder) could not be written
script_launched      pid                                     a script run's own process exists (script tier)
script_exited        exit                                    the script process ended (exit record)
script_output        value                                   the script called emit_output(value)
step_replayed        node, attempt, digest                   a script step call answered from the journal:
                                                             nothing ran (attempt = the stored one)
step_halted          node, why                               a script step cannot be decided alone
run_halted           steps ([{step, why}])                   the script run stopped: lifecycle needs_decision
step_diverged        node, stored_digest, digest             a step key's inputs changed since it ran: the run fails
decision_recorded    node, decision, by                      resume --decide: rerun|skip, one attempt's worth
run_completed        outcome                                 every node is terminal (or the run was cancelled)
needs_recovery       nodes                                   an unclean exit left uncertain attempts
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import Enum
from typing import Any

__all__ = ["EventKind", "event", "now_iso", "describe_event", "PROGRESS_KINDS", "TERMINAL_PROGRESS_KINDS"]


class EventKind(str, Enum):
    RUN_CREATED = "run_created"
    RUN_STARTED = "run_started"
    OWNER_EXITED = "owner_exited"
    JOURNAL_REPAIRED = "journal_repaired"
    NODE_READY = "node_ready"
    NODE_SKIPPED = "node_skipped"
    NODE_BLOCKED = "node_blocked"
    NODE_LAUNCHED = "node_launched"
    NODE_REUSED = "node_reused"
    PROCESS_STARTED = "process_started"
    OUTPUT_CHUNK = "output_chunk"
    NODE_FINISHED = "node_finished"
    NODE_RESET = "node_reset"
    ATTEMPT_UNCERTAIN = "attempt_uncertain"
    ORPHAN_STOPPED = "orphan_stopped"
    RECOVERY_CONFIRMED = "recovery_confirmed"
    CANCEL_REQUESTED = "cancel_requested"
    CANCEL_ACKNOWLEDGED = "cancel_acknowledged"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"
    APPROVAL_CARRIED = "approval_carried"
    HOOK_RAN = "hook_ran"
    HOOK_IGNORED = "hook_ignored"
    PLAN_APPROVAL = "plan_approval"
    ARTIFACT_FAILED = "artifact_failed"
    SCRIPT_LAUNCHED = "script_launched"
    SCRIPT_EXITED = "script_exited"
    SCRIPT_OUTPUT = "script_output"
    STEP_REPLAYED = "step_replayed"
    STEP_HALTED = "step_halted"
    RUN_HALTED = "run_halted"
    STEP_DIVERGED = "step_diverged"
    DECISION_RECORDED = "decision_recorded"
    RUN_COMPLETED = "run_completed"
    NEEDS_RECOVERY = "needs_recovery"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def event(kind: EventKind, run_id: str, *, node: str | None = None, **data: Any) -> dict[str, Any]:
    """A journal record without its seq (the journal assigns it)."""
    record: dict[str, Any] = {"run_id": run_id, "at": now_iso(), "kind": kind.value}
    if node is not None:
        record["node"] = node
    record.update(data)
    return record


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


def describe_event(record: dict[str, Any], *, approve_command: str = "rho-notebook approve") -> str:
    """One line for people about a journal record (the live progress of CLI and notebook runs)."""
    kind = str(record["kind"])
    if kind == "node_finished":
        return str(record["state"]) + (f"  {record['message']}" if record.get("message") else "")
    if kind == "node_launched":
        return f"running (attempt {record['attempt']})"
    if kind == "node_reused":
        return f"reused from run {record['source_run']} ({record['source_node']}, attempt {record['source_attempt']})"
    if kind == "approval_carried":
        return f"launch approved earlier by {record['by']} in run {record['from_run']} (same facts): not asked again"
    if kind in ("node_skipped", "node_blocked"):
        return kind.removeprefix("node_") + (f"  {record['reason']}" if record.get("reason") else "")
    if kind == "run_completed":
        return f"run completed: {record['outcome']}"
    if kind == "approval_requested" and record.get("approval") == "form":
        step = (record.get("facts") or {}).get("step", record.get("node"))
        answer = approve_command.replace(" approve", " answer").replace(" workflow approve", " workflow answer")
        return f"waiting for a person: {answer} {record['run_id'][:13]} {step} FIELD=VALUE...  (or approve --deny)"
    if kind == "approval_decided" and "answer" in record:
        return f"answered by {record['by']} via {record['via']}: {json.dumps(record['answer'], sort_keys=True)}"
    if kind == "approval_requested":
        return (
            f"waiting for a person: {approve_command} {record['run_id'][:13]} {record['request_id'][:13]}  (or --deny)"
        )
    if kind == "approval_decided":
        return f"{record['decision']} by {record['by']} via {record['via']}" + (
            f": {record['comment']}" if record.get("comment") else ""
        )
    if kind == "run_halted":
        steps = ", ".join(f"{s['step']} ({s['why']})" for s in record.get("steps", []))
        return f"needs a decision: {steps}; resume with --decide STEP=rerun|skip"
    if kind == "step_diverged":
        return f"diverged: inputs were {record['stored_digest']}, now {record['digest']}"
    if kind == "step_replayed":
        return f"replayed (attempt {record['attempt']}): nothing ran"
    if kind == "run_started":
        return f"run {record['run_id']} started (owner pid {record['pid']})"
    return kind.replace("_", " ") + (f" {record['request_id']}" if "request_id" in record else "")
