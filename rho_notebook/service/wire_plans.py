"""The JSON shapes of the answers about plans: a saved plan, what ``validate`` and ``plan``
answer for a workflow that plans, and a diff of two plans or runs.

Importable from :mod:`rho_notebook.service.wire`, which lists them in ``WIRE_TYPES`` with every
other answer shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NotRequired

from typing_extensions import TypedDict

from rho_notebook.model.plan import Plan, PlanManifest

if TYPE_CHECKING:  # a type only: the diff module imports the runtime's reuse rules
    from rho_notebook.service.diff import DiffResult

__all__ = [
    "PlanJson",
    "PlanSummaryJson",
    "DiffJson",
    "DiffSideJson",
    "NodeChangeJson",
    "plan_json",
    "plan_summary_json",
    "diff_json",
]


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
    runs: NotRequired[list[dict[str, str | None]]]
    """Two runs of one fork lineage (docs/fork.md): per node ``{node, old_state, new_state,
    old_value, new_value, how}`` (values as ``sha256:`` digests; ``how``: taken, edited, reused, launched)."""


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
    if result.runs is not None:
        answer["runs"] = [{**vars(node)} for node in result.runs]
    return answer
