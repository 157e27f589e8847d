"""The frozen plan: its manifest model, and turning source + inputs into one (validate / plan).

A plan is the frozen graph (digest-covered) plus a manifest of everything that is recorded but
not digested: IDs, time, workspace location and key, source labels/sizes/digests, file identities,
the authority list, planning limits and the planner's format identity.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from rho_notebook.errors import Diagnostic, InvalidWorkflow, PlanError, SourceError
from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.canonical import ENCODING_VERSION, graph_bytes
from rho_notebook.model.graph import (
    GRAPH_FORMAT,
    AgentNode,
    ApprovalNode,
    ArgvPart,
    CommandNode,
    FrozenExecutable,
    Graph,
    InputDecl,
    ItemNode,
    Node,
    PythonArg,
    PythonModule,
    PythonNode,
    PythonRuntime,
    SchedulerLimits,
    ShellNode,
)
from rho_notebook.model.plan import PLAN_FORMAT, AuthorityItem, Plan, PlanManifest, SourceRecord
from rho_notebook.model.reference import Template
from rho_notebook.planning.code_args import code_argument_problem
from rho_notebook.planning.inputs import check_inputs
from rho_notebook.planning.normalize import NodeDraft, check_graph, drafts_of, is_output_ref, to_output_ref, to_template
from rho_notebook.planning.python import freeze_runtime, frozen_modules, reuse_input
from rho_notebook.planning.resolve import Resolver
from rho_notebook.source.evaluate import Evaluation, evaluate_source
from rho_notebook.source.labels import FileSourceReader, SourceText
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.pymodules import ModuleIndex
from rho_notebook.source.workspace import Workspace

__all__ = ["PlanRequest", "authority_of", "build_plan", "catalog_resolver", "frozen_agent", "source_records"]

AgentResolver = Any  # (agent_id, workflow_dir, workspace, user_home, overlay) -> (AgentDefinition, Path | None)


@dataclass
class PlanRequest:
    """Everything planning needs: the entry source, inputs and where to look things up."""

    entry: SourceText
    workspace: Workspace
    user_home: Path
    inputs: Mapping[str, Any] = field(default_factory=dict)
    workflow_dir: Path | None = None
    """Folder of the entry module (its agents/ folder has the highest agent precedence)."""
    overlay_sources: Mapping[str, SourceText] = field(default_factory=dict)
    overlay_agents: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    search_path: str = "/usr/local/bin:/usr/bin:/bin"
    workspace_trusted: bool = False
    """Recorded in the plan; project settings and hooks apply only to trusted workspaces."""
    python_interpreter: Path | None = None
    """The interpreter Python nodes run in, by absolute path; None: this process's ``sys.executable``."""
    flow: str | None = None
    """A script entry planned as a flow run (docs/flows.md): the ``Workflow`` the module defines."""


def source_records(sources: list[SourceText]) -> tuple[SourceRecord, ...]:
    """The manifest's record (label, size, digest) of each frozen source text."""
    return tuple(
        SourceRecord(
            label=s.label, size=len(s.text.encode()), sha256="sha256:" + hashlib.sha256(s.text.encode()).hexdigest()
        )
        for s in sources
    )


def _argv_part(raw: Any) -> ArgvPart:
    if isinstance(raw, str):
        return raw
    tmpl = to_template(raw)
    static = tmpl.static_text()
    return static if static is not None else tmpl


def _limit(found: list[Diagnostic], draft: NodeDraft, limits: Limits, budget: str, measured: int) -> None:
    if measured > limits.limit(budget):
        found.append(
            draft.diagnostic(
                f"limit.{budget}",
                f"planning budget '{budget}' exceeded: accepted limit {limits.limit(budget)}, measured {measured} (node {draft.name!r})",
            )
        )


def _template_bytes(tmpl: Template) -> int:
    return sum(len(p.encode()) for p in tmpl.parts if isinstance(p, str))


