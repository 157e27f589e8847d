"""Owning a run: create it from a plan, then execute or resume it as its owner.

Ownership: the process executing a run holds the exclusive owner lock (mutation.lock) for the
whole execution. A run whose journal is damaged (:func:`rho_notebook.runtime.status.journal_state`)
is never owned: nothing can say which of its nodes finished, so it is refused before anything is
written. Status never takes it (:mod:`rho_notebook.runtime.status`). Resume replays the
journal; attempts of a dead owner are settled by :mod:`rho_notebook.runtime.recovery` before the
driver starts, and cancel requests by :mod:`rho_notebook.runtime.cancel`. A script run
(``graph.script``) is executed by :class:`~rho_notebook.runtime.script_driver.ScriptDriver` instead,
with this resume's ``--decide`` decisions; both drivers hold the same
:class:`~rho_notebook.runtime.execution.Execution`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rho_notebook.errors import BadArgument, ExecutorInvalid, PlanError, RhoError, RunRefused, StoreError
from rho_notebook.exec.base import Executor
from rho_notebook.model.events import EventKind, event, now_iso
from rho_notebook.model.graph import Graph
from rho_notebook.model.plan import Plan
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle
from rho_notebook.policy.approvals import ApprovalRequest, who_am_i
from rho_notebook.policy.hooks import load_hooks
from rho_notebook.policy.permission import PermissionMode
from rho_notebook.policy.plan_approval import PlanApproval, PlanApprovals
from rho_notebook.policy.trust import TrustStore
from rho_notebook.runtime.budget import open_budgets
from rho_notebook.runtime.checkout import CheckoutLock
from rho_notebook.runtime.driver import RunDriver
from rho_notebook.runtime.execution import EventSink, Execution
from rho_notebook.runtime.executor_choice import ExecutorChoice, parse_executor, remote_executor, resolve_executor
from rho_notebook.runtime.recovery import nothing_to_resume, recovery_events
from rho_notebook.runtime.reuse import Seed, seeds
from rho_notebook.runtime.status import RunFacts, journal_state
from rho_notebook.source.workspace import Workspace
from rho_notebook.store.graphs import GraphOutline
from rho_notebook.store.ids import new_id
from rho_notebook.store.journal import CHAINED, JournalWriter
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.plans import PlanStore
from rho_notebook.store.run_locks import OwnerLock
from rho_notebook.store.runs import RunFolder, RunManifest, RunStore

__all__ = [
    "create_run",
    "check_run_id",
    "execute_run",
    "default_executors",
]


def default_executors(*, trusted: bool = False) -> dict[str, Executor]:
    """One executor per node kind; ``trusted`` lets agents read the project's settings."""
    from rho_notebook.exec.agent import AgentExecutor
    from rho_notebook.exec.approval import ApprovalExecutor
    from rho_notebook.exec.command import CommandExecutor
    from rho_notebook.exec.item import ItemExecutor
    from rho_notebook.exec.python import PythonExecutor

    executor = CommandExecutor()
    agents = AgentExecutor(trusted=trusted)
    return {
        "command": executor,
        "shell": executor,
        "approval": ApprovalExecutor(),
        "agent": agents,
        "python": PythonExecutor(),
        "item": ItemExecutor(agents=agents, commands=executor),
    }


def _check_plan(layout: StoreLayout, plan: Plan) -> None:
    """The stored sources still match their digests and the workspace is still where it was."""
    try:
        PlanStore(layout).load_sources(plan)
    except StoreError as err:
        raise PlanError(err.message) from None
    root = Path(plan.manifest.workspace_root)
    if not root.is_dir():
        msg = f"plan {plan.plan_id}: its workspace {root} no longer exists"
        raise PlanError(msg)
    key = hashlib.sha256(os.fsencode(root.resolve())).hexdigest()
    if key != plan.manifest.workspace_key:
        msg = f"plan {plan.plan_id}: the workspace {root} now resolves elsewhere (key {key[:12]} != {plan.manifest.workspace_key[:12]})"
        raise PlanError(msg)


