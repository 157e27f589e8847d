"""Executing one script step: validate its arguments, freeze what it will run, digest it, run it.

A script run's steps (docs/scripts.md) arrive one call at a time over the private channel. The
script driver hands each call to :meth:`StepRunner.prepare`, which checks the arguments, resolves
what the step will run *now* and returns a :class:`PreparedStep` with

* ``digest``: ``sha256:`` over the canonical encoding (:func:`rho_notebook.model.canonical.encode`)
  of the step's execution-affecting inputs (``PreparedStep.inputs``). Resume compares it with the
  digest journaled for the same key: equal means the stored result may be replayed.
* ``facts``: what a supervised person or a hook approves, shaped like a node's launch facts.

and then awaits :meth:`StepRunner.run`. A step is an operation, the same one a node of its kind
runs (:mod:`rho_notebook.exec`): the runner builds the operation's spec and runs it, nothing else.

command
    ``{"argv", "cwd", "timeout_seconds", "max_output_bytes"}``. argv[0] is resolved exactly as
    planning resolves a command node's (:class:`~rho_notebook.planning.resolve.Resolver`: the
    search path, ``#!`` interpreters, version-manager shims) and frozen with its sha256 and file
    identity at prepare time (:mod:`rho_notebook.exec.freeze`); the launch is the command
    operation (:func:`~rho_notebook.exec.command.run_command`: verified handles pinned to those
    identities, the graph's environment policy, process group, timeout, bounded output), so an
    executable replaced between prepare and run fails closed. An argv item may be
    ``{"step": KEY, "text": TEXT}``: text taken from step KEY's output. Such items are data, and
    :func:`~rho_notebook.planning.code_args.code_argument_problem` refuses them where an
    interpreter reads its program (``sh -c``, ``python -c``, a script path) or a wrapper the
    program it runs (``env DATA``), as it refuses ``output()`` references in a command node: at
    prepare, before anything is journaled, naming the step key and the call's ``FILE:LINE``
    (:attr:`StepCall.where`). ``cwd`` is a ``//`` label, an absolute path inside
    the workspace, or a path relative to the script's working directory; None is the script's.
    Value: ``{"exit_code", "stdout", "stderr"}`` (retained bytes, at most ``max_output_bytes`` per
    stream, as UTF-8 with replacement); output: the stdout text; success iff exit code 0.
agent
    ``{"agent", "prompt", "output", "budget"}`` (``budget``, agent and model steps: the step's own
    limits, checked before each of its calls as a node's are: :mod:`~rho_notebook.runtime.step_budget`).
    The agent is resolved from the catalog as planning resolves it (the script's folder's
    ``agents/``, ``<workspace>/.rho/agents``, the user's, the built-ins)
    and its provider checked; the attempt is the agent operation
    (:meth:`~rho_notebook.exec.agent.AgentExecutor.run`) with that definition.
    Output: the answer text; value: the validated value when ``output`` (a schema) was given.
model
    ``{"messages", "provider", "model", "tools", "output", "budget"}``: the model operation
    (:mod:`rho_notebook.exec.model`, one completion). Leading ``system`` messages form the
    system prompt (plus the answer instructions of ``output``). Output: the answer text; value:
    the validated value with ``output``, ``{"content", "tool_calls"}`` with ``tools``, else None.

The search path: plans do not record the PATH they resolved command nodes with (the service
plans with the PATH of its own process), so the runner takes ``search_path`` from its caller and
defaults to the ``PATH`` of the run's environment (``environ``), then to planning's default.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from rho_notebook.errors import (
    Diagnostic,
    InvalidWorkflow,
    SettingsError,
    StepInvalid,
    StoreError,
)
from rho_notebook.exec.base import Attempt, AttemptResult, EnvironmentSnapshot, ModelCalls
from rho_notebook.exec.command import judge_exit, run_command
from rho_notebook.exec.command_step import STEP_FORMAT, CommandStepPreparer, StepBudgets, step_digest
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.exec.supervised import Ended, ProcessOperation
from rho_notebook.model.agent import agent_launch_facts
from rho_notebook.model.budget import Limits
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import Graph
from rho_notebook.model.identity import FileIdentity
from rho_notebook.model.reference import Template
from rho_notebook.model.schema import Schema, StdoutJsonSchema, schema_depth
from rho_notebook.model.state import NodeState
from rho_notebook.runtime.step_budget import StepGuards, step_budget
from rho_notebook.source.limits import load_limits
from rho_notebook.store.artifacts import AttemptFiles
from rho_notebook.store.layout import ANSWER_VALUE_FILE, VALUE_FILE, StoreLayout
from rho_notebook.store.runs import RunFolder

if TYPE_CHECKING:  # the agents layer and httpx are imported when an agent or model step comes
    import httpx

    from rho_notebook.agents.settings import AgentSettings
    from rho_notebook.exec.agent import AgentOperation
    from rho_notebook.exec.model import ModelCall

__all__ = [
    "AGENT_STEP_MAX_OUTPUT_BYTES",
    "AGENT_STEP_TIMEOUT_SECONDS",
    "DEFAULT_SEARCH_PATH",
    "STEP_FORMAT",
    "PreparedStep",
    "StepCall",
    "StepInvalid",
    "StepKind",
    "StepResult",
    "StepRunner",
]

StepKind = Literal["command", "agent", "model"]
DEFAULT_SEARCH_PATH = "/usr/local/bin:/usr/bin:/bin"
"""Planning's default search path (``PlanRequest.search_path``), used when neither the caller nor
the run's environment gives one."""
AGENT_STEP_TIMEOUT_SECONDS = 3600
"""Wall-time bound of one agent step (agent steps take no timeout argument)."""
AGENT_STEP_MAX_OUTPUT_BYTES = 1_048_576
"""Bound on an agent step's final answer."""

