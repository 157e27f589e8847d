"""Freezing an item-graph document into a plan (docs/graphs.md): the same plan as a Starlark
workflow's (digest, confirmation, authority list), whose nodes are the document's steps.

- Each step becomes an :class:`~rho_notebook.model.graph.ItemNode` that carries its parameters,
  its in-edge sources (in edge order) and its out-edges (in document order).
- A loop edge ``x -> t`` with ``max_rounds: N`` freezes its *body* (every step on a path from
  ``t`` to ``x`` over the other edges) as per-round instances ``step@1`` ... ``step@N``: edges
  inside the body join the instances of one round, the loop edge joins round r's ``x`` to round
  r+1's ``t`` (there is none after round N), an edge into the body enters round 1 and an edge out
  of it leaves from every round. Loop bodies may not share a step.
- ``command`` steps pin argv[0] as command nodes do and run in the document's folder; their argv
  passes the code-argument rule (:mod:`~rho_notebook.planning.code_args`: a mapping is data and
  never code nor the program) against the files the names resolve to (``argv.code``, with the
  argument's line:column); ``agent`` steps (and ``model`` steps that name an agent) freeze the
  agent's definition from the catalog.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from rho_notebook.errors import Diagnostic, InvalidWorkflow, PlanError
from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.canonical import ENCODING_VERSION, graph_bytes
from rho_notebook.model.graph import GRAPH_FORMAT, Graph, InputDecl, ItemNode, ItemRoute, ItemSettings
from rho_notebook.model.itemgraph import GRAPH_SUFFIXES, ItemGraph, is_graph_file
from rho_notebook.model.itemrun import instance_name
from rho_notebook.model.plan import PLAN_FORMAT, Plan, PlanManifest
from rho_notebook.planning.code_args import code_argument_problem, item_argv
from rho_notebook.planning.inputs import check_inputs
from rho_notebook.planning.item_size import loop_bodies
from rho_notebook.planning.itemgraph import load_graph, locate
from rho_notebook.planning.plan import PlanRequest, authority_of, catalog_resolver, frozen_agent, source_records
from rho_notebook.planning.resolve import Resolver
from rho_notebook.planning.script import workspace_label
from rho_notebook.source.labels import FileSourceReader, SourceText
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.workspace import Workspace

__all__ = ["HUMAN_TIMEOUT_SECONDS", "graph_entry", "is_graph_request", "plan_item_graph"]

HUMAN_TIMEOUT_SECONDS = 604_800
"""How long a human step waits for its answer (the ``timeout_seconds`` ceiling: 7 days)."""
_AGENT_TIMEOUT_SECONDS = 1_800
_INLINE_TIMEOUT_SECONDS = 600
_MAX_OUTPUT_BYTES = 1_048_576


def graph_entry(path: Path, workspace: Workspace) -> SourceText:
    """Read the document at ``path`` under the label rules (inside ``workspace``, no symlinks).

    Raises
    ------
    SourceError
        The document is outside the workspace or cannot be read.
    LimitError
        The document is larger than the ``source_bytes`` limit (it is not read whole).
    """
    label = workspace_label(path, workspace, what="an item graph", rule="graph.outside_workspace")
    suffix = next(s for s in GRAPH_SUFFIXES if path.name.endswith(s))
    return FileSourceReader(workspace.root).read(label, suffix=suffix, max_bytes=load_limits().limit("source_bytes"))


def is_graph_request(request: PlanRequest) -> bool:
    """Whether the entry is an item-graph document (``*.graph.yaml``, ``.graph.yml``, ``.graph.json``)."""
    return is_graph_file(request.entry.label)


def _instances(step: str, loops: dict[str, tuple[int, frozenset[str]]]) -> list[str]:
    if step not in loops:
        return [step]
    return [instance_name(step, r) for r in range(1, loops[step][0] + 1)]


def _wiring(graph: ItemGraph, loops: dict[str, tuple[int, frozenset[str]]]) -> list[tuple[str, str, Any]]:
    """(source node, target node, when) of every frozen edge, in document edge order."""
    wired: list[tuple[str, str, Any]] = []
    for edge in graph.edges:
        when = None if edge.when is None else edge.when.model_dump(mode="json")
        if edge.loop is not None:
            rounds = edge.loop.max_rounds
            wired.extend((instance_name(edge.source, r), instance_name(edge.to, r + 1), when) for r in range(1, rounds))
        elif edge.source in loops and edge.to in loops and loops[edge.source][1] is loops[edge.to][1]:
            rounds = loops[edge.source][0]
            wired.extend((instance_name(edge.source, r), instance_name(edge.to, r), when) for r in range(1, rounds + 1))
        else:
            target = instance_name(edge.to, 1) if edge.to in loops else edge.to
            wired.extend((source, target, when) for source in _instances(edge.source, loops))
    return wired


def _timeout(kind: str, params: dict[str, Any]) -> int:
    if kind == "command":
        return int(params.get("timeout_seconds", 600))
    if kind == "human":
        return HUMAN_TIMEOUT_SECONDS
    if kind in ("agent", "model"):
        return _AGENT_TIMEOUT_SECONDS
    return _INLINE_TIMEOUT_SECONDS


def _freeze(
    graph: ItemGraph, request: PlanRequest, resolver: Resolver, where: Any
) -> tuple[list[ItemNode], dict[str, AgentDefinition]]:
    from rho_notebook.model.agent import READ_ONLY_TOOLS

    try:
        loops = loop_bodies(graph)
    except ValueError as err:
        index = next(i for i, e in enumerate(graph.edges) if e.loop is not None)
        line, column = where(("edges", index, "loop"))
        raise InvalidWorkflow(
            [Diagnostic(rule="graph.loop", message=str(err), file=request.entry.display, line=line, column=column)]
        ) from None
    wired = _wiring(graph, loops)
    routes: dict[str, list[ItemRoute]] = {}
    sources: dict[str, list[str]] = {}
    for source, target, when in wired:
        routes.setdefault(source, []).append(ItemRoute(to=target, when=when))
        sources.setdefault(target, []).append(source)
    agents: dict[str, AgentDefinition] = {}
    found: list[Diagnostic] = []
    nodes: list[ItemNode] = []
    for index, step in enumerate(graph.steps):
        params = step.params.model_dump(mode="json", exclude_defaults=False)
        line, column = where(("steps", index, "params"))

        def problem(rule: str, message: str, at: tuple[int, int] = (line, column)) -> None:
            found.append(Diagnostic(rule=rule, message=message, file=request.entry.display, line=at[0], column=at[1]))

        extra: dict[str, Any] = {}
        agent_id = params.get("agent")
        if step.kind in ("agent", "model") and agent_id is not None:
            try:
                frozen_agent(agent_id, agents, request=request, resolve_agent=catalog_resolver)
            except (InvalidWorkflow, PlanError) as err:
                problem("resolve", f"step {step.id!r}: {err.message}")
                continue
            extra["agent"] = agent_id
            access = params.get("access", "read_only")
            if step.kind == "agent" and access == "read_only" and not agents[agent_id].is_read_only():
                mutating = sorted(agents[agent_id].capability_set() - READ_ONLY_TOOLS)
                problem(
                    "agent.access",
                    f"step {step.id!r} asks for access: read_only but agent {agent_id!r} is not read-only "
                    f"(its tools include {', '.join(mutating) or 'a runtime that writes'}); set access: mutating",
                )
                continue
            extra["access"] = access
        if step.kind == "command":
            try:
                folder = request.entry.label[2:].rpartition("/")[0] or "."
                cwd = resolver.frozen_dir(folder, node=step.id)
                extra["cwd"] = cwd
                extra["executable"] = resolver.executable(params["argv"][0], cwd_label=cwd, node=step.id)
            except PlanError as err:
                problem("resolve", f"step {step.id!r}: {err.message}")
                continue
            code = code_argument_problem(
                item_argv(params["argv"]),
                resolved=extra["executable"].file.path,
                lookup=partial(resolver.canonical_name, cwd_label=cwd),
                node=step.id,
                subject="step",
            )
            if code is not None:
                problem("argv.code", code.message, where(("steps", index, "params", "argv", code.argument)))
                continue
            extra["access"] = "mutating"
        for name in _instances(step.id, loops):
            nodes.append(
                ItemNode(
                    name=name,
                    needs=tuple(sorted(set(sources.get(name, ())))),
                    timeout_seconds=_timeout(step.kind, params),
                    max_output_bytes=int(params.get("max_output_bytes", _MAX_OUTPUT_BYTES)),
                    step=step.id,
                    round=int(name.rsplit("@", 1)[1]) if step.id in loops else None,
                    step_kind=step.kind,
                    params=params,
                    sources=tuple(sources.get(name, ())),
                    routes=tuple(routes.get(name, ())),
                    **extra,
                )
            )
    if found:
        raise InvalidWorkflow(found)
    return sorted(nodes, key=lambda n: n.name), agents


async def plan_item_graph(request: PlanRequest, *, plan_id: str, limits: Limits | None = None) -> Plan:
    """Validate the document ``request.entry``, check the inputs, and freeze it into a plan;
    nothing is stored here.

    Raises
    ------
    InvalidWorkflow
        Every finding of validation (``file:line:column``), bad inputs, an agent or a command that
        cannot be resolved, loops that share a step, or a graph over the ``graph_bytes`` budget.
    """
    limits = limits or load_limits()
    shown = request.entry.display
    document = load_graph(request.entry.text, display=shown, limits=limits)
    declared = {name: decl.declaration() for name, decl in document.inputs.items()}
    values = check_inputs(declared, request.inputs, file=shown)
    where = locate(request.entry.text, display=shown)
    resolver = Resolver(workspace=request.workspace.root, search_path=request.search_path)
    nodes, agents = await asyncio.to_thread(_freeze, document, request, resolver, where)
    inputs = tuple(
        InputDecl(
            name=name,
            type=decl["type"],
            choices=tuple(decl["choices"]),
            required=decl["required"],
            default=decl["default"],
            value=values.get(name),
        )
        for name, decl in declared.items()
    )
    graph = Graph(
        name=document.name,
        inputs=inputs,
        nodes=tuple(nodes),
        agents=tuple(agents[k] for k in sorted(agents)),
        items=ItemSettings(item_bytes=limits.limit("item_bytes")),
    )
    encoded = graph_bytes(graph)
    if len(encoded) > limits.limit("graph_bytes"):
        msg = f"planning budget 'graph_bytes' exceeded: accepted limit {limits.limit('graph_bytes')}, measured {len(encoded)}"
        raise InvalidWorkflow([Diagnostic(rule="limit.graph_bytes", message=msg, file=shown)])
    manifest = PlanManifest(
        plan_id=plan_id,
        created_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        graph_digest="sha256:" + hashlib.sha256(encoded).hexdigest(),
        workflow=graph.name,
        entry=request.entry.label,
        workspace_root=str(request.workspace.root),
        workspace_key=request.workspace.key,
        workspace_trusted=request.workspace_trusted,
        sources=source_records([request.entry]),
        inputs=graph.input_values(),
        identities=dict(sorted(resolver.identities.items())),
        authority=authority_of(graph, resolver),
        limits=limits.as_dict(),
        planner={"graph_format": GRAPH_FORMAT, "encoding_version": ENCODING_VERSION, "plan_format": PLAN_FORMAT},
        stats={"graph_bytes": len(encoded), "input_bytes": len(json.dumps(graph.input_values()).encode())},
    )
    return Plan(manifest=manifest, graph=graph, sources=[request.entry])