@dataclass
class _Frozen:
    """What freezing the nodes produced."""

    nodes: list[Node]
    agents: dict[str, AgentDefinition]
    found: list[Diagnostic]
    python: PythonRuntime | None = None
    python_modules: tuple[PythonModule, ...] = ()


def _python_node(
    draft: NodeDraft, common: dict[str, Any], *, index: ModuleIndex, resolver: Resolver
) -> PythonNode | Diagnostic:
    """A python node frozen, or the diagnostic that stops it; a module's syntax error, or a problem
    reading a module it imports, raises SourceError (located in that module, not at the node)."""
    raw = draft.raw
    cwd = resolver.frozen_dir(raw.get("cwd", "."), node=draft.name)
    label, function = raw["module"], raw["function"]
    try:
        module = index.module(label)
    except SourceError as err:
        problem = err.diagnostics()[0]
        if problem.rule == "python.syntax":
            raise
        return draft.diagnostic(problem.rule, f"node {draft.name!r}: module = {label!r}: {problem.message}")
    if not module.defines(function):
        return draft.diagnostic(
            "python.function",
            f"node {draft.name!r}: module {module.source.display} ({label}) defines no top-level {function!r}; "
            f"define it with def {function}(...) or fix function =",
        )
    args = tuple(
        PythonArg(name=name, ref=to_output_ref(value)) if is_output_ref(value) else PythonArg(name=name, value=value)
        for name, value in sorted(raw.get("args", {}).items())
    )
    reuse_inputs = tuple(
        reuse_input(path, workspace=resolver.workspace, node=draft.name) for path in raw.get("reuse_inputs", [])
    )
    return PythonNode(
        module=label,
        function=function,
        args=args,
        cwd=cwd,
        access=raw.get("access", "mutating"),
        modules=index.closure(label),
        reuse=raw.get("reuse", False),
        reuse_inputs=tuple(sorted({f.path: f for f in reuse_inputs}.values(), key=lambda f: f.path)),
        **common,
    )


