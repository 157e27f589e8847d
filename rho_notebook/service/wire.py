"""The one JSON shape of every answer, for every front end that speaks JSON.

``rho-notebook ... --output json``, the Python API's ``to_json()``, the jupyter-server REST API,
the widgets and the model-facing tool all answer with these shapes, built here and nowhere else.
Each shape is a ``TypedDict``; :data:`WIRE_TYPES` lists them for the JSON Schema from which the
TypeScript types are generated (``scripts/gen_wire_types.py``).

The builders are pure functions of records already read from the store, except
:func:`result_json`, which reads the small ``value.json`` of successful attempts.

The shapes that need a pydantic model (:class:`ApprovalJson`, the plan shapes of
:mod:`.wire_plans`) and :data:`WIRE_TYPES`, which lists them all, are imported from here on first
use (:func:`rho_notebook.lazy.lazy_face`; they live in :mod:`.wire_types` and :mod:`.wire_plans`):
``status`` and ``runs`` build their answers without importing pydantic (issue 31).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, cast

from typing_extensions import TypedDict

from rho_notebook.errors import InvalidWorkflow
from rho_notebook.lazy import lazy_face
from rho_notebook.model.budget import resume_flags
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.service.spend_view import BudgetJson, add_spend
from rho_notebook.service.wire_views import (
    CancelJson,
    DeletedJson,
    Detail,
    HaltedStepJson,
    InstancesJson,
    NodeView,
    OutcomeName,
    ReusedFromJson,
    RunView,
    ShownName,
    StepJson,
    StreamView,
    UsageCountsJson,
    UsageJson,
    WireEdge,
    WireLayout,
    WireNode,
    deleted_json,
)
from rho_notebook.store.layout import VALUE_FILE

if TYPE_CHECKING:
    from rho_notebook.runtime.status import RunFacts
    from rho_notebook.service.wire_plans import (
        DiffJson,
        DiffSideJson,
        NodeChangeJson,
        PlanJson,
        PlanSummaryJson,
        diff_json,
        plan_json,
        plan_summary_json,
    )
    from rho_notebook.service.wire_types import WIRE_TYPES, ApprovalJson, approval_json
    from rho_notebook.store.layout import StoreLayout
    from rho_notebook.store.runs import RunFolder, RunManifest

_PLANS = "DiffJson DiffSideJson NodeChangeJson PlanJson PlanSummaryJson diff_json plan_json plan_summary_json"
__getattr__, __dir__ = lazy_face(
    __name__,
    {
        **{name: "rho_notebook.service.wire_plans" for name in _PLANS.split()},
        **{name: "rho_notebook.service.wire_types" for name in ("WIRE_TYPES", "ApprovalJson", "approval_json")},
    },
)

__all__ = [
    "LIVE_LIFECYCLES",
    "WIRE_TYPES",
    "OutcomeName",
    "outcome_name",
    "ShownName",
    "SHOWN_ORDER",
    "shown_state",
    "shown_label",
    "allowed_failures_of",
    "unsettled_nodes",
    "person_command",
    "PlanJson",
    "PlanSummaryJson",
    "DiffJson",
    "DiffSideJson",
    "NodeChangeJson",
    "diff_json",
    "ReusedFromJson",
    "HaltedStepJson",
    "StepJson",
    "NodeStatusJson",
    "StatusJson",
    "RunRowJson",
    "UsageCountsJson",
    "UsageJson",
    "AttemptJson",
    "NodeResultJson",
    "ResultJson",
    "ApprovalJson",
    "CancelJson",
    "DeletedJson",
    "deleted_json",
    "ValidateJson",
    "validate_json",
    "invalid_json",
    "EventJson",
    "plan_json",
    "plan_summary_json",
    "status_json",
    "reused_from_json",
    "halted_json",
    "instances_json",
    "step_json",
    "node_order",
    "run_row_json",
    "result_json",
    "approval_json",
    "WireNode",
    "WireEdge",
    "WireLayout",
    "NodeView",
    "RunView",
    "StreamView",
    "Detail",
]

LIVE_LIFECYCLES = frozenset({Lifecycle.RUNNING, Lifecycle.WAITING, Lifecycle.CANCELLING})
"""Lifecycles in which an owner is executing the run."""


def outcome_name(state: RunState) -> OutcomeName | None:
    """The run's outcome as the wire names it: one of :data:`OutcomeName`, None until it completes."""
    return cast("OutcomeName | None", state.outcome)


