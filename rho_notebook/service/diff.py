"""Comparing plans and trying one node: what the ``diff`` and ``try`` verbs read and build.

``diff OLD NEW`` names each side by a plan ID (or unique prefix), a graph digest (``sha256:...``:
the newest stored plan with that digest, else the newest run) or a run ID (the graph that run
executes); :func:`resolve_graph` turns such a name into a :class:`GraphRef`.

``try NODE`` makes a *derived plan*: the node and every node it transitively needs, cut out of the
current plan's graph (:func:`sub_graph`; its own digest) and saved like any plan, to be run with
the ancestors' results taken from an earlier run (the source run). It refuses
(:class:`~rho_notebook.errors.TryRefused`) when an ancestor's definition in the current plan
differs from the one the source run executed, naming the node and the changed fields, since the
values the run would take would then not be what the current plan computes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rho_notebook.errors import AmbiguousId, NotFound, RhoError, TryRefused
from rho_notebook.model.canonical import graph_digest
from rho_notebook.model.diff import PlanDiff, ancestors, diff_graphs, node_changes
from rho_notebook.model.graph import AgentNode, CommandNode, Graph, Node, PythonNode, ShellNode
from rho_notebook.model.node_names import no_node
from rho_notebook.model.plan import AuthorityItem, Plan
from rho_notebook.runtime.reuse import predict_reuse
from rho_notebook.runtime.reuse import seeds as seed_attempts
from rho_notebook.store.ids import new_id
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.plans import PlanStore
from rho_notebook.store.runs import RunManifest, RunStore

if TYPE_CHECKING:
    from rho_notebook.service.fork import ForkPlan

__all__ = [
    "GraphRef",
    "DiffResult",
    "TryPlan",
    "resolve_graph",
    "plan_ref",
    "compare",
    "latest_run",
    "sub_graph",
    "derive_try_plan",
    "derive_fork",
    "NodeRunDiff",
    "compare_runs",
]


@dataclass(frozen=True)
class GraphRef:
    """What a ``diff`` argument named: a stored plan or a run, and its frozen graph."""

    kind: Literal["plan", "run"]
    id: str
    """The plan or run ID."""
    graph_digest: str
    graph: Graph
    workflow: str
    workspace_root: str
    workspace_key: str


@dataclass(frozen=True)
class DiffResult:
    """The answer of ``diff OLD NEW``."""

    old: GraphRef
    new: GraphRef
    diff: PlanDiff
    will_reuse: tuple[str, ...] | None = None
    """NEW's nodes a run started now would take from a stored success; None: not predicted."""
    will_launch: tuple[str, ...] | None = None
    """NEW's nodes a run started now would launch; None: not predicted."""
    runs: tuple[NodeRunDiff, ...] | None = None
    """Two runs of one fork lineage (``diff RUN FORK``): each node's state and value on both sides."""

    def lines(self) -> list[str]:
        """The text answer (``diff`` in a terminal and a notebook): a head line, one line per added
        (``+``), removed (``-``) and changed (``~``, with its fields) node, graph-level changes,
        then the reuse prediction when there is one."""
        found = self.diff
        head = f"diff {_side(self.old)} -> {_side(self.new)}"
        shown = [head]
        if found.same:
            shown.append("no changes: the graphs are the same")
        shown += [f"+ {name}" for name in found.added]
        shown += [f"- {name}" for name in found.removed]
        shown += [f"~ {change.node}: {', '.join(change.fields)}" for change in found.changed]
        if found.graph:
            shown.append(f"graph: {', '.join(found.graph)}")
        if self.will_reuse is not None:
            shown.append(f"will reuse: {', '.join(self.will_reuse) or '(none)'}")
        if self.will_launch is not None:
            shown.append(f"will launch: {', '.join(self.will_launch) or '(none)'}")
        for node in self.runs or ():
            shown.append(node.line())
        return shown


@dataclass(frozen=True)
class NodeRunDiff:
    """One node of ``diff RUN FORK``: its state, value digest and how NEW got it, on each side."""

    node: str
    old_state: str | None
    new_state: str | None
    old_value: str | None
    """``sha256:...`` of OLD's value bytes; None: no value (or no such node)."""
    new_value: str | None
    how: str
    """How NEW's current attempt came to be: ``taken``, ``edited``, ``reused``, ``launched`` or ``""``."""

    @property
    def same(self) -> bool:
        return self.old_state == self.new_state and self.old_value == self.new_value

    def line(self) -> str:
        """``= a: success (taken)`` or ``~ d: success -> success, value changed (launched)``."""
        how = f" ({self.how})" if self.how else ""
        if self.same:
            return f"= {self.node}: {self.new_state}{how}"
        states = f"{self.old_state or '-'} -> {self.new_state or '-'}"
        value = ", value changed" if self.old_value != self.new_value else ""
        return f"~ {self.node}: {states}{value}{how}"