def _freeze_nodes(
    drafts: list[NodeDraft],
    *,
    request: PlanRequest,
    resolver: Resolver,
    resolve_agent: AgentResolver,
    limits: Limits,
    index: ModuleIndex,
) -> _Frozen:

    nodes: list[Node] = []
    agents: dict[str, AgentDefinition] = {}
    found: list[Diagnostic] = []
    for draft in sorted(drafts, key=lambda d: d.name):
        raw = draft.raw
        common: dict[str, Any] = {
            "name": draft.name,
            "needs": draft.needs,
            "when": draft.when,
            "allow_failure": raw.get("allow_failure", False),
            "timeout_seconds": raw["timeout_seconds"],
            "max_output_bytes": raw["max_output_bytes"],
            "output": draft.output,
        }
        # Command, shell and python nodes only (the worker refuses these options on the others).
        placed: dict[str, Any] = {
            "placement": raw.get("placement", "any"),
            "resources": tuple(sorted(raw.get("resources", {}).items())),
        }
        try:
            if draft.kind == "agent":
                agent_id = raw["agent"]
                definition = frozen_agent(agent_id, agents, request=request, resolve_agent=resolve_agent)
                access = raw.get("access", "mutating")
                if access == "read_only" and not definition.is_read_only():
                    mutating = sorted(definition.capability_set() - _read_only_caps())
                    why = (
                        "claude-cli agents are always mutating"
                        if definition.runtime == "claude-cli"
                        else f"its tools include {', '.join(mutating)}"
                    )
                    found.append(
                        draft.diagnostic(
                            "agent.access",
                            f'agent node {draft.name!r} asks for access = "read_only" but agent {agent_id!r} is not read-only: {why}',
                        )
                    )
                    continue
                prompt = to_template(raw["prompt"])
                _limit(found, draft, limits, "template_bytes", _template_bytes(prompt) + len(definition.body.encode()))
                reuse = raw.get("reuse", False)
                nodes.append(AgentNode(agent=agent_id, prompt=prompt, access=access, reuse=reuse, **common))
            elif draft.kind == "approval":
                prompt = to_template(raw["prompt"])
                _limit(found, draft, limits, "template_bytes", _template_bytes(prompt))
                nodes.append(ApprovalNode(prompt=prompt, **common))
            elif draft.kind == "command":
                cwd = resolver.frozen_dir(raw.get("cwd", "."), node=draft.name)
                argv = tuple(_argv_part(p) for p in raw["argv"])
                size = sum(len(p.encode()) if isinstance(p, str) else _template_bytes(p) for p in argv)
                _limit(found, draft, limits, "argv_bytes", size)
                _limit(found, draft, limits, "argv_items", len(argv))
                executable = resolver.executable(raw["argv"][0], cwd_label=cwd, node=draft.name)
                problem = code_argument_problem(
                    argv,
                    resolved=executable.file.path,
                    lookup=partial(resolver.canonical_name, cwd_label=cwd),
                    node=draft.name,
                )
                if problem is not None:
                    found.append(draft.diagnostic("argv.code", problem.message))
                    continue
                nodes.append(CommandNode(argv=argv, cwd=cwd, executable=executable, **common, **placed))
            elif draft.kind == "shell":
                cwd = resolver.frozen_dir(raw.get("cwd", "."), node=draft.name)
                arguments = tuple(raw.get("arguments", []))
                size = len(raw["command"].encode()) + sum(len(a.encode()) for a in arguments)
                _limit(found, draft, limits, "argv_bytes", size)
                executable = resolver.executable(raw["executable"], cwd_label=cwd, node=draft.name)
                nodes.append(
                    ShellNode(
                        executable=executable, arguments=arguments, command=raw["command"], cwd=cwd, **common, **placed
                    )
                )
            elif draft.kind == "python":
                try:
                    frozen = _python_node(draft, {**common, **placed}, index=index, resolver=resolver)
                except SourceError as err:  # a module's syntax: said once, however many nodes import it
                    found.extend(d for d in err.diagnostics() if d not in found)
                    continue
                if isinstance(frozen, Diagnostic):
                    found.append(frozen)
                    continue
                nodes.append(frozen)
        except InvalidWorkflow as err:
            found.extend(err.diagnostics())
        except PlanError as err:
            found.append(draft.diagnostic("resolve", err.message))
    python_nodes = [node for node in nodes if isinstance(node, PythonNode)]
    if not python_nodes or found:
        return _Frozen(nodes=nodes, agents=agents, found=found)
    first = python_nodes[0].name
    try:
        runtime = freeze_runtime(request.python_interpreter, resolver=resolver, node=first)
    except PlanError as err:
        draft = next(d for d in drafts if d.name == first)
        return _Frozen(nodes=nodes, agents=agents, found=[draft.diagnostic("python.interpreter", err.message)])
    labels = {label for node in python_nodes for label in node.modules}
    return _Frozen(
        nodes=nodes, agents=agents, found=found, python=runtime, python_modules=frozen_modules(index, labels)
    )


def frozen_agent(
    agent_id: str, agents: dict[str, AgentDefinition], *, request: PlanRequest, resolve_agent: AgentResolver
) -> AgentDefinition:
    """The definition of ``agent_id`` from the catalog (``request``'s workflow folder, overlays,
    workspace and user home), its provider checked against the settings; kept in ``agents`` so
    each agent is resolved once per plan.

    Raises
    ------
    InvalidWorkflow, PlanError
        The agent is not found, its definition is invalid, or its provider is unknown.
    """
    from rho_notebook.agents.resolve import check_agent_provider

    if agent_id not in agents:
        definition, where = resolve_agent(
            agent_id,
            workflow_dir=request.workflow_dir,
            workspace=request.workspace.root,
            user_home=request.user_home,
            overlay=request.overlay_agents,
        )
        agents[agent_id] = definition  # a provider problem is said once, at the first node naming it
        check_agent_provider(
            definition,
            user_home=request.user_home,
            workspace=request.workspace.root,
            trusted=request.workspace_trusted,
            file=where,
        )
    return agents[agent_id]


