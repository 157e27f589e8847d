"""The JSON shapes of the DAG view (its layout, node and run views and the node pane), and the
shapes of a run that they share with the answers of :mod:`rho_notebook.service.wire`.

Built by :mod:`rho_notebook.views` for the widgets and the JupyterLab sidebar; listed in
:data:`rho_notebook.service.wire.WIRE_TYPES` (and importable from there) with every other answer
shape.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

__all__ = [
    "OutcomeName",
    "ShownName",
    "ReusedFromJson",
    "StepJson",
    "HaltedStepJson",
    "WireNode",
    "WireEdge",
    "WireLayout",
    "InstancesJson",
    "NodeView",
    "RunView",
    "StreamView",
    "Detail",
    "CancelJson",
    "DeletedJson",
    "deleted_json",
    "UsageCountsJson",
    "UsageJson",
]


OutcomeName = Literal["success", "failure", "denial", "cancellation", "stalled", "blocked"]
"""A finished run's outcome (:class:`~rho_notebook.model.state.Outcome`); by precedence
cancellation > denial > failure > stalled > blocked > success (docs/running.md)."""


ShownName = Literal[
    "pending",
    "ready",
    "running",
    "success",
    "failure",
    "denial",
    "cancellation",
    "skipped",
    "blocked",
    "failure_allowed",
    "failure_handled",
    "denial_handled",
    "waiting_for_approval",
]
"""A node's state as the run has it (``shown``): its :class:`~rho_notebook.model.state.NodeState`,
or one that says more: ``failure_allowed`` (a failure of an ``allow_failure`` node: it does not
count against the run), ``failure_handled`` / ``denial_handled`` (a script step whose failure the
script went on from), ``waiting_for_approval`` (a launch held for a person's decision: nothing
started). :func:`rho_notebook.service.wire.shown_state` is the rule."""


# -- what the answers about runs and the views share ------------------------------------------


class UsageCountsJson(TypedDict):
    """What model calls spent (:class:`~rho_notebook.model.ledger.Usage`): tokens, calls, retries,
    tool calls, wall time and the cost from the settings' ``prices``."""

    input_tokens: int
    output_tokens: int
    """Reasoning tokens included."""
    cached_tokens: int
    reasoning_tokens: int
    calls: int
    retries: int
    tool_calls: int
    wall_seconds: float
    """A node: its attempts' launch-to-end times; the run: first launch to last end."""
    cost_usd: float | None
    """None (never 0) when a call's ``provider/model`` has no price in settings."""


class UsageJson(UsageCountsJson):
    """The ``usage`` of a node or a run (present when the run made or saved a model call).
    ``saved``: what a reused node, a step answered from the journal, or the run did not spend
    again; ``by_key``: a node's calls by their ``key`` (an instance, a branch), the run's steps by
    key prefix (a flow's module path, a fork branch)."""

    saved: NotRequired[UsageCountsJson]
    by_key: NotRequired[dict[str, UsageCountsJson]]


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


def deleted_json(kind: Literal["run", "plan"], deleted_id: str) -> DeletedJson:
    """The answer to ``delete`` (and each run ``prune`` deleted)."""
    return {"kind": kind, "id": deleted_id, "deleted": True}


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


class InstancesJson(TypedDict):
    """An item graph's ``aggregate`` step: its instances ``STEP[i]`` (one node in the DAG)."""

    counts: dict[str, int]
    """How many instances are in each state (``success``, ``running``, ``failure``, ...)."""
    states: dict[str, str]
    """Each instance's latest state by its key ``STEP[i]``, in element order."""


class NodeView(TypedDict):
    state: str
    shown: NotRequired[ShownName]
    """The state as the run has it: front ends style and count nodes by it, falling back to
    ``state`` when absent (``state`` says only what the journal recorded: a held launch is
    ``running``, an allowed failure ``failure``). Always sent by this version."""
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
    instances: NotRequired[InstancesJson]
    """An item graph's aggregate step: its instances' counts and states."""
    usage: NotRequired[UsageJson]
    """What its model calls spent (the widget sends it once the node made or saved a call)."""
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
    """Lifecycle ``needs_decision``: the steps the run stopped at, and why."""
    next: str
    """The command a person runs to move the run on, as ``runs`` words it (``resume RUN
    --raise-budget tokens=N`` for a run its budget halted, ``--decide STEP=rerun|skip`` per halted
    script step, ``--recover-uncertain``); absent when the run needs nobody."""
    output: Any
    """A script run's emitted output (absent when it emitted none)."""
    usage: UsageJson
    """What the run's model calls spent (the widget sends it once the run made or saved a call)."""
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
    """The node pane; ``spend``: what the node's model calls spent over every attempt, as ``status``
    has it (and what a reused or replayed node saved), None when it made and saved none."""

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
    spend: UsageJson | None
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
