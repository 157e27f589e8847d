"""``rho-notebook mcp``: the workflow tools and run resources over the Model Context Protocol.

Built on the official SDK's low-level :class:`mcp.server.lowlevel.Server` (the protocol, framing
and transports are the SDK's): this module lists the tools of :mod:`rho_notebook.mcp.tools`,
validates every call with the tool's pydantic model, and answers each with the JSON object the
matching CLI verb prints with ``--output json`` (:mod:`rho_notebook.service.wire`). A bad call is
a tool error (``isError``) with a message naming what to fix, never a traceback.

What a model may not do is not here at all: there is no tool, argument or resource that approves
a launch, answers an approval node or a human step's form, approves a plan, trusts a folder or changes a setting. A run
started here is recorded ``via: mcp`` with the client's self-reported name; its mode is decided by
:meth:`Service.mcp_run_mode` (supervised unless a person approved the digest), and it runs in its
own owner process (:meth:`Service.start_detached`), so closing the server never stops it.

Resources (:mod:`rho_notebook.mcp._resources`): the journal, a node's result and a run's output, paged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from rho_notebook.errors import InvalidWorkflow, NotFound, NothingToResume, RhoError, SourceError
from rho_notebook.mcp._paging import cut_value, events_page, nodes_page, page_pieces
from rho_notebook.mcp._person import person_note, run_notes
from rho_notebook.mcp._resources import RunResources
from rho_notebook.mcp.tools import (
    MAX_NODE_CHARS,
    MAX_TEXT,
    TOOLS,
    CancelArgs,
    EventsArgs,
    ListArgs,
    LogsArgs,
    PlanApprovalArgs,
    PlanArgs,
    ResultArgs,
    ResumeArgs,
    RunArgs,
    RunsArgs,
    StatusArgs,
    ToolSpec,
    ValidateArgs,
    WaitArgs,
)
from rho_notebook.model.budget import resume_flags
from rho_notebook.model.itemgraph import GRAPH_SUFFIXES
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle
from rho_notebook.service import (
    Consent,
    PlanRequest,
    ResumeRun,
    RunsQuery,
    Service,
    StartRun,
    Workspace,
    check_path,
)
from rho_notebook.service.catalog import catalog_json
from rho_notebook.service.checks import FlowSpelling, check_flow, flows_spelled, inputs_spelled
from rho_notebook.service.kernel_python import notebook_interpreter
from rho_notebook.service.wire import LIVE_LIFECYCLES, invalid_json, plan_summary_json, status_json, validate_json

__all__ = ["WorkflowTools", "build_server", "serve_stdio"]

_log = logging.getLogger(__name__)

_WAIT_POLL_SECONDS = 0.1
_CLIENT_NAME_MAX = 200
_PASS_INPUT = '; pass it in the inputs argument: {{"{key}": VALUE}}'
"""How a missing input is given to a tool (the CLI says ``--input``: :func:`inputs_spelled`)."""
_FLOWS = FlowSpelling(
    flag="the workflow argument", lead="pass it in the workflow argument: ", each='{{"workflow": "{name}"}}'
)
"""How a flow is named to a tool (the CLI says ``--flow``: :func:`flows_spelled`)."""
_RUN_AGAIN = (
    "to run {node} again, start a new run of its plan: workflow_run(plan_id='{plan_id}', graph_digest='{digest}'); "
    "no tool forks a run: a person may fork it at {node}, keeping what succeeded, with rho-notebook fork {run} --at {node}"
)
"""What runs a completed run's failed node again (the CLI says ``rho-notebook fork``: MCP has no fork tool)."""
_DIGEST_HINT = "pass graph_digest={digest} as workflow_plan answered it"
_INSTRUCTIONS = """\
Rho workflows: frozen DAGs (and Python scripts, and item graphs: FILE.graph.yaml) of agent and command steps.
workflow_list (the workflows; workflow_runs lists runs) -> workflow_validate -> workflow_plan (read the
graph_digest, authority and nodes) -> workflow_run(plan_id, graph_digest) -> workflow_wait / workflow_status
(workflow_events pages the journal) -> workflow_result.
A run you start is supervised (every launch waits for a person) unless a person approved the plan;
no tool approves anything: when a run waits, tell the user the command the answer names."""


class ToolFailure(Exception):
    """A call the tool answers with an error: ``answer`` is the JSON it carries (or a message)."""

    def __init__(self, answer: Any) -> None:
        super().__init__(answer if isinstance(answer, str) else json.dumps(answer))
        self.answer = answer


