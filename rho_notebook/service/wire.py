"""The one JSON shape of every answer, for every front end that speaks JSON.

``rho-notebook ... --output json``, the Python API's ``to_json()``, the jupyter-server REST API,
the widgets and the model-facing tool all answer with these shapes, built here and nowhere else.
Each shape is a ``TypedDict``; :data:`WIRE_TYPES` lists them for the JSON Schema from which the
TypeScript types are generated (``scripts/gen_wire_types.py``).

The builders are pure functions of records already read from the store, except
:func:`result_json`, which reads the small ``value.json`` of successful attempts.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, cast

from typing_extensions import TypedDict

from rho_notebook.model.plan import Plan, PlanManifest
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.policy.approvals import ApprovalRequest
from rho_notebook.service.diff import DiffResult
from rho_notebook.store.runs import RunFolder, RunManifest

__all__ = [
    "LIVE_LIFECYCLES",
    "WIRE_TYPES",
    "OutcomeName",
    "outcome_name",
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
    "AttemptJson",
    "NodeResultJson",
    "ResultJson",
    "ApprovalJson",
    "CancelJson",
    "DeletedJson",
    "EventJson",
    "plan_json",
    "plan_summary_json",
    "status_json",
    "reused_from_json",
    "halted_json",
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

OutcomeName = Literal["success", "failure", "denial", "cancellation", "stalled", "blocked"]
"""A finished run's outcome (:class:`~rho_notebook.model.state.Outcome`); by precedence
cancellation > denial > failure > stalled > blocked > success (docs/running.md)."""


def outcome_name(state: RunState) -> OutcomeName | None:
    """The run's outcome as the wire names it: one of :data:`OutcomeName`, None until it completes."""
    return cast("OutcomeName | None", state.outcome)


# -- plans ------------------------------------------------------------------------------------------


class PlanJson(TypedDict):
    """A saved plan: identity, digest, inputs, sources and the authority list (no graph)."""

    plan_id: str
    workflow: str
    graph_digest: str
    created_at: str
    entry: str
    workspace_root: str
    workspace_trusted: bool
    inputs: dict[str, Any]
    sources: list[dict[str, Any]]
    authority: list[dict[str, Any]]
    stats: dict[str, int]


def plan_json(manifest: PlanManifest) -> PlanJson:
    """A row of ``plans`` (and the head of one plan's answer)."""
    return {
        "plan_id": manifest.plan_id,
        "workflow": manifest.workflow,
        "graph_digest": manifest.graph_digest,
        "created_at": manifest.created_at,
        "entry": manifest.entry,
        "workspace_root": manifest.workspace_root,
        "workspace_trusted": manifest.workspace_trusted,
        "inputs": manifest.inputs,
        "sources": [source.model_dump(mode="json") for source in manifest.sources],
        "authority": [item.model_dump(mode="json") for item in manifest.authority],
        "stats": dict(manifest.stats),
    }


class PlanNodeJson(TypedDict):
    name: str
    kind: str
    needs: list[str]
    conditional: bool
    allow_failure: bool
    timeout_seconds: int
    max_output_bytes: int


class PlanSummaryJson(TypedDict):
    """What ``validate`` and ``plan`` answer: the plan as the person confirming it sees it."""

    plan_id: NotRequired[str]
    """Absent for ``validate`` (nothing was stored)."""
    valid: NotRequired[bool]
    """``validate`` only: True."""
    graph_digest: str
    workflow: str
    workspace: dict[str, Any]
    authority: list[dict[str, Any]]
    sources: list[dict[str, Any]]
    inputs: dict[str, Any]
    limits: dict[str, Any]
    nodes: list[PlanNodeJson]
    stats: dict[str, int]


def plan_summary_json(plan: Plan, *, stored: bool = True) -> PlanSummaryJson:
    """``plan --output json`` (``stored``), or ``validate --output json`` (no plan ID, ``valid``)."""
    m = plan.manifest
    summary: PlanSummaryJson = {
        "plan_id": m.plan_id,
        "graph_digest": m.graph_digest,
        "workflow": m.workflow,
        "workspace": {"root": m.workspace_root, "key": m.workspace_key, "trusted": m.workspace_trusted},
        "authority": [a.model_dump() for a in m.authority],
        "sources": [s.model_dump() for s in m.sources],
        "inputs": m.inputs,
        "limits": {"scheduler": plan.graph.scheduler.model_dump(), "planning": m.limits},
        "nodes": [
            {
                "name": n.name,
                "kind": n.kind,
                "needs": list(n.needs),
                "conditional": n.when is not None,
                "allow_failure": n.allow_failure,
                "timeout_seconds": n.timeout_seconds,
                "max_output_bytes": n.max_output_bytes,
            }
            for n in plan.graph.nodes
        ],
        "stats": m.stats,
    }
    if not stored:
        del summary["plan_id"]
        summary["valid"] = True
    return summary


# -- diff -------------------------------------------------------------------------------------------


class DiffSideJson(TypedDict):
    """One side of a diff: the plan or run an argument named."""

    kind: Literal["plan", "run"]
    id: str
    graph_digest: str
    workflow: str