def _side(ref: GraphRef) -> str:
    return f"{ref.kind} {ref.id[:13]} ({ref.graph_digest[:19]})"


@dataclass(frozen=True)
class TryPlan:
    """A derived plan for trying one node, and where its upstream values come from."""

    plan: Plan
    """The stored derived plan (the node and its ancestors)."""
    base: Plan
    """The plan it was cut from."""
    node: str
    source_run: str
    """The run whose results the ancestors take."""
    seed_nodes: tuple[str, ...]
    """The ancestors, sorted: the nodes whose results are taken from ``source_run``."""


def plan_ref(plan: Plan) -> GraphRef:
    """A loaded plan as a ``diff`` side."""
    m = plan.manifest
    return GraphRef(
        kind="plan",
        id=m.plan_id,
        graph_digest=m.graph_digest,
        graph=plan.graph,
        workflow=m.workflow,
        workspace_root=m.workspace_root,
        workspace_key=m.workspace_key,
    )


def _run_ref(runs: RunStore, run_id: str) -> GraphRef:
    m = runs.manifest(run_id)
    return GraphRef(
        kind="run",
        id=run_id,
        graph_digest=m.graph_digest,
        graph=runs.graph(run_id, expected_digest=m.graph_digest),
        workflow=m.workflow,
        workspace_root=m.workspace_root,
        workspace_key=m.workspace_key,
    )


def resolve_graph(layout: StoreLayout, target: str) -> GraphRef:
    """The plan or run ``target`` names: ``sha256:...`` (the newest plan with that graph digest,
    else the newest run), else a plan ID or a run ID (or a unique prefix of one).

    Raises
    ------
    NotFound
        Nothing has that digest or ID.
    AmbiguousId
        The prefix matches several plans or runs, or a plan and a run.
    """
    plans, runs = PlanStore(layout), RunStore(layout)
    target = target.strip()
    if target.startswith("sha256:"):
        for manifest in sorted(plans.list(), key=lambda m: (m.created_at, m.plan_id), reverse=True):
            if manifest.graph_digest == target:
                return plan_ref(plans.load(manifest.plan_id))
        for run_id in reversed(runs.ids()):
            try:
                if runs.manifest(run_id).graph_digest == target:
                    return _run_ref(runs, run_id)
            except (RhoError, OSError):
                continue
        raise NotFound(f"no stored plan or run has graph digest {target}", listers=("plans",))
    plan_hit = _match(plans.resolve, target)
    run_hit = _match(runs.resolve, target)
    if plan_hit is not None and run_hit is not None:
        msg = f"{target!r} matches plan {plan_hit} and run {run_hit}; give more characters"
        raise AmbiguousId(msg)
    if plan_hit is not None:
        return plan_ref(plans.load(plan_hit))
    if run_hit is not None:
        return _run_ref(runs, run_hit)
    msg = f"{target!r} is neither a plan ID, a run ID nor a graph digest (sha256:...)"
    raise NotFound(msg, listers=("plans", "runs"))


def compare(layout: StoreLayout, old: GraphRef, new: GraphRef) -> DiffResult:
    """What changed from ``old`` to ``new``, and which nodes of ``new`` a run started now in its
    workspace would reuse or launch (:func:`~rho_notebook.runtime.reuse.predict_reuse`)."""
    found = diff_graphs(old.graph, new.graph, old_digest=old.graph_digest, new_digest=new.graph_digest)
    if old.kind == new.kind == "run" and _same_lineage(layout, old.id, new.id):
        return DiffResult(old=old, new=new, diff=found, runs=compare_runs(layout, old, new))
    predicted = predict_reuse(
        new.graph, layout=layout, workspace_key=new.workspace_key, workspace=Path(new.workspace_root)
    )
    return DiffResult(
        old=old,
        new=new,
        diff=found,
        will_reuse=tuple(sorted(name for name, what in predicted.items() if what == "reuse")),
        will_launch=tuple(sorted(name for name, what in predicted.items() if what != "reuse")),
    )


def _match(resolve: object, target: str) -> str | None:
    """``resolve(target)``, or None when nothing matches (an ambiguous prefix still raises)."""
    if not callable(resolve):  # pragma: no cover - called with a store's resolve method
        raise TypeError(resolve)
    try:
        found = resolve(target)
    except AmbiguousId:
        raise
    except NotFound:
        return None
    return str(found)