class WorkflowTools:
    """The tools, each a method taking its validated argument model and the client's name."""

    def __init__(self, service: Service, workspace: Workspace) -> None:
        self.service = service
        self.workspace = workspace
        self._resources = RunResources(service)
        self._tools: dict[str, tuple[ToolSpec, Callable[[Any, str | None], Awaitable[Any]]]] = {
            spec.name: (spec, getattr(self, spec.name)) for spec in TOOLS
        }

    def listing(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=spec.name,
                description=spec.description,
                input_schema=spec.input_schema(),
                annotations=types.ToolAnnotations(
                    read_only_hint=spec.read_only, destructive_hint=False, open_world_hint=False
                ),
            )
            for spec in TOOLS
        ]

    async def call(self, name: str, arguments: dict[str, Any] | None, *, client: str | None) -> types.CallToolResult:
        """Validate and run one call: its JSON answer, or a tool error saying what is wrong."""
        found = self._tools.get(name)
        if found is None:
            return _error(f"no tool {name!r}; the tools are: {', '.join(self._tools)}")
        spec, method = found
        try:
            args = spec.args.model_validate(arguments or {})
        except ValidationError as err:
            return _error(f"{name}: invalid arguments: {_explain(err)}")
        try:
            return _answer(await method(args, client))
        except ToolFailure as failure:
            return _error(_spelled(failure.answer))
        except InvalidWorkflow as err:
            return _error(_spelled(invalid_json(err)))
        except RhoError as err:
            return _error(f"error[{err.rule}]: {_refusal(err)}")
        except Exception as err:  # a bug or an OS failure: the client gets one line, the log the traceback
            _log.exception("tool %s failed", name)
            return _error(f"{name} failed unexpectedly ({type(err).__name__}: {err}); the server's stderr has details")

    # -- finding and planning ---------------------------------------------------------------------

    def _path(self, file: str) -> Path:
        path = Path(file)
        return path if path.is_absolute() else self.workspace.root / path

    def _inside(self, path: Path, *, file: str, what: str, rule: str) -> None:
        """Refuse a file outside the *served* workspace (symlinks resolved, the file's own too: a
        notebook is planned where it resolves): no tool reads, or plans in, another folder.

        Planning checks a .star, script or item graph against the workspace it is given (the
        served one here: ``planning.script.workspace_label``), resolving only the folder's links,
        since reading a linked file is refused anyway. A notebook is not read that way: it is
        exported beside the file a link points to and planned there, so for a notebook only this
        check keeps the plan inside the served workspace."""
        root = os.path.realpath(self.workspace.root)
        if not Path(os.path.realpath(check_path(path, argument="file"))).is_relative_to(root):
            msg = f"{file} is outside the workspace {root}; {what} must live inside it (workflow_list names them)"
            raise SourceError(msg, rule=rule, file=file)

    async def workflow_list(self, args: ListArgs, client: str | None) -> Any:
        scan = await self.service.workflow_scan(self.workspace.root)
        return catalog_json(self.workspace.root, scan)

    async def workflow_validate(self, args: ValidateArgs, client: str | None) -> Any:
        path = self._path(args.file)
        if path.suffix == ".py":
            self._inside(path, file=args.file, what="a script", rule="script.outside_workspace")
            if args.workflow is not None:
                return await self._validate_flow(path, args, flow=args.workflow)
            return await self._validate_script(path, args)
        if path.suffix != ".star" and not path.name.endswith(GRAPH_SUFFIXES):
            msg = f"workflow_validate takes an entry .star, a SCRIPT.py or a FILE.graph.yaml, not {args.file!r}"
            if path.suffix == ".ipynb":
                msg += "; plan a notebook with workflow_plan (it answers the same checks, and stores the plan)"
            raise ToolFailure(msg)
        if args.workflow is not None:
            raise ToolFailure(
                "workflow names a flow module's Workflow; leave it out for a .star file or a FILE.graph.yaml"
            )
        if path.name.endswith(GRAPH_SUFFIXES):
            self._inside(path, file=args.file, what="an item graph", rule="graph.outside_workspace")
            return await self._validate_graph(path, args)
        request = self.service.request_for(path, inputs=args.inputs, workspace=self.workspace)
        return plan_summary_json(await self.service.validate(request), stored=False)

    async def _validate_graph(self, path: Path, args: ValidateArgs) -> Any:
        """An item graph's findings, as ``validate FILE.graph.yaml --output json`` prints them."""
        checked = await self.service.check_graph(path, inputs=args.inputs or None, display=args.file)
        if checked.errors:
            raise ToolFailure(checked.to_json())
        return checked.to_json()

    async def _validate_script(self, path: Path, args: ValidateArgs) -> Any:
        """A script's lint findings; with inputs, also checked against its ``INPUTS`` (as the CLI)."""
        checked = await self.service.check_script(path, inputs=args.inputs)
        if checked.errors:
            raise ToolFailure(checked.to_json())
        return _spelled(checked.to_json())  # a flow module's flow.unnamed warning

    async def _validate_flow(self, path: Path, args: ValidateArgs, *, flow: str) -> Any:
        """A flow module's lint findings, then its compiled manifest's check, as ``validate FILE.py
        --flow NAME --output json`` prints them."""

        def request() -> PlanRequest:
            return self.service.request_for(path, inputs=args.inputs, workspace=self.workspace, flow=flow)

        checked, manifest = await check_flow(self.service, path, flow=flow, request=request)
        errors = checked.errors
        answer = validate_json(checked.diagnostics, valid=errors == 0, flow=flow, manifest=manifest)
        if errors:
            raise ToolFailure(answer)
        return answer

    async def workflow_plan(self, args: PlanArgs, client: str | None) -> Any:
        path = self._path(args.file)
        if path.suffix == ".ipynb":
            self._inside(path, file=args.file, what="a notebook", rule="notebook.outside_workspace")
            interpreter = await asyncio.to_thread(notebook_interpreter, path)  # as `run NOTEBOOK.ipynb` does
            plan = await self.service.plan_notebook(
                path, workflow=args.workflow, inputs=args.inputs, where=args.file, python_interpreter=interpreter.path
            )
        elif path.suffix == ".py":  # a script, or (with workflow) a flow module's Workflow
            request = self.service.request_for(path, inputs=args.inputs, workspace=self.workspace, flow=args.workflow)
            plan = await self.service.plan(request)
            # what `plan SCRIPT.py` prints on stderr: e.g. a flow module planned without its workflow runs nothing
            warnings = [finding.to_json() for finding in await self.service.lint_script(path, flow=args.workflow)]
            if warnings:
                return _spelled({**plan_summary_json(plan, stored=True), "warnings": warnings})
        elif args.workflow is not None:
            raise ToolFailure(
                "workflow names a notebook's workflow or a flow module's; leave it out for a .star file or a FILE.graph.yaml"
            )
        elif path.suffix == ".star" or path.name.endswith(GRAPH_SUFFIXES):
            plan = await self.service.plan(self.service.request_for(path, inputs=args.inputs, workspace=self.workspace))
        else:
            msg = f"workflow_plan takes an entry .star, a SCRIPT.py, a NOTEBOOK.ipynb or a FILE.graph.yaml, not {args.file!r}"
            raise ToolFailure(msg)
        return plan_summary_json(plan, stored=True)

    # -- starting and resuming --------------------------------------------------------------------

    async def workflow_run(self, args: RunArgs, client: str | None) -> Any:
        plan = await self.service.load_plan(args.plan_id)
        mode, reason = await self.service.mcp_run_mode(plan.graph_digest, args.mode)
        consent = Consent(digest=args.graph_digest, hint=_DIGEST_HINT)
        request = StartRun(plan=plan.plan_id, consent=consent, mode=mode, origin="mcp", client=client)
        run_id = await self.service.create_run_of(plan, request)
        pid = await self.service.start_detached(run_id)
        return {
            "run_id": run_id,
            "plan_id": plan.plan_id,
            "graph_digest": plan.graph_digest,
            "workflow": plan.graph.name,
            "mode": mode,
            "mode_asked": args.mode,
            "mode_reason": reason,
            "owner_pid": pid,
            "person": run_notes(plan, run_id, mode, asked=args.mode),
            "next": f"workflow_wait(run_id={run_id!r}) until it ends or waits for a person",
        }

    async def workflow_resume(self, args: ResumeArgs, client: str | None) -> Any:
        run_id = await self.service.resolve_run(args.run_id)
        consent = Consent(digest=args.graph_digest, hint="pass graph_digest={digest} as workflow_status answers it")
        follow = f"follow it with workflow_wait(run_id={run_id!r})"
        request = ResumeRun(run=run_id, consent=consent, decisions=dict(args.decisions), follow_hint=follow)
        await self.service.check_resume(request)
        await self.service.check_mcp_decisions(run_id, dict(args.decisions))
        pid = await self.service.resume_detached(request)
        return {
            "run_id": run_id,
            "resumed": True,
            "decisions": dict(args.decisions),
            "owner_pid": pid,
            "next": f"workflow_wait(run_id={run_id!r}) until it ends or waits for a person",
        }

    async def workflow_cancel(self, args: CancelArgs, client: str | None) -> Any:
        return (await self.service.cancel(args.run_id, wait_seconds=args.timeout_seconds)).to_json()

    # -- reading runs -----------------------------------------------------------------------------

    async def workflow_status(self, args: StatusArgs, client: str | None) -> Any:
        state = await self.service.status(args.run_id)
        return _bounded(
            status_json(state, layout=self.service.layout), node_offset=args.node_offset, tool="workflow_status"
        )

    async def workflow_wait(self, args: WaitArgs, client: str | None) -> Any:
        """Poll the durable state until the run settles (ends, or waits for a person) or time runs out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + args.timeout_seconds
        while True:
            state = await self.service.status(args.run_id)
            settled = state.lifecycle is Lifecycle.WAITING or (
                state.lifecycle not in LIVE_LIFECYCLES and state.lifecycle is not Lifecycle.PLANNED
            )
            if settled or loop.time() >= deadline:
                break
            await asyncio.sleep(_WAIT_POLL_SECONDS)
        status = status_json(state, layout=self.service.layout)
        answer = {**_bounded(status, node_offset=args.node_offset, tool="workflow_wait"), "timed_out": not settled}
        person = await self._person_needed(state)
        if person:
            answer["person"] = person
        return answer

    async def _person_needed(self, state: RunState) -> list[str]:
        """What a person must do for the run to go on, with the commands they would run."""
        run_id = state.run_id
        if state.lifecycle is Lifecycle.WAITING:
            return [person_note(run_id, request) for request in await self.service.pending_approvals(run_id)]
        if state.lifecycle is Lifecycle.NEEDS_DECISION:
            steps = resume_flags(status_json(state).get("halted", []))
            return [
                'steps halted by recovery="manual" may be decided with workflow_resume(decisions=...); any other '
                f"halt needs a person: rho-notebook resume {run_id} {steps}"
            ]
        if state.lifecycle is Lifecycle.NEEDS_RECOVERY:
            return [
                "a launch's outcome is uncertain: a person must inspect it and run "
                f"rho-notebook resume {run_id} --recover-uncertain (never reachable from a tool)"
            ]
        return []

    async def workflow_result(self, args: ResultArgs, client: str | None) -> Any:
        data: dict[str, Any] = dict(await self.service.result(args.run_id))
        run_id = data["run_id"]
        for name, node in data["nodes"].items():
            if "output" in node:
                where = f"the resource rho://runs/{run_id}/nodes/{quote(name, safe='')}/output"  # a key may hold `/`
                node["output"] = cut_value(node["output"], limit=MAX_TEXT // 4, where=where)
        if "output" in data:
            data["output"] = _run_output(data["output"], run_id)
        return _nodes_paged(data, node_offset=args.node_offset, tool="workflow_result")

    async def workflow_logs(self, args: LogsArgs, client: str | None) -> Any:
        run_id = await self.service.resolve_run(args.run_id)  # answered whole, as every other tool does
        pieces = (text async for _, text in self.service.logs(run_id, args.node, streams=(args.stream,)))
        how = f"call workflow_logs with stream={args.stream!r} and offset={{offset}}"
        window = await page_pieces(pieces, offset=args.offset, limit=args.limit, how=how)
        return {"run_id": run_id, "node": args.node, "stream": args.stream, **window}

    async def workflow_runs(self, args: RunsArgs, client: str | None) -> Any:
        query = RunsQuery(state=None if args.state is None else Lifecycle(args.state), limit=args.limit)
        return await self.service.run_rows(query)

    async def workflow_events(self, args: EventsArgs, client: str | None) -> Any:
        """One page of the run's journal; a damaged journal's readable part, with the reason."""
        run_id = await self.service.resolve_run(args.run_id)
        read = await self.service.journal(run_id, after_seq=args.after_seq)
        window = events_page(
            read.events, after_seq=args.after_seq, last_seq=read.last_seq, limit=args.limit, max_chars=MAX_TEXT
        )
        return {"run_id": run_id, **window, "torn": read.torn, "damage": read.damage}

    async def workflow_plan_approval(self, args: PlanApprovalArgs, client: str | None) -> Any:
        plan_id = None
        digest = args.graph_digest
        if args.plan_id is not None:
            plan = await self.service.load_plan(args.plan_id)
            plan_id, digest = plan.plan_id, plan.graph_digest
        if digest is None:  # the model validator requires one of them
            raise ToolFailure("give exactly one of plan_id and graph_digest")
        record = await self.service.plan_approval(digest)
        if record is None:
            return {
                "graph_digest": digest,
                "plan_id": plan_id,
                "approved": False,
                "person": f"a person who read the plan approves it with: rho-notebook approve-plan {plan_id or digest}",
            }
        return {"graph_digest": digest, "plan_id": plan_id, "approved": True, "record": record.model_dump(mode="json")}

    # -- resources --------------------------------------------------------------------------------

    def templates(self) -> list[types.ResourceTemplate]:
        return self._resources.templates()

    async def read(self, uri: str) -> types.TextResourceContents:
        """One resource's text; a refusal (no such run, an ambiguous prefix) is an MCP error whose
        message names the tool that lists what exists, as a tool's refusal does."""
        try:
            return await self._resources.read(uri)
        except RhoError as err:
            raise MCPError(types.INVALID_PARAMS, f"error[{err.rule}]: {_refusal(err)}") from None