def create_run(
    layout: StoreLayout,
    plan: Plan,
    *,
    mode: str = "auto",
    origin: str = "cli",
    via: str | None = None,
    client: str | None = None,
    reuse: bool = True,
    seed_from: str | None = None,
    seed_nodes: tuple[str, ...] = (),
    executor: str | None = None,
    run_id: str | None = None,
) -> str:
    """Check the plan (and its plan approval when required) and copy its frozen graph into a new
    run; returns the run ID (``run_id`` when given: ``run --run-id``, :func:`check_run_id`). ``reuse`` False launches every node (``run --no-reuse``);
    ``seed_from`` (a full run ID) and ``seed_nodes`` make the run take those nodes' successful
    attempts from that run instead of launching them (``try``). All three are kept in the run's
    manifest, so a resumed run keeps them. Who started the run is recorded once, here: the OS
    account of this process (``initiator``), how (``via``, default ``origin``) and, through MCP,
    the client's self-reported name (``client``, printable characters only, at most 128).
    ``executor`` (``local``, ``dask``, ``dask=ADDRESS``; None: local) is settled here
    (:func:`~rho_notebook.runtime.executor_choice.resolve_executor`) and kept in the manifest."""
    _check_plan(layout, plan)
    choice = _executor_for(layout, plan, executor)
    _check_seeds(plan, seed_from, seed_nodes)
    approval = PlanApprovals(layout).check(plan.graph_digest)
    run_id = new_id() if run_id is None else _unused_run_id(layout, run_id)
    manifest = RunManifest(
        run_id=run_id,
        plan_id=plan.plan_id,
        graph_digest=plan.graph_digest,
        workflow=plan.graph.name,
        created_at=now_iso(),
        workspace_root=plan.manifest.workspace_root,
        workspace_key=plan.manifest.workspace_key,
        identities=plan.manifest.identities,
        mode=mode,
        origin=origin,
        initiator=who_am_i(),
        via=via or origin,
        client=_client_name(client),
        journal_format=CHAINED,
        reuse=reuse,
        seed_from=seed_from,
        seed_nodes=tuple(sorted(set(seed_nodes))),
        executor=choice.spec(),
    )
    RunStore(layout).create(manifest, plan.graph, records=_created_records(manifest, approval))
    return run_id


_UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
"""A canonical UUIDv7 as :func:`~rho_notebook.store.ids.new_id` writes it: lower-case, hyphenated."""


def check_run_id(given: str) -> str:
    """A run ID chosen by the caller (``run --run-id``), which must look like the IDs the store
    makes: run IDs order runs by creation time and resolve by prefix, so a free-form name would
    break both.

    Raises
    ------
    BadArgument
        ``given`` is not a canonical UUIDv7 (lower-case, hyphenated, version 7, variant 10).
    """
    if _UUID7.fullmatch(given) is None:
        msg = (
            f"run ID {given!r} is not a canonical UUIDv7 (lower-case and hyphenated, e.g. "
            f"{new_id()}): run IDs order runs by time and resolve by prefix"
        )
        raise BadArgument(msg)
    return given


def _unused_run_id(layout: StoreLayout, run_id: str) -> str:
    """A caller's run ID, checked, and not the ID of a run in the store.

    Raises BadArgument (not a canonical UUIDv7) or RunRefused (a run has that ID)."""
    check_run_id(run_id)
    if os.path.lexists(layout.runs / run_id):
        msg = f"run ID {run_id} is taken: a run with that ID exists (rho-notebook status {run_id[:13]})"
        raise RunRefused(msg)
    return run_id


def _executor_for(layout: StoreLayout, plan: Plan, executor: str | None) -> ExecutorChoice:
    """The run's executor choice, settled; a script run's steps never leave the owner."""
    choice = resolve_executor(executor, home=layout.home, environ=os.environ)
    if choice.kind != "local" and plan.graph.script is not None:
        msg = (
            f"executor {choice.spec()!r}: a script run's steps run with the run owner; "
            "a distributed executor runs the nodes of a workflow graph (docs/distributed.md)"
        )
        raise ExecutorInvalid(msg, given=executor or "")
    return choice


