"""Forking a completed run from one node (issue 35, docs/fork.md): what ``fork`` plans and creates.

A fork is built as ``try`` builds its plan (:mod:`.diff`): a *derived plan*, the source run's graph
(or ``--from-plan``'s) with a frozen :class:`~rho_notebook.model.fork.ForkRecord` in it, stored
like any plan, its digest confirmed like any run's. Every node that is not NODE and not downstream
of it is *taken* from the source run (its attempt and value digest are in the record); NODE takes
the edited value, or re-runs; everything downstream runs anew. The settled refusals
(:class:`~rho_notebook.errors.ForkRefused`, naming the node) are checked here, before anything is
stored or started: the source run is not completed; a node to be taken did not succeed there (NODE
with a value excepted); with ``--from-plan``, a node to be taken is defined otherwise in the plan;
an edited value for a node without an output schema, or one that does not fit it (naming the field).

When the run is created (:func:`create_fork_run`) the taken values are copied into it
(:func:`~rho_notebook.runtime.replay.fork_copies`), so deleting the source run never breaks it.
Script and flow runs are forked by :mod:`rho_notebook.runtime.script_fork` (their steps are keys of
the journal, not nodes of the graph).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rho_notebook.errors import ForkRefused, NotFound, PlanError
from rho_notebook.exec.item import edited_item_problem
from rho_notebook.model.canonical import graph_digest
from rho_notebook.model.diff import node_changes
from rho_notebook.model.fork import UNSET, ForkRecord, TakenAttempt, edit_of, value_digest, value_named
from rho_notebook.model.graph import Graph
from rho_notebook.model.node_names import no_node
from rho_notebook.model.plan import Plan
from rho_notebook.model.schema import validate_value
from rho_notebook.model.state import Lifecycle, NodeState, not_completed
from rho_notebook.policy.approvals import who_am_i
from rho_notebook.runtime.replay import SourceValue, may_reuse, source_values
from rho_notebook.runtime.script_fork import fork_script_record
from rho_notebook.runtime.status import load_state
from rho_notebook.service.requests import StartRun
from rho_notebook.service.starting import create_run_of
from rho_notebook.store.ids import new_id
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.plans import PlanStore
from rho_notebook.store.runs import RunManifest, RunStore

__all__ = ["UNSET", "ForkPlan", "create_fork_run", "derive_fork_plan", "downstream"]


@dataclass(frozen=True)
class ForkPlan:
    """A stored derived plan forking ``source_run`` at ``node``, and what it will do."""

    plan: Plan
    source_run: str
    node: str
    taken: tuple[str, ...]
    """Nodes taken from the source run, sorted (the edited node not among them)."""
    edited: bool
    """NODE takes an edited value (not launched)."""
    anew: tuple[str, ...]
    """Nodes that will run anew (NODE when it re-runs, and everything downstream), sorted."""

    def lines(self) -> list[str]:
        """The text answer shown before consent (CLI and notebook)."""
        g = self.plan.graph
        node = f"{self.node} (edited value {g.fork.edit.value_digest[:19]})" if g.fork and g.fork.edit else self.node
        return [
            f"fork of run {self.source_run} at {node}: plan {self.plan.plan_id}  digest {self.plan.graph_digest}",
            f"taken from run {self.source_run[:13]}: {', '.join(self.taken) or '(none)'}",
            f"runs anew: {self._anew()}",
        ]

    def summary(self) -> str:
        """One line for a pane that asks a person to confirm the digest (the sidebar's, the widget's)."""
        how = "takes the edited value" if self.edited else "runs again"
        what = f"{self.node} {how}, what follows runs anew"
        return f"Fork run {self.source_run} at {self.node} ({what}): the derived plan's graph digest"

    def _anew(self) -> str:
        if self.plan.graph.script is None:  # a graph: exactly these nodes
            return ", ".join(self.anew) or "(none)"
        later = "every step the script calls after it"  # a script's later steps are known only as it runs
        return f"{self.node}, then {later}" if self.anew else later


def downstream(graph: Graph, names: set[str]) -> set[str]:
    """Every node that transitively needs one of ``names`` (not ``names`` themselves unless so)."""
    needed_by: dict[str, list[str]] = {}
    for node in graph.nodes:
        for need in node.needs:
            needed_by.setdefault(need, []).append(node.name)
    found: set[str] = set()
    stack = [child for name in names for child in needed_by.get(name, ())]
    while stack:
        current = stack.pop()
        if current not in found:
            found.add(current)
            stack.extend(needed_by.get(current, ()))
    return found


def _source(layout: StoreLayout, run: str) -> tuple[str, RunManifest, Graph, set[str]]:
    """The source run (full ID), its manifest, its frozen graph and its skipped nodes; refused
    unless it completed."""
    runs = RunStore(layout)
    run_id = runs.resolve(run)
    manifest = runs.manifest(run_id)
    state = load_state(layout, run_id)
    if state.lifecycle is not Lifecycle.COMPLETED:
        raise ForkRefused(not_completed(run_id, state.lifecycle, action="fork"), node="")
    skipped = {name for name, record in state.nodes.items() if record.state is NodeState.SKIPPED}
    return run_id, manifest, runs.graph(run_id, expected_digest=manifest.graph_digest), skipped


def _check_value(graph: Graph, node: str, value: Any, *, via: str) -> None:
    """An edited value needs NODE's output schema and must fit it (the field named); an item
    step's is the item it passes on (:func:`~rho_notebook.exec.item.edited_item_problem`)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ForkRefused(f"the edited value of node {node!r} is not JSON data ({err})", node=node) from None
    if graph.items is not None:  # an item step's value is the item it passes on, checked as its own result
        problem = edited_item_problem(graph, node, value)
        if problem is not None:
            raise ForkRefused(problem[0], node=node, fields=() if problem[1] is None else (problem[1],))
        return
    schema = graph.node(node).output
    if schema is None:
        msg = (
            f"node {node!r} declares no output schema, so an edited value cannot be checked: "
            f"fork it without {value_named(via)}"
        )
        raise ForkRefused(msg, node=node)
    problems = validate_value(schema, value, where=node)
    if problems:
        field = problems[0].split(":", 1)[0]
        msg = f"the edited value of node {node!r} does not fit its output schema: {'; '.join(problems)}"
        raise ForkRefused(msg, node=node, fields=(field,))