# -- answers ---------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def _answer(value: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=_text(value))], is_error=False)


def _spelled(answer: Any) -> Any:
    """A validate or plan answer in the tools' terms: inputs and flows named as arguments, not flags."""
    return flows_spelled(inputs_spelled(answer, _PASS_INPUT), _FLOWS)


def _refusal(err: RhoError) -> str:
    """A refusal's message; a not-found one names the tool that lists what exists (the CLI's verb
    where no tool lists it: plans), a resume that would start nothing the tool that runs it again."""
    if isinstance(err, NotFound):
        return err.listed_with("`rho-notebook {}`", runs="the `workflow_runs` tool")
    if isinstance(err, NothingToResume):
        return err.again_with(_RUN_AGAIN)
    return err.message


def _error(value: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=_text(value))], is_error=True)


def _explain(err: ValidationError) -> str:
    """Each problem as ``argument: what is wrong`` (never the rejected value: it may be long)."""
    problems = []
    for problem in err.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        what = problem["msg"] if problem["type"] != "extra_forbidden" else "is not an argument of this tool"
        problems.append(f"{where}: {what}")
    return "; ".join(problems)


def _run_output(value: Any, run_id: str) -> Any:
    """A run's output value, cut to a marker naming the resource that holds it whole when long."""
    return cut_value(value, limit=MAX_TEXT // 2, where=f"the resource rho://runs/{run_id}/output")


def _bounded(status: Mapping[str, Any], *, node_offset: int, tool: str) -> dict[str, Any]:
    """A status answer whose run output (a script's ``emit_output``, unbounded) is cut when long,
    and whose nodes are paged when many (:func:`_nodes_paged`)."""
    answer = dict(status)
    if "output" in answer:
        answer["output"] = _run_output(answer["output"], answer["run_id"])
    return _nodes_paged(answer, node_offset=node_offset, tool=tool)


def _nodes_paged(answer: dict[str, Any], *, node_offset: int, tool: str) -> dict[str, Any]:
    """The answer with at most :data:`MAX_NODE_CHARS` of node JSON from ``node_offset`` on."""
    how = f"call {tool} with run_id={answer['run_id']!r} and node_offset={{offset}}"
    return nodes_page(answer, node_offset=node_offset, max_chars=MAX_NODE_CHARS, how=how)


def _client_name(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The client's self-reported name (``clientInfo.name``), if it gave one."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return None if info is None else info.name[:_CLIENT_NAME_MAX]


# -- the server ------------------------------------------------------------------------------------


def build_server(service: Service, workspace: Workspace) -> Server[Any]:
    """The MCP server of the workflow tools and run resources over ``service``, for ``workspace``."""
    tools = WorkflowTools(service, workspace)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.listing())

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await tools.call(params.name, params.arguments, client=_client_name(ctx))

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=tools.templates())

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=[await tools.read(str(params.uri))])

    return Server(
        "rho-notebook",
        version=_version(),
        instructions=_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over standard input and output until it closes them (with one planning
    worker kept warm for the client's validate and plan calls)."""
    from rho_notebook.service.planning import use_warm_planner

    use_warm_planner()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rho-notebook")
    except PackageNotFoundError:
        return "0"