def _check_seeds(plan: Plan, seed_from: str | None, seed_nodes: tuple[str, ...]) -> None:
    """A ``try``'s seeded nodes are nodes of the plan, taken from a named run."""
    unknown = sorted(set(seed_nodes) - {node.name for node in plan.graph.nodes}) if seed_nodes else []
    if unknown:
        msg = f"plan {plan.plan_id}: cannot take {', '.join(unknown)} from another run: no such node in the plan"
        raise PlanError(msg)
    if seed_nodes and seed_from is None:
        msg = "seed_nodes need seed_from: the run to take their values from"
        raise PlanError(msg)


def _created_records(manifest: RunManifest, approval: PlanApproval | None) -> list[dict[str, Any]]:
    """``run_created`` (with the run's reuse and seed options) and the plan approval it runs under."""
    options: dict[str, Any] = {} if manifest.reuse else {"reuse": False}
    if manifest.seed_from is not None:
        options.update(seed_from=manifest.seed_from, seed_nodes=list(manifest.seed_nodes))
    records = [
        event(
            EventKind.RUN_CREATED,
            manifest.run_id,
            plan_id=manifest.plan_id,
            graph_digest=manifest.graph_digest,
            mode=manifest.mode,
            **options,
        )
    ]
    if approval is not None:
        records.append(
            event(
                EventKind.PLAN_APPROVAL,
                manifest.run_id,
                graph_digest=approval.graph_digest,
                by=approval.by,
                approved_at=approval.at,
            )
        )
    return records


def _client_name(reported: str | None) -> str | None:
    """A client's self-reported name as the manifest keeps it: printable characters only (others
    become ``?``), at most 128 of them; None when nothing printable was reported."""
    if reported is None:
        return None
    shown = "".join(ch if ch.isprintable() else "?" for ch in reported.strip())[:128]
    return shown or None


def _seeds(layout: StoreLayout, manifest: RunManifest, graph: Graph) -> dict[str, Seed | str]:
    """The source attempts a ``try`` run takes (or, per node, why it cannot); a fork's are its
    own copies of the values its derived plan takes (runtime/replay.py, docs/fork.md), read
    against ``graph``, the run's frozen graph as the owner loaded it (digest checked)."""
    if manifest.forked_from is not None:
        from rho_notebook.runtime.replay import fork_seeds

        return fork_seeds(layout, manifest.run_id, graph)
    if manifest.seed_from is None or not manifest.seed_nodes:
        return {}
    try:
        return seeds(layout, manifest.seed_from, manifest.seed_nodes)
    except RhoError as err:
        why = f"run {manifest.seed_from} cannot be read ({err.message})"
        return dict.fromkeys(manifest.seed_nodes, why)


