"""The tools of ``rho-notebook mcp``: one frozen pydantic argument model per tool, and the table of
tools (name, argument model, what it does) the server lists.

Each model's JSON Schema is the tool's ``inputSchema``, and the same model validates every call
(unknown arguments, wrong types and out-of-range values are refused with a message naming the
argument), so what a client reads in the listing is exactly what the server accepts. Argument
names are the JSON fields of the CLI's answers: ``file``, ``inputs``, ``plan_id``,
``graph_digest``, ``run_id``, ``timeout_seconds``, ``decisions``.

No argument of any tool can approve a launch, answer an approval node, approve a plan, trust a
folder, change a setting or reach ``--recover-uncertain``: none of those exist here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

__all__ = [
    "TOOLS",
    "ToolSpec",
    "ListArgs",
    "ValidateArgs",
    "PlanArgs",
    "RunArgs",
    "StatusArgs",
    "WaitArgs",
    "ResultArgs",
    "CancelArgs",
    "ResumeArgs",
    "LogsArgs",
    "RunsArgs",
    "EventsArgs",
    "PlanApprovalArgs",
    "MAX_TEXT",
    "MAX_EVENTS",
    "MAX_WAIT_SECONDS",
]

MAX_TEXT = 20_000
"""Characters of log or output text one answer carries at most (the rest is paged with ``offset``)."""
MAX_NODE_CHARS = 2 * MAX_TEXT
"""Characters of node JSON one status, wait or result answer carries at most (the rest is paged
with ``node_offset``; a node's own output value is cut at ``MAX_TEXT // 4``)."""
MAX_EVENTS = 1000
"""Journal records one ``workflow_events`` answer carries at most (also bounded by :data:`MAX_TEXT`)."""
MAX_WAIT_SECONDS = 300.0
"""The longest one ``workflow_wait`` call waits: below the per-call timeout of common MCP hosts."""
MAX_INPUTS_BYTES = 1_000_000
"""The largest ``inputs`` object accepted (as JSON); planning applies its own, smaller, limits."""

RunId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=36,
        pattern=r"^[0-9a-fA-F-]+$",
        description="a run ID (as workflow_run or workflow_runs answered) or a unique prefix of one",
    ),
]
PlanId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=36,
        pattern=r"^[0-9a-fA-F-]+$",
        description="the plan_id workflow_plan answered (or a unique prefix)",
    ),
]
Digest = Annotated[
    str,
    Field(
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="the exact graph_digest workflow_plan answered for this plan (sha256:...)",
    ),
]
File = Annotated[
    str,
    Field(
        min_length=1,
        max_length=4096,
        description="a workflow file of the workspace as workflow_list names it (relative to the workspace root): "
        "an entry .star, a SCRIPT.py, a NOTEBOOK.ipynb (workflow_plan only) or an item graph FILE.graph.yaml",
    ),
]
StepId = Annotated[str, Field(min_length=1, max_length=200)]


class _Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Inputs(_Args):
    inputs: dict[str, JsonValue] = Field(
        default_factory=dict, description='the workflow\'s input values by name, e.g. {"pattern": "*.py"}'
    )

    @field_validator("inputs")
    @classmethod
    def _bounded(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        size = len(json.dumps(value))
        if size > MAX_INPUTS_BYTES:
            msg = f"inputs are {size} bytes of JSON; at most {MAX_INPUTS_BYTES} are accepted"
            raise ValueError(msg)
        return value


class ListArgs(_Args):
    """``workflow_list`` takes no arguments."""


class ValidateArgs(_Inputs):
    file: File
    workflow: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        description="the Workflow of a flow module (kind flow in workflow_list: its name): compiled and its "
        "manifest checked, as `rho-notebook validate FILE.py --flow NAME` does",
    )


class PlanArgs(_Inputs):
    file: File
    workflow: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        description="which workflow of a notebook (needed when it holds several), or the Workflow of a flow "
        "module (kind flow in workflow_list: its name)",
    )


class RunArgs(_Args):
    plan_id: PlanId
    graph_digest: Digest
    mode: Literal["auto", "plan", "supervised"] = Field(
        default="auto",
        description="the permission mode asked for; a run started here is supervised (every launch waits for a "
        "person) unless a person approved this graph digest with `rho-notebook approve-plan`",
    )


NodeOffset = Annotated[
    int,
    Field(
        ge=0,
        description="the node to start at, in the answer's node order: a cut answer's nodes_page.next_node_offset "
        "(a run of many nodes is answered a page at a time)",
    ),
]


class StatusArgs(_Args):
    run_id: RunId
    node_offset: NodeOffset = 0


class WaitArgs(_Args):
    run_id: RunId
    timeout_seconds: float = Field(
        default=30.0,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="how long to wait at most; the answer says the state reached and whether the wait timed out",
    )
    node_offset: NodeOffset = 0


class ResultArgs(_Args):
    run_id: RunId
    node_offset: NodeOffset = 0


class CancelArgs(_Args):
    run_id: RunId
    timeout_seconds: float = Field(
        default=2.0, ge=0, le=30, description="how long to wait for the run's owner to acknowledge"
    )


class ResumeArgs(_Args):
    run_id: RunId
    graph_digest: Digest = Field(description="the run's graph_digest (workflow_status answers it)")
    decisions: dict[StepId, Literal["rerun", "skip"]] = Field(
        default_factory=dict,
        description='a script run halted by recovery="manual": one decision per halted step, '
        '{"STEP": "rerun"} (one new attempt) or {"STEP": "skip"} (accept its stored result)',
    )