_KINDS: tuple[str, ...] = ("command", "agent", "model")
_RECOVERY = (None, "rerun", "manual")
_ARGS: dict[str, frozenset[str]] = {
    "command": frozenset({"argv", "cwd", "timeout_seconds", "max_output_bytes"}),
    "agent": frozenset({"agent", "prompt", "output", "budget"}),
    "model": frozenset({"messages", "provider", "model", "tools", "output", "budget"}),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "command": ("argv", "timeout_seconds", "max_output_bytes"),
    "agent": ("agent", "prompt"),
    "model": ("messages",),
}
_CHANGED = "after the step call froze it; call the step again (a resume executes a failed step)"


@dataclass(frozen=True)
class StepCall:
    """One step call as the script made it (after the channel's JSON decoding)."""

    key: str
    """The step key: the author's ``step_id`` or ``call-N``."""
    kind: str
    """``command`` | ``agent`` | ``model`` (anything else is refused by :meth:`StepRunner.prepare`)."""
    args: Mapping[str, Any]
    """The kind's arguments (see the module docstring)."""
    recovery: str | None = None
    """None | ``rerun`` | ``manual``: what resume may do with an unsettled attempt."""
    after: tuple[str, ...] = ()
    """Keys of the steps whose handles fed this call (edges of the live DAG)."""
    where: str | None = None
    """``FILE:LINE`` of the call in the script (the shim sends it; not digested, not journaled),
    named in refusals."""


@dataclass(frozen=True)
class PreparedStep:
    """A validated step call with what it will run frozen; :meth:`StepRunner.run` runs it."""

    call: StepCall
    digest: str
    """``sha256:<hex>`` of ``encode(inputs)``."""
    facts: dict[str, Any]
    """What a person or a hook approves (a node's launch facts)."""
    inputs: dict[str, Any]
    """The execution-affecting inputs the digest covers (JSON-shaped; shown when a step diverges)."""
    operation: ProcessOperation | AgentOperation | ModelCall | None = None
    """What :meth:`StepRunner.run` runs: the command, agent or model operation."""
    identities: Mapping[str, FileIdentity] = field(default_factory=dict)
    """Command steps: identities of the frozen executable, interpreters and cwd, taken at prepare."""
    budget: Limits | None = None
    """Agent and model steps: the step's own ``budget`` (not digested: raising it replays nothing)."""

    @property
    def node(self) -> ProcessOperation | AgentOperation | ModelCall | None:
        """:attr:`operation` (its former name)."""
        return self.operation


class _WouldBlock(Exception):
    """Preparing this call needs blocking work (resolving, hashing, reading settings)."""