async def execute_run(
    layout: StoreLayout,
    run_id: str,
    *,
    resume: bool,
    recover_uncertain: bool = False,
    executors: Mapping[str, Executor] | None = None,
    on_event: EventSink | None = None,
    responder: Callable[[ApprovalRequest], None] | None = None,
    approval_timeout: float = 0.0,
    decisions: Mapping[str, str] | None = None,
    steps: Callable[..., Any] | None = None,
    executor: str | None = None,
    attended: Callable[[], bool] | None = None,
) -> RunState:
    """Own and execute (or resume) a run until it completes, is cancelled or (a script run)
    halts. ``decisions`` (step key -> ``rerun``/``skip``, a script run's ``resume --decide``)
    authorise one call each; ``steps`` makes a script run's step runner (called with
    StepRunner's keyword arguments; default StepRunner). ``executor`` overrides where the run's
    remotable attempts go (None: the manifest's choice, docs/distributed.md). ``attended`` says
    whether a person can answer now (None: whenever there is a ``responder``); a detached owner
    asks its followers."""
    folder, manifest, graph = RunStore(layout).owned(run_id)
    lock = OwnerLock(folder.lock)
    if not lock.try_acquire():
        msg = f"run {run_id} is owned by another live process; watch it with `rho-notebook status {run_id[:13]}`"
        raise RunRefused(msg)
    journal: JournalWriter | None = None
    try:
        # checked before the writer opens (it would create a deleted journal and cut a torn tail)
        state = _undamaged_state(layout, run_id, manifest=manifest, graph=graph)
        journal = JournalWriter.open(folder.events, mark=folder.mark if manifest.chained else None)
        # the values later nodes read; a damaged one stops us before anything is journaled
        # (a script run reads a step's value when the step is called: an unreadable one halts it)
        outputs = folder.output_values_at(state.value_sources()) if graph.script is None else {}
        _check_decisions(run_id, graph.script is not None, state, decisions or {})
        _recover(state, journal, graph=graph, resume=resume, recover_uncertain=recover_uncertain, on_event=on_event)
        # current trust only narrows: an untrusted workspace's project settings and hooks are ignored
        trusted = TrustStore(layout).is_trusted(Workspace(Path(manifest.workspace_root)))
        execution = _execution(
            layout,
            manifest,
            graph=graph,
            folder=folder,
            state=state,
            journal=journal,
            trusted=trusted,
            on_event=on_event,
            responder=responder,
            approval_timeout=approval_timeout,
            attended=attended,
        )
        execution.spend_guard = open_budgets(
            layout, state, journal, graph=graph, workspace=execution.workspace, trusted=trusted
        )
        if graph.script is not None:
            return await _execute_script(
                execution, resume=resume, trusted=trusted, decisions=decisions or {}, steps=steps
            )
        driver = RunDriver(
            execution=execution,
            executors=executors if executors is not None else default_executors(trusted=trusted),
            reuse=manifest.reuse,
            seeded=_seeds(layout, manifest, graph),
            remote=remote_executor(_executor_of(layout, manifest, executor)),
            run_fields={
                "initiator": manifest.initiator or None,
                "via": manifest.via or manifest.origin,
                "client": manifest.client,
            },
        )
        driver.outputs.update(outputs)
        return await driver.execute(resumed=resume)  # the driver closes ``remote`` when it ends
    finally:
        if journal is not None:
            journal.close()
        lock.release()


def _execution(
    layout: StoreLayout,
    manifest: RunManifest,
    *,
    graph: Graph,
    folder: RunFolder,
    state: RunState,
    journal: JournalWriter,
    trusted: bool,
    on_event: EventSink | None,
    responder: Callable[[ApprovalRequest], None] | None,
    approval_timeout: float,
    attended: Callable[[], bool] | None,
) -> Execution:
    """The execution of this owner, whatever the run's form: its mode, hooks, checkout and approvals."""
    workspace = Path(manifest.workspace_root)
    return Execution(
        run_id=manifest.run_id,
        graph=graph,
        folder=folder,
        state=state,
        journal=journal,
        workspace=workspace,
        identities=manifest.identities,
        layout=layout,
        on_event=on_event,
        mode=PermissionMode(manifest.mode),
        checkout=CheckoutLock.for_layout(layout, manifest.workspace_key),
        hooks=load_hooks(layout.home, workspace, trusted=trusted),
        responder=responder,
        approval_timeout=approval_timeout,
        attended=attended,
        workspace_key=manifest.workspace_key,
        origin=manifest.origin,
    )


