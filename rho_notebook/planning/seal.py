"""Sealing a frozen graph into a plan: the one place every authoring form (Starlark workflows,
scripts, flows, item graphs) encodes its graph canonically, checks the ``graph_bytes`` planning
limit, digests it and writes the manifest.

A form's ``to_graph`` (see :mod:`~rho_notebook.planning.forms`) freezes its source into a
:class:`FrozenGraph`; :func:`seal` turns that into the :class:`~rho_notebook.model.plan.Plan`.
What differs between forms is data on the frozen graph (its sources, the file a limit diagnostic
names, the statistics the form measured, a flow's compiled manifest), never a second sealing path.

The digest is :func:`~rho_notebook.model.canonical.graph_digest`'s: ``sha256:`` over
:func:`~rho_notebook.model.canonical.graph_bytes`. The bytes are encoded once here, because the
size check needs them too (encoding a 750-node graph costs about as much as 5 % of planning it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rho_notebook.errors import Diagnostic, InvalidWorkflow
from rho_notebook.model.canonical import ENCODING_VERSION, graph_bytes
from rho_notebook.model.graph import GRAPH_FORMAT, Graph
from rho_notebook.model.plan import PLAN_FORMAT, Plan, PlanManifest, SourceRecord
from rho_notebook.planning.authority import authority_of
from rho_notebook.planning.request import PlanRequest
from rho_notebook.planning.resolve import Resolver
from rho_notebook.source.labels import SourceText
from rho_notebook.source.limits import Limits, load_limits

__all__ = ["FrozenGraph", "Planner", "ToGraph", "plan_with", "seal", "source_records"]

PLANNER = {"graph_format": GRAPH_FORMAT, "encoding_version": ENCODING_VERSION, "plan_format": PLAN_FORMAT}
"""The planner's format identity, recorded in every manifest."""


@dataclass(frozen=True)
class FrozenGraph:
    """What an authoring form's ``to_graph`` hands to :func:`seal`: the frozen graph and what the
    manifest records beside it."""

    graph: Graph
    resolver: Resolver
    """The resolver that froze the graph's files: their identities and how names led to them."""
    sources: Sequence[SourceText]
    """Every source text the plan keeps, in the order the plan lists them."""
    display: str | None
    """The file a ``limit.graph_bytes`` diagnostic names."""
    stats: Mapping[str, int] | None = None
    """Statistics the form measured (a Starlark evaluation's); None: the size of the inputs."""
    flow: dict[str, Any] | None = None
    """A flow's compiled manifest, kept in the plan manifest for views."""
    memo: dict[Any, Any] | None = None
    """Where the form keeps what it derived from the one source evaluation this graph came from
    (a Starlark evaluation's :attr:`~rho_notebook.source.evaluate.Evaluation.memo`), or None.
    :func:`seal` keeps the graph's canonical bytes there: ``plan`` after ``validate`` of the same
    evaluation in a warm process encodes an equal graph once."""


def source_records(sources: Sequence[SourceText]) -> tuple[SourceRecord, ...]:
    """The manifest's record (label, size, digest) of each frozen source text."""
    return tuple(
        SourceRecord(
            label=s.label, size=len(s.text.encode()), sha256="sha256:" + hashlib.sha256(s.text.encode()).hexdigest()
        )
        for s in sources
    )


_CANONICAL = "canonical bytes"
"""The key of the last sealed graph and its canonical bytes in :attr:`FrozenGraph.memo`."""


def _canonical(frozen: FrozenGraph) -> bytes:
    """:func:`graph_bytes` of the frozen graph, or the bytes kept in its memo for an equal graph.

    Two graphs frozen from one evaluation share every value that came from the source (the same
    objects: the nodes' drafts, their conditions and literals), so where they are equal they are
    equal value for value, ``True`` and ``1`` included: what differs between two freezings is what
    the filesystem gave (paths, digests, labels), strings compared as strings. Equal graphs have
    the same canonical bytes; comparing them costs a fraction of encoding (the nodes a warm
    freezing reused are the same objects: :func:`~rho_notebook.planning.starlark_nodes.freeze_nodes`).
    """
    memo, graph = frozen.memo, frozen.graph
    kept = memo.get(_CANONICAL) if memo is not None else None
    if kept is not None and (kept[0] is graph or kept[0] == graph):
        encoded: bytes = kept[1]
        return encoded
    encoded = graph_bytes(graph)
    if memo is not None:
        memo[_CANONICAL] = (graph, encoded)
    return encoded


def _encoded(frozen: FrozenGraph, limits: Limits) -> bytes:
    """The graph's canonical bytes, refused past the ``graph_bytes`` planning limit."""
    encoded = _canonical(frozen)
    if len(encoded) > limits.limit("graph_bytes"):
        msg = f"planning budget 'graph_bytes' exceeded: accepted limit {limits.limit('graph_bytes')}, measured {len(encoded)}"
        raise InvalidWorkflow([Diagnostic(rule="limit.graph_bytes", message=msg, file=frozen.display)])
    return encoded


def _stats(frozen: FrozenGraph, encoded: bytes) -> dict[str, int]:
    if frozen.stats is not None:
        return {**frozen.stats, "graph_bytes": len(encoded)}
    return {"graph_bytes": len(encoded), "input_bytes": len(json.dumps(frozen.graph.input_values()).encode())}


def seal(frozen: FrozenGraph, request: PlanRequest, *, plan_id: str, limits: Limits) -> Plan:
    """The plan of ``frozen``: its canonical encoding size-checked, its digest, its authority list
    and its manifest; nothing is stored here.

    Raises
    ------
    InvalidWorkflow
        ``limit.graph_bytes``: the encoded graph is over the planning limit.
    """
    graph, resolver = frozen.graph, frozen.resolver
    encoded = _encoded(frozen, limits)
    manifest = PlanManifest(
        plan_id=plan_id,
        created_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        graph_digest="sha256:" + hashlib.sha256(encoded).hexdigest(),  # canonical.graph_digest, bytes in hand
        workflow=graph.name,
        entry=request.entry.label,
        workspace_root=str(request.workspace.root),
        workspace_key=request.workspace.key,
        workspace_trusted=request.workspace_trusted,
        sources=source_records(frozen.sources),
        inputs=graph.input_values(),
        identities=dict(sorted(resolver.identities.items())),
        authority=authority_of(graph, resolver),
        limits=limits.as_dict(),
        planner=dict(PLANNER),
        stats=_stats(frozen, encoded),
        flow=frozen.flow,
    )
    return Plan(manifest=manifest, graph=graph, sources=list(frozen.sources))


ToGraph = Callable[..., Awaitable[FrozenGraph]]
"""A form's ``to_graph(request, *, limits)``: its source frozen into a graph."""
Planner = Callable[..., Awaitable[Plan]]
"""``plan(request, *, plan_id, limits=None)``: a request planned (nothing stored)."""


def plan_with(to_graph: ToGraph) -> Planner:
    """The planner of a form whose freezing is ``to_graph``: freeze, then :func:`seal` (``limits``
    default to the loaded planning limits)."""

    async def plan(request: PlanRequest, *, plan_id: str, limits: Limits | None = None) -> Plan:
        limits = limits or load_limits()
        return seal(await to_graph(request, limits=limits), request, plan_id=plan_id, limits=limits)

    return plan
