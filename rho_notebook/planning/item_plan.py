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
- An ``aggregate`` step is one node whose executable, working directory, agent, timeout and
  output bound are its inner step's (each instance runs that step; the node's attempt runs them
  all and journals each as ``STEP[i]``, :mod:`~rho_notebook.exec.item`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rho_notebook.errors import Diagnostic, InvalidWorkflow, PlanError
from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.budget_spec import budget_spec
from rho_notebook.model.graph import Graph, InputDecl, ItemNode, ItemRoute, ItemSettings
from rho_notebook.model.itemgraph import GRAPH_SUFFIXES, ItemGraph, Step
from rho_notebook.model.itemrun import instance_name
from rho_notebook.planning.code_args import code_argument_problem, item_argv
from rho_notebook.planning.forms import is_graph_request
from rho_notebook.planning.frozen_agents import catalog_resolver, frozen_agent, mutating_tools
from rho_notebook.planning.inputs import check_inputs
from rho_notebook.planning.item_document import field_of
from rho_notebook.planning.item_size import loop_bodies
from rho_notebook.planning.itemgraph import load_graph, locate
from rho_notebook.planning.request import PlanRequest
from rho_notebook.planning.resolve import Resolver
from rho_notebook.planning.script import workspace_label
from rho_notebook.planning.seal import FrozenGraph
from rho_notebook.source.code_step import check_code_steps
from rho_notebook.source.labels import FileSourceReader, SourceText
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.workspace import Workspace

__all__ = ["HUMAN_TIMEOUT_SECONDS", "check_graph_steps", "graph_entry", "is_graph_request", "to_graph"]

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


_Where = Callable[[tuple[str | int, ...]], tuple[int, int]]
_Loops = dict[str, tuple[int, frozenset[str]]]


def _loops(graph: ItemGraph, request: PlanRequest, where: _Where) -> _Loops:
    """Each looped step's rounds and body (:func:`~rho_notebook.planning.item_size.loop_bodies`).

    Raises
    ------
    InvalidWorkflow
        ``graph.loop``: two loop bodies share a step.
    """
    try:
        return loop_bodies(graph)
    except ValueError as err:
        index = next(i for i, e in enumerate(graph.edges) if e.loop is not None)
        line, column = where(("edges", index, "loop"))
        shown, step = request.entry.display, graph.edges[index].source  # an edge's step is its from, as a document's
        raise InvalidWorkflow(
            [Diagnostic("graph.loop", str(err), shown, line, column, step=step, field="loop")]
        ) from None


def _edges(wired: list[tuple[str, str, Any]]) -> tuple[dict[str, list[ItemRoute]], dict[str, list[str]]]:
    """Each node's out-routes and in-edge sources, in wiring order."""
    routes: dict[str, list[ItemRoute]] = {}
    sources: dict[str, list[str]] = {}
    for source, target, when in wired:
        routes.setdefault(source, []).append(ItemRoute(to=target, when=when))
        sources.setdefault(target, []).append(source)
    return routes, sources