def _undamaged_state(layout: StoreLayout, run_id: str, *, manifest: RunManifest, graph: Graph) -> RunState:
    """The run's replayed state; a damaged journal is refused (nothing can say what finished).
    The manifest and the graph (digest checked) the owner read already are not read again."""
    state = journal_state(layout, run_id, facts=RunFacts.of(manifest), outline=GraphOutline.of(graph))
    if state.damage is not None:
        msg = (
            f"run {run_id} is damaged and cannot be resumed or owned: {state.damage}. Its finished work "
            f"cannot be told from unfinished work, so nothing is rerun. Inspect it with `rho-notebook status`, "
            f"`events` and `logs`, then restore the run folder from a backup or `rho-notebook delete {run_id[:13]}`"
        )
        raise RunRefused(msg)
    return state


def _recover(
    state: RunState,
    journal: JournalWriter,
    *,
    graph: Graph,
    resume: bool,
    recover_uncertain: bool,
    on_event: EventSink | None,
) -> None:
    """Refuse what cannot be (re)started, then journal (durably) the repair of a torn tail and
    the settling of what a dead owner left behind."""
    run_id = state.run_id
    records: list[dict[str, Any]] = []
    if journal.repaired_bytes:
        records.append(event(EventKind.JOURNAL_REPAIRED, run_id, bytes=journal.repaired_bytes))
    started = state.lifecycle is not Lifecycle.PLANNED
    if started and not resume:
        msg = f"run {run_id} has already started; use `rho-notebook resume {run_id[:13]}`"
        raise RunRefused(msg)
    idle = nothing_to_resume(state, script=graph.script is not None) if resume else None
    if idle is not None:
        raise RunRefused(idle)
    records = recovery_events(
        state, journal, graph=graph, pending=records, resume=resume, recover_uncertain=recover_uncertain
    )
    for record in journal.append(records):
        apply(state, record)
        if on_event is not None:
            on_event(record)
    journal.sync()


def _executor_of(layout: StoreLayout, manifest: RunManifest, given: str | None) -> ExecutorChoice:
    """The executor choice of this execution: ``given`` (a resume's ``--executor``) settled as at
    creation, else the manifest's, with the user's current ``dask_path_map``."""
    if given is not None:
        return resolve_executor(given, home=layout.home, environ=os.environ)
    recorded = parse_executor(manifest.executor)
    if recorded.kind == "local":
        return recorded
    # the recorded address stands (None: a LocalCluster); only the path map is read again
    resolved = resolve_executor("dask", home=layout.home, environ={})
    return ExecutorChoice(kind="dask", address=recorded.address, path_map=resolved.path_map)


def _check_decisions(run_id: str, script: bool, state: RunState, decisions: Mapping[str, str]) -> None:
    """``--decide`` names steps of this script run, each with ``rerun`` or ``skip``."""
    if not decisions:
        return
    if not script:
        msg = f"run {run_id} is not a script run: --decide applies to the steps of script runs"
        raise RunRefused(msg)
    halted = ", ".join(h["step"] for h in state.halted) or "none"
    for key, decision in sorted(decisions.items()):
        if decision not in ("rerun", "skip"):
            msg = f"--decide {key}={decision}: a decision is rerun or skip"
            raise RunRefused(msg)
        if key not in state.nodes:
            msg = f"--decide {key}={decision}: run {run_id} has no step {key!r} (halted steps: {halted})"
            raise RunRefused(msg)


async def _execute_script(
    execution: Execution,
    *,
    resume: bool,
    trusted: bool,
    decisions: Mapping[str, str],
    steps: Callable[..., Any] | None,
) -> RunState:
    """Execute a script run (graph.script) with the script driver."""
    from rho_notebook.runtime.script_driver import ScriptDriver
    from rho_notebook.runtime.script_steps import StepRunner

    runner = (steps or StepRunner)(
        graph=execution.graph,
        workspace=execution.workspace,
        layout=execution.layout,
        run_id=execution.run_id,
        folder=execution.folder,
        identities=execution.identities,
        environ=dict(os.environ),
        trusted=trusted,
    )
    driver = ScriptDriver(
        execution=execution,
        steps=runner,
        decisions={key: "rerun" if d == "rerun" else "skip" for key, d in decisions.items()},
    )
    return await driver.execute(resumed=resume)