def _read_only_caps() -> frozenset[str]:
    from rho_notebook.model.agent import READ_ONLY_TOOLS

    return READ_ONLY_TOOLS


def authority_of(graph: Graph, resolver: Resolver) -> tuple[AuthorityItem, ...]:
    """Everything the plan's nodes may do, as a person confirms it (sorted)."""
    items: set[AuthorityItem] = set()

    def process(exe: FrozenExecutable, cwd: str) -> None:
        detail = "; ".join((exe.file.sha256, *resolver.via(exe.file.path)))
        items.add(AuthorityItem(kind="executable", value=exe.file.path, detail=detail))
        for interp in exe.interpreters:
            interp_detail = "; ".join((interp.sha256, *resolver.via(interp.path)))
            items.add(AuthorityItem(kind="interpreter", value=interp.path, detail=interp_detail))
        items.add(AuthorityItem(kind="directory", value=cwd, detail="working directory (mutating)"))
        items.add(AuthorityItem(kind="capability", value="process", detail="run frozen commands in the workspace"))

    def agent_items(agent_id: str, access: str) -> None:
        agent = graph.agent(agent_id)
        tools = "all" if agent.tools == "all" else ", ".join(agent.tools)
        items.add(
            AuthorityItem(
                kind="agent",
                value=agent.id,
                detail=f"{agent.runtime} agent from {agent.origin}; tools: {tools}; access: {access}",
            )
        )
        for cap in sorted(agent.capability_set()):
            items.add(
                AuthorityItem(kind="capability", value=f"agent:{cap}", detail=f"tool available to agent {agent.id!r}")
            )

    for node in graph.nodes:
        if isinstance(node, (CommandNode, ShellNode)):
            process(node.executable, node.cwd)
        elif isinstance(node, ItemNode):
            if node.executable is not None:
                process(node.executable, node.cwd)
            elif node.step_kind == "agent" and node.agent is not None:
                agent_items(node.agent, node.access)
            elif node.step_kind == "model":
                detail = (
                    f"one completion from agent {node.agent!r}'s model"
                    if node.agent
                    else f"one completion from {node.params.get('provider')}/{node.params.get('model')}"
                )
                items.add(AuthorityItem(kind="capability", value="model", detail=detail))
            elif node.step_kind == "human":
                items.add(
                    AuthorityItem(kind="capability", value="approval", detail=f"a person answers step {node.step!r}")
                )
        elif isinstance(node, PythonNode):
            if graph.python is None:
                msg = f"python node {node.name!r} in a graph without a Python runtime"
                raise PlanError(msg)
            interp = graph.python.interpreter.file
            interp_detail = "; ".join((interp.sha256, *resolver.via(interp.path)))
            items.add(AuthorityItem(kind="interpreter", value=interp.path, detail=interp_detail))
            mode = "read-only, declared" if node.access == "read_only" else "mutating"
            items.add(AuthorityItem(kind="directory", value=node.cwd, detail=f"working directory ({mode})"))
            items.add(
                AuthorityItem(kind="capability", value="process", detail="run frozen Python functions in the workspace")
            )
        elif isinstance(node, ApprovalNode):
            items.add(AuthorityItem(kind="capability", value="approval", detail=f"a person decides node {node.name!r}"))
        elif isinstance(node, AgentNode):
            agent_items(node.agent, node.access)
    return tuple(sorted(items, key=lambda i: (i.kind, i.value, i.detail)))


def catalog_resolver(agent_id: str, **where: Any) -> Any:
    from rho_notebook.agents.catalog import resolve_agent

    return resolve_agent(agent_id, **where)