# -- node states as the run has them ----------------------------------------------------------------

SHOWN_ORDER: tuple[ShownName, ...] = (
    "pending",
    "ready",
    "waiting_for_approval",
    "running",
    "success",
    "failure_allowed",
    "failure",
    "failure_handled",
    "denial",
    "denial_handled",
    "cancellation",
    "skipped",
    "blocked",
)
"""Every :data:`ShownName` in the order legends list them (each variant beside its state)."""

_LABELS: dict[str, str] = {
    "failure_allowed": "failure (allowed)",
    "failure_handled": "failure (handled)",
    "denial_handled": "denial (handled)",
    "waiting_for_approval": "waiting for approval",
}


def shown_label(shown: str) -> str:
    """How a person reads a shown state: ``failure (allowed)``, ``waiting for approval``; a node
    state reads as itself."""
    return _LABELS.get(shown, shown)


def shown_state(record: NodeRecord, *, allowed: bool = False) -> ShownName:
    """The state a front end shows for a node (the one rule, for every view and text).

    - ``waiting_for_approval``: the node is running and its latest attempt waits on an approval
      request (a supervised launch, an approval node, a human step): no process has started.
    - ``failure_handled`` / ``denial_handled``: a script or flow step that failed or was denied
      while the script went on: it made another step call after it, or the run succeeded
      (:attr:`NodeRecord.handled <rho_notebook.model.run_state.NodeRecord.handled>`, folded from
      the journal). The run's outcome follows the script, so such a step did not fail it.
    - ``failure_allowed``: the node failed and ``allowed`` (its ``allow_failure`` is set: the
      failure does not count against the run's outcome).
    - otherwise the node's state.
    """
    state = record.state
    current = record.current
    if state is NodeState.RUNNING and current is not None and current.pending_approval:
        return "waiting_for_approval"
    if record.handled and state is NodeState.FAILURE:
        return "failure_handled"
    if record.handled and state is NodeState.DENIAL:
        return "denial_handled"
    if state is NodeState.FAILURE and allowed:
        return "failure_allowed"
    return state.value


def allowed_failures_of(state: RunState) -> frozenset[str]:
    """The nodes of ``state``'s run whose failure does not count: from the run's graph outline
    when this process read it (every status read does), else what the outcome proves (a run that
    succeeded had only allowed failures)."""
    from rho_notebook.runtime.status import allowed_failures_of as known  # no import cost for others

    found = known(state.graph_digest)
    if found is not None:
        return found
    if state.outcome == "success":  # a script's steps are never allowed failures: they are handled ones
        return frozenset(
            name for name, record in state.nodes.items() if record.state is NodeState.FAILURE and record.step is None
        )
    return frozenset()


def unsettled_nodes(state: RunState) -> list[str]:
    """Nodes whose attempt started and has no recorded result (not waiting for a person, not
    reused): ``resume`` refuses until ``--recover-uncertain`` says they were looked at. A script
    run never has one (its steps are decided when the script calls them again)."""
    if any(record.step is not None for record in state.nodes.values()):
        return []
    found = []
    for name in node_order(state):
        record = state.nodes[name]
        current = record.current
        if record.state is NodeState.RUNNING and current is not None:
            if not current.pending_approval and not current.reused_from and not current.abandoned:
                found.append(name)
    return found


def person_command(state: RunState, *, command: str = "rho-notebook") -> str | None:
    """The command a person runs to move a run on that waits for one: ``resume`` for a run
    whose owner stopped (``--recover-uncertain`` once its unsettled nodes were looked at),
    ``resume --raise-budget`` or ``--decide`` for a run that needs a decision (:func:`resume_flags`),
    ``status`` (which names each approve or answer command) for a run that waits for an approval;
    None for any other run."""
    run_id = state.run_id
    lifecycle = state.lifecycle
    if lifecycle is Lifecycle.NEEDS_RECOVERY:
        recover = " --recover-uncertain" if unsettled_nodes(state) else ""
        return f"{command} resume {run_id}{recover}"
    if lifecycle is Lifecycle.NEEDS_DECISION:
        return f"{command} resume {run_id} {resume_flags(halted_json(state))}".rstrip()
    if lifecycle is Lifecycle.WAITING:
        return f"{command} status {run_id}"
    return None


# -- runs -------------------------------------------------------------------------------------------


