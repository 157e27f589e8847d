"""The Starlark form: evaluating a workflow's source with its inputs, checking the graph rules,
and freezing its nodes into the graph that :mod:`~rho_notebook.planning.seal` turns into a plan.

A plan is the frozen graph (digest-covered) plus a manifest of everything that is recorded but
not digested: IDs, time, workspace location and key, source labels/sizes/digests, file identities,
the authority list, planning limits and the planner's format identity.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rho_notebook.errors import Diagnostic, InvalidWorkflow
from rho_notebook.model.graph import Graph, InputDecl, SchedulerLimits
from rho_notebook.planning.authority import authority_of
from rho_notebook.planning.budgets import source_budget
from rho_notebook.planning.frozen_agents import AgentResolver, catalog_resolver, frozen_agent
from rho_notebook.planning.inputs import check_inputs
from rho_notebook.planning.normalize import NodeDraft, check_graph, drafts_of
from rho_notebook.planning.request import PlanRequest
from rho_notebook.planning.resolve import Resolver
from rho_notebook.planning.seal import FrozenGraph, source_records
from rho_notebook.planning.starlark_nodes import FrozenNodes, freeze_nodes
from rho_notebook.source.evaluate import Evaluation, evaluate_source
from rho_notebook.source.labels import FileSourceReader, SourceReader
from rho_notebook.source.limits import Limits
from rho_notebook.source.pymodules import ModuleIndex

__all__ = [
    "PlanRequest",
    "authority_of",
    "catalog_resolver",
    "frozen_agent",
    "source_records",
    "to_graph",
]


async def _evaluate(request: PlanRequest, *, reader: SourceReader, limits: Limits) -> Evaluation:
    """The evaluated entry, its declared inputs checked (count first) against the given ones."""
    shown = request.entry.display

    def checker(declared: dict[str, Any]) -> dict[str, Any]:
        if len(declared) > limits.limit("input_count"):
            raise InvalidWorkflow(
                [
                    Diagnostic(
                        rule="limit.input_count",
                        message=f"planning budget 'input_count' exceeded: accepted limit {limits.limit('input_count')}, measured {len(declared)}",
                        file=shown,
                    )
                ]
            )
        return check_inputs(declared, request.inputs, file=shown)

    return await evaluate_source(request.entry, reader=reader, check_inputs=checker, limits=limits)


def _checked_drafts(evaluation: Evaluation, *, limits: Limits) -> tuple[list[NodeDraft], str | None]:
    """The node drafts, located in their files, and the file of the ``workflow(...)`` call.

    They depend on the evaluation, the limits and the files' display names alone, so they are
    kept in the evaluation's memo: a warm process that reuses the evaluation (``plan`` after
    ``validate``) does not check the same graph twice.

    Raises
    ------
    InvalidWorkflow
        With every finding of the graph rules.
    """
    key = ("drafts", tuple(limits.as_dict().items()), tuple((s.label, s.display) for s in evaluation.sources))
    kept: tuple[list[NodeDraft], str | None] | None = evaluation.memo.get(key)
    if kept is not None:
        return kept
    at = evaluation.graph.get("at") or [None, None, None]
    drafts = drafts_of(evaluation.graph["nodes"])
    for draft in drafts:
        draft.at = (evaluation.display(draft.at[0]), draft.at[1], draft.at[2])
    workflow_at = (evaluation.display(at[0]), at[1], at[2])
    found = check_graph(drafts, limits=limits, workflow_at=workflow_at)
    if found:
        raise InvalidWorkflow(found)
    evaluation.memo[key] = (drafts, workflow_at[0])
    return drafts, workflow_at[0]


def _graph(evaluation: Evaluation, frozen: FrozenNodes) -> Graph:
    raw, agents = evaluation.graph, frozen.agents
    inputs = tuple(
        InputDecl(
            name=key,
            type=decl["type"],
            choices=tuple(decl.get("choices") or ()),
            required=decl["required"],
            default=decl.get("default"),
            value=evaluation.input_values[key],
        )
        for key, decl in sorted(evaluation.declared_inputs.items())
    )
    return Graph(
        name=raw["name"],
        inputs=inputs,
        nodes=tuple(frozen.nodes),
        agents=tuple(agents[k] for k in sorted(agents)),
        scheduler=SchedulerLimits(**(raw.get("concurrency") or {})),
        checkout=raw.get("checkout", "exclusive"),
        python=frozen.python,
        python_modules=frozen.python_modules,
        budget=source_budget(raw.get("budget"), where="define(budget = ...)"),
    )


async def to_graph(
    request: PlanRequest, *, limits: Limits, resolve_agent: AgentResolver = catalog_resolver
) -> FrozenGraph:
    """Evaluate, validate, resolve, normalise and freeze a Starlark workflow; nothing is stored.

    Raises
    ------
    InvalidWorkflow
        With every diagnostic found (source, inputs, graph rules, resolution, limits).
    """
    reader = FileSourceReader(request.workspace.root, request.overlay_sources)
    index = ModuleIndex(reader)
    evaluation = await _evaluate(request, reader=reader, limits=limits)
    drafts, workflow_file = _checked_drafts(evaluation, limits=limits)
    resolver = Resolver(workspace=request.workspace.root, search_path=request.search_path)
    # Resolution hashes files and may ask a version manager about a shim: off the event loop.
    frozen = await asyncio.to_thread(
        freeze_nodes,
        drafts,
        request=request,
        resolver=resolver,
        resolve_agent=resolve_agent,
        limits=limits,
        index=index,
        memo=evaluation.memo,
    )
    if frozen.found:
        raise InvalidWorkflow(frozen.found)
    graph = _graph(evaluation, frozen)
    python_sources = [index.module(module.label).source for module in graph.python_modules]
    sources = sorted([*evaluation.sources, *python_sources], key=lambda s: s.label)
    return FrozenGraph(
        graph=graph,
        resolver=resolver,
        sources=sources,
        display=workflow_file,
        stats=evaluation.stats,
        memo=evaluation.memo,
    )