class NodeChangeJson(TypedDict):
    node: str
    fields: list[str]
    """Changed fields by their Starlark names (argv, module, module source, output, needs, when, ...)."""


class DiffJson(TypedDict):
    """What ``diff OLD NEW`` answers: nodes added, removed and changed from OLD to NEW."""

    old: DiffSideJson
    new: DiffSideJson
    same: bool
    added: list[str]
    removed: list[str]
    changed: list[NodeChangeJson]
    unchanged: list[str]
    graph: list[str]
    """Graph-level fields that differ: name, inputs, environment, concurrency, interpreter."""
    will_reuse: NotRequired[list[str]]
    """NEW's nodes a run started now would take from a stored success (``reuse = True``)."""
    will_launch: NotRequired[list[str]]
    """NEW's other nodes."""


def diff_json(result: DiffResult) -> DiffJson:
    """``diff --output json``."""
    found = result.diff
    answer: DiffJson = {
        "old": {
            "kind": result.old.kind,
            "id": result.old.id,
            "graph_digest": result.old.graph_digest,
            "workflow": result.old.workflow,
        },
        "new": {
            "kind": result.new.kind,
            "id": result.new.id,
            "graph_digest": result.new.graph_digest,
            "workflow": result.new.workflow,
        },
        "same": found.same,
        "added": list(found.added),
        "removed": list(found.removed),
        "changed": [{"node": c.node, "fields": list(c.fields)} for c in found.changed],
        "unchanged": list(found.unchanged),
        "graph": list(found.graph),
    }
    if result.will_reuse is not None:
        answer["will_reuse"] = list(result.will_reuse)
    if result.will_launch is not None:
        answer["will_launch"] = list(result.will_launch)
    return answer


# -- runs -------------------------------------------------------------------------------------------


class ReusedFromJson(TypedDict):
    """Where a reused attempt's success came from (no process was launched for it)."""

    run_id: str
    node: str
    attempt: int


class StepJson(TypedDict):
    """A script step's journaled facts (its latest ``node_launched``)."""

    kind: str
    """command, agent or model."""
    digest: str
    """The digest of the step's execution-affecting inputs."""
    facts: dict[str, Any]
    after: list[str]
    """The steps whose handles fed this step's arguments (the edges of the live DAG)."""
    recovery: str | None


class HaltedStepJson(TypedDict):
    """A script step the run stopped at (lifecycle ``needs_decision``)."""

    step: str
    why: str


class NodeStatusJson(TypedDict):
    state: str
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


class StatusJson(TypedDict):
    """One durable snapshot of a run: ``status``."""

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


def halted_json(state: RunState) -> list[HaltedStepJson]:
    """The steps a script run stopped at (empty unless it needs a decision)."""
    return [{"step": str(h.get("step", "")), "why": str(h.get("why", ""))} for h in state.halted]


def node_order(state: RunState) -> list[str]:
    """The order a run's nodes are listed in: by name, except a script run's steps, which come in
    arrival order (the order their nodes first appeared in the journal)."""
    if any(record.step is not None for record in state.nodes.values()):
        return list(state.nodes)
    return sorted(state.nodes)


