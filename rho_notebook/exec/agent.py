"""The agent operation, and the executor for agent nodes: runtime rho (a tool-using loop over a
model provider) and claude-cli.

An agent node, an item graph's agent step and a script's agent step all run one
:class:`AgentOperation` through :meth:`AgentExecutor.run`. One attempt: render the prompt template, resolve provider, model and credential from settings
(runtime rho) or find ``claude`` (claude-cli), run until the final answer within the node's
``timeout_seconds``, then check the answer: with an output schema it must be exactly one JSON
value matching the schema; without one it is markdown prose that nothing downstream can read.
Cancellation (``ctx.cancel``) and the timeout cancel the running task, which aborts in-flight HTTP
requests and stops tool and ``claude`` process groups. There is no automatic retry. Each model call
reports to ``ctx.model_calls`` (the run's ledger and budgets): each turn of the rho loop, and for
claude-cli, which reports usage only at its end, once before the attempt and once with its totals.

Artifacts of an attempt (every text redacted of credential values):

=================== =========================================================================
answer.md           the final answer of a node without output schema (prose)
answer.txt          the raw final answer of a node with an output schema (kept on failure too)
value.json          the validated value (schema nodes that succeed)
transcript.json     system prompt, messages, tool calls and results, per-turn timings (rho);
                    argv, task, Claude's result object and stderr tail (claude-cli)
usage.json          provider, model, credential reference, timings, tokens, retries, outcome,
                    failure kind and message
system-prompt.txt   claude-cli with a body: the system prompt file passed to ``claude``
=================== =========================================================================

The ``node_finished`` event carries :meth:`Session.summary` as its ``exit`` (kind ``agent``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

from rho_notebook.agents.answer import parse_typed_answer
from rho_notebook.agents.claude_cli import CLAUDE_ENV_PREFIXES, run_claude
from rho_notebook.agents.loop import LoopLimits, run_loop
from rho_notebook.agents.prompts import system_prompt, task_message
from rho_notebook.agents.provider import output_limit
from rho_notebook.agents.redact import Redactor
from rho_notebook.agents.resolve import open_provider, read_credential, select_model
from rho_notebook.agents.session import Session
from rho_notebook.agents.settings import AgentSettings, load_settings
from rho_notebook.agents.tools import IMPLEMENTED_TOOLS, ToolBox
from rho_notebook.errors import AgentFailure, AnswerError, RhoError, SettingsError, StoreError, UnavailableValue
from rho_notebook.exec.base import Attempt, AttemptContext, AttemptResult, node_environment, render_template
from rho_notebook.model.agent import RHO_TOOLS, AgentDefinition
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import AgentNode, Graph
from rho_notebook.model.reference import Template
from rho_notebook.model.schema import Schema
from rho_notebook.model.state import NodeState
from rho_notebook.store.files import atomic_write, atomic_write_json
from rho_notebook.store.layout import (
    ANSWER_PROSE_FILE,
    ANSWER_TEXT_FILE,
    TRANSCRIPT_FILE,
    USAGE_FILE,
    VALUE_FILE,
    StoreLayout,
)
from rho_notebook.store.runs import RunStore

__all__ = ["AgentExecutor", "AgentOperation", "agent_operation"]

_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def _no_outputs(name: str) -> Any:
    return UNAVAILABLE


@dataclass(frozen=True, kw_only=True)
class AgentOperation:
    """One agent attempt: which agent, asked what, with which access and bounds."""

    name: str
    """The node's name or the step's key (``RHO_NODE`` of the agent's tools)."""
    agent: str
    """The agent's id in the run's frozen graph (used when ``definition`` is None)."""
    prompt: Template
    """The task; its references are rendered against ``outputs`` when the attempt starts."""
    access: Literal["read_only", "mutating"] = "mutating"
    timeout_seconds: int
    max_output_bytes: int
    output: Schema | None = None
    """The schema the final answer must match (None: prose)."""
    definition: AgentDefinition | None = None
    """The resolved definition; None reads the run's frozen graph."""
    outputs: Callable[[str], Any] = _no_outputs
    """Validated values of upstream nodes the prompt refers to."""


def agent_operation(node: AgentNode, outputs: Callable[[str], Any]) -> AgentOperation:
    """The attempt an agent node makes."""
    return AgentOperation(
        name=node.name,
        agent=node.agent,
        prompt=node.prompt,
        access=node.access,
        timeout_seconds=node.timeout_seconds,
        max_output_bytes=node.max_output_bytes,
        output=node.output,
        outputs=outputs,
    )


class AgentExecutor:
    """Runs agent nodes and agent operations.

    Parameters
    ----------
    settings
        Agent settings to use; None reads them per attempt from the store home the attempt
        directory belongs to (``$RHO_NOTEBOOK_HOME/settings.json``).
    graph
        The frozen graph; None reads the run's frozen copy (never an agent definition file).
    limits
        Turn, tool-error and tool-output budgets of the rho loop.
    trusted
        Whether project settings (``<workspace>/.rho/settings.json``) apply.
    transport
        An httpx transport for provider requests (None: the default network transport).
    """

    def __init__(
        self,
        *,
        settings: AgentSettings | None = None,
        graph: Graph | None = None,
        limits: LoopLimits = LoopLimits(),
        trusted: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._settings = settings
        self._graph = graph
        self._limits = limits
        self._trusted = trusted
        self._transport = transport
        self._graphs: dict[str, Graph] = {}

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        node = ctx.node
        if not isinstance(node, AgentNode):
            msg = f"AgentExecutor cannot run a {node.kind} node"
            raise TypeError(msg)
        return await self.run(ctx, agent_operation(node, ctx.outputs))

    async def run(self, ctx: Attempt, op: AgentOperation) -> AttemptResult:
        """One attempt of ``op``: its answer, transcript and usage go to the attempt folder."""
        if ctx.cancel.is_set():
            return AttemptResult(state=NodeState.CANCELLATION, message="cancelled before the agent started")
        await ctx.directory()  # transcripts, answers and the claude-cli prompt file go there
        redactor = Redactor()
        try:
            definition = op.definition
            if definition is None:
                definition = await asyncio.to_thread(self._definition, ctx, op.agent)
        except (RhoError, KeyError) as err:
            message = err.message if isinstance(err, RhoError) else str(err)
            return AttemptResult(state=NodeState.FAILURE, message=f"cannot load the frozen agent: {message}")
        session = Session(runtime=definition.runtime, redactor=redactor, agent=definition.id)
        failure: AgentFailure | None = None
        answer: str | None = None
        try:
            answer = await self._bounded(ctx, self._run(ctx, op, definition, session), op.timeout_seconds)
        except AgentFailure as err:
            failure = err
        value: Any = UNAVAILABLE
        artifacts: dict[str, str] = {}
        if failure is None and answer is not None:
            value, failure = await self._answer(ctx, op, redactor.text(answer), artifacts)
        return await self._finish(ctx, session, failure, value, artifacts)

    # -- running ---------------------------------------------------------------------------------

    async def _bounded(self, ctx: Attempt, work: Awaitable[str], timeout: float) -> str:
        """``work``'s result, unless the node times out or is cancelled first (then it is stopped)."""
        task = asyncio.ensure_future(work)
        waiter = asyncio.ensure_future(ctx.cancel.wait())
        try:
            done, _ = await asyncio.wait({task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            waiter.cancel()
            await asyncio.gather(task, waiter, return_exceptions=True)
            raise
        waiter.cancel()
        if task in done:
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if ctx.cancel.is_set():
            msg = "cancelled; the in-flight model request and tool processes were stopped"
            raise AgentFailure(msg, kind="cancelled")
        msg = f"timed out after {timeout:g} s (timeout_seconds); the in-flight request and tool processes were stopped"
        raise AgentFailure(msg, kind="node_timeout")

    async def _run(self, ctx: Attempt, op: AgentOperation, definition: AgentDefinition, session: Session) -> str:
        try:
            prompt = render_template(op.prompt, op.outputs)
        except UnavailableValue as err:
            raise AgentFailure(f"cannot render the prompt: {err}", kind="template") from None
        if definition.runtime == "claude-cli":
            environ = self._claude_environ(ctx, op.name, session.redactor)
            return await run_claude(
                definition,
                task=task_message(prompt, output=op.output, read_only=False),
                workspace=ctx.workspace,
                attempt_dir=ctx.attempt_dir,
                environ=environ,
                session=session,
                max_turns=self._limits.max_turns,
                max_output_bytes=op.max_output_bytes,
                on_started=ctx.on_started,
                calls=ctx.model_calls,
            )
        settings = await self._load_settings(ctx)
        for name in settings.credential_env_names():
            session.redactor.add(ctx.source_environ.get(name))
        selection = select_model(definition, settings)
        session.provider, session.model, session.model_alias = selection.provider, selection.model, selection.alias
        session.provider_type, session.base_url = selection.settings.type, selection.settings.url()
        session.credential = selection.credential
        api_key = read_credential(selection, ctx.source_environ)
        session.redactor.add(api_key)
        toolbox = self._toolbox(ctx, op, definition, session)
        session.system = system_prompt(definition)
        read_only = op.access == "read_only"
        async with httpx.AsyncClient(transport=self._transport) as client:
            provider = open_provider(selection, client=client, api_key=api_key, redactor=session.redactor)
            return await run_loop(
                provider,
                definition=definition,
                model=selection.model,
                task=task_message(prompt, output=op.output, read_only=read_only),
                toolbox=toolbox,
                session=session,
                limits=self._limits,
                calls=ctx.model_calls,
                max_output_tokens=output_limit(selection.settings, definition.reasoning),
            )

    def _toolbox(self, ctx: Attempt, op: AgentOperation, definition: AgentDefinition, session: Session) -> ToolBox:
        capabilities = definition.capability_set()
        foreign = sorted(capabilities - set(RHO_TOOLS))
        if foreign:
            msg = (
                f"agent {definition.id!r} lists capabilit{'y' if len(foreign) == 1 else 'ies'} "
                f"{', '.join(map(repr, foreign))}, which this host does not supply; remove "
                f"{'it' if len(foreign) == 1 else 'them'} from tools"
            )
            raise AgentFailure(msg, kind="config")
        session.unavailable_tools = tuple(sorted(capabilities - IMPLEMENTED_TOOLS))
        environ = node_environment(ctx.environment, ctx.source_environ, run_id=ctx.run_id, node=op.name)
        toolbox = ToolBox(
            ctx.workspace,
            offered=capabilities,
            environ=environ,
            read_only=op.access == "read_only",
            limits=self._limits.tools,
        )
        session.tools = toolbox.offered
        return toolbox

    def _claude_environ(self, ctx: Attempt, name: str, redactor: Redactor) -> dict[str, str]:
        environ = node_environment(ctx.environment, ctx.source_environ, run_id=ctx.run_id, node=name)
        for name, value in ctx.source_environ.items():
            if name.startswith(CLAUDE_ENV_PREFIXES):
                environ[name] = value
                if any(word in name.upper() for word in _SECRET_WORDS):
                    redactor.add(value)
        return environ

    # -- lookups -----------------------------------------------------------------------------------

    def _definition(self, ctx: Attempt, agent: str) -> AgentDefinition:
        graph = self._graph
        if graph is None:
            graph = self._graphs.get(ctx.run_id)
        if graph is None:
            store = RunStore(StoreLayout(home=_store_home(ctx)))
            manifest = store.manifest(ctx.run_id)
            graph = store.graph(ctx.run_id, expected_digest=manifest.graph_digest)
            self._graphs[ctx.run_id] = graph
        return graph.agent(agent)

    @property
    def transport(self) -> httpx.AsyncBaseTransport | None:
        """The httpx transport provider requests use (None: the network)."""
        return self._transport

    async def settings_for(self, ctx: Attempt) -> AgentSettings:
        """The agent settings an attempt of this run uses (raises AgentFailure ``config``)."""
        return await self._load_settings(ctx)

    async def _load_settings(self, ctx: Attempt) -> AgentSettings:
        if self._settings is not None:
            return self._settings
        try:
            home = _store_home(ctx)
            return await asyncio.to_thread(load_settings, home, ctx.workspace, trusted=self._trusted)
        except (SettingsError, StoreError) as err:
            raise AgentFailure(err.message, kind="config") from None

    # -- answer and records ----------------------------------------------------------------------------

    async def _answer(
        self, ctx: Attempt, op: AgentOperation, answer: str, artifacts: dict[str, str]
    ) -> tuple[Any, AgentFailure | None]:
        size = len(answer.encode())
        if op.output is None:
            if not answer.strip():
                return UNAVAILABLE, AgentFailure("the agent's final answer is empty", kind="empty_answer")
            kept = answer
            if size > op.max_output_bytes:
                kept = answer.encode()[: op.max_output_bytes].decode("utf-8", errors="ignore")
            await asyncio.to_thread(atomic_write, ctx.attempt_dir / ANSWER_PROSE_FILE, kept.encode())
            artifacts["answer"] = ANSWER_PROSE_FILE
            return UNAVAILABLE, None
        await asyncio.to_thread(atomic_write, ctx.attempt_dir / ANSWER_TEXT_FILE, answer.encode())
        artifacts["answer"] = ANSWER_TEXT_FILE
        if size > op.max_output_bytes:
            msg = f"the final answer is {size} bytes, more than max_output_bytes={op.max_output_bytes}; it cannot be parsed whole"
            return UNAVAILABLE, AgentFailure(msg, kind="too_large")
        if not answer.strip():
            msg = "the agent's final answer is empty; a node with an output schema needs exactly one JSON value"
            return UNAVAILABLE, AgentFailure(msg, kind="empty_answer")
        try:
            value = parse_typed_answer(answer, op.output)
        except AnswerError as err:
            return UNAVAILABLE, AgentFailure(err.message + f" (raw answer in {ANSWER_TEXT_FILE})", kind=err.kind)
        await asyncio.to_thread(atomic_write_json, ctx.attempt_dir / VALUE_FILE, value)
        artifacts["value"] = VALUE_FILE
        return value, None

    async def _finish(
        self, ctx: Attempt, session: Session, failure: AgentFailure | None, value: Any, artifacts: dict[str, str]
    ) -> AttemptResult:
        if failure is None:
            state, outcome = NodeState.SUCCESS, "success"
        elif failure.kind == "cancelled":
            state, outcome = NodeState.CANCELLATION, "cancellation"
        else:
            state, outcome = NodeState.FAILURE, "failure"
        if failure is not None:
            failure = AgentFailure(session.redactor.text(failure.message), kind=failure.kind, status=failure.status)
        records = {
            TRANSCRIPT_FILE: session.transcript(),
            USAGE_FILE: session.usage_record(outcome=outcome, failure=failure),
        }
        for name, record in records.items():
            await asyncio.to_thread(atomic_write_json, ctx.attempt_dir / name, record)
            artifacts[name.removesuffix(".json")] = name
        if (ctx.attempt_dir / "system-prompt.txt").exists():
            artifacts["system_prompt"] = "system-prompt.txt"
        message = "" if failure is None else f"agent {failure.kind}: {failure.message}"
        return AttemptResult(
            state=state, message=message, exit=session.summary(failure), value=value, artifacts=artifacts
        )


def _store_home(ctx: Attempt) -> Path:
    """RHO_NOTEBOOK_HOME of the run the attempt belongs to: ``<home>/workflows/runs/<RUN>/nodes/<N>/attempts/<K>``
    (an aggregate's instance runs in ``<that>/instances/<I>``)."""
    attempt = ctx.attempt_dir
    if attempt.parent.name == "instances":
        attempt = attempt.parents[1]
    parents = attempt.parents
    if (
        len(parents) > 6
        and parents[3].name == ctx.run_id
        and parents[4].name == "runs"
        and parents[5].name == "workflows"
    ):
        return parents[6]
    msg = (
        f"the attempt directory {ctx.attempt_dir} is not inside a run store, so the run's settings and "
        "frozen graph cannot be found; give AgentExecutor settings= and graph="
    )
    raise StoreError(msg)