@dataclass
class StepResult:
    """How one step attempt ended."""

    state: NodeState
    message: str = ""
    exit: dict[str, Any] | None = None
    """The exit record journaled with ``node_finished`` (process exit, agent or model summary)."""
    output: Any = None
    """What ``StepHandle.output`` returns: stdout text (command) or answer text (agent, model)."""
    value: Any = None
    """What ``StepHandle.value`` returns (see the module docstring); None when there is none."""
    artifacts: dict[str, str] = field(default_factory=dict)
    """Artifact name -> file name in the attempt folder."""


class StepRunner:
    """Prepares and runs the steps of one script run.

    Parameters
    ----------
    graph
        The run's frozen graph (its environment policy and, for the script's folder, ``script``).
    workspace
        The canonical workspace root.
    layout
        The store; ``layout.home`` is the user home agents and settings are read from.
    run_id, folder
        The run and its folder.
    identities
        The plan manifest's identities (used for a cwd the step's own freeze did not record).
    environ
        The run's source environment (filtered by the graph's environment policy for processes;
        credentials are read from it by reference).
    search_path
        The PATH command steps resolve argv[0] on; None: ``environ["PATH"]``, else planning's default.
    trusted
        Whether the workspace is trusted (project settings apply), as recorded in the plan.
    transport
        An httpx transport for provider requests (None: the network).
    """

    def __init__(
        self,
        *,
        graph: Graph,
        workspace: Path,
        layout: StoreLayout,
        run_id: str,
        folder: RunFolder,
        identities: Mapping[str, FileIdentity] | None = None,
        environ: Mapping[str, str],
        search_path: str | None = None,
        trusted: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
        kill_grace_seconds: float = 2.0,
    ) -> None:
        self.graph = graph
        self.workspace = workspace
        self.layout = layout
        self.run_id = run_id
        self.folder = folder
        self.identities = dict(identities or {})
        self.environ = environ if isinstance(environ, EnvironmentSnapshot) else EnvironmentSnapshot(environ)
        """Read-only; a snapshot remembers what the environment policy lets through (per launch)."""
        self.search_path = search_path or environ.get("PATH") or DEFAULT_SEARCH_PATH
        self.trusted = trusted
        self.transport = transport
        self.kill_grace_seconds = kill_grace_seconds
        self._budgets = StepBudgets(load_limits())
        self._step_guards = StepGuards(layout=layout, run_id=run_id, workspace=workspace, trusted=trusted)
        self._commands = CommandStepPreparer(
            workspace=workspace,
            search_path=self.search_path,
            script_cwd=graph.script.cwd if graph.script is not None else "//",
            identities=self.identities,
            budgets=self._budgets,
        )
        """Command steps, their argv[0] frozen once in this execution (one StepRunner per execution)."""

    # -- prepare ---------------------------------------------------------------------------------

    def prepare(self, call: StepCall) -> PreparedStep:
        """Validate ``call``, resolve what it runs, and compute its digest and facts.

        Blocking (it hashes files and may ask a version manager): call it in a thread from a loop.

        Raises
        ------
        StepInvalid
            The message says what is wrong with the call and how to fix it.
        """
        return self._prepare(call, block=True)

    def _prepare(self, call: StepCall, *, block: bool) -> PreparedStep:
        """:meth:`prepare`; without ``block``, raises :class:`_WouldBlock` rather than resolve or hash."""
        if call.kind not in _KINDS:
            msg = f"step {call.key!r}: unknown step kind {call.kind!r} (command, agent or model)"
            raise StepInvalid(msg)
        if call.recovery not in _RECOVERY:
            msg = f"step {call.key!r}: recovery must be None, 'rerun' or 'manual', got {call.recovery!r}"
            raise StepInvalid(msg)
        if not isinstance(call.args, Mapping):
            msg = f"step {call.key!r}: arguments must be an object"
            raise StepInvalid(msg)
        unknown = sorted(set(call.args) - _ARGS[call.kind])
        if unknown:
            msg = f"step {call.key!r}: unknown {call.kind} step argument(s) {', '.join(unknown)} (allowed: {', '.join(sorted(_ARGS[call.kind]))})"
            raise StepInvalid(msg)
        missing = [name for name in _REQUIRED[call.kind] if call.args.get(name) is None]
        if missing:
            msg = f"step {call.key!r}: a {call.kind} step needs {', '.join(missing)}"
            raise StepInvalid(msg)
        if call.kind == "command":
            return self._prepare_command(call, block=block)
        if not block:
            raise _WouldBlock
        if call.kind == "agent":
            return self._prepare_agent(call)
        return self._prepare_model(call)

    def prepare_now(self, call: StepCall) -> PreparedStep | None:
        """:meth:`prepare`, when that needs no blocking work; None when it does (call :meth:`prepare`
        in a thread then).

        A command step whose argv[0] this runner already froze for the same working directory, with
        its files unchanged (:mod:`rho_notebook.exec.freeze`), costs a few ``stat`` calls: fine on the event
        loop, and the common case of a loop of steps and of a replay. Raises as :meth:`prepare`.
        """
        try:
            return self._prepare(call, block=False)
        except _WouldBlock:
            return None

    def _prepare_command(self, call: StepCall, *, block: bool) -> PreparedStep:
        done = self._commands.prepare(call.key, call.args, where=call.where or "", block=block)
        if done is None:
            raise _WouldBlock
        return PreparedStep(
            call=call,
            digest=done.digest,
            facts=done.facts,
            inputs=done.inputs,
            operation=done.operation,
            identities=done.identities,
        )

    def _schema(self, call: StepCall) -> Schema | None:
        raw = call.args.get("output")
        if raw is None:
            return None
        from rho_notebook.planning.normalize import to_schema

        try:
            schema = to_schema(raw if isinstance(raw, dict) else {"type": None})
        except (KeyError, TypeError, ValueError, ValidationError) as err:
            msg = f"step {call.key!r}: output is not a schema ({type(err).__name__}: {err}); build it with rho_notebook.script's schema helpers"
            raise StepInvalid(msg) from None
        if isinstance(schema, StdoutJsonSchema):
            msg = f"step {call.key!r}: stdout_json is for command nodes; give the schema of the answer itself"
            raise StepInvalid(msg)
        self._budgets.within(call.key, "schema_depth", schema_depth(schema))
        self._budgets.within(call.key, "schema_bytes", len(schema.model_dump_json()))
        return schema

    def _prepare_agent(self, call: StepCall) -> PreparedStep:
        from rho_notebook.agents.catalog import resolve_agent
        from rho_notebook.agents.resolve import check_agent_provider
        from rho_notebook.exec.agent import AgentOperation

        agent_id, prompt = call.args["agent"], call.args["prompt"]
        if not isinstance(agent_id, str) or not agent_id:
            msg = f"step {call.key!r}: agent must be an agent id (a string), got {agent_id!r}"
            raise StepInvalid(msg)
        if not isinstance(prompt, str) or not prompt.strip():
            msg = f"step {call.key!r}: prompt must be non-empty text"
            raise StepInvalid(msg)
        schema = self._schema(call)
        try:
            definition, where = resolve_agent(
                agent_id,
                workflow_dir=self._script_dir(),
                workspace=self.workspace,
                user_home=self.layout.home,
            )
            check_agent_provider(
                definition, user_home=self.layout.home, workspace=self.workspace, trusted=self.trusted, file=where
            )
        except InvalidWorkflow as err:
            raise StepInvalid(f"step {call.key!r}: {Diagnostic.inline_all(err.diagnostics())}") from None
        self._budgets.within(call.key, "template_bytes", len(prompt.encode()) + len(definition.body.encode()))
        operation = AgentOperation(
            name=call.key,
            agent=definition.id,
            prompt=Template(parts=(prompt,)),
            timeout_seconds=AGENT_STEP_TIMEOUT_SECONDS,
            max_output_bytes=AGENT_STEP_MAX_OUTPUT_BYTES,
            output=schema,
            definition=definition,
        )
        inputs = {
            "format": STEP_FORMAT,
            "kind": "agent",
            "agent": definition.model_dump(mode="json"),
            "prompt": prompt,
            "output": None if schema is None else schema.model_dump(mode="json"),
        }
        facts = agent_launch_facts(definition, access=operation.access, prompt=prompt)
        digest, budget = step_digest(call.key, inputs), step_budget(call.key, call.args.get("budget"))
        return PreparedStep(call=call, digest=digest, facts=facts, inputs=inputs, operation=operation, budget=budget)

    def _script_dir(self) -> Path | None:
        """The script's folder (its ``agents/`` has the highest precedence, as a workflow's has)."""
        if self.graph.script is None:
            return None
        label = PurePosixPath(self.graph.script.module.removeprefix("//"))
        return self.workspace.joinpath(*label.parent.parts)

    def _settings(self) -> AgentSettings:
        from rho_notebook.agents.settings import load_settings

        return load_settings(self.layout.home, self.workspace, trusted=self.trusted)

    def _prepare_model(self, call: StepCall) -> PreparedStep:
        from rho_notebook.exec.model import conversation, model_call, tool_list

        args = call.args
        subject = f"step {call.key!r}: "
        for name in ("provider", "model"):
            if args.get(name) is not None and (not isinstance(args[name], str) or not args[name]):
                msg = f"{subject}{name} must be a name (a string), got {args[name]!r}"
                raise StepInvalid(msg)
        conversation(args["messages"], subject=subject)  # refused before the settings are read
        tool_list(args.get("tools"), subject=subject)
        schema = self._schema(call)
        try:
            made = model_call(
                self._settings(),
                messages=args["messages"],
                provider=args.get("provider"),
                model=args.get("model"),
                tools=args.get("tools"),
                output=schema,
                subject=subject,
            )
        except (SettingsError, StoreError) as err:
            raise StepInvalid(f"{subject}{err.message}") from None
        inputs = {"format": STEP_FORMAT, "kind": "model", **made.inputs()}
        facts, digest = made.facts(), step_digest(call.key, inputs)
        budget = self._step_guards.limits(
            call.key, call.args.get("budget"), model=f"{facts['provider']}/{facts['model']}"
        )
        return PreparedStep(call=call, digest=digest, facts=facts, inputs=inputs, operation=made, budget=budget)

    # -- run -------------------------------------------------------------------------------------

    async def run(
        self,
        prepared: PreparedStep,
        *,
        attempt_dir: Path,
        cancel: asyncio.Event,
        on_started: Callable[[int], Awaitable[None]] | None = None,
        files: AttemptFiles | None = None,
        verified: VerifiedHandles | None = None,
        model_calls: ModelCalls | None = None,
    ) -> StepResult:
        """Run ``prepared`` once; artifacts (stdout, stderr, exit.json, transcripts) go to ``attempt_dir``.

        ``files`` is the run's lazily made attempt directory (a command step that prints nothing
        then makes none, as a command node makes none; without it the directory is made now), and
        ``verified`` the run's kept verified descriptors (without them every frozen file is
        verified from scratch, a hash per launch). ``model_calls`` is where an agent or model step's
        calls report to the run's ledger (a flow's calls keyed by its module path and branch).
        Never raises for a failing step: the result's state and message say how it ended (a
        budget's :class:`~rho_notebook.errors.BudgetExceeded` propagates, the call unsent).
        """
        if cancel.is_set():
            return StepResult(state=NodeState.CANCELLATION, message="cancelled before the step started")
        operation = prepared.operation
        if operation is None:
            msg = f"step {prepared.call.key!r} was not prepared by StepRunner.prepare"
            raise TypeError(msg)
        if files is None:
            await asyncio.to_thread(_make_dir, attempt_dir)
            files = AttemptFiles.made(attempt_dir)
        elif not isinstance(operation, ProcessOperation):
            await files.ready()  # agents and models write into it themselves
        if prepared.budget is not None:  # the step's own budget, checked as a node's (runtime/step_budget.py)
            await self._step_guards.arm(prepared.call.key, prepared.budget, model_calls)
        attempt = Attempt(
            run_id=self.run_id,
            attempt=int(attempt_dir.name) if attempt_dir.name.isdigit() else 1,
            workspace=self.workspace,
            identities=prepared.identities,
            environment=self.graph.environment,
            cancel=cancel,
            on_started=on_started or _no_pid,
            source_environ=self.environ,
            files=files,
            verified=verified,
            model_calls=_keyed(model_calls, prepared.call.key),
        )
        if isinstance(operation, ProcessOperation):
            return await self._run_command(attempt, operation)
        if prepared.call.kind == "agent":
            return await self._run_agent(attempt, operation)
        return await self._run_model(attempt, operation)

    async def _run_command(self, attempt: Attempt, operation: ProcessOperation) -> StepResult:
        kept: dict[str, bytes] = {}

        async def judge(ended: Ended) -> AttemptResult:
            kept["stdout"] = bytes(ended.stdout.kept or b"")  # all of stdout's retained bytes
            return await judge_exit(ended)

        done = await run_command(attempt, operation, judge=judge, kill_grace_seconds=self.kill_grace_seconds)
        if "stdout" in kept and "stderr" not in done.artifacts:  # nothing to read back from files
            text = kept["stdout"].decode("utf-8", "replace")
            streams = {"stdout": text, "stderr": ""}
        else:
            streams = await asyncio.to_thread(_read_streams, attempt.attempt_dir, done.artifacts)
        # (a step that printed nothing gets no exit.json, as a silent command node gets none: its
        # exit record is journaled with node_finished, and a small value with it)
        code = done.exit.get("code") if done.exit is not None else None
        value = {"exit_code": code, "stdout": streams["stdout"], "stderr": streams["stderr"]}
        message = done.message
        if done.exit is not None and done.exit.get("kind") == "not_started":
            # verification speaks of plans; a step's files were frozen when the call was prepared
            message = message.replace("after planning; create a new plan", _CHANGED)
        return StepResult(
            state=done.state,
            message=message,
            exit=done.exit,
            output=streams["stdout"],
            value=value,
            artifacts=done.artifacts,
        )

    async def _run_agent(self, attempt: Attempt, operation: Any) -> StepResult:
        from rho_notebook.exec.agent import AgentExecutor

        try:
            settings = await asyncio.to_thread(self._settings)
        except (SettingsError, StoreError) as err:
            return StepResult(state=NodeState.FAILURE, message=f"agent config: {err.message}")
        executor = AgentExecutor(settings=settings, trusted=self.trusted, transport=self.transport)
        done = await executor.run(attempt, operation)
        answer = await asyncio.to_thread(_read_answer, attempt.attempt_dir, done)
        value = None if done.value is UNAVAILABLE else done.value
        return StepResult(
            state=done.state,
            message=done.message,
            exit=done.exit,
            output=answer,
            value=value,
            artifacts=done.artifacts,
        )

    async def _run_model(self, attempt: Attempt, operation: Any) -> StepResult:
        from rho_notebook.exec.model import run_model

        outcome = await run_model(
            operation,
            folder=attempt.attempt_dir,
            environ=self.environ,
            cancel=attempt.cancel,
            transport=self.transport,
            calls=attempt.model_calls,
        )
        return StepResult(
            state=outcome.state,
            message=outcome.message,
            exit=outcome.exit,
            output=outcome.text,
            value=outcome.value,
            artifacts=outcome.artifacts,
        )