class NodeStatusJson(TypedDict):
    state: str
    shown: ShownName
    """The state as the run has it (``failure_allowed``, ``waiting_for_approval``, ...)."""
    attempt: int
    exit_code: int | None
    reason: str
    uncertain: bool
    reused_from: NotRequired[ReusedFromJson]
    """Present when the latest attempt reused a stored success of the same reuse key."""
    step: NotRequired[StepJson]
    """Script runs: the step's kind, digest, facts, edges and recovery."""
    replayed: NotRequired[int]
    """Script runs: how many step calls were answered from the journal (nothing ran)."""
    instances: NotRequired[InstancesJson]
    """An item graph's aggregate step: its instances ``STEP[i]``, counted by state."""
    usage: NotRequired[UsageJson]


class StatusJson(TypedDict):
    """One durable snapshot of a run: ``status``; ``usage`` (the run's and each node's): what its
    model calls spent, present when it made or saved one (docs/usage.md)."""

    run_id: str
    plan_id: str
    graph_digest: str
    workflow: str
    lifecycle: str
    outcome: OutcomeName | None
    nodes: dict[str, NodeStatusJson]
    """By name; a script run's steps in arrival order."""
    halted: NotRequired[list[HaltedStepJson]]
    """Lifecycle ``needs_decision`` only: the steps to decide with ``resume RUN --decide STEP=rerun|skip``."""
    output: NotRequired[Any]
    """Script runs: the value the script emitted with ``emit_output`` (absent when it emitted none)."""
    damage: NotRequired[str]
    """Lifecycle ``damaged`` only: what the journal contradicts (the nodes are its readable part)."""
    usage: NotRequired[UsageJson]
    budgets: NotRequired[list[BudgetJson]]


def reused_from_json(record: NodeRecord) -> ReusedFromJson | None:
    """The source of the node's latest attempt when it was reused, else None."""
    current = record.current
    source = current.reused_from if current is not None else None
    if not source:
        return None
    return {"run_id": str(source["run_id"]), "node": str(source["node"]), "attempt": int(source["attempt"])}


def step_json(record: NodeRecord) -> StepJson | None:
    """A script step's facts, or None for a graph node."""
    step = record.step
    if step is None:
        return None
    facts = step.get("facts")
    recovery = step.get("recovery")
    return {
        "kind": str(step.get("kind", "")),
        "digest": str(step.get("digest", "")),
        "facts": dict(facts) if isinstance(facts, dict) else {},
        "after": [str(key) for key in step.get("after") or ()],
        "recovery": str(recovery) if recovery is not None else None,
    }


def instances_json(name: str, record: NodeRecord) -> InstancesJson | None:
    """An aggregate step's instances (keys ``NAME[i]``, in element order), or None for any other node."""
    if not record.instances:
        return None
    states = {f"{name}[{i}]": str(r["state"]) for i, r in sorted(record.instances.items())}
    counts: dict[str, int] = {}
    for shown in states.values():
        counts[shown] = counts.get(shown, 0) + 1
    return {"counts": counts, "states": states}


def halted_json(state: RunState) -> list[HaltedStepJson]:
    """The steps a script run stopped at (empty unless it needs a decision)."""
    return [{"step": str(h.get("step", "")), "why": str(h.get("why", ""))} for h in state.halted]


def node_order(state: RunState) -> list[str]:
    """The order a run's nodes are listed in: by name, except a script run's steps, which come in
    arrival order (the order their nodes first appeared in the journal)."""
    if any(record.step is not None for record in state.nodes.values()):
        return list(state.nodes)
    return sorted(state.nodes)


def status_json(
    state: RunState, *, allowed: frozenset[str] | None = None, layout: StoreLayout | None = None
) -> StatusJson:
    """One durable snapshot of a run: ``rho-notebook status --output json``. ``allowed``: the
    nodes whose failure does not count (default: :func:`allowed_failures_of`); ``layout``: the
    run's store, whose usage files and prices say what it spent (default: its journal alone,
    priced by this process's settings)."""
    allowed = allowed_failures_of(state) if allowed is None else allowed
    nodes: dict[str, NodeStatusJson] = {}
    for name in node_order(state):
        record = state.nodes[name]
        current = record.current
        nodes[name] = {
            "state": record.state.value,
            "shown": shown_state(record, allowed=name in allowed),
            "attempt": record.attempt,
            "exit_code": record.exit_code(),
            "reason": record.reason,
            "uncertain": bool(current and current.uncertain and not current.abandoned),
        }
        reused = reused_from_json(record)
        if reused is not None:
            nodes[name]["reused_from"] = reused
        step = step_json(record)
        if step is not None:
            nodes[name]["step"] = step
            nodes[name]["replayed"] = record.replayed
        instances = instances_json(name, record)
        if instances is not None:
            nodes[name]["instances"] = instances
    status: StatusJson = {
        "run_id": state.run_id,
        "plan_id": state.plan_id,
        "graph_digest": state.graph_digest,
        "workflow": state.workflow,
        "lifecycle": state.lifecycle.value,
        "outcome": outcome_name(state),
        "nodes": nodes,
    }
    if state.halted:
        status["halted"] = halted_json(state)
    if state.output is not None:
        status["output"] = state.output
    if state.damage is not None:
        status["damage"] = state.damage
    add_spend(status, state, layout=layout)
    return status


