"""The application service: every verb of every front end, over one store.

The CLI, the notebook API and magics, the widgets, the jupyter-server handlers and the
model-facing tool call these verbs and nothing below them, so each rule lives once: consent to a
digest (:class:`~rho_notebook.service.requests.Consent`), listing with a filter and a limit,
refusing to delete a live run, reading a node's logs, the one answer shape per verb
(:mod:`rho_notebook.service.wire`).

:class:`Service` is a thin facade: each verb delegates to the module of its concept --
:mod:`.sources` (what to plan), :mod:`.planning` (lint, validate, plan), :mod:`.diff` (compare,
try a node), :mod:`.starting` (consent, create, execute, resume), :mod:`.reading` (result,
attempts, journal, logs), :mod:`.listing` (the run list), :mod:`.decisions` (approvals, forms,
plan approval), :mod:`.maintenance` (delete, prune, trust), :mod:`.mcp_rules`, :mod:`.catalog`,
:mod:`.export` and :mod:`.record` -- which take the store's layout and return typed results. Each
is imported when a verb first uses it (:mod:`.parts`): ``status`` loads no planner and no owner.

Verbs are ``async``. Those that read or write files run in a worker thread (``asyncio.to_thread``) so an event
loop that awaits them (the server's, the runner's) never blocks; planning awaits the supervised planning worker.
Synchronous callers bridge through :func:`~.background.wait_for` in a kernel, :func:`~.sync.run_sync` in the CLI.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from rho_notebook.service import parts
from rho_notebook.store.layout import StoreLayout

if TYPE_CHECKING:
    from rho_notebook.model.graph import Graph
    from rho_notebook.model.plan import Plan, PlanManifest
    from rho_notebook.model.run_state import RunState
    from rho_notebook.planning.flow import FlowCheck
    from rho_notebook.planning.itemgraph import GraphFinding
    from rho_notebook.planning.plan import PlanRequest
    from rho_notebook.planning.script import Finding
    from rho_notebook.policy.approvals import ApprovalDecision, ApprovalRequest
    from rho_notebook.policy.plan_approval import PlanApproval
    from rho_notebook.runtime.cancel import CancelResult
    from rho_notebook.runtime.detached import OwnerOptions
    from rho_notebook.runtime.execution import EventSink
    from rho_notebook.runtime.follow import RunFollower
    from rho_notebook.service.catalog import WorkflowEntry, WorkflowScan
    from rho_notebook.service.cells import NotebookSource
    from rho_notebook.service.checks import Checked
    from rho_notebook.service.completion import CompletionJson
    from rho_notebook.service.diff import DiffResult, TryPlan
    from rho_notebook.service.export import ExportResult
    from rho_notebook.service.fork import ForkPlan
    from rho_notebook.service.listing import RowCache, RunsQuery
    from rho_notebook.service.maintenance import Deleted
    from rho_notebook.service.reading import NodeAttempt, Stream
    from rho_notebook.service.record import Recorded
    from rho_notebook.service.requests import Mode, ResumeRun, StartRun
    from rho_notebook.service.results import RunResult
    from rho_notebook.service.starting import Responder
    from rho_notebook.service.wire import DeletedJson, ResultJson, RunRowJson
    from rho_notebook.source.workspace import Workspace
    from rho_notebook.store.journal import JournalRead
    from rho_notebook.store.plans import PlanStore
    from rho_notebook.store.runs import RunManifest, RunStore

__all__ = ["Service"]

P = ParamSpec("P")
T = TypeVar("T")


def _in_thread(method: Callable[P, T]) -> Callable[P, Coroutine[Any, Any, T]]:
    """An async verb whose blocking body (file reads and writes) runs in a worker thread."""

    @functools.wraps(method)
    async def verb(*args: P.args, **kwargs: P.kwargs) -> T:
        import asyncio  # here: what runs without an event loop (glance.py) does not import it

        return await asyncio.to_thread(method, *args, **kwargs)

    return verb


def _deleted(found: Deleted) -> DeletedJson:
    return parts.wire.deleted_json(found.kind, found.id)


@dataclass
class Service:
    """Every verb over the store at ``layout`` (``$RHO_NOTEBOOK_HOME``)."""

    layout: StoreLayout

    @classmethod
    def default(cls) -> Service:
        """The service over the default store (``$RHO_NOTEBOOK_HOME``, read at each call)."""
        return cls(layout=StoreLayout.default())

    @property
    def plan_store(self) -> PlanStore:
        return parts.plans.PlanStore(self.layout)

    @property
    def run_store(self) -> RunStore:
        return parts.runs.RunStore(self.layout)

    # -- planning ---------------------------------------------------------------------------------

    def request_for(
        self,
        source: Path | str | NotebookSource,
        *,
        inputs: Mapping[str, Any] | None = None,
        workspace: Workspace | None = None,
        search_path: str | None = None,
        flow: str | None = None,
    ) -> PlanRequest:
        """:func:`~rho_notebook.service.sources.request_for`: the planning request for an entry ``.star`` path,
        a script, flow module or graph document (``.py``, ``.graph.yaml``), Starlark text or notebook cells."""
        return parts.sources.request_for(
            self.layout, source, inputs=inputs, workspace=workspace, search_path=search_path, flow=flow
        )

    @_in_thread
    def lint_script(self, path: Path, *, flow: str | None = None) -> list[Finding]:
        """``validate SCRIPT.py`` (``flow``: as that flow): the lint findings (planning/script.py lists
        the rules), read with ``ast``, never imported; errors make the script invalid, warnings do not."""
        return parts.planning.script_findings(path, flow=flow)

    @_in_thread
    def lint_graph(
        self, path: Path, *, inputs: Mapping[str, Any] | None = None, display: str | None = None
    ) -> list[GraphFinding]:
        """``validate FILE.graph.yaml``: the item-graph document's findings (planning/itemgraph.py
        lists the rules), naming the file ``display`` (default: ``path``); with ``inputs``, they are
        checked against its declared inputs. Nothing is stored (``plan`` freezes the document)."""
        return parts.planning.graph_findings(path, inputs=inputs, display=display)

    async def check_script(self, path: Path, *, inputs: Mapping[str, Any] | None = None) -> Checked:
        """``validate SCRIPT.py``: the lint findings; when there is no error and ``inputs`` are
        given, they are checked against the script's ``INPUTS`` too (as ``plan`` would)."""
        return await parts.planning.check_script(self.layout, path, inputs=inputs)

    async def check_graph(
        self, path: Path, *, inputs: Mapping[str, Any] | None = None, display: str | None = None
    ) -> Checked:
        """``validate FILE.graph.yaml``: :meth:`lint_graph`'s findings, or the input errors."""
        return await parts.planning.check_graph(self.layout, path, inputs=inputs, display=display)

    @_in_thread
    def convert_graph(self, path: Path) -> str:
        """``convert FILE.graph.yaml``: the equivalent Starlark workflow's source (planning/convert.py
        lists what converts). Raises :class:`InvalidWorkflow` for a document that does not validate
        and :class:`NotConvertible` (a subclass) for one without a faithful Starlark equivalent.
        The file is read as ``plan`` reads it (:func:`~rho_notebook.planning.itemgraph.read_graph_file`)."""
        return parts.planning.convert_graph(path)

    async def validate(self, request: PlanRequest) -> Plan:
        """Everything ``plan`` does except storing: the returned plan has the ID ``unsaved``."""
        return await parts.planning.validate(request)

    async def validate_flow(self, request: PlanRequest) -> FlowCheck:
        """``validate FILE.py --flow NAME``: the flow's compiled manifest and the findings of its
        check (planning/flow.py lists the rules); nothing is stored. Findings are returned, not
        raised; a module that does not lint, plan or compile raises :class:`InvalidWorkflow`."""
        return await parts.flow.check_flow(request)

    async def plan(self, request: PlanRequest) -> Plan:
        """Validate, resolve agents and executables, freeze, and store an immutable plan; when
        this workspace already stored the same graph from the same sources, that plan is
        returned instead (one plan per graph: :meth:`PlanStore.save_once`)."""
        return await parts.planning.plan(self.layout, request)

    async def plan_notebook(
        self,
        notebook: Path,
        *,
        workflow: str | None = None,
        inputs: Mapping[str, Any] | None = None,
        where: str | None = None,
        python_interpreter: Path | None = None,
        store: bool = True,
    ) -> Plan:
        """Plan (without ``store``: validate) a saved notebook's workflow as its exported folder
        would (:func:`~rho_notebook.service.planning.plan_notebook`); diagnostics name its cells."""
        return await parts.planning.plan_notebook(
            self.layout,
            notebook,
            workflow=workflow,
            inputs=inputs,
            where=where,
            python_interpreter=python_interpreter,
            store=store,
        )

    async def plan_source(self, source: NotebookSource, request: PlanRequest, *, store: bool = True) -> Plan:
        """Plan (or validate) notebook cells; diagnostics are renumbered to the cells' lines."""
        return await parts.planning.plan_source(self.layout, source, request, store=store)

    @_in_thread
    def plans(self) -> list[PlanManifest]:
        """Saved plans, oldest first."""
        return self.plan_store.list()

    @_in_thread
    def load_plan(self, plan: str) -> Plan:
        """A stored plan by ID or unique prefix."""
        return self.plan_store.load(plan)

    @_in_thread
    def export(self, notebook: Path, out_dir: Path, *, workflow: str | None = None) -> ExportResult:
        """Write the workflow folder of a saved notebook (``export NOTEBOOK.ipynb DIR``); a path the
        file system cannot hold, or a file where DIR must be, is a ``BadPath``."""
        return parts.export.export_notebook(
            parts.paths.check_path(notebook, argument="notebook"), out_dir, workflow=workflow
        )

    @_in_thread
    def record(self, run: str, out_dir: Path, *, live_commands: bool = False) -> Recorded:
        """Write a finished run's recording and a pytest file replaying it (``record RUN DIR``;
        :mod:`rho_notebook.service.record`)."""
        return parts.record.record_run(self.layout, self.run_store.resolve(run), out_dir, live_commands=live_commands)

    # -- comparing plans and trying one node -------------------------------------------------------

    @_in_thread
    def diff(self, old: str, new: str) -> DiffResult:
        """What changed from OLD to NEW, each a plan ID, a graph digest (``sha256:...``) or a run ID (or a unique prefix): nodes added, removed and changed, each change by field, and which nodes of NEW a run started now would reuse or launch."""
        diff = parts.diff
        return diff.compare(self.layout, diff.resolve_graph(self.layout, old), diff.resolve_graph(self.layout, new))

    @_in_thread
    def diff_plans(self, old: Plan, new: Plan) -> DiffResult:
        """:meth:`diff` of two plans already loaded (a notebook cell's previous and new plan)."""
        return parts.diff.compare(self.layout, parts.diff.plan_ref(old), parts.diff.plan_ref(new))

    @_in_thread
    def try_node(self, plan: str, node: str, *, from_run: str | None = None) -> TryPlan:
        """Store the derived plan that runs ``node`` of ``plan`` alone, its ancestors' results taken from ``from_run`` (default: the newest run of the workflow in this workspace). Raises TryRefused (naming the node): an ancestor changed since, is missing there or did not succeed there."""
        return parts.diff.derive_try_plan(self.layout, self.plan_store.load(plan), node, from_run=from_run)

    @_in_thread
    def fork(self, run: str, *, at: str, value: Any = None, edited: bool = False, inputs: Mapping[str, Any] | None = None, from_plan: str | None = None, via: str = "cli") -> ForkPlan:  # fmt: skip
        """Plan and store the fork of ``run`` at node ``at`` (service/fork.py, docs/fork.md): ``edited``: ``at`` takes ``value`` instead of re-running. Create its run with :meth:`create_run_of` (consent for its digest, as for any run)."""
        return parts.diff.derive_fork(self.layout, run, at=at, value=value, edited=edited, inputs=inputs, from_plan=None if from_plan is None else self.plan_store.load(from_plan), via=via)  # fmt: skip

    # -- starting and resuming --------------------------------------------------------------------

    async def create_run(self, request: StartRun) -> tuple[Plan, str]:
        """Check consent for the plan's digest and create (not start) a run: (plan, run ID). Raises
        ConfirmationRequired: The consent does not cover its digest; PlanError: it came from ``validate``."""
        plan = await self.load_plan(request.plan)
        return plan, await self.create_run_of(plan, request)

    async def create_run_of(self, plan: Plan, request: StartRun) -> str:
        """As :meth:`create_run` for a plan already loaded (``request.plan`` names it)."""
        return await parts.starting.create_run_of(self.layout, plan, request)

    async def execute(
        self,
        run_id: str,
        *,
        resume: bool = False,
        recover_uncertain: bool = False,
        on_event: EventSink | None = None,
        responder: Responder | None = None,
        approval_timeout: float = 0.0,
        decisions: Mapping[str, str] | None = None,
        executor: str | None = None,
    ) -> RunState:
        """Execute (or resume) a created run as its owner on this loop, until it ends (or, a
        script run, halts for a decision; ``decisions`` are a script run's ``--decide``).
        ``executor`` overrides the run's recorded executor (docs/distributed.md)."""
        return await parts.owner.execute_run(
            self.layout,
            run_id,
            resume=resume,
            recover_uncertain=recover_uncertain,
            on_event=on_event,
            responder=responder,
            approval_timeout=approval_timeout,
            decisions=decisions,
            executor=executor,
        )

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        provider: str | None = None,
        model: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        workspace: Workspace | None = None,
    ) -> CompletionJson:
        """One completion outside any run (a flow's in-memory backend, docs/flows.md), with the
        user's settings and, when it is trusted, the workspace's (:func:`~rho_notebook.service.completion.complete`)."""
        return await parts.completion.complete_in(
            self.layout, messages, workspace=workspace, provider=provider, model=model, tools=tools
        )

    def provider_kinds(self, workspace: Workspace) -> dict[str, str] | None:
        """``{name: type}`` of the providers :meth:`complete` can call in ``workspace``, read now (None:
        unreadable settings); what a kernel's flows check ``.to(provider=...)`` against. Not a coroutine."""
        return parts.completion.provider_kinds_in(self.layout, workspace)

    def can_run(self, kind: str) -> bool:
        """Whether a run started here can execute nodes of ``kind`` (``command``, ``shell``,
        ``agent``, ``approval``): this installation has an executor for it. Whether an agent
        node's model endpoint is configured is a separate question (docs/providers.md)."""
        return kind in parts.owner.default_executors()

    async def check_resume(self, request: ResumeRun) -> str:
        """Check consent for resuming the run's frozen graph; returns the full run ID.

        Raises ConfirmationRequired: The consent does not cover the run's graph digest.
        """
        return await parts.starting.check_resume(self.layout, request)

    async def run(
        self,
        request: StartRun,
        *,
        on_event: EventSink | None = None,
        responder: Responder | None = None,
        approval_timeout: float = 0.0,
    ) -> RunState:
        """Consent, create and execute a run on this loop until it ends (the CLI's ``run``)."""
        _, run_id = await self.create_run(request)
        return await self.execute(run_id, on_event=on_event, responder=responder, approval_timeout=approval_timeout)

    async def resume(
        self,
        request: ResumeRun,
        *,
        on_event: EventSink | None = None,
        responder: Responder | None = None,
        approval_timeout: float = 0.0,
    ) -> RunState:
        """Consent and resume a run on this loop until it ends (the CLI's ``resume``)."""
        run_id = await self.check_resume(request)
        return await self.execute(
            run_id,
            resume=True,
            recover_uncertain=request.recover_uncertain,
            on_event=on_event,
            responder=responder,
            approval_timeout=approval_timeout,
            decisions=request.decisions,
            executor=request.executor,
        )

    @_in_thread
    def start_detached(self, run: str, options: OwnerOptions | None = None) -> int:
        """:meth:`start_owner` from a worker thread (so from the fork server): the owner's pid."""
        return self.start_owner(self.run_store.resolve(run), options)

    def start_owner(self, run_id: str, options: OwnerOptions | None = None, *, fork: bool = False) -> int:
        """Start (``options.resume``: resume) run ``run_id`` in an owner process of its own
        (:mod:`rho_notebook.runtime.detached`; ``fork`` only while this process has no other
        thread): the owner's pid once it holds the run. Blocks until then; not a coroutine, so a
        single-threaded CLI can fork. Raises the owner's refusal (a RhoError) as it is, or
        RunRefused when the owner could not start (``owner.log`` says why)."""
        return parts.detached.start_owner(self.layout, run_id, options, fork=fork)

    def follower(self, run_id: str, *, after_seq: int = 0, answers: bool = False) -> RunFollower:
        """A :class:`~rho_notebook.runtime.follow.RunFollower` of run ``run_id`` (records after ``after_seq``)."""
        return parts.follow.RunFollower(self.layout, run_id, after_seq=after_seq, answers=answers)

    async def resume_detached(self, request: ResumeRun) -> int:
        """Check consent and resume the run as :meth:`start_detached` starts one
        (:func:`~rho_notebook.service.starting.resume_detached`): the owner's pid."""
        return await parts.starting.resume_detached(self.layout, request)

    # -- reading runs -----------------------------------------------------------------------------

    @_in_thread
    def resolve_run(self, run: str) -> str:
        """The full run ID of an ID or unique prefix."""
        return self.run_store.resolve(run)

    @_in_thread
    def status(self, run: str) -> RunState:
        """One durable snapshot of a run (never takes ownership)."""
        return parts.glance.status(self.layout, run)

    @_in_thread
    def manifest(self, run: str) -> RunManifest:
        """How a run was created: plan, digest, time, front end, permission mode."""
        return self.run_store.manifest(self.run_store.resolve(run))

    @_in_thread
    def result(self, run: str) -> ResultJson:
        """Per node: state, attempts, exit, artifact paths and validated output."""
        return parts.reading.read_result(self.layout, run)

    @_in_thread
    def run_result(self, run: str) -> RunResult:
        """:meth:`result` as Python values (``rho.result(run_id)``; ``to_json()`` is the same answer)."""
        return parts.reading.read_run_result(self.layout, run)

    @_in_thread
    def runs(self, query: RunsQuery | None = None) -> list[RunState]:
        """Runs in the store, oldest first (run IDs are time-ordered); a run whose journal is
        damaged is listed as ``damaged``, one that cannot be read at all is left out.
        ``query.state`` filters by lifecycle; ``query.limit`` keeps the newest."""
        return parts.listing.list_runs(self.layout, query)

    @_in_thread
    def run_rows(self, query: RunsQuery | None = None, *, cache: RowCache | None = None) -> list[RunRowJson]:
        """:meth:`runs` as rows of the run list (with how each run was created), by the same
        listing rule. With ``cache``, the row of a finished run whose journal has not changed
        (same size and mtime) is not read again: for a front end that polls the list."""
        return parts.listing.list_rows(self.layout, query, cache)

    @_in_thread
    def run_graph(self, run: str) -> Graph:
        """The frozen graph a run executes, checked against the digest it was created with.

        Raises StoreError: The run's ``graph.json`` was modified.
        """
        return parts.reading.run_graph(self.layout, run)

    @_in_thread
    def node_attempt(self, run: str, node: str, *, attempt: int = 0) -> NodeAttempt:
        """One attempt of a node (0: its latest) and its artifacts' folder (:func:`.reading.node_attempt`)."""
        return parts.reading.node_attempt(self.layout, run, node, attempt=attempt)

    def attempt_dir(self, run_id: str, node: str, attempt: int) -> Path:
        """Where attempt ``attempt`` (>= 1) of ``node`` of run ``run_id`` (a full ID) keeps its own
        artifacts, without reading the store (cheap): for a view that shows them and tails its
        growing streams. :meth:`node_attempt` checks the folder and follows a reused attempt."""
        return parts.reading.attempt_dir(self.layout, run_id, node, attempt)

    def run_ids(self) -> list[str]:
        """Every run ID in the store, oldest first (cheap: a directory listing)."""
        return self.run_store.ids()

    def is_owned(self, run_id: str) -> bool:
        """Whether a live owner holds the run now."""
        return parts.run_locks.OwnerLock.is_held(self.run_store.folder(run_id).lock)

    @_in_thread
    def journal(self, run: str, *, after_seq: int = 0) -> JournalRead:
        """The run's journal records after ``after_seq`` (and whether its last line is torn); for a
        chained run, checked against its chain and watermark: with ``damage`` set, the records are
        the readable part before it."""
        return parts.reading.journal(self.layout, run, after_seq=after_seq)

    def events(
        self, run: str, *, after_seq: int = 0, follow: bool = False, stop: Callable[[], bool] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The run's journal records after ``after_seq``; with ``follow``, new ones as they are
        written, until the run is no longer live, or (given ``stop``) until ``stop()`` is true:
        everything written before that is yielded first."""
        return parts.reading.events(self.layout, run, after_seq=after_seq, follow=follow, stop=stop)

    def logs(
        self, run: str, node: str, *, streams: tuple[Stream, ...] = ("stdout", "stderr"), follow: bool = False
    ) -> AsyncIterator[tuple[Stream, str]]:
        """A node's retained output, latest attempt, as (stream, text) pieces decoded as UTF-8
        (replacing errors); with ``follow``, new output while the node runs.

        Raises NotFound: The run has no such node.
        """
        return parts.reading.logs(self.layout, run, node, streams=streams, follow=follow)

    async def log_text(
        self, run: str, node: str, *, streams: tuple[Stream, ...] = ("stdout", "stderr")
    ) -> dict[str, str]:
        """A node's retained output of its latest attempt, whole, by stream ("" when none)."""
        found: dict[str, str] = dict.fromkeys(streams, "")
        async for stream, text in self.logs(run, node, streams=streams):
            found[stream] += text
        return found

    # -- acting on runs ---------------------------------------------------------------------------

    @_in_thread
    def cancel(self, run: str, *, wait_seconds: float = 2.0) -> CancelResult:
        """Durably request cancellation and wait up to ``wait_seconds`` for the owner's
        acknowledgement; works for a run owned by any process."""
        return parts.cancel.request_cancel(self.layout, self.run_store.resolve(run), wait_seconds=wait_seconds)

    @_in_thread
    def delete(self, target: str, *, include_plans: bool = True) -> DeletedJson:
        """Delete a run that no owner holds, or (when no run matches) a saved plan.

        Raises RunRefused: The run is live: an owner holds it (cancel it first); NotFound: Nothing matches."""
        return _deleted(parts.maintenance.delete(self.layout, target, include_plans=include_plans))

    @_in_thread
    def delete_plan(self, plan: str) -> DeletedJson:
        """Delete a saved plan (its runs keep their own copy of the graph)."""
        return _deleted(parts.maintenance.delete_plan(self.layout, plan))

    @_in_thread
    def prunable(self, *, older_than_days: float, include_damaged: bool = False) -> list[str]:
        """Completed (with ``include_damaged``, damaged too) runs last updated more than
        ``older_than_days`` ago (:func:`~rho_notebook.service.maintenance.prunable`)."""
        return parts.maintenance.prunable(self.layout, older_than_days=older_than_days, include_damaged=include_damaged)

    async def prune(self, run_ids: list[str]) -> list[DeletedJson]:
        """Delete the runs :meth:`prunable` named (each refused again if it became live)."""
        return [await self.delete(run_id, include_plans=False) for run_id in run_ids]

    # -- decisions --------------------------------------------------------------------------------

    @_in_thread
    def pending_approvals(self, run: str) -> list[ApprovalRequest]:
        """Approval requests of a run that have no decision yet."""
        return parts.deciding.pending_approvals(self.layout, run)

    @_in_thread
    def approval_request(self, run: str, request: str) -> ApprovalRequest:
        """One approval request of a run by ID or unique prefix."""
        return parts.deciding.approval_request(self.layout, run, request)

    @_in_thread
    def decision(self, request: ApprovalRequest) -> ApprovalDecision | None:
        """The decision that stands on a request, if any."""
        return parts.deciding.decision_on(self.layout, request)

    @_in_thread
    def decide(self, request: ApprovalRequest, *, approve: bool, comment: str | None, via: str) -> ApprovalDecision:
        """Record a person's decision and wake the owner; the decision that stands is returned
        (:func:`~rho_notebook.service.decisions.decide` says when it is refused)."""
        return parts.deciding.decide(self.layout, request, approve=approve, comment=comment, via=via)

    @_in_thread
    def form_request(self, run: str, step: str) -> ApprovalRequest:
        """The pending form request of a human step (``step`` or one round, ``step@N``) of a run
        (:func:`~rho_notebook.service.decisions.form_request`)."""
        return parts.deciding.form_request(self.layout, run, step)

    @_in_thread
    def answer(
        self, request: ApprovalRequest, values: Mapping[str, Any], *, comment: str | None = None, via: str
    ) -> ApprovalDecision:
        """Answer a human step's form (:meth:`form_request`; :func:`~rho_notebook.service.decisions.answer`):
        values checked against its fields, recorded like an approval, the owner woken."""
        return parts.deciding.answer(self.layout, request, values, comment=comment, via=via)

    async def approve(
        self, run: str, request: str, *, approve: bool = True, comment: str | None = None, via: str
    ) -> tuple[ApprovalRequest, ApprovalDecision]:
        """Decide one pending request of a run: (the request, the decision that stands)."""
        found = await self.approval_request(run, request)
        return found, await self.decide(found, approve=approve, comment=comment, via=via)

    @_in_thread
    def plan_approval(self, digest: str) -> PlanApproval | None:
        """The ``approve-plan`` record of graph ``digest``, if a person made one."""
        return parts.plan_approval.PlanApprovals(self.layout).get(digest)

    @_in_thread
    def approve_plan(self, target: str) -> tuple[PlanApproval, bool, str | None]:
        """Approve a graph digest (``sha256:...``) or a plan's digest (ID or prefix) for runs when
        plan approval is enforced: (the record that stands, whether it is new, the plan ID)."""
        return parts.deciding.approve_plan(self.layout, target)

    @_in_thread
    def trust(self, path: Path | None = None) -> tuple[Workspace, dict[str, Any]]:
        """Trust the workspace holding ``path``: its project settings and hooks apply
        (:func:`~rho_notebook.service.maintenance.trust`)."""
        return parts.maintenance.trust(self.layout, path)

    @_in_thread
    def untrust(self, path: Path | None = None) -> tuple[Workspace, bool]:
        """Stop trusting the workspace holding ``path``: (the workspace, whether it was trusted);
        a name the file system cannot hold is a ``BadPath``."""
        return parts.maintenance.untrust(self.layout, path)

    # -- the model-facing tool (MCP) ---------------------------------------------------------------

    @_in_thread
    def mcp_run_mode(self, graph_digest: str, requested: Mode) -> tuple[Mode, str]:
        """The mode a run of ``graph_digest`` started through MCP gets when ``requested``, and why
        (:func:`~rho_notebook.service.mcp_rules.mcp_run_mode`)."""
        approval = parts.plan_approval.PlanApprovals(self.layout).get(graph_digest)
        rules = parts.mcp_rules
        return rules.mcp_run_mode(graph_digest, requested, approval=approval, setting=rules.user_max_mode(self.layout))

    @_in_thread
    def check_mcp_decisions(self, run: str, decisions: Mapping[str, str]) -> None:
        """Refuse decisions a model may not make (:func:`~rho_notebook.service.mcp_rules.check_mcp_decisions`)."""
        parts.mcp_rules.check_mcp_decisions(self.layout, self.run_store.resolve(run), decisions)

    # -- the workspace's workflows ----------------------------------------------------------------

    async def workflows(self, root: Path) -> list[WorkflowEntry]:
        """The workflows of the workspace at ``root`` (:mod:`rho_notebook.service.catalog`):
        Starlark entries, scripts, flow modules, graph documents and notebooks' workflow cells.
        Bounded: :meth:`workflow_scan` says whether the scan stopped early."""
        return (await self.workflow_scan(root)).workflows

    @_in_thread
    def workflow_scan(self, root: Path) -> WorkflowScan:
        """:meth:`workflows` with whether the scan stopped after its bound and what it skipped."""
        return parts.catalog.scan_workflows(root, store=self.layout.home)