class LogsArgs(_Args):
    run_id: RunId
    node: str = Field(min_length=1, max_length=500, description="the node (or script step) name")
    stream: Literal["stdout", "stderr"] = "stdout"
    offset: int = Field(default=0, ge=0, description="the character to start at: a truncated answer's next_offset")
    limit: int = Field(default=MAX_TEXT, ge=1, le=MAX_TEXT, description="characters to answer at most")


class RunsArgs(_Args):
    state: (
        Literal[
            "planned", "running", "waiting", "cancelling", "completed", "needs_recovery", "needs_decision", "damaged"
        ]
        | None
    ) = Field(default=None, description="only runs in this lifecycle")
    limit: int = Field(default=50, ge=1, le=500, description="the newest this many runs")


class EventsArgs(_Args):
    run_id: RunId
    after_seq: int = Field(
        default=0, ge=0, description="answer the records after this seq: 0 from the start, else a page's next_after_seq"
    )
    limit: int = Field(default=200, ge=1, le=MAX_EVENTS, description="records to answer at most")


class PlanApprovalArgs(_Args):
    plan_id: PlanId | None = None
    graph_digest: Digest | None = None

    @model_validator(mode="after")
    def _one(self) -> PlanApprovalArgs:
        if (self.plan_id is None) == (self.graph_digest is None):
            msg = "give exactly one of plan_id and graph_digest"
            raise ValueError(msg)
        return self


@dataclass(frozen=True)
class ToolSpec:
    name: str
    args: type[_Args]
    description: str
    read_only: bool = True

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "workflow_list",
        ListArgs,
        "The workflows of the workspace: Starlark entries, scripts, flows, notebooks and item graphs (file, kind, "
        "name); not runs (those are workflow_runs). Plan one with workflow_plan.",
    ),
    ToolSpec(
        "workflow_validate",
        ValidateArgs,
        "Evaluate a workflow once and check it (a script is linted; with workflow, a flow module's Workflow is "
        "compiled and checked); stores nothing. "
        'Answers the plan as `rho-notebook validate FILE --output json` prints it, or {"valid": false, "diagnostics"}.',
    ),
    ToolSpec(
        "workflow_plan",
        PlanArgs,
        "Validate and freeze a workflow into a stored plan: answers plan_id, graph_digest, the authority list and "
        "the nodes. Read them, then start it with workflow_run(plan_id, graph_digest).",
    ),
    ToolSpec(
        "workflow_run",
        RunArgs,
        "Start a run of a stored plan, confirming the graph_digest you read from workflow_plan; answers the run_id "
        "at once (the run has its own owner process). Unless a person approved the plan, the run is supervised: "
        "every launch waits for a person, and the answer says which command they run.",
        read_only=False,
    ),
    ToolSpec(
        "workflow_status",
        StatusArgs,
        "One durable snapshot of a run (as `rho-notebook status RUN --output json`); a run that made model calls "
        "has a `usage` object per node and one for the run (tokens, calls, retries, wall_seconds, cost_usd: null "
        "when a model has no price in settings). A long run output is cut: rho://runs/{run_id}/output holds it.",
    ),
    ToolSpec(
        "workflow_wait",
        WaitArgs,
        "Wait (at most timeout_seconds) until the run ends or waits for a person; answers the state reached, "
        "whether the wait timed out, and what a person must do when the run waits for one.",
    ),
    ToolSpec(
        "workflow_result",
        ResultArgs,
        "Per node: state, attempts, exit, validated output and artifact paths (as `rho-notebook result RUN --output "
        "json`); a long output is cut, its full text is the resource rho://runs/{run_id}/nodes/{node}/output "
        "(a run's output: rho://runs/{run_id}/output).",
    ),
    ToolSpec(
        "workflow_cancel",
        CancelArgs,
        "Durably request cancellation and wait for the owner's acknowledgement.",
        read_only=False,
    ),
    ToolSpec(
        "workflow_resume",
        ResumeArgs,
        "Resume a cancelled, interrupted or halted run from its frozen graph (own owner process; answers at once). "
        'decisions decide script steps halted by recovery="manual" only; every other halt needs a person.',
        read_only=False,
    ),
    ToolSpec(
        "workflow_logs",
        LogsArgs,
        "A node's stdout or stderr (latest attempt), paged: a truncated answer gives next_offset for the next call.",
    ),
    ToolSpec(
        "workflow_runs",
        RunsArgs,
        "The runs of the store (not the workflows: that is workflow_list), newest last, filtered by state (a "
        "lifecycle), the newest limit of them (as `rho-notebook runs --state S --limit N --output json`).",
    ),
    ToolSpec(
        "workflow_events",
        EventsArgs,
        "A run's journal records after after_seq (as `rho-notebook events RUN --after-seq N --no-follow`), paged: "
        "at most limit records; a truncated answer gives next_after_seq for the next call. Read once, never follows.",
    ),
    ToolSpec(
        "workflow_plan_approval",
        PlanApprovalArgs,
        "Read-only: whether a person approved a graph digest with `rho-notebook approve-plan` (then runs of it "
        "may use the mode asked for). No tool grants an approval.",
    ),
)