def _counts(state: RunState) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in state.nodes.values():
        counts[record.state.value] = counts.get(record.state.value, 0) + 1
    return {s.value: counts[s.value] for s in NodeState if s.value in counts}


class RunRowJson(TypedDict):
    """A row of the run list (``runs``): identity, lifecycle, counts, and how it was created."""

    run_id: str
    plan_id: str
    workflow: str
    lifecycle: str
    outcome: OutcomeName | None
    updated_at: str | None
    graph_digest: str
    live: bool
    counts: dict[str, int]
    """Node state -> how many nodes are in it."""
    total: int
    waiting: int
    """How many nodes wait for a person."""
    last_seq: int
    created_at: NotRequired[str]
    """This and ``origin``, ``mode``, ``initiator``, ``via``, ``client``: how and by whom the run
    was created (absent when its manifest is unreadable)."""
    origin: NotRequired[str]
    mode: NotRequired[str]
    initiator: NotRequired[str]
    """The OS account that created the run ("" for runs created before it was recorded)."""
    via: NotRequired[str]
    """How it was started: cli, terminal, notebook, server or mcp."""
    client: NotRequired[str | None]
    """Runs started through MCP: the client's self-reported name (else null)."""
    damage: NotRequired[str]
    """Lifecycle ``damaged`` only: what the journal contradicts."""
    owner_pid: NotRequired[int]
    """The pid of the owner process that holds the run now (0 when it did not record its pid);
    absent when no process owns the run."""
    next: NotRequired[str]
    """A run that waits for a person (``needs_recovery``, ``needs_decision``, ``waiting``): the
    command that moves it on (:func:`person_command`)."""
    lineage: NotRequired[list[dict[str, str]]]
    """A fork (docs/fork.md): ``[{"run", "node"}, ...]``, the run it was forked from and the node,
    then that run's own origin for a fork of a fork, nearest first."""


def run_row_json(state: RunState, manifest: RunManifest | RunFacts | None = None) -> RunRowJson:
    """A row of the run list; with ``manifest``: when, from which front end and in which
    permission mode the run was created."""
    row: RunRowJson = {
        "run_id": state.run_id,
        "plan_id": state.plan_id,
        "workflow": state.workflow,
        "lifecycle": state.lifecycle.value,
        "outcome": outcome_name(state),
        "updated_at": state.updated_at,
        "graph_digest": state.graph_digest,
        "live": state.lifecycle in LIVE_LIFECYCLES,
        "counts": _counts(state),
        "total": len(state.nodes),
        "waiting": len(state.waiting_requests()),
        "last_seq": state.last_seq,
    }
    if state.damage is not None:
        row["damage"] = state.damage
    command = person_command(state)
    if command is not None:
        row["next"] = command
    if manifest is not None:
        row["created_at"] = manifest.created_at
        row["origin"] = manifest.origin
        row["mode"] = manifest.mode
        row["initiator"] = manifest.initiator
        row["via"] = manifest.via
        row["client"] = manifest.client
    return row


class AttemptJson(TypedDict):
    number: int
    started_at: str | None
    ended_at: str | None
    pid: int | None
    state: str | None
    exit: dict[str, Any] | None
    message: str
    uncertain: bool
    abandoned: bool
    pending_approval: str | None
    approval: dict[str, Any] | None


class NodeResultJson(TypedDict):
    state: str
    attempts: list[AttemptJson]
    """Every attempt, oldest first."""
    exit: NotRequired[dict[str, Any] | None]
    """The latest attempt's exit record (absent when the node never started)."""
    artifacts: NotRequired[dict[str, str]]
    """Artifact key (stdout, stderr, exit, value, answer, ...) -> file of the latest attempt."""
    output: NotRequired[Any]
    """The validated output value; present only for successful nodes with an output schema (a
    script step's: its ``value.json``, ``{"output", "value"}``)."""
    step: NotRequired[StepJson]
    """Script runs: the step's kind, digest, facts, edges and recovery."""
    replayed: NotRequired[int]
    """Script runs: how many step calls were answered from the journal."""
    usage: NotRequired[UsageJson]