# -- helpers ---------------------------------------------------------------------------------------


def _keyed(calls: ModelCalls | None, step: str) -> ModelCalls | None:
    """A flow call's step key is ``<module path>[/<branch>]#<n>`` (``#`` is never in a step id):
    its calls roll up by the part before ``#`` (:mod:`rho_notebook.flow.keys`)."""
    if calls is None or "#" not in step:
        return calls
    from rho_notebook.exec.model import KeyedCalls

    return KeyedCalls(calls, step.rsplit("#", 1)[0])


async def _no_pid(pid: int) -> None:
    return None


def _make_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def _read_streams(folder: Path, artifacts: Mapping[str, str]) -> dict[str, str]:
    """stdout and stderr as text (the retained bytes; empty when the stream wrote nothing)."""
    found: dict[str, str] = {}
    for stream in ("stdout", "stderr"):
        name = artifacts.get(stream)
        found[stream] = (folder / name).read_bytes().decode("utf-8", "replace") if name else ""
    return found


def _read_answer(folder: Path, attempt: AttemptResult) -> str | None:
    """The agent's final answer text (``answer.md`` or the raw ``answer.txt``); None when there was none.

    An agent node's own ``value.json`` is renamed ``answer-value.json``: in a script run the attempt's
    ``value.json`` is the step payload the script driver writes."""
    if attempt.artifacts.get("value") == VALUE_FILE:
        os.replace(folder / VALUE_FILE, folder / ANSWER_VALUE_FILE)
        attempt.artifacts["value"] = ANSWER_VALUE_FILE
    name = attempt.artifacts.get("answer")
    if name is None:
        return None
    return (folder / name).read_text(encoding="utf-8", errors="replace")