@dataclass
class _StepFreezer:
    """Resolves what a step needs beyond its parameters (an agent, a program); problems go to
    ``found``, located at the step's parameters (an ``argv.code`` at the argument)."""

    request: PlanRequest
    resolver: Resolver
    where: _Where
    agents: dict[str, AgentDefinition] = field(default_factory=dict)
    found: list[Diagnostic] = field(default_factory=list)

    def problem(self, rule: str, message: str, at: tuple[int, int], *, step: str, under: tuple[str | int, ...]) -> None:
        """A finding at ``at``, the position of ``under`` (a path into the document) in step ``step``."""
        display, inside = self.request.entry.display, field_of(under)
        self.found.append(
            Diagnostic(rule=rule, message=message, file=display, line=at[0], column=at[1], step=step, field=inside)
        )

    def extra(self, index: int, step: Step, params: dict[str, Any]) -> dict[str, Any] | None:
        """The fields the step's nodes add (agent, access, cwd, executable); None: refused. An
        aggregate's are its inner step's (the step it runs once per element)."""
        under: tuple[str | int, ...] = ("steps", index, "params")
        kind, acting = step.kind, params
        if kind == "aggregate":
            kind, acting, under = params["step"]["kind"], params["step"]["params"], (*under, "step", "params")
        at = self.where(under)
        if kind in ("agent", "model") and acting.get("agent") is not None:
            return self.agent(under, step, kind, acting, at)
        if kind == "command":
            return self.command(under, step, acting, at)
        return {}

    def agent(
        self, under: tuple[str | int, ...], step: Step, kind: str, params: dict[str, Any], at: tuple[int, int]
    ) -> dict[str, Any] | None:
        agent_id = params["agent"]
        try:
            definition = frozen_agent(agent_id, self.agents, request=self.request, resolve_agent=catalog_resolver)
        except InvalidWorkflow as err:  # each finding at the step, with its own rule (agent.unknown, ...)
            for found in err.diagnostics():
                if found.file in (None, self.request.entry.display):
                    said = found.inline(rule=False, within=self.request.entry.display)  # its rule is the finding's
                    self.problem(found.rule, f"step {step.id!r}: {said}", at, step=step.id, under=under)
                else:  # in the agent's definition file: said there, naming the step
                    named = f"step {step.id!r}: {found.message}"
                    self.found.append(dataclasses.replace(found, message=named, step=step.id))
            return None
        except PlanError as err:
            self.problem("resolve", f"step {step.id!r}: {err.message}", at, step=step.id, under=under)
            return None
        access = params.get("access", "read_only")
        if kind == "agent" and access == "read_only" and not definition.is_read_only():
            self.problem(
                "agent.access",
                f"step {step.id!r} asks for access: read_only but agent {agent_id!r} is not read-only "
                f"(its tools include {', '.join(mutating_tools(definition)) or 'a runtime that writes'}); "
                "set access: mutating",
                at,
                step=step.id,
                under=under,
            )
            return None
        return {"agent": agent_id, "access": access}

    def command(
        self, under: tuple[str | int, ...], step: Step, params: dict[str, Any], at: tuple[int, int]
    ) -> dict[str, Any] | None:
        try:
            folder = self.request.entry.label[2:].rpartition("/")[0] or "."
            cwd = self.resolver.frozen_dir(folder, node=step.id)
            executable = self.resolver.executable(params["argv"][0], cwd_label=cwd, node=step.id)
        except PlanError as err:
            said = err.message.removeprefix(f"node {step.id!r}: ")
            self.problem("resolve", f"step {step.id!r}: {said}", at, step=step.id, under=under)
            return None
        code = code_argument_problem(
            item_argv(params["argv"]),
            resolved=executable.file.path,
            lookup=partial(self.resolver.canonical_name, cwd_label=cwd),
            node=step.id,
            subject="step",
        )
        if code is not None:
            argument = (*under, "argv", code.argument)
            self.problem("argv.code", code.message, self.where(argument), step=step.id, under=argument)
            return None
        return {"cwd": cwd, "executable": executable, "access": "mutating"}


def _step_nodes(
    step: Step,
    params: dict[str, Any],
    extra: dict[str, Any],
    *,
    loops: _Loops,
    edges: tuple[dict[str, list[ItemRoute]], dict[str, list[str]]],
) -> list[ItemNode]:
    """The step's node, or one node per round when it is in a loop body."""
    routes, sources = edges
    kind, acting = (
        (params["step"]["kind"], params["step"]["params"]) if step.kind == "aggregate" else (step.kind, params)
    )
    return [
        ItemNode(
            name=name,
            needs=tuple(sorted(set(sources.get(name, ())))),
            timeout_seconds=_timeout(kind, acting),  # an aggregate's: per instance
            max_output_bytes=int(acting.get("max_output_bytes", _MAX_OUTPUT_BYTES)),
            step=step.id,
            round=int(name.rsplit("@", 1)[1]) if step.id in loops else None,
            step_kind=step.kind,
            params=params,
            sources=tuple(sources.get(name, ())),
            routes=tuple(routes.get(name, ())),
            **extra,
        )
        for name in _instances(step.id, loops)
    ]