class ResultJson(TypedDict):
    """Per node: state, attempts, exit, artifact paths and validated output: ``result``."""

    run_id: str
    lifecycle: str
    outcome: OutcomeName | None
    nodes: dict[str, NodeResultJson]
    """By name; a script run's steps in arrival order."""
    halted: NotRequired[list[HaltedStepJson]]
    """Lifecycle ``needs_decision`` only: the steps to decide with ``resume RUN --decide STEP=rerun|skip``."""
    output: NotRequired[Any]
    """Script runs: the value the script emitted with ``emit_output`` (absent when it emitted none)."""
    usage: NotRequired[UsageJson]


def result_json(folder: RunFolder, state: RunState) -> ResultJson:
    """``rho-notebook result --output json`` (and ``rho.result(id).to_json()``)."""
    nodes: dict[str, NodeResultJson] = {}
    for name in node_order(state):
        record = state.nodes[name]
        attempts: list[AttemptJson] = [a.to_json() for a in record.attempts]  # type: ignore[misc]
        entry: NodeResultJson = {"state": record.state.value, "attempts": attempts}
        step = step_json(record)
        if record.current is not None:
            entry["exit"] = record.current.exit
            found = folder.artifacts(name, record.current)
            entry["artifacts"] = {key: str(path) for key, path in found.items()}
            if "value" in found and record.state is NodeState.SUCCESS:
                exists, value = folder.read_value(found["value"])  # StoreError when it is not JSON
                if exists:
                    entry["output"] = value
            elif record.state is NodeState.SUCCESS:  # a journaled value whose copy was lost in a crash?
                journaled = folder.journaled_step_value(folder.files_of(name, record.current) / VALUE_FILE)
                if journaled is not None:
                    entry["output"] = journaled
        if step is not None:
            entry["step"] = step
            entry["replayed"] = record.replayed
        nodes[name] = entry
    result: ResultJson = {
        "run_id": state.run_id,
        "lifecycle": state.lifecycle.value,
        "outcome": outcome_name(state),
        "nodes": nodes,
    }
    if state.halted:
        result["halted"] = halted_json(state)
    if state.output is not None:
        result["output"] = state.output
    add_spend(result, state, run_folder=folder.path, budgets=False)
    return result


class ValidateJson(TypedDict):
    """What ``validate`` answers for a script, a flow, a graph document, or a workflow that does
    not validate (a Starlark workflow that does is a :class:`PlanSummaryJson` with ``valid``)."""

    valid: bool
    """No finding is an error."""
    flow: NotRequired[str]
    """``validate FILE.py --flow NAME``: the flow checked."""
    manifest: NotRequired[dict[str, Any]]
    """``--flow``: the flow's compiled manifest."""
    graph: NotRequired[str]
    """A ``%%graph`` cell validated in a notebook: the document checked."""
    diagnostics: list[dict[str, Any]]
    """Each finding: file, line, column, rule, severity, message."""


def validate_json(
    diagnostics: Sequence[Mapping[str, Any]],
    *,
    valid: bool | None = None,
    flow: str | None = None,
    manifest: Mapping[str, Any] | None = None,
    graph: str | None = None,
) -> ValidateJson:
    """The ``validate`` answer: ``valid`` (default: no diagnostic has severity ``error``), what
    was checked, and the findings."""
    found = [dict(d) for d in diagnostics]
    if valid is None:
        valid = not any(d.get("severity") == "error" for d in found)
    checked: dict[str, Any] = {"flow": flow, "manifest": None if manifest is None else dict(manifest), "graph": graph}
    return cast(
        "ValidateJson", {"valid": valid, **{k: v for k, v in checked.items() if v is not None}, "diagnostics": found}
    )


def invalid_json(err: InvalidWorkflow) -> ValidateJson:
    """The ``validate`` answer for a workflow that does not validate (every diagnostic an error)."""
    return validate_json([d.to_json() for d in err.diagnostics()], valid=False)


EventJson = dict[str, Any]
"""One journal record: ``seq``, ``kind``, ``at`` and the kind's own keys (docs/running.md)."""