def latest_run(layout: StoreLayout, *, workflow: str, workspace_key: str) -> str | None:
    """The newest run of ``workflow`` made in the workspace with ``workspace_key`` (run IDs are
    time-ordered), or None."""
    runs = RunStore(layout)
    for run_id in reversed(runs.ids()):
        try:
            manifest: RunManifest = runs.manifest(run_id)
        except (RhoError, OSError):
            continue
        if manifest.workflow == workflow and manifest.workspace_key == workspace_key:
            return run_id
    return None


def sub_graph(graph: Graph, names: set[str]) -> Graph:
    """``graph`` restricted to the nodes ``names`` (which must be closed under ``needs``), with
    only the agents and Python modules they use and the Python runtime when one remains."""
    nodes = tuple(node for node in graph.nodes if node.name in names)
    agent_ids = {node.agent for node in nodes if isinstance(node, AgentNode)}
    python = [node for node in nodes if isinstance(node, PythonNode)]
    labels = {label for node in python for label in (node.module, *node.modules)}
    return graph.model_copy(
        update={
            "nodes": nodes,
            "agents": tuple(agent for agent in graph.agents if agent.id in agent_ids),
            "python": graph.python if python else None,
            "python_modules": tuple(module for module in graph.python_modules if module.label in labels),
        }
    )


def _authority(items: tuple[AuthorityItem, ...], graph: Graph) -> tuple[AuthorityItem, ...]:
    """The items of the base plan's authority list the sub-graph still uses; an item of a kind this
    filter does not know is kept (the list may say more than the plan uses, never less)."""
    nodes: list[Node] = list(graph.nodes)
    executables = {n.executable.file.path for n in nodes if isinstance(n, (CommandNode, ShellNode))}
    interpreters = {i.path for n in nodes if isinstance(n, (CommandNode, ShellNode)) for i in n.executable.interpreters}
    if graph.python is not None:
        interpreters.add(graph.python.interpreter.file.path)
        executables.add(graph.python.interpreter.file.path)
    directories = {n.cwd for n in nodes if isinstance(n, (CommandNode, ShellNode, PythonNode))}
    agents = {agent.id for agent in graph.agents}
    names = {n.name for n in nodes}
    kept = []
    for item in items:
        if item.kind == "executable" and item.value not in executables:
            continue
        if item.kind == "interpreter" and item.value not in interpreters:
            continue
        if item.kind == "directory" and item.value not in directories:
            continue
        if item.kind == "agent" and item.value not in agents:
            continue
        if item.kind == "capability" and item.value == "approval" and not any(f"{n!r}" in item.detail for n in names):
            continue
        if (
            item.kind == "capability"
            and item.value.startswith("agent:")
            and not any(f"{a!r}" in item.detail for a in agents)
        ):
            continue
        kept.append(item)
    return tuple(kept)


def _check_source(base: Plan, node: str, seeds: tuple[str, ...], layout: StoreLayout, source_run: str) -> None:
    """Refuse unless every ancestor is defined as in the source run and succeeded there."""
    runs = RunStore(layout)
    manifest = runs.manifest(source_run)
    if manifest.workspace_key != base.manifest.workspace_key:
        msg = (
            f"run {source_run} was made in another workspace ({manifest.workspace_root}); "
            f"try node {node!r} from a run of this workspace ({base.manifest.workspace_root})"
        )
        raise TryRefused(msg, node=node)
    graph = runs.graph(source_run, expected_digest=manifest.graph_digest)
    for name in seeds:
        try:
            fields = node_changes(graph, base.graph, name)
        except KeyError:
            msg = f"node {name!r}, upstream of {node!r}, is not in run {source_run}; run the whole workflow instead"
            raise TryRefused(msg, node=name) from None
        if fields:
            msg = (
                f"node {name!r}, upstream of {node!r}, changed since run {source_run} "
                f"({', '.join(fields)}); its result there is not what this plan computes: run the whole workflow"
            )
            raise TryRefused(msg, node=name, fields=fields)
    for name, found in seed_attempts(layout, source_run, seeds).items():
        if isinstance(found, str):
            raise TryRefused(f"{found}; try node {node!r} from another run (--from RUN_ID)", node=name)