def _freeze(
    graph: ItemGraph, request: PlanRequest, resolver: Resolver, where: _Where
) -> tuple[list[ItemNode], dict[str, AgentDefinition]]:
    """The document's nodes, sorted by name, and the agents they name (blocking: it hashes files).

    Raises
    ------
    InvalidWorkflow
        Loops that share a step; with every problem resolving the steps.
    """
    loops = _loops(graph, request, where)
    edges = _edges(_wiring(graph, loops))
    freezer = _StepFreezer(request=request, resolver=resolver, where=where)
    nodes: list[ItemNode] = []
    for index, step in enumerate(graph.steps):
        params = step.params.model_dump(mode="json", exclude_defaults=False)
        extra = freezer.extra(index, step, params)
        budget = getattr(step, "budget", None)  # agent and model steps (validated by the document model)
        if extra is not None and budget is not None:
            limits = {k: float(v) if k == "cost" else v for k, v in budget.model_dump(exclude_none=True).items()}
            extra = {**extra, "budget": budget_spec(limits, where=f"step {step.id}")}
        if extra is not None:
            nodes.extend(_step_nodes(step, params, extra, loops=loops, edges=edges))
    if freezer.found:
        raise InvalidWorkflow(freezer.found)
    return sorted(nodes, key=lambda n: n.name), freezer.agents


async def to_graph(request: PlanRequest, *, limits: Limits) -> FrozenGraph:
    """Validate the document ``request.entry``, check the inputs, and freeze it; nothing is stored.

    Raises
    ------
    InvalidWorkflow
        Every finding of validation (``file:line:column``), bad inputs, an agent or a command that
        cannot be resolved, or loops that share a step.
    """
    shown = request.entry.display
    document = load_graph(request.entry.text, display=shown, limits=limits)
    declared = {name: decl.declaration() for name, decl in document.inputs.items()}
    values = check_inputs(declared, request.inputs, file=shown)
    resolver = Resolver(workspace=request.workspace.root, search_path=request.search_path)
    nodes, agents = await _frozen_steps(document, request, resolver, limits)
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
    return FrozenGraph(graph=graph, resolver=resolver, sources=[request.entry], display=shown)


async def _frozen_steps(
    document: ItemGraph, request: PlanRequest, resolver: Resolver, limits: Limits
) -> tuple[list[ItemNode], dict[str, AgentDefinition]]:
    """The document's nodes and agents; every step that cannot be resolved, and every code step
    whose source does not parse, refused together."""
    where = locate(request.entry.text, display=request.entry.display)
    found: list[Diagnostic] = []
    frozen: tuple[list[ItemNode], dict[str, AgentDefinition]] = ([], {})
    try:
        frozen = await asyncio.to_thread(_freeze, document, request, resolver, where)
    except InvalidWorkflow as err:
        found = err.diagnostics()
    sources = {step: (at, text) for step, at, text in _code_sources(document)}
    for refused in await check_code_steps([(step, text) for step, (_, text) in sources.items()], limits=limits):
        at = sources[refused.step][0]
        line, column = where(at)
        shown, inside = request.entry.display, field_of(at)  # params.source (an aggregate's: params.step.params.source)
        found.append(Diagnostic(refused.rule, refused.message, shown, line, column, step=refused.step, field=inside))
    if found:
        raise InvalidWorkflow(found)
    return frozen


def _code_sources(document: ItemGraph) -> Iterator[tuple[str, tuple[str | int, ...], str]]:
    """(step id, path of its ``source`` in the document, the source) of each code step, an
    aggregate's inner code step included."""
    for index, step in enumerate(document.steps):
        params = step.params.model_dump(mode="json")
        under: tuple[str | int, ...] = ("steps", index, "params")
        if step.kind == "aggregate" and params["step"]["kind"] == "code":
            params, under = params["step"]["params"], (*under, "step", "params")
        elif step.kind != "code":
            continue
        yield step.id, (*under, "source"), params["source"]


async def check_graph_steps(request: PlanRequest, *, limits: Limits) -> None:
    """What planning resolves in a valid document's steps, without its inputs: each agent from the
    catalog (and its access), each command's program and its code arguments, the loops. It is
    ``validate``'s check of what the document's rules cannot see, so ``validate`` and ``plan``
    refuse the same document.

    Raises
    ------
    InvalidWorkflow
        Every step that cannot be resolved, at its parameters (``resolve``, ``agent.unknown``,
        ``agent.access``, ``argv.code``), or loops that share a step.
    """
    document = load_graph(request.entry.text, display=request.entry.display, limits=limits)
    resolver = Resolver(workspace=request.workspace.root, search_path=request.search_path)
    await _frozen_steps(document, request, resolver, limits)