def _check_plan(run_graph: Graph, plan_graph: Graph, taken: set[str], run_id: str) -> None:
    """With ``--from-plan``: a node to be taken must be defined as in the source run."""
    for name in sorted(taken):
        fields = node_changes(run_graph, plan_graph, name)
        if fields:
            msg = (
                f"node {name!r} would be taken from run {run_id} but the plan defines it otherwise "
                f"({', '.join(fields)}): fork at {name!r} or upstream of it instead"
            )
            raise ForkRefused(msg, node=name)


def _taken(layout: StoreLayout, run_id: str, names: set[str], at: str) -> tuple[TakenAttempt, ...]:
    """The source attempts of the nodes to take; refused, naming the node, when one did not succeed."""
    found = source_values(layout, run_id, tuple(sorted(names)))
    taken = []
    for name in sorted(names):
        got = found[name]
        if not isinstance(got, SourceValue):
            msg = f"{got}: it cannot be taken into a fork at {at!r}; fork at {name!r} or upstream of it"
            raise ForkRefused(msg, node=name)
        digest = None if got.value_bytes is None else value_digest(got.value_bytes)
        taken.append(TakenAttempt(node=name, attempt=got.attempt, value_digest=digest, exit_code=got.exit_code))
    return tuple(taken)


def _split(run_graph: Graph, graph: Graph, at: str, edited: bool, changed: set[str]) -> tuple[set[str], set[str]]:
    """(taken, anew): NODE (unless edited) and its downstream run anew, as do nodes new in
    ``graph`` (or ``changed`` by new inputs) and what follows them; every other node is taken."""
    known = {n.name for n in run_graph.nodes}
    new = ({n.name for n in graph.nodes} - known) | (changed - {at} if edited else changed)
    start = new | ({at} if not edited else set())
    anew = start | downstream(graph, {at, *new})
    taken = {n.name for n in graph.nodes} - anew - ({at} if edited else set())
    return taken, anew