async def build_plan(
    request: PlanRequest,
    *,
    plan_id: str,
    limits: Limits | None = None,
    resolve_agent: AgentResolver | None = None,
) -> Plan:
    """Evaluate, validate, resolve, normalise and freeze; nothing is stored here.

    Raises
    ------
    InvalidWorkflow
        With every diagnostic found (source, inputs, graph rules, resolution, limits).
    """
    limits = limits or load_limits()
    resolve_agent = resolve_agent or catalog_resolver
    reader = FileSourceReader(request.workspace.root, request.overlay_sources)
    index = ModuleIndex(reader)
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

    evaluation: Evaluation = await evaluate_source(request.entry, reader=reader, check_inputs=checker, limits=limits)
    raw = evaluation.graph
    at = raw.get("at") or [None, None, None]
    drafts = drafts_of(raw["nodes"])
    for draft in drafts:
        draft.at = (evaluation.display(draft.at[0]), draft.at[1], draft.at[2])
    workflow_at = (evaluation.display(at[0]), at[1], at[2])
    found = check_graph(drafts, limits=limits, workflow_at=workflow_at)
    if found:
        raise InvalidWorkflow(found)
    resolver = Resolver(workspace=request.workspace.root, search_path=request.search_path)
    # Resolution hashes files and may ask a version manager about a shim: off the event loop.
    frozen = await asyncio.to_thread(
        _freeze_nodes,
        drafts,
        request=request,
        resolver=resolver,
        resolve_agent=resolve_agent,
        limits=limits,
        index=index,
    )
    if frozen.found:
        raise InvalidWorkflow(frozen.found)
    nodes, agents = frozen.nodes, frozen.agents
    declared = evaluation.declared_inputs
    inputs = tuple(
        InputDecl(
            name=key,
            type=decl["type"],
            choices=tuple(decl.get("choices") or ()),
            required=decl["required"],
            default=decl.get("default"),
            value=evaluation.input_values[key],
        )
        for key, decl in sorted(declared.items())
    )
    graph = Graph(
        name=raw["name"],
        inputs=inputs,
        nodes=tuple(nodes),
        agents=tuple(agents[k] for k in sorted(agents)),
        scheduler=SchedulerLimits(**(raw.get("concurrency") or {})),
        checkout=raw.get("checkout", "exclusive"),
        python=frozen.python,
        python_modules=frozen.python_modules,
    )
    encoded = graph_bytes(graph)
    if len(encoded) > limits.limit("graph_bytes"):
        raise InvalidWorkflow(
            [
                Diagnostic(
                    rule="limit.graph_bytes",
                    message=f"planning budget 'graph_bytes' exceeded: accepted limit {limits.limit('graph_bytes')}, measured {len(encoded)}",
                    file=workflow_at[0],
                )
            ]
        )
    digest = "sha256:" + hashlib.sha256(encoded).hexdigest()
    python_sources = [index.module(module.label).source for module in graph.python_modules]
    sources = sorted([*evaluation.sources, *python_sources], key=lambda s: s.label)
    manifest = PlanManifest(
        plan_id=plan_id,
        created_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        graph_digest=digest,
        workflow=graph.name,
        entry=request.entry.label,
        workspace_root=str(request.workspace.root),
        workspace_key=request.workspace.key,
        workspace_trusted=request.workspace_trusted,
        sources=source_records(sources),
        inputs=graph.input_values(),
        identities=dict(sorted(resolver.identities.items())),
        authority=authority_of(graph, resolver),
        limits=limits.as_dict(),
        planner={"graph_format": GRAPH_FORMAT, "encoding_version": ENCODING_VERSION, "plan_format": PLAN_FORMAT},
        stats={**evaluation.stats, "graph_bytes": len(encoded)},
    )
    return Plan(manifest=manifest, graph=graph, sources=sources)