def status_json(state: RunState) -> StatusJson:
    """One durable snapshot of a run: ``rho-notebook status --output json``."""
    nodes: dict[str, NodeStatusJson] = {}
    for name in node_order(state):
        record = state.nodes[name]
        current = record.current
        nodes[name] = {
            "state": record.state.value,
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


def run_row_json(state: RunState, manifest: RunManifest | None = None) -> RunRowJson:
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


def result_json(folder: RunFolder, state: RunState) -> ResultJson:
    """``rho-notebook result --output json`` (and ``rho.result(id).to_json()``)."""
    nodes: dict[str, NodeResultJson] = {}
    for name in node_order(state):
        record = state.nodes[name]
        attempts: list[AttemptJson] = [a.to_json() for a in record.attempts]  # type: ignore[misc]
        entry: NodeResultJson = {"state": record.state.value, "attempts": attempts}
        if record.current is not None:
            entry["exit"] = record.current.exit
            found = folder.artifacts(name, record.current)
            entry["artifacts"] = {key: str(path) for key, path in found.items()}
            if "value" in found and record.state is NodeState.SUCCESS:
                exists, value = folder.read_value(found["value"])  # StoreError when it is not JSON
                if exists:
                    entry["output"] = value
        step = step_json(record)
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
    return result


class ApprovalJson(ApprovalRequest):
    """A pending approval request, and whether the run's owner is waiting on it now."""

    waiting: bool
    """False for a request whose node has since ended (e.g. timed out)."""


def approval_json(request: ApprovalRequest, *, waiting: bool) -> dict[str, Any]:
    """A pending approval request in the :class:`ApprovalJson` shape."""
    return ApprovalJson(**dict(request), waiting=waiting).model_dump(mode="json")


class CancelJson(TypedDict):
    """The answer to ``cancel``: the durable request and whether the owner acknowledged it."""

    run_id: str
    request_id: str | None
    cancellation_state: Literal["acknowledged", "pending", "already_completed"]
    lifecycle: str


class DeletedJson(TypedDict):
    """The answer to ``delete``: what was deleted."""

    kind: Literal["run", "plan"]
    id: str
    deleted: bool


EventJson = dict[str, Any]
"""One journal record: ``seq``, ``kind``, ``at`` and the kind's own keys (docs/running.md)."""


# -- the DAG view: layout, node and run views, the node pane ---------------------------------------


class WireNode(TypedDict):
    name: str
    kind: str
    layer: int
    x: float
    y: float
    needs: list[str]
    conditional: bool


class WireEdge(TypedDict):
    source: str
    target: str
    condition: bool
    points: list[list[float]]


class WireLayout(TypedDict):
    direction: str
    width: float
    height: float
    node_width: float
    node_height: float
    layers: int
    nodes: list[WireNode]
    edges: list[WireEdge]
    edge_count: int
    reduced_edge_count: int


class NodeView(TypedDict):
    state: str
    attempt: int
    started_at: str | None
    ended_at: str | None
    reason: str
    exit_code: int | None
    uncertain: bool
    reused_from: NotRequired[ReusedFromJson]
    """Present when the latest attempt reused a stored success (drawn with a "reused" mark)."""
    step_kind: NotRequired[str]
    """Script runs: the step's kind (command, agent, model)."""
    replayed: NotRequired[int]
    """Script runs: step calls answered from the journal (drawn with a "replayed" mark when > 0)."""
    halted: NotRequired[str]
    """Lifecycle ``needs_decision``: why the run stopped at this step (drawn "needs decision")."""
    v: int
    """Version: the tracker's change counter when this view last changed (newest wins)."""


class RunView(TypedDict, total=False):
    run_id: str
    plan_id: str
    workflow: str
    graph_digest: str
    lifecycle: str
    outcome: OutcomeName | None
    started_at: str | None
    ended_at: str | None
    cancel_pending: bool
    can_cancel: bool
    can_resume: bool
    message: str
    script: bool
    """A script run: its steps appear as nodes while it runs (the layout grows)."""
    halted: list[HaltedStepJson]
    """Lifecycle ``needs_decision``: the steps to decide with ``resume RUN --decide STEP=rerun|skip``."""
    output: Any
    """A script run's emitted output (absent when it emitted none)."""
    v: int


class StreamView(TypedDict):
    text: str
    bytes: int
    """Size of the stream file."""
    start: int
    """Byte offset of the first byte shown (0 unless older output was left out)."""
    end: int
    """Byte offset just after the last byte shown."""
    truncated: bool
    """The runner stopped retaining this stream at max_output_bytes (exit.json says so)."""
    limit: int


class Detail(TypedDict, total=False):
    node: str
    kind: str
    state: str
    reason: str
    attempt: int
    live: bool
    definition: dict[str, Any]
    attempts: list[dict[str, Any]]
    exit: dict[str, Any] | None
    answer: StreamView | None
    """answer.md: an agent's final answer (markdown prose; nodes without an output schema)."""
    raw_answer: StreamView | None
    """answer.txt: the raw final answer of an agent node with an output schema."""
    usage: Any
    """usage.json of an agent attempt (provider, model, tokens, timings)."""
    stdout: StreamView | None
    stderr: StreamView | None
    has_value: bool
    value: Any
    has_input: bool
    input: Any
    """Item-graph steps: the item the attempt received (its ``input.json``); ``value`` is the item
    it passed on."""
    reused_from: ReusedFromJson | None
    """The latest attempt reused this stored success (its artifacts are read from there when the
    attempt has none of its own)."""
    step: StepJson
    """Script runs: the step's kind, digest, facts, edges and recovery (``value`` is then the
    attempt's ``value.json``, ``{"output", "value"}``)."""
    replayed: int
    """Script runs: step calls answered from the journal."""
    halted: str
    """Lifecycle ``needs_decision``: why the run stopped at this step."""
    approval: dict[str, Any] | None
    """The latest attempt's approval record (decision, by, comment, decided_at, via); ``via`` is
    ``carried`` for a launch approval carried over from an earlier run."""
    error: str


WIRE_TYPES: dict[str, Any] = {
    "PlanJson": PlanJson,
    "PlanSummaryJson": PlanSummaryJson,
    "DiffJson": DiffJson,
    "StatusJson": StatusJson,
    "RunRowJson": RunRowJson,
    "ResultJson": ResultJson,
    "ApprovalJson": ApprovalJson,
    "CancelJson": CancelJson,
    "DeletedJson": DeletedJson,
    "WireLayout": WireLayout,
    "ReusedFromJson": ReusedFromJson,
    "StepJson": StepJson,
    "HaltedStepJson": HaltedStepJson,
    "NodeView": NodeView,
    "RunView": RunView,
    "StreamView": StreamView,
    "Detail": Detail,
}
"""Every answer shape by its TypeScript name (``scripts/gen_wire_types.py`` generates from these)."""