def derive_fork_plan(
    layout: StoreLayout,
    run: str,
    *,
    at: str,
    value: Any = UNSET,
    inputs: Mapping[str, Any] | None = None,
    from_plan: Plan | None = None,
    via: str = "cli",
) -> ForkPlan:
    """Plan and store the fork of run ``run`` at node ``at`` (see the module docstring).

    Raises
    ------
    NotFound
        No such run, or its graph (or ``from_plan``'s) has no node ``at``.
    ForkRefused
        One of the settled refusals; the message and ``node`` name the node.
    InvalidWorkflow, PlanError
        ``inputs`` given and the workflow does not plan with them (inputs re-plan the run's entry
        ``.star`` file; nodes whose definition then differs run anew, with what follows them).
    """
    run_id, manifest, run_graph, skipped = _source(layout, run)
    if run_graph.script is not None:
        if inputs or from_plan is not None:
            msg = f"run {run_id} is a script run: fork it at a step key, with or without --value (no --input, --from-plan)"
            raise ForkRefused(msg, node=at)
        return _script_fork(layout, run_id, manifest, run_graph, at=at, value=value, via=via)
    changed: set[str] = set()
    if inputs:
        if from_plan is not None:
            raise ForkRefused("give --input or --from-plan, not both: plan anew with the inputs instead", node=at)
        from_plan = _replanned(layout, PlanStore(layout).load(manifest.plan_id), inputs)
        changed = _changed(run_graph, from_plan.graph)
    if from_plan is not None and from_plan.graph.name != run_graph.name:  # a wrong plan ID, not an edit
        msg = (
            f"plan {from_plan.plan_id} is of workflow {from_plan.graph.name!r} and run {run_id} of "
            f"{run_graph.name!r}: --from-plan takes a plan of the run's own workflow, edited (rho-notebook plans)"
        )
        raise ForkRefused(msg, node=at)
    graph = from_plan.graph if from_plan is not None else run_graph
    names = {n.name for n in graph.nodes}
    if at not in names or at not in {n.name for n in run_graph.nodes}:
        msg = no_node(f"run {run_id} (and the plan it would run)", at, names)
        raise NotFound(msg)
    edited = value is not UNSET
    if edited:
        _check_value(graph, at, value, via=via)
    taken, anew = _split(run_graph, graph, at, edited, changed)
    taken -= skipped  # decided again on the same values: skipped again, never launched
    if from_plan is not None:
        _check_plan(run_graph, graph, taken, run_id)
    attempts = _taken(layout, run_id, taken, at)
    record = ForkRecord(
        source_run=run_id,
        source_digest=manifest.graph_digest,
        node=at,
        taken=attempts,
        edit=edit_of(value, by=who_am_i(), via=via) if edited else None,
        inputs=tuple(sorted(inputs or ())),
    )
    derived = _rerun(graph, at) if not edited else graph
    plan = _store(layout, manifest, derived.model_copy(update={"fork": record}), from_plan)
    return ForkPlan(
        plan=plan, source_run=run_id, node=at, taken=tuple(sorted(taken)), edited=edited, anew=tuple(sorted(anew))
    )


def _rerun(graph: Graph, at: str) -> Graph:
    """NODE re-runs in a fork without a value: a ``reuse = True`` node would otherwise take the
    stored success of the very attempt the person wants to see again, so the fork's graph has it
    with reuse off (downstream nodes keep theirs)."""
    node = graph.node(at)
    if not may_reuse(node):
        return graph
    nodes = tuple(n.model_copy(update={"reuse": False}) if n.name == at else n for n in graph.nodes)
    return graph.model_copy(update={"nodes": nodes})