def derive_try_plan(layout: StoreLayout, base: Plan, node: str, *, from_run: str | None = None) -> TryPlan:
    """Cut ``node`` and its ancestors out of the stored plan ``base``, check them against the
    source run (``from_run``, default: the newest run of the same workflow in the same
    workspace) and store the derived plan (one plan per graph: trying the same node of the same
    plan again gives the same plan).

    Raises
    ------
    NotFound
        ``base`` has no node ``node``, ``from_run`` matches no run, or there is no earlier run.
    TryRefused
        An ancestor differs from the source run's, is missing there or did not succeed there, or
        the source run was made in another workspace.
    """
    names = {n.name for n in base.graph.nodes}
    if node not in names:
        msg = no_node(f"plan {base.plan_id}", node, names)
        raise NotFound(msg)
    runs = RunStore(layout)
    if from_run is None:
        source_run = latest_run(layout, workflow=base.graph.name, workspace_key=base.manifest.workspace_key)
        if source_run is None:
            msg = f"workflow {base.graph.name!r} has no run in this workspace to take upstream values from; run it once first"
            raise NotFound(msg)
    else:
        source_run = runs.resolve(from_run)
    seeds = ancestors(base.graph, node)
    _check_source(base, node, seeds, layout, source_run)
    plans = PlanStore(layout)
    graph = sub_graph(base.graph, {*seeds, node})
    m = base.manifest
    manifest = m.model_copy(
        update={
            "plan_id": new_id(),
            "created_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "graph_digest": graph_digest(graph),
            "authority": _authority(m.authority, graph),
            "planner": {**m.planner, "derived_from": m.plan_id, "tried_node": node},
        }
    )
    derived = plans.save_once(Plan(manifest=manifest, graph=graph, sources=plans.load_sources(base)))
    return TryPlan(plan=derived, base=base, node=node, source_run=source_run, seed_nodes=seeds)


def derive_fork(
    layout: StoreLayout,
    run: str,
    *,
    at: str,
    value: Any = None,
    edited: bool = False,
    inputs: Mapping[str, Any] | None = None,
    from_plan: Plan | None = None,
    via: str = "cli",
) -> ForkPlan:
    """:func:`rho_notebook.service.fork.derive_fork_plan` for the service facade (a fork's plan is
    a derived plan, as ``try``'s): ``edited`` says whether ``value`` is NODE's edited output."""
    from rho_notebook.service import fork

    chosen = value if edited else fork.UNSET
    return fork.derive_fork_plan(layout, run, at=at, value=chosen, inputs=inputs, from_plan=from_plan, via=via)


def _lineage_of(layout: StoreLayout, run_id: str) -> set[str]:
    from rho_notebook.runtime.status import run_facts
    from rho_notebook.service.listing import fork_lineage

    origin = run_facts(layout, run_id).forked_from
    return {link["run"] for link in fork_lineage(layout, origin)} if isinstance(origin, dict) else set()


def _same_lineage(layout: StoreLayout, old: str, new: str) -> bool:
    """Whether one run is a fork (or a fork of a fork...) of the other, or both of one run."""
    before, after = _lineage_of(layout, old), _lineage_of(layout, new)
    return old in after or new in before or bool(before & after)


def _node_runs(layout: StoreLayout, ref: GraphRef) -> dict[str, tuple[str, str | None, str]]:
    """Node -> (state, value digest, how it came to be) in the run ``ref`` names."""
    from rho_notebook.runtime.status import journal_state

    state = journal_state(layout, ref.id)
    where = state.value_sources()
    fork = ref.graph.fork
    found: dict[str, tuple[str, str | None, str]] = {}
    for name, record in state.nodes.items():
        digest = _value_digest(layout, where[name]) if name in where else None
        current = record.current
        if fork is not None and name == fork.node and fork.edit is not None:
            how = "edited"
        elif fork is not None and name in fork.taken_names():
            how = "taken"
        elif current is not None and current.reused_from is not None:
            how = "reused"
        else:
            how = "launched" if current is not None else ""
        found[name] = (record.state.value, digest, how)
    return found


def compare_runs(layout: StoreLayout, old: GraphRef, new: GraphRef) -> tuple[NodeRunDiff, ...]:
    """``diff RUN FORK``: every node of either run, its state and value digest on both sides."""
    before, after = _node_runs(layout, old), _node_runs(layout, new)
    shown = []
    for name in sorted(before.keys() | after.keys()):
        old_state, old_value, _ = before.get(name, (None, None, ""))
        new_state, new_value, how = after.get(name, (None, None, ""))
        shown.append(NodeRunDiff(name, old_state, new_state, old_value, new_value, how))
    return tuple(shown)


def _value_digest(layout: StoreLayout, where: tuple[str, str, int]) -> str | None:
    """The digest of the canonical JSON of the value at (run, node, attempt); None when there is
    none or it cannot be read (its run was deleted)."""
    from rho_notebook.model.fork import canonical_json, value_digest

    run, node, attempt = where
    try:
        folder = RunStore(layout).folder(run)
        exists, value = folder.read_value(folder.attempt_dir(node, attempt) / "value.json")
    except (RhoError, OSError):
        return None
    return value_digest(canonical_json(value).encode()) if exists else None
