"""The application service: every verb of every front end, over one store.

The CLI, the notebook API and magics, the widgets, the jupyter-server handlers and the
model-facing tool call these verbs and nothing below them, so each rule lives once: consent to a
digest (:class:`~rho_notebook.service.requests.Consent`), listing with a filter and a limit,
refusing to delete a live run, reading a node's logs, the one answer shape per verb
(:mod:`rho_notebook.service.wire`).

Verbs are ``async``. Those that read or write files run in a worker thread (``asyncio.to_thread``)
so an event loop that awaits them (the server's, the runner's) never blocks; planning awaits the
supervised planning worker; ``run`` and ``resume`` execute the run as its owner on the awaiting
loop. Synchronous callers bridge through :func:`rho_notebook.service.background.default_runner`
(``runner.call(service.status(...))``) in a kernel, or ``asyncio.run`` in the CLI.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import math
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar

from rho_notebook.errors import (
    ApprovalRefused,
    BadArgument,
    InvalidWorkflow,
    NotFound,
    PlanError,
    RhoError,
    RunRefused,
    SourceError,
    TrustRefused,
)
from rho_notebook.model.events import now_iso
from rho_notebook.model.graph import Graph
from rho_notebook.model.itemgraph import is_graph_file
from rho_notebook.model.plan import Plan, PlanManifest
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.model.source import SourceText
from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.planning.convert import convert_graph
from rho_notebook.planning.flow import FlowCheck, check_flow, plan_flow
from rho_notebook.planning.inputs import check_inputs
from rho_notebook.planning.item_plan import graph_entry, is_graph_request, plan_item_graph
from rho_notebook.planning.itemgraph import GraphFinding, lint_graph_file, read_graph_file
from rho_notebook.planning.plan import PlanRequest, build_plan
from rho_notebook.planning.script import Finding, is_script_request, lint_script, plan_script, script_entry
from rho_notebook.policy.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    already_decided,
    check_decider,
    list_requests,
    read_decision,
    read_request,
    record_decision,
    who_am_i,
)
from rho_notebook.policy.plan_approval import PlanApproval, PlanApprovals
from rho_notebook.policy.trust import TrustStore
from rho_notebook.runtime.cancel import CancelResult, request_cancel
from rho_notebook.runtime.detached import start_owner
from rho_notebook.runtime.driver import EventSink
from rho_notebook.runtime.owner import create_run, default_executors, execute_run
from rho_notebook.runtime.status import load_state
from rho_notebook.runtime.wakeup import poke_owner
from rho_notebook.service.catalog import WorkflowEntry, WorkflowScan, scan_workflows
from rho_notebook.service.cells import NotebookSource
from rho_notebook.service.checks import Checked
from rho_notebook.service.completion import CompletionJson, complete
from rho_notebook.service.diff import DiffResult, TryPlan, compare, derive_try_plan, plan_ref, resolve_graph
from rho_notebook.service.export import (
    ExportResult,
    choose_workflow,
    export_cells,
    export_notebook,
    exported_source,
    read_cells,
)
from rho_notebook.service.mcp_rules import check_mcp_decisions, mcp_run_mode, user_max_mode
from rho_notebook.service.paths import check_path
from rho_notebook.service.record import Recorded, record_run
from rho_notebook.service.requests import Mode, ResumeRun, RunsQuery, StartRun
from rho_notebook.service.wire import LIVE_LIFECYCLES, DeletedJson, ResultJson, RunRowJson, result_json, run_row_json
from rho_notebook.source.labels import FileSourceReader, label_for_path
from rho_notebook.source.workspace import Workspace, find_workspace
from rho_notebook.store.files import check_no_symlink, refused_dir_entry
from rho_notebook.store.ids import match_id, new_id
from rho_notebook.store.journal import JournalRead, check_journal, follow_journal, read_journal
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.plans import PlanStore
from rho_notebook.store.runs import OwnerLock, RunFolder, RunManifest, RunStore

__all__ = ["Service", "NodeAttempt", "Responder", "RowCache", "Stream", "entry_source"]

_log = logging.getLogger(__name__)
_REPORTED_REFUSALS: set[str] = set()
"""Refused run directory entries already warned about in this process."""

P = ParamSpec("P")
T = TypeVar("T")

Responder = Callable[[ApprovalRequest], None]
"""Called (on the owner's loop) when a run asks a person; it must return at once."""

Stream = Literal["stdout", "stderr"]

_LOG_POLL_SECONDS = 0.1


def _in_thread(method: Callable[P, T]) -> Callable[P, Coroutine[Any, Any, T]]:
    """An async verb whose blocking body (file reads and writes) runs in a worker thread."""

    @functools.wraps(method)
    async def verb(*args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(method, *args, **kwargs)

    return verb


def entry_source(path: Path, workspace: Workspace) -> SourceText:
    """Read an entry module from disk under the label rules (``.star``, under the root, no symlinks)."""
    label = label_for_path(path, workspace.root)
    if not label.endswith(".star"):
        msg = f"{path}: a workflow entry must be a .star file"
        raise SourceError(msg, rule="load.label", file=str(path))
    return FileSourceReader(workspace.root).read(label)


def _is_script_path(source: object) -> bool:
    """Whether a planning source names a script file (``SCRIPT.py``), not Starlark text or a notebook."""
    if isinstance(source, Path):
        return source.suffix == ".py"
    return isinstance(source, str) and "\n" not in source and source.endswith(".py")


def _is_graph_path(source: object) -> bool:
    """Whether a planning source names an item-graph document (``FILE.graph.yaml``)."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source):
        return is_graph_file(str(source))
    return False


@dataclass(frozen=True)
class NodeAttempt:
    """One attempt of a node and where it keeps its artifacts (:meth:`Service.node_attempt`)."""

    run_id: str
    node: str
    attempt: int
    """0 when the node has not started."""
    folder: Path | None
    """None when the node has not started."""
    record: NodeRecord
    """The node's record in the snapshot the attempt was read from."""


class RowCache:
    """Rows of finished runs by the size and mtime of their journal and the mtime of its
    watermark (:meth:`Service.run_rows`).

    A front end that lists runs often (the server) keeps one; safe to share between threads.
    """

    def __init__(self) -> None:
        self._rows: dict[str, tuple[tuple[int, ...], RunRowJson]] = {}
        self._lock = threading.Lock()

    def get(self, run_id: str, key: tuple[int, ...]) -> RunRowJson | None:
        with self._lock:
            found = self._rows.get(run_id)
        return found[1] if found is not None and found[0] == key else None

    def put(self, run_id: str, key: tuple[int, ...], row: RunRowJson) -> None:
        with self._lock:
            self._rows[run_id] = (key, row)

    def keep(self, run_ids: list[str]) -> None:
        """Forget the runs not in ``run_ids`` (deleted)."""
        kept = set(run_ids)
        with self._lock:
            for gone in [run_id for run_id in self._rows if run_id not in kept]:
                del self._rows[gone]


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
        return PlanStore(self.layout)

    @property
    def run_store(self) -> RunStore:
        return RunStore(self.layout)

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
        """The planning request for an entry ``.star`` path, a script (a ``.py`` path: its
        workspace is found from the script's folder), Starlark source text (a str with a newline)
        or a notebook's workflow cells.

        The workspace (module root) defaults to the nearest ancestor of the current directory
        holding ``.rho/`` or ``.git``. Explicit ``inputs`` override a notebook source's default
        inputs key by key. ``flow`` (a script only) plans the module's ``Workflow`` of that name as
        a flow run (docs/flows.md).

        Raises
        ------
        BadPath
            A path the file system cannot hold (:func:`~rho_notebook.service.paths.check_path`).
        """
        if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source):
            check_path(source, argument="file")
        if _is_script_path(source) or _is_graph_path(source):
            request = self._script_request(
                Path(str(source)), inputs=inputs, workspace=workspace, search_path=search_path
            )
            return request if flow is None else dataclasses.replace(request, flow=flow)
        if flow is not None and not isinstance(source, NotebookSource):
            msg = f"--flow {flow} needs a flow module (a .py file), not {source!s:.80}"
            raise PlanError(msg)
        ws = workspace or find_workspace()
        given = dict(inputs or {})
        common: dict[str, Any] = {
            "workspace": ws,
            "user_home": self.layout.home,
            "search_path": search_path if search_path is not None else os.environ.get("PATH", os.defpath),
            "workspace_trusted": TrustStore(self.layout).is_trusted(ws),
        }
        if isinstance(source, NotebookSource):
            return PlanRequest(
                entry=source.entry,
                inputs={**source.inputs, **given},
                workflow_dir=source.workflow_dir,
                overlay_sources=dict(source.modules),
                overlay_agents=dict(source.agents),
                python_interpreter=source.python_interpreter,
                flow=flow if flow is not None else source.flow,
                **common,
            )
        if isinstance(source, str) and "\n" in source:
            folder = Path.cwd().resolve()
            relative = folder.relative_to(ws.root).as_posix() if folder.is_relative_to(ws.root) else ""
            label = "//" + (f"{relative}/" if relative and relative != "." else "") + "source.star"
            entry = SourceText(label=label, text=source, display="<source>")
            return PlanRequest(entry=entry, inputs=given, workflow_dir=folder, **common)
        entry = entry_source(Path(source), ws)
        return PlanRequest(entry=entry, inputs=given, workflow_dir=(ws.root / entry.label[2:]).parent, **common)

    def _script_request(
        self,
        path: Path,
        *,
        inputs: Mapping[str, Any] | None,
        workspace: Workspace | None,
        search_path: str | None,
    ) -> PlanRequest:
        """The planning request of a script (``SCRIPT.py``): its workspace is found from the
        script's folder (unless given) and the script must lie inside it."""
        ws = workspace or find_workspace(Path(os.path.realpath(path.absolute().parent)))
        entry = graph_entry(path, ws) if is_graph_file(path.name) else script_entry(path, ws)
        return PlanRequest(
            entry=entry,
            inputs=dict(inputs or {}),
            workflow_dir=(ws.root / entry.label[2:]).parent,
            workspace=ws,
            user_home=self.layout.home,
            search_path=search_path if search_path is not None else os.environ.get("PATH", os.defpath),
            workspace_trusted=TrustStore(self.layout).is_trusted(ws),
        )

    @_in_thread
    def lint_script(self, path: Path) -> list[Finding]:
        """``validate SCRIPT.py``: the script's lint findings (planning/script.py lists the rules),
        read with ``ast``, never imported; errors make the script invalid, warnings do not."""
        check_path(path, argument="file")
        ws = find_workspace(Path(os.path.realpath(path.absolute().parent)))
        entry = script_entry(path, ws)
        return lint_script(entry.text, entry.label, display=str(path))

    @_in_thread
    def lint_graph(
        self, path: Path, *, inputs: Mapping[str, Any] | None = None, display: str | None = None
    ) -> list[GraphFinding]:
        """``validate FILE.graph.yaml``: the item-graph document's findings (planning/itemgraph.py
        lists the rules), naming the file ``display`` (default: ``path``); with ``inputs``, they are
        checked against its declared inputs. Nothing is stored (``plan`` freezes the document)."""
        check_path(path, argument="file")
        return lint_graph_file(path, display=display or str(path), inputs=inputs)

    async def check_script(self, path: Path, *, inputs: Mapping[str, Any] | None = None) -> Checked:
        """``validate SCRIPT.py``: the lint findings; when there is no error and ``inputs`` are
        given, they are checked against the script's ``INPUTS`` too (as ``plan`` would)."""
        checked = Checked.of(await self.lint_script(path))
        if not checked.errors and inputs:
            try:
                await self.validate(self.request_for(path, inputs=inputs))
            except InvalidWorkflow as err:
                checked.add_errors(err)
        return checked

    async def check_graph(
        self, path: Path, *, inputs: Mapping[str, Any] | None = None, display: str | None = None
    ) -> Checked:
        """``validate FILE.graph.yaml``: :meth:`lint_graph`'s findings, or the input errors."""
        try:
            return Checked.of(await self.lint_graph(path, inputs=inputs, display=display))
        except InvalidWorkflow as err:
            checked = Checked.of([])
            checked.add_errors(err)
            return checked

    @_in_thread
    def convert_graph(self, path: Path) -> str:
        """``convert FILE.graph.yaml``: the equivalent Starlark workflow's source (planning/convert.py
        lists what converts). Raises :class:`InvalidWorkflow` for a document that does not validate
        and :class:`NotConvertible` (a subclass) for one without a faithful Starlark equivalent.
        The file is read as ``plan`` reads it (:func:`~rho_notebook.planning.itemgraph.read_graph_file`)."""
        check_path(path, argument="file")
        raw = read_graph_file(path, display=str(path))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            msg = f"cannot read {path}: not UTF-8 text ({err.reason} at byte {err.start})"
            raise SourceError(msg, rule="graph.read", file=str(path)) from None
        return convert_graph(text, display=str(path))

    async def validate(self, request: PlanRequest) -> Plan:
        """Everything ``plan`` does except storing: the returned plan has the ID ``unsaved``."""
        if request.flow is not None:
            return await plan_flow(request, plan_id="unsaved")
        if is_script_request(request):
            return await plan_script(request, plan_id="unsaved")
        if is_graph_request(request):
            return await plan_item_graph(request, plan_id="unsaved")
        return await build_plan(request, plan_id="unsaved")

    async def validate_flow(self, request: PlanRequest) -> FlowCheck:
        """``validate FILE.py --flow NAME``: the flow's compiled manifest and the findings of its
        check (planning/flow.py lists the rules); nothing is stored. Findings are returned, not
        raised; a module that does not lint, plan or compile raises :class:`InvalidWorkflow`."""
        return await check_flow(request)

    async def plan(self, request: PlanRequest) -> Plan:
        """Validate, resolve agents and executables, freeze, and store an immutable plan; when
        this workspace already stored the same graph from the same sources, that plan is
        returned instead (one plan per graph: :meth:`PlanStore.save_once`)."""
        if request.flow is not None:
            plan = await plan_flow(request, plan_id=new_id())
        elif is_script_request(request):
            plan = await plan_script(request, plan_id=new_id())
        elif is_graph_request(request):
            plan = await plan_item_graph(request, plan_id=new_id())
        else:
            plan = await build_plan(request, plan_id=new_id())
        return await asyncio.to_thread(self.plan_store.save_once, plan)

    async def plan_notebook(
        self,
        notebook: Path,
        *,
        workflow: str | None = None,
        inputs: Mapping[str, Any] | None = None,
        where: str | None = None,
        python_interpreter: Path | None = None,
    ) -> Plan:
        """Plan a saved notebook's workflow exactly as its exported folder would plan.

        The folder is exported to a temporary directory beside the notebook (so it lies inside the
        workspace and its labels resolve), planned, and removed; the plan keeps the sources.
        Diagnostics name the notebook's cells. The cell's ``--input`` values are defaults that
        ``inputs`` override. ``where`` names the notebook in errors (default: its resolved path;
        the CLI passes the path as typed). Python nodes are frozen with ``python_interpreter``
        (None: this process's; the CLI passes the notebook kernel's, see ``kernel_python``).
        """
        notebook = check_path(notebook, argument="file").resolve()
        where = where or str(notebook)
        workspace = find_workspace(notebook.parent)
        cells = await asyncio.to_thread(read_cells, notebook)
        cell = choose_workflow(cells, workflow, where=where)
        folder = Path(tempfile.mkdtemp(prefix=".rho-notebook-export-", dir=notebook.parent))
        try:
            result = await asyncio.to_thread(export_cells, cells, folder, workflow=cell.name, where=where)
            source = exported_source(
                result, cells, workspace=workspace, python_interpreter=python_interpreter, script_folder=notebook.parent
            )
            request = self.request_for(source, inputs=inputs, workspace=workspace)
            return await self.plan_source(source, request)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    async def plan_source(self, source: NotebookSource, request: PlanRequest, *, store: bool = True) -> Plan:
        """Plan (or validate) notebook cells; diagnostics are renumbered to the cells' lines."""
        try:
            return await (self.plan(request) if store else self.validate(request))
        except InvalidWorkflow as err:
            raise InvalidWorkflow(source.renumber(err.diagnostics())) from None

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
        return export_notebook(check_path(notebook, argument="notebook"), out_dir, workflow=workflow)

    @_in_thread
    def record(self, run: str, out_dir: Path, *, live_commands: bool = False) -> Recorded:
        """Write a finished run's recording and a pytest file replaying it (``record RUN DIR``;
        :mod:`rho_notebook.service.record`)."""
        return record_run(self.layout, self.run_store.resolve(run), out_dir, live_commands=live_commands)

    # -- comparing plans and trying one node -------------------------------------------------------

    @_in_thread
    def diff(self, old: str, new: str) -> DiffResult:
        """What changed from OLD to NEW, each a plan ID, a graph digest (``sha256:...``) or a run
        ID (or a unique prefix): nodes added, removed and changed, each change by field, and which
        nodes of NEW a run started now would reuse or launch."""
        return compare(self.layout, resolve_graph(self.layout, old), resolve_graph(self.layout, new))

    @_in_thread
    def diff_plans(self, old: Plan, new: Plan) -> DiffResult:
        """:meth:`diff` of two plans already loaded (a notebook cell's previous and new plan)."""
        return compare(self.layout, plan_ref(old), plan_ref(new))

    @_in_thread
    def try_node(self, plan: str, node: str, *, from_run: str | None = None) -> TryPlan:
        """Store the derived plan that runs ``node`` of ``plan`` alone, its ancestors' results
        taken from ``from_run`` (default: the newest run of the workflow in this workspace).

        Raises
        ------
        TryRefused
            An ancestor's definition differs from the source run's (the message names the node
            and the changed fields), is missing there, or did not succeed there.
        """
        return derive_try_plan(self.layout, self.plan_store.load(plan), node, from_run=from_run)

    # -- starting and resuming --------------------------------------------------------------------

    async def create_run(self, request: StartRun) -> tuple[Plan, str]:
        """Check consent for the plan's digest and create (not start) a run: (plan, run ID).

        Raises
        ------
        ConfirmationRequired
            The consent does not cover the plan's graph digest.
        PlanError
            The plan was never stored (it came from ``validate``).
        """
        plan = await self.load_plan(request.plan)
        return plan, await self.create_run_of(plan, request)

    async def create_run_of(self, plan: Plan, request: StartRun) -> str:
        """As :meth:`create_run` for a plan already loaded (``request.plan`` names it)."""
        if plan.plan_id == "unsaved":
            msg = "this plan came from validate() and was not stored; create a stored plan with plan(...)"
            raise PlanError(msg)
        approval = await self.plan_approval(plan.graph_digest) if request.consent.plan_approved else None
        request.consent.check(
            plan.graph_digest,
            what=f"run plan {plan.plan_id[:13]}",
            approved_digest=None if approval is None else approval.graph_digest,
        )
        seed_from = None if request.seed_from is None else await self.resolve_run(request.seed_from)
        return await asyncio.to_thread(
            create_run,
            self.layout,
            plan,
            mode=request.mode,
            origin=request.origin,
            via=request.via,
            client=request.client,
            reuse=request.reuse,
            seed_from=seed_from,
            seed_nodes=request.seed_nodes,
            executor=request.executor,
        )

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
        return await execute_run(
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
        """One completion outside any run (a flow's in-memory backend, docs/flows.md): the request
        and provider selection of a ``run_model`` step, nothing journaled. Settings are the user's,
        plus the workspace's when it is trusted (default workspace: found from the current
        directory).

        Raises
        ------
        StepInvalid, SettingsError, AgentFailure, ProviderError
            See :func:`rho_notebook.service.completion.complete`.
        """
        ws = workspace if workspace is not None else await asyncio.to_thread(find_workspace)
        trusted = await asyncio.to_thread(TrustStore(self.layout).is_trusted, ws)
        return await complete(
            messages,
            home=self.layout.home,
            workspace=ws.root,
            trusted=trusted,
            provider=provider,
            model=model,
            tools=tools,
        )

    def can_run(self, kind: str) -> bool:
        """Whether a run started here can execute nodes of ``kind`` (``command``, ``shell``,
        ``agent``, ``approval``): this installation has an executor for it. Whether an agent
        node's model endpoint is configured is a separate question (docs/providers.md)."""
        return kind in default_executors()

    async def check_resume(self, request: ResumeRun) -> str:
        """Check consent for resuming the run's frozen graph; returns the full run ID.

        Raises
        ------
        ConfirmationRequired
            The consent does not cover the run's graph digest.
        """
        run_id = await self.resolve_run(request.run)
        manifest = await asyncio.to_thread(self.run_store.manifest, run_id)
        request.consent.check(manifest.graph_digest, what=f"resume run {run_id[:13]}")
        return run_id

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

    # -- reading runs -----------------------------------------------------------------------------

    @_in_thread
    def resolve_run(self, run: str) -> str:
        """The full run ID of an ID or unique prefix."""
        return self.run_store.resolve(run)

    @_in_thread
    def status(self, run: str) -> RunState:
        """One durable snapshot of a run (never takes ownership)."""
        return load_state(self.layout, self.run_store.resolve(run))

    @_in_thread
    def manifest(self, run: str) -> RunManifest:
        """How a run was created: plan, digest, time, front end, permission mode."""
        return self.run_store.manifest(self.run_store.resolve(run))

    @_in_thread
    def result(self, run: str) -> ResultJson:
        """Per node: state, attempts, exit, artifact paths and validated output."""
        run_id = self.run_store.resolve(run)
        return result_json(self.run_store.folder(run_id), load_state(self.layout, run_id))

    @_in_thread
    def runs(self, query: RunsQuery | None = None) -> list[RunState]:
        """Runs in the store, oldest first (run IDs are time-ordered); a run whose journal is
        damaged is listed as ``damaged``, one that cannot be read at all is left out.
        ``query.state`` filters by lifecycle; ``query.limit`` keeps the newest."""
        found = []
        for run_id in self._listable_run_ids():
            try:
                found.append(load_state(self.layout, run_id))
            except (RhoError, OSError):
                continue
        return (query or RunsQuery()).select(found, lambda state: state.lifecycle)

    @_in_thread
    def run_rows(self, query: RunsQuery | None = None, *, cache: RowCache | None = None) -> list[RunRowJson]:
        """:meth:`runs` as rows of the run list (with how each run was created), by the same
        listing rule. With ``cache``, the row of a finished run whose journal has not changed
        (same size and mtime) is not read again: for a front end that polls the list."""
        ids = self._listable_run_ids()
        if cache is not None:
            cache.keep(ids)
        rows = [row for row in (self._run_row(run_id, cache) for run_id in ids) if row is not None]
        return (query or RunsQuery()).select(rows, lambda row: row["lifecycle"])

    def _listable_run_ids(self) -> list[str]:
        """The store's run IDs but those whose directory entry is refused (a symlink, not a
        directory): each of those is reported as a warning (``rho-notebook: warning: ...`` in
        the CLI, the server's log; once per process and entry, as the sidebar polls the list),
        never silently left out."""
        ids = []
        for run_id in self.run_store.ids():
            refused = refused_dir_entry(self.layout.run_dir(run_id))
            if refused is None:
                ids.append(run_id)
            else:
                _report_refusal(run_id, refused)
        return ids

    def _run_row(self, run_id: str, cache: RowCache | None) -> RunRowJson | None:
        key = None
        if cache is not None:
            key = self._row_key(run_id)
            cached = cache.get(run_id, key) if key is not None else None
            if cached is not None:
                return cached
        try:
            state = load_state(self.layout, run_id)
            row = run_row_json(state, self.run_store.manifest(run_id))
        except NotFound:  # no manifest yet: a run being created
            return None
        except (RhoError, OSError) as err:  # reported as a warning, never silently left out
            _report_refusal(run_id, err.message if isinstance(err, RhoError) else str(err))
            return None
        if (
            cache is not None
            and key is not None
            and state.lifecycle not in LIVE_LIFECYCLES
            and state.lifecycle is not Lifecycle.PLANNED
        ):
            cache.put(run_id, key, row)
        return row

    def _row_key(self, run_id: str) -> tuple[int, ...] | None:
        """What a cached row is valid for: the journal's size and mtime and (chained runs) the
        watermark's mtime, so deleting or editing either is seen; None when the journal cannot be
        stat'ed (the row is then read, not cached: a deleted journal lists as damaged)."""
        folder = self.run_store.folder(run_id)
        try:
            info = os.stat(folder.events, follow_symlinks=False)
        except OSError:
            return None
        try:
            mark = os.stat(folder.mark, follow_symlinks=False).st_mtime_ns
        except OSError:
            mark = -1
        return (info.st_size, info.st_mtime_ns, mark)

    @_in_thread
    def run_graph(self, run: str) -> Graph:
        """The frozen graph a run executes, checked against the digest it was created with.

        Raises
        ------
        StoreError
            The run's ``graph.json`` was modified.
        """
        run_id = self.run_store.resolve(run)
        return self.run_store.graph(run_id, expected_digest=self.run_store.manifest(run_id).graph_digest)

    @_in_thread
    def node_attempt(self, run: str, node: str, *, attempt: int = 0) -> NodeAttempt:
        """One attempt of a node (0: its latest) and the folder of its artifacts (stdout,
        exit.json, ...), checked to hold no symlinked entry below the store. The folder is None
        when the latest attempt was asked for and the node has not started.

        Raises
        ------
        NotFound
            The run has no such node, or the node no such attempt.
        StoreError
            A symlink stands on the way to the folder.
        """
        state = load_state(self.layout, self.run_store.resolve(run))
        record = state.nodes.get(node)
        if record is None:
            msg = f"run {state.run_id} has no node {node!r}; its nodes: {', '.join(sorted(state.nodes))}"
            raise NotFound(msg)
        number = attempt or record.attempt
        if number == 0:
            return NodeAttempt(run_id=state.run_id, node=node, attempt=0, folder=None, record=record)
        if number < 1 or number > record.attempt:
            msg = f"node {node!r} of run {state.run_id} has no attempt {number} (it has {record.attempt})"
            raise NotFound(msg)
        attempt_record = next((a for a in record.attempts if a.number == number), None)
        run_folder = self.run_store.folder(state.run_id)
        folder = run_folder.attempt_dir(node, number)
        if attempt_record is not None:  # a reused attempt's files are its source attempt's
            folder = run_folder.files_of(node, attempt_record)
        check_no_symlink(folder, below=self.layout.home)
        return NodeAttempt(run_id=state.run_id, node=node, attempt=number, folder=folder, record=record)

    def run_ids(self) -> list[str]:
        """Every run ID in the store, oldest first (cheap: a directory listing)."""
        return self.run_store.ids()

    def run_folder(self, run_id: str) -> RunFolder:
        """Where a run's files are (events, attempts, requests): for readers that tail them."""
        return self.run_store.folder(run_id)

    def is_owned(self, run_id: str) -> bool:
        """Whether a live owner holds the run now."""
        return OwnerLock.is_held(self.run_store.folder(run_id).lock)

    @_in_thread
    def journal(self, run: str, *, after_seq: int = 0) -> JournalRead:
        """The run's journal records after ``after_seq`` (and whether its last line is torn); for a
        chained run, checked against its chain and watermark: with ``damage`` set, the records are
        the readable part before it."""
        run_id = self.run_store.resolve(run)
        folder = self.run_store.folder(run_id)
        if self.run_store.manifest(run_id).chained:
            return check_journal(folder.events, mark=folder.mark, after_seq=after_seq)
        return read_journal(folder.events, after_seq=after_seq)

    async def events(
        self, run: str, *, after_seq: int = 0, follow: bool = False, stop: Callable[[], bool] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The run's journal records after ``after_seq``; with ``follow``, new ones as they are
        written, until the run is no longer live, or (given ``stop``) until ``stop()`` is true:
        everything written before that is yielded first."""
        run_id = await self.resolve_run(run)
        folder = self.run_store.folder(run_id)
        if not follow:
            read = await asyncio.to_thread(read_journal, folder.events, after_seq=after_seq)
            for record in read.events:
                yield record
            return

        def finished() -> bool:
            return (
                not OwnerLock.is_held(folder.lock) and load_state(self.layout, run_id).lifecycle not in LIVE_LIFECYCLES
            )

        async for record in follow_journal(folder.events, after_seq=after_seq, stop=stop or finished):
            yield record

    async def logs(
        self, run: str, node: str, *, streams: tuple[Stream, ...] = ("stdout", "stderr"), follow: bool = False
    ) -> AsyncIterator[tuple[Stream, str]]:
        """A node's retained output, latest attempt, as (stream, text) pieces decoded as UTF-8
        (replacing errors); with ``follow``, new output while the node runs.

        Raises
        ------
        NotFound
            The run has no such node.
        """
        run_id = await self.resolve_run(run)
        folder = self.run_store.folder(run_id)
        offsets = dict.fromkeys(streams, 0)
        while True:
            state = await asyncio.to_thread(load_state, self.layout, run_id)
            if node not in state.nodes:
                msg = f"run {run_id} has no node {node!r}; its nodes: {', '.join(sorted(state.nodes))}"
                raise NotFound(msg)
            record = state.nodes[node]
            attempt_dir = folder.attempt_dir(node, max(record.attempt, 1))
            for stream in streams:
                data = await asyncio.to_thread(folder.read_from, attempt_dir / stream, offsets[stream])
                if data:
                    offsets[stream] += len(data)
                    yield stream, data.decode("utf-8", "replace")
            if not follow or record.state not in (NodeState.RUNNING, NodeState.READY, NodeState.PENDING):
                return
            if state.lifecycle not in LIVE_LIFECYCLES:
                return
            await asyncio.sleep(_LOG_POLL_SECONDS)

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
        return request_cancel(self.layout, self.run_store.resolve(run), wait_seconds=wait_seconds)

    @_in_thread
    def delete(self, target: str, *, include_plans: bool = True) -> DeletedJson:
        """Delete a run that no owner holds, or (when no run matches) a saved plan.

        Raises
        ------
        RunRefused
            The run is live: an owner holds it (cancel it first).
        NotFound
            Nothing matches ``target``.
        """
        try:
            run_id = self.run_store.resolve(target)
        except NotFound:
            if not include_plans:
                raise
            return {"kind": "plan", "id": self.plan_store.delete(target), "deleted": True}
        if self.is_owned(run_id):
            msg = f"run {run_id} is live (an owner holds it); cancel it first"
            raise RunRefused(msg)
        self.run_store.delete(run_id)
        return {"kind": "run", "id": run_id, "deleted": True}

    @_in_thread
    def delete_plan(self, plan: str) -> DeletedJson:
        """Delete a saved plan (its runs keep their own copy of the graph)."""
        return {"kind": "plan", "id": self.plan_store.delete(plan), "deleted": True}

    @_in_thread
    def prunable(self, *, older_than_days: float, include_damaged: bool = False) -> list[str]:
        """Completed runs last updated more than ``older_than_days`` ago (what ``prune`` deletes);
        with ``include_damaged``, damaged runs too (aged by their last readable event, else by
        their creation).

        Raises
        ------
        BadArgument
            ``older_than_days`` is not a finite number >= 0.
        """
        if not math.isfinite(older_than_days) or older_than_days < 0:
            msg = f"older than {older_than_days} days: give a finite number of days, 0 or more"
            raise BadArgument(msg)
        try:
            cutoff = datetime.now(UTC) - timedelta(days=older_than_days)
        except OverflowError:  # before the first day of the calendar: no run is that old
            return []
        doomed = []
        for run_id in self.run_store.ids():
            try:
                state = load_state(self.layout, run_id)
                if state.lifecycle is Lifecycle.DAMAGED:
                    if not include_damaged:
                        continue
                    when = state.updated_at or self.run_store.manifest(run_id).created_at
                elif state.lifecycle is Lifecycle.COMPLETED:
                    when = state.updated_at
                else:
                    continue
            except (RhoError, OSError):
                continue
            if when and datetime.fromisoformat(when) < cutoff:
                doomed.append(run_id)
        return doomed

    async def prune(self, run_ids: list[str]) -> list[DeletedJson]:
        """Delete the runs :meth:`prunable` named (each refused again if it became live)."""
        return [await self.delete(run_id, include_plans=False) for run_id in run_ids]

    # -- decisions --------------------------------------------------------------------------------

    @_in_thread
    def pending_approvals(self, run: str) -> list[ApprovalRequest]:
        """Approval requests of a run that have no decision yet."""
        folder = self.run_store.folder(self.run_store.resolve(run)).requests
        return [r for r in list_requests(folder) if read_decision(folder, r.request_id) is None]

    @_in_thread
    def approval_request(self, run: str, request: str) -> ApprovalRequest:
        """One approval request of a run by ID or unique prefix."""
        folder = self.run_store.folder(self.run_store.resolve(run)).requests
        ids = [r.request_id for r in list_requests(folder)]
        return read_request(folder, match_id(request, ids, what="approval request"))

    @_in_thread
    def decision(self, request: ApprovalRequest) -> ApprovalDecision | None:
        """The decision that stands on a request, if any."""
        return read_decision(self.run_store.folder(request.run_id).requests, request.request_id)

    @_in_thread
    def decide(self, request: ApprovalRequest, *, approve: bool, comment: str | None, via: str) -> ApprovalDecision:
        """Record a person's decision (the first decision wins; the one that stands is returned)
        and wake the owner.

        Raises
        ------
        ApprovalRefused
            The caller is the run's owner process or one of its children (a node cannot approve
            itself).
        AlreadyDecided
            Another decision stands (an identical one too): this one was not recorded.
        """
        if request.kind == "form" and approve:
            msg = (
                f"step {request.facts.get('step', request.node)!r} asks a person to fill a form; answer it with "
                f"rho-notebook answer {request.run_id} {request.facts.get('step', request.node)} FIELD=VALUE... "
                "(approve --deny declines it)"
            )
            raise ApprovalRefused(msg)
        state = load_state(self.layout, request.run_id)
        check_decider(run_id=request.run_id, owner_pid=state.owner_pid)
        decision = ApprovalDecision(
            request_id=request.request_id,
            decision="approve" if approve else "deny",
            by=who_am_i(),
            comment=comment,
            at=now_iso(),
            via=via,
            facts_sha256=request.facts_sha256,
        )
        standing = record_decision(self.run_store.folder(request.run_id).requests, request, decision)
        poke_owner(request.run_id, request.request_id, timeout=0.0)
        return standing

    @_in_thread
    def form_request(self, run: str, step: str) -> ApprovalRequest:
        """The pending form request of a human step (``step`` or one round, ``step@N``) of a run.

        Raises
        ------
        NotFound
            The run has no pending form request for that step (the message lists those it has).
        AlreadyDecided
            The step's form was answered or declined already (the message says by whom and when).
        """
        folder = self.run_store.folder(self.run_store.resolve(run)).requests
        pending = [r for r in list_requests(folder) if r.kind == "form" and read_decision(folder, r.request_id) is None]
        found = [r for r in pending if step in (r.node, r.facts.get("step"))]
        if not found:
            answered = [
                (r, d)
                for r in list_requests(folder)
                if r.kind == "form" and step in (r.node, r.facts.get("step"))
                if (d := read_decision(folder, r.request_id)) is not None
            ]
            if answered:  # too late: say who answered, and when
                raise already_decided(*max(answered, key=lambda pair: pair[0].requested_at))
            waiting = ", ".join(sorted(r.node for r in pending)) or "none"
            msg = f"run {run}: no human step {step!r} is waiting for an answer (steps waiting: {waiting})"
            raise NotFound(msg)
        return max(found, key=lambda r: r.requested_at)

    @_in_thread
    def answer(
        self, request: ApprovalRequest, values: Mapping[str, Any], *, comment: str | None = None, via: str
    ) -> ApprovalDecision:
        """Answer a human step's form (:meth:`form_request`): ``values`` are checked against the
        form's fields (types, choices, required; defaults filled in), recorded like an approval
        with who, when and via (the first answer wins; the one that stands is returned), and the
        owner is woken.

        Raises
        ------
        InputError
            A value is missing, unknown or of the wrong type (the message names the field).
        ApprovalRefused
            The caller is the run's owner or one of its children.
        AlreadyDecided
            Another answer (or a decline) stands: this one was not recorded.
        """
        form = request.facts.get("form") or {}
        where = f"step {request.facts.get('step', request.node)}"
        checked = check_inputs(form, values, file=where, noun="field")
        state = load_state(self.layout, request.run_id)
        check_decider(run_id=request.run_id, owner_pid=state.owner_pid)
        decision = ApprovalDecision(
            request_id=request.request_id,
            decision="approve",
            by=who_am_i(),
            comment=comment,
            at=now_iso(),
            via=via,
            facts_sha256=request.facts_sha256,
            answer=checked,
        )
        standing = record_decision(self.run_store.folder(request.run_id).requests, request, decision)
        poke_owner(request.run_id, request.request_id, timeout=0.0)
        return standing

    async def approve(
        self, run: str, request: str, *, approve: bool = True, comment: str | None = None, via: str
    ) -> tuple[ApprovalRequest, ApprovalDecision]:
        """Decide one pending request of a run: (the request, the decision that stands)."""
        found = await self.approval_request(run, request)
        return found, await self.decide(found, approve=approve, comment=comment, via=via)

    @_in_thread
    def plan_approval(self, digest: str) -> PlanApproval | None:
        """The ``approve-plan`` record of graph ``digest``, if a person made one."""
        return PlanApprovals(self.layout).get(digest)

    @_in_thread
    def approve_plan(self, target: str) -> tuple[PlanApproval, bool, str | None]:
        """Approve a graph digest (``sha256:...``) or a plan's digest (ID or prefix) for runs when
        plan approval is enforced: (the record that stands, whether it is new, the plan ID)."""
        plan_id = None
        if target.startswith("sha256:"):
            digest = target
        else:
            try:
                plan = self.plan_store.load(target)
            except NotFound:
                msg = f"{target!r} is neither a plan ID prefix nor a graph digest (sha256:...)"
                raise NotFound(msg) from None
            digest, plan_id = plan.graph_digest, plan.plan_id
        record, new = PlanApprovals(self.layout).approve(digest, by=who_am_i(), plan_id=plan_id)
        return record, new, plan_id

    @_in_thread
    def trust(self, path: Path | None = None) -> tuple[Workspace, dict[str, Any]]:
        """Trust the workspace holding ``path``: its project settings and hooks apply.

        Raises
        ------
        TrustRefused
            ``path`` does not exist: nothing is trusted.
        BadPath
            ``path`` is a name the file system cannot hold.
        """
        if path is not None:
            check_path(path, argument="path")
        if path is not None and not _exists(path):
            msg = f"{path} does not exist, so there is no workspace to trust; give a folder of the workspace"
            raise TrustRefused(msg, path=str(path))
        workspace = find_workspace(path)
        return workspace, TrustStore(self.layout).trust(workspace, by=who_am_i())

    @_in_thread
    def untrust(self, path: Path | None = None) -> tuple[Workspace, bool]:
        """Stop trusting the workspace holding ``path``: (the workspace, whether it was trusted);
        a name the file system cannot hold is a ``BadPath``."""
        if path is not None:
            check_path(path, argument="path")
        workspace = find_workspace(path)
        return workspace, TrustStore(self.layout).untrust(workspace)

    # -- the model-facing tool (MCP) ---------------------------------------------------------------

    @_in_thread
    def mcp_run_mode(self, graph_digest: str, requested: Mode) -> tuple[Mode, str]:
        """The mode a run of ``graph_digest`` started through MCP gets when ``requested``, and why
        (:mod:`rho_notebook.service.mcp_rules`): at most ``supervised`` unless a person approved
        the digest (``approve-plan``) or the user settings say ``"mcp_max_mode": "auto"``.

        Raises
        ------
        SettingsError
            The user settings' ``mcp_max_mode`` is neither ``"supervised"`` nor ``"auto"``.
        """
        approval = PlanApprovals(self.layout).get(graph_digest)
        return mcp_run_mode(graph_digest, requested, approval=approval, setting=user_max_mode(self.layout))

    @_in_thread
    def check_mcp_decisions(self, run: str, decisions: Mapping[str, str]) -> None:
        """Refuse decisions a model may not make: each must be ``rerun``/``skip`` for a step of the
        run halted by ``recovery="manual"`` (:func:`~rho_notebook.service.mcp_rules.check_mcp_decisions`).

        Raises
        ------
        DecisionNeedsPerson
            A decided step is not halted, or halted for a reason only a person may decide
            (an uncertain launch, an unreadable result); the message names the command to run.
        """
        check_mcp_decisions(self.layout, self.run_store.resolve(run), decisions)

    @_in_thread
    def start_detached(self, run: str) -> int:
        """Start a created run (ID or unique prefix) in an owner process of its own, detached from
        this one (:mod:`rho_notebook.runtime.detached`): closing this process never stops the run,
        and a supervised launch waits for a person instead of failing closed. Returns the owner's
        pid once it holds the run.

        Raises
        ------
        RunRefused
            The owner could not take the run (already started, owned elsewhere, damaged) or could
            not be started (``owner.log`` in the run's folder says why).
        """
        return start_owner(self.layout, self.run_store.resolve(run))

    async def resume_detached(self, request: ResumeRun) -> int:
        """Check consent and resume the run as :meth:`start_detached` starts one, with the request's
        script decisions; returns the owner's pid.

        Raises
        ------
        ConfirmationRequired
            The consent does not cover the run's graph digest.
        RunRefused
            ``recover_uncertain`` was asked for (it takes a person: ``rho-notebook resume RUN
            --recover-uncertain``), or the owner could not take the run.
        """
        run_id = await self.check_resume(request)
        if request.recover_uncertain:
            msg = (
                f"recovering uncertain attempts of run {run_id[:13]} takes a person who inspected them: "
                f"`rho-notebook resume {run_id[:13]} --recover-uncertain`"
            )
            raise RunRefused(msg)
        decisions = dict(request.decisions)
        return await asyncio.to_thread(start_owner, self.layout, run_id, resume=True, decisions=decisions)

    async def workflows(self, root: Path) -> list[WorkflowEntry]:
        """The workflows of the workspace at ``root`` (:mod:`rho_notebook.service.catalog`):
        Starlark entries, scripts, flow modules, graph documents and notebooks' workflow cells.
        Bounded: :meth:`workflow_scan` says whether the scan stopped early."""
        return (await self.workflow_scan(root)).workflows

    @_in_thread
    def workflow_scan(self, root: Path) -> WorkflowScan:
        """:meth:`workflows` with whether the scan stopped after its bound and what it skipped."""
        return scan_workflows(root)


def _exists(path: Path) -> bool:
    """Whether ``path`` names something (a name the file system cannot hold names nothing)."""
    try:
        return path.exists()
    except OSError:
        return False


def _report_refusal(run_id: str, why: str) -> None:
    """Log that run ``run_id`` is left out of a listing and why, once per process and reason (the
    server's sidebar polls the list)."""
    if why not in _REPORTED_REFUSALS:
        _REPORTED_REFUSALS.add(why)
        _log.warning("run %s refused: %s", run_id, why)