def _replanned(layout: StoreLayout, base: Plan, inputs: Mapping[str, Any]) -> Plan:
    """``--input``: the source run's workflow planned again from its entry file with those inputs
    changed (the others as the run had them); stored like any plan."""
    from rho_notebook.planning.inputs import unknown_input
    from rho_notebook.service.planning import plan
    from rho_notebook.service.sources import request_for
    from rho_notebook.source.workspace import Workspace

    m = base.manifest
    unknown = sorted(set(inputs) - set(m.inputs))
    if unknown:  # said as planning says it of `run --input`
        raise ForkRefused(unknown_input(unknown[0], m.inputs).inline(), node="", fields=(unknown[0],))
    if not (m.entry.startswith("//") and m.entry.endswith(".star")):
        msg = f"--input: run's plan came from {m.entry}, not a .star file; plan it anew with the input and fork with --from-plan PLAN"
        raise ForkRefused(msg, node="")
    root = Path(m.workspace_root)
    request = request_for(
        layout, root / m.entry.removeprefix("//"), inputs={**m.inputs, **inputs}, workspace=Workspace(root=root)
    )
    return asyncio.run(plan(layout, request))


def _changed(run_graph: Graph, graph: Graph) -> set[str]:
    """Nodes of both graphs whose definition differs (an input's new value changed their text)."""
    known = {n.name for n in run_graph.nodes}
    return {n.name for n in graph.nodes if n.name in known and node_changes(run_graph, graph, n.name)}


def _script_fork(
    layout: StoreLayout, run_id: str, manifest: RunManifest, graph: Graph, *, at: str, value: Any, via: str
) -> ForkPlan:
    """A script or flow run: the record comes from :mod:`rho_notebook.runtime.script_fork`."""
    edited = value is not UNSET
    record: ForkRecord = fork_script_record(
        layout, run_id, graph, at=at, value=value if edited else None, has_value=edited, by=who_am_i(), via=via
    )
    plan = _store(layout, manifest, graph.model_copy(update={"fork": record}), None)
    return ForkPlan(
        plan=plan,
        source_run=run_id,
        node=at,
        taken=record.taken_names(),
        edited=record.edit is not None,
        anew=(at,) if record.edit is None else (),
    )


def _store(layout: StoreLayout, manifest: RunManifest, graph: Graph, from_plan: Plan | None) -> Plan:
    """Store the derived plan: the manifest of ``from_plan`` or of the source run's plan."""
    plans = PlanStore(layout)
    try:
        base = from_plan if from_plan is not None else plans.load(manifest.plan_id)
    except NotFound:
        msg = f"the plan of run {manifest.run_id} ({manifest.plan_id}) was deleted; plan the workflow again and fork with --from-plan PLAN"
        raise NotFound(msg) from None
    fork = graph.fork
    if fork is None:  # pragma: no cover - every caller sets it
        raise PlanError("a fork's derived plan needs its fork record")
    m = base.manifest
    derived = m.model_copy(
        update={
            "plan_id": new_id(),
            "created_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "graph_digest": graph_digest(graph),
            "planner": {
                **m.planner,
                "derived_from": m.plan_id,
                "forked_from": {"run": fork.source_run, "node": fork.node},
            },
        }
    )
    return plans.save_once(Plan(manifest=derived, graph=graph, sources=plans.load_sources(base)))


async def create_fork_run(layout: StoreLayout, forked: ForkPlan, request: StartRun) -> str:
    """Check consent for the fork's digest (exactly as for a run: ``request.consent``) and create the
    run, its taken values copied in (:func:`~rho_notebook.service.starting.create_run_of`); returns
    its ID. Start it as any created run."""
    request = request.model_copy(update={"plan": forked.plan.plan_id, "seed_from": None, "seed_nodes": ()})
    return await create_run_of(layout, forked.plan, request)
