"""Executing one script step: validate its arguments, freeze what it will run, digest it, run it.

A script run's steps (docs/scripts.md) arrive one call at a time over the private channel. The
script driver hands each call to :meth:`StepRunner.prepare`, which checks the arguments, resolves
what the step will run *now* and returns a :class:`PreparedStep` with

* ``digest``: ``sha256:`` over the canonical encoding (:func:`rho_notebook.model.canonical.encode`)
  of the step's execution-affecting inputs (``PreparedStep.inputs``). Resume compares it with the
  digest journaled for the same key: equal means the stored result may be replayed.
* ``facts``: what a supervised person or a hook approves, shaped like a node's launch facts.

and then awaits :meth:`StepRunner.run`, which reuses the node executors rather than copying them:

command
    ``{"argv", "cwd", "timeout_seconds", "max_output_bytes"}``. argv[0] is resolved exactly as
    planning resolves a command node's (:class:`~rho_notebook.planning.resolve.Resolver`: the
    search path, ``#!`` interpreters, version-manager shims) and frozen with its sha256 and file
    identity at prepare time; the launch is a command node's launch
    (:class:`~rho_notebook.exec.command.CommandExecutor`: verified handles pinned to those
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
    ``{"agent", "prompt", "output"}``. The agent is resolved from the catalog as planning resolves
    it (the script's folder's ``agents/``, ``<workspace>/.rho/agents``, the user's, the built-ins)
    and its provider checked; the attempt is an agent node's attempt
    (:class:`~rho_notebook.exec.agent.AgentExecutor`) of a one-node graph holding the definition.
    Output: the answer text; value: the validated value when ``output`` (a schema) was given.
model
    ``{"messages", "provider", "model", "tools", "output"}``: one completion
    (:func:`rho_notebook.agents.completion.complete_once`). Leading ``system`` messages form the
    system prompt (plus the answer instructions of ``output``). Output: the answer text; value:
    the validated value with ``output``, ``{"content", "tool_calls"}`` with ``tools``, else None.

The search path: plans do not record the PATH they resolved command nodes with (the service
plans with the PATH of its own process), so the runner takes ``search_path`` from its caller and
defaults to the ``PATH`` of the run's environment (``environ``), then to planning's default.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from rho_notebook.errors import (
    AgentFailure,
    AnswerError,
    InvalidWorkflow,
    PlanError,
    ProviderError,
    SettingsError,
    StepInvalid,
    StoreError,
)
from rho_notebook.exec.base import AttemptContext, AttemptResult
from rho_notebook.exec.command import CommandExecutor, process_facts
from rho_notebook.exec.verify import is_settled, resolve_path
from rho_notebook.model.agent import agent_launch_facts
from rho_notebook.model.canonical import encode
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import AgentNode, CommandNode, FrozenExecutable, Graph
from rho_notebook.model.identity import FileIdentity, identity_of_stat
from rho_notebook.model.reference import Template
from rho_notebook.model.schema import Schema, StdoutJsonSchema, schema_depth
from rho_notebook.model.state import NodeState
from rho_notebook.planning.code_args import ArgvItem, code_argument_problem, step_datum
from rho_notebook.planning.resolve import Resolver, resolve_cwd_label
from rho_notebook.source.limits import load_limits
from rho_notebook.store.files import FileVersion, atomic_write_json, file_version
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import RunFolder

if TYPE_CHECKING:  # the agents layer and httpx are imported when an agent or model step comes
    import httpx

    from rho_notebook.agents.provider import Completion, CompletionRequest, Message
    from rho_notebook.agents.redact import Redactor
    from rho_notebook.agents.resolve import Selection
    from rho_notebook.agents.settings import AgentSettings

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
STEP_FORMAT = "rho-notebook/step/v1"
"""Part of every step digest's input: a change of what a digest covers changes this."""
AGENT_STEP_TIMEOUT_SECONDS = 3600
"""Wall-time bound of one agent step (agent steps take no timeout argument)."""
AGENT_STEP_MAX_OUTPUT_BYTES = 1_048_576
"""Bound on an agent step's final answer."""

_KINDS: tuple[str, ...] = ("command", "agent", "model")
_RECOVERY = (None, "rerun", "manual")
_ARGS: dict[str, frozenset[str]] = {
    "command": frozenset({"argv", "cwd", "timeout_seconds", "max_output_bytes"}),
    "agent": frozenset({"agent", "prompt", "output"}),
    "model": frozenset({"messages", "provider", "model", "tools", "output"}),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "command": ("argv", "timeout_seconds", "max_output_bytes"),
    "agent": ("agent", "prompt"),
    "model": ("messages",),
}
_DIGEST_MEMO = 4096
"""Most prepared command steps remembered (the memo starts over when full)."""
_CHANGED = "after the step call froze it; call the step again (a resume executes a failed step)"
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "tool_name", "is_error"})


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
    node: CommandNode | AgentNode | None = None
    """The synthetic node the executor runs (None for model steps)."""
    graph: Graph | None = None
    """Agent steps: a one-node graph holding the node and the resolved agent definition."""
    identities: Mapping[str, FileIdentity] = field(default_factory=dict)
    """Command steps: identities of the frozen executable, interpreters and cwd, taken at prepare."""
    model: _ModelCall | None = None
    """Model steps: the resolved provider and the request."""


@dataclass(frozen=True)
class _ModelCall:
    selection: Selection
    request: CompletionRequest
    output: Schema | None
    tools: bool


class _WouldBlock(Exception):
    """Preparing this call needs blocking work (resolving, hashing, reading settings)."""


@dataclass(frozen=True)
class _Resolved:
    """A command step's argv[0] as frozen once in this execution, reused while its files are unchanged.

    Resolving argv[0] (the PATH lookup, the ``#!`` chain) and hashing what it finds costs most of a
    step call's preparation, and a replayed call needs the digest all the same. The freeze is reused
    for the same (argv[0], cwd) when ``os.stat`` of every file it froze still gives the
    :func:`~rho_notebook.store.files.file_version` (dev, inode, size, mtime_ns, ctime_ns) it had when
    it was hashed: a write or a replacement changes that version (user space cannot set ctime back),
    and a freeze is kept only when its files had settled (:func:`~rho_notebook.exec.verify.is_settled`,
    as the verifier's digest cache does), so two writes inside one timestamp tick cannot share it.
    For a name with a ``/`` the path as given is stat'ed (a link retargeted is a change); a bare
    name's PATH lookup is kept for the execution, as a plan keeps it for all its nodes; a freeze
    that went through a version-manager shim is never reused (the manager's answer depends on more
    than files).

    Security does not rest on this cache: every launch still opens the frozen files through
    verified handles and checks their content against the frozen sha256
    (:mod:`rho_notebook.exec.verify`) exactly as without it. The cache only saves hashing the files
    again to compute the step's digest.
    """

    executable: FrozenExecutable
    identities: dict[str, FileIdentity]
    """Identities of the executable and its interpreters, by frozen path (as Resolver records them)."""
    versions: tuple[tuple[str, FileVersion], ...]
    """(path to stat, the version it had when frozen) for each frozen file."""

    def unchanged(self) -> bool:
        for path, version in self.versions:
            try:
                if file_version(os.stat(path)) != version:
                    return False
            except OSError:
                return False
        return True


def _versions(files: list[tuple[str, FileIdentity]]) -> tuple[tuple[str, FileVersion], ...] | None:
    """(path, version) of each file, or None when one is unsettled or no longer has the identity
    the resolver recorded as it hashed it (changed since: that freeze must not be reused)."""
    versions: list[tuple[str, FileVersion]] = []
    for path, identity in files:
        try:
            info = os.stat(path)
        except OSError:
            return None
        if identity_of_stat(info) != identity or not is_settled(info):
            return None
        versions.append((path, file_version(info)))
    return tuple(versions)


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
        self.environ = environ
        self.search_path = search_path or environ.get("PATH") or DEFAULT_SEARCH_PATH
        self.trusted = trusted
        self.transport = transport
        self._commands = CommandExecutor(kill_grace_seconds=kill_grace_seconds)
        self._limits = load_limits()
        self._resolved: dict[tuple[str, str], _Resolved] = {}
        """(argv[0], cwd label) -> its freeze in this execution (one StepRunner per execution)."""
        self._prepared: dict[tuple[Any, ...], tuple[_Resolved, PreparedStep, dict[str, FileIdentity]]] = {}
        """(argv, argv data refs, cwd, timeout, max_output) -> (the freeze, the step prepared with
        it, the cwd identity it saw)."""

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
        its files unchanged (:class:`_Resolved`), costs a few ``stat`` calls: fine on the event
        loop, and the common case of a loop of steps and of a replay. Raises as :meth:`prepare`.
        """
        try:
            return self._prepare(call, block=False)
        except _WouldBlock:
            return None

    def _budget(self, call: StepCall, name: str) -> int:
        value = call.args[name]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            msg = f"step {call.key!r}: {name} must be a positive integer, got {value!r}"
            raise StepInvalid(msg)
        self._within(call, name, value)
        return value

    def _within(self, call: StepCall, budget: str, measured: int) -> None:
        limit = self._limits.limit(budget)
        if measured > limit:
            msg = f"step {call.key!r}: budget {budget!r} exceeded: accepted limit {limit}, measured {measured}"
            raise StepInvalid(msg)

    def _cwd_relative(self, call: StepCall) -> str:
        """The step's cwd as a path relative to the workspace root (what Resolver.frozen_dir takes)."""
        raw = call.args.get("cwd")
        base = self.graph.script.cwd if self.graph.script is not None else "//"
        if raw is None:
            return base[2:] or "."
        if not isinstance(raw, str) or not raw or "\x00" in raw:
            msg = f"step {call.key!r}: cwd must be a non-empty path, got {raw!r}"
            raise StepInvalid(msg)
        if raw.startswith("//"):
            relative = raw[2:] or "."
        elif raw.startswith("/"):
            try:
                relative = Path(os.path.normpath(raw)).relative_to(self.workspace).as_posix()
            except ValueError:
                msg = f"step {call.key!r}: cwd {raw!r} is outside the workspace {self.workspace}; give a path inside it"
                raise StepInvalid(msg) from None
        else:
            relative = str(PurePosixPath(base[2:] or ".") / raw)
        if resolve_cwd_label(relative) is None:
            msg = f"step {call.key!r}: cwd {raw!r} leaves the workspace (no '..'); give a path inside it"
            raise StepInvalid(msg)
        return relative

    def _argv(self, call: StepCall) -> tuple[list[str], list[ArgvItem]]:
        """(texts, parts): the argv as launched, and as the code-argument rule sees it (step data
        as data)."""
        raw = call.args["argv"]
        if not isinstance(raw, list) or not raw:
            msg = f"step {call.key!r}: argv must be a non-empty list of strings"
            raise StepInvalid(msg)
        texts: list[str] = []
        parts: list[ArgvItem] = []
        for index, item in enumerate(raw):
            if isinstance(item, str):
                texts.append(item)
                parts.append(item)
            elif (
                isinstance(item, dict)
                and set(item) == {"step", "text"}
                and isinstance(item["step"], str)
                and isinstance(item["text"], str)
                and index > 0
            ):
                texts.append(item["text"])
                parts.append(step_datum(item["step"]))
            else:
                what = "argv[0] must be literal text" if index == 0 else f"argv[{index}] is not a string"
                msg = f"step {call.key!r}: {what} (got {item!r})"
                raise StepInvalid(msg)
            if "\x00" in texts[-1]:
                msg = f"step {call.key!r}: argv[{index}] contains a NUL byte, which no process can receive"
                raise StepInvalid(msg)
        self._within(call, "argv_items", len(texts))
        self._within(call, "argv_bytes", sum(len(t.encode()) for t in texts))
        return texts, parts

    def _prepare_command(self, call: StepCall, *, block: bool) -> PreparedStep:
        texts, parts = self._argv(call)
        timeout = self._budget(call, "timeout_seconds")
        max_output = self._budget(call, "max_output_bytes")
        relative = self._cwd_relative(call)
        resolver = Resolver(workspace=self.workspace, search_path=self.search_path)
        try:
            cwd = resolver.frozen_dir(relative, node=call.key)
            resolved = self._executable(resolver, texts[0], cwd=cwd, node=call.key, block=block)
        except PlanError as err:
            raise StepInvalid(err.message.replace("node ", "step ", 1)) from None
        except OSError as err:
            msg = f"step {call.key!r}: cannot resolve {texts[0]!r} in {relative!r}: {err.strerror or err}"
            raise StepInvalid(msg) from None
        # the same arguments over the same reused freeze (and the same cwd) prepare the same step:
        # build it once, and give it this call's key
        refs = tuple(item["step"] if isinstance(item, dict) else None for item in call.args["argv"])
        memo_key = (tuple(texts), refs, cwd, timeout, max_output)
        memo = self._prepared.get(memo_key)
        if memo is not None and memo[0] is resolved and memo[2] == resolver.identities:
            known = memo[1]
            # the node keeps the first call's name until it runs (a replay never runs it): see run
            return PreparedStep(
                call=call,
                digest=known.digest,
                facts=known.facts,
                inputs=known.inputs,
                node=known.node,
                identities=known.identities,
            )
        identities = {**self.identities, **resolver.identities, **resolved.identities}
        executable = resolved.executable
        problem = code_argument_problem(
            parts,
            resolved=executable.file.path,
            lookup=partial(resolver.canonical_name, cwd_label=cwd),
            node=call.key,
            subject="step",
            where=call.where or "",
        )
        if problem is not None:
            raise StepInvalid(problem.message)
        node = CommandNode(
            name=call.key,
            argv=tuple(texts),
            cwd=cwd,
            executable=executable,
            timeout_seconds=timeout,
            max_output_bytes=max_output,
        )
        inputs = {
            "format": STEP_FORMAT,
            "kind": "command",
            "argv": texts,
            "cwd": cwd,
            "executable": executable.model_dump(mode="json"),
            "timeout_seconds": timeout,
            "max_output_bytes": max_output,
        }
        facts = process_facts(node, lambda _: UNAVAILABLE)
        facts.update(timeout_seconds=timeout, max_output_bytes=max_output)
        prepared = PreparedStep(
            call=call,
            digest=_digest(call, inputs),
            facts=facts,
            inputs=inputs,
            node=node,
            identities=identities,
        )
        if len(self._prepared) >= _DIGEST_MEMO:
            self._prepared.clear()
        self._prepared[memo_key] = (resolved, prepared, dict(resolver.identities))
        return PreparedStep(
            call=call, digest=prepared.digest, facts=dict(facts), inputs=inputs, node=node, identities=identities
        )

    def _executable(self, resolver: Resolver, name: str, *, cwd: str, node: str, block: bool) -> _Resolved:
        """argv[0] frozen as planning freezes it, or this execution's earlier freeze of it when a
        stat proves every file it froze unchanged (:class:`_Resolved`); without ``block``, raises
        :class:`_WouldBlock` instead of freezing it."""
        key = (name, cwd)
        cached = self._resolved.get(key)
        if cached is not None and cached.unchanged():
            return cached
        if not block:
            raise _WouldBlock
        executable = resolver.executable(name, cwd_label=cwd, node=node)
        frozen = (executable.file, *executable.interpreters)
        identities = {f.path: resolver.identities[f.path] for f in frozen}
        resolved = _Resolved(executable=executable, identities=identities, versions=())
        if resolver.via(executable.file.path) or any(resolver.via(i.path) for i in executable.interpreters):
            return resolved  # a version manager's answer depends on more than these files: ask it every time
        given = name if name.startswith("/") else str(resolver.workspace_path(cwd) / name) if "/" in name else None
        versions = _versions(
            [(given or str(resolve_path(executable.file.path, self.workspace)), identities[executable.file.path])]
            + [(str(resolve_path(i.path, self.workspace)), identities[i.path]) for i in executable.interpreters]
        )
        if versions is None:
            return resolved
        resolved = _Resolved(executable=executable, identities=identities, versions=versions)
        self._resolved[key] = resolved
        return resolved

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
        self._within(call, "schema_depth", schema_depth(schema))
        self._within(call, "schema_bytes", len(schema.model_dump_json()))
        return schema

    def _prepare_agent(self, call: StepCall) -> PreparedStep:
        from rho_notebook.agents.catalog import resolve_agent
        from rho_notebook.agents.resolve import check_agent_provider

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
            shown = "; ".join(d.render() for d in err.diagnostics())
            raise StepInvalid(f"step {call.key!r}: {shown}") from None
        self._within(call, "template_bytes", len(prompt.encode()) + len(definition.body.encode()))
        node = AgentNode(
            name=call.key,
            agent=definition.id,
            prompt=Template(parts=(prompt,)),
            timeout_seconds=AGENT_STEP_TIMEOUT_SECONDS,
            max_output_bytes=AGENT_STEP_MAX_OUTPUT_BYTES,
            output=schema,
        )
        graph = Graph(
            name=self.graph.name,
            inputs=(),
            nodes=(node,),
            agents=(definition,),
            environment=self.graph.environment,
        )
        inputs = {
            "format": STEP_FORMAT,
            "kind": "agent",
            "agent": definition.model_dump(mode="json"),
            "prompt": prompt,
            "output": None if schema is None else schema.model_dump(mode="json"),
        }
        facts = agent_launch_facts(definition, access=node.access, prompt=prompt)
        return PreparedStep(call=call, digest=_digest(call, inputs), facts=facts, inputs=inputs, node=node, graph=graph)

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
        from rho_notebook.agents.answer import answer_instructions
        from rho_notebook.agents.completion import select_provider
        from rho_notebook.agents.provider import CompletionRequest, ToolSpec

        args = call.args
        for name in ("provider", "model"):
            if args.get(name) is not None and (not isinstance(args[name], str) or not args[name]):
                msg = f"step {call.key!r}: {name} must be a name (a string), got {args[name]!r}"
                raise StepInvalid(msg)
        messages, system, conversation = _messages(call)
        tools = _tools(call)
        schema = self._schema(call)
        if tools and schema is not None:
            msg = (
                f"step {call.key!r}: give tools or output, not both: a completion that calls tools has no "
                "final answer to validate"
            )
            raise StepInvalid(msg)
        try:
            selection = select_provider(self._settings(), provider=args.get("provider"), model=args.get("model"))
        except (SettingsError, StoreError) as err:
            raise StepInvalid(f"step {call.key!r}: {err.message}") from None
        if schema is not None:
            system = "\n\n".join(p for p in (system, answer_instructions(schema)) if p)
        request = CompletionRequest(
            model=selection.model,
            system=system,
            messages=conversation,
            tools=tuple(ToolSpec.model_validate(t) for t in tools),
        )
        inputs = {
            "format": STEP_FORMAT,
            "kind": "model",
            "provider": selection.provider,
            "model": selection.model,
            "messages": messages,
            "tools": tools if args.get("tools") is not None else None,
            "output": None if schema is None else schema.model_dump(mode="json"),
        }
        facts = {
            "provider": selection.provider,
            "provider_type": selection.settings.type,
            "base_url": selection.settings.url(),
            "model": selection.model,
            "credential": selection.credential,
            "messages": messages,
            "tools": [t["name"] for t in tools],
        }
        model = _ModelCall(selection=selection, request=request, output=schema, tools=bool(tools))
        return PreparedStep(call=call, digest=_digest(call, inputs), facts=facts, inputs=inputs, model=model)

    # -- run -------------------------------------------------------------------------------------

    async def run(
        self,
        prepared: PreparedStep,
        *,
        attempt_dir: Path,
        cancel: asyncio.Event,
        on_started: Callable[[int], Awaitable[None]] | None = None,
    ) -> StepResult:
        """Run ``prepared`` once; artifacts (stdout, stderr, exit.json, transcripts) go to ``attempt_dir``.

        Never raises for a failing step: the result's state and message say how it ended.
        """
        if cancel.is_set():
            return StepResult(state=NodeState.CANCELLATION, message="cancelled before the step started")
        await asyncio.to_thread(_make_dir, attempt_dir)
        if prepared.model is not None:
            return await self._run_model(prepared.model, attempt_dir=attempt_dir, cancel=cancel)
        node = prepared.node
        if node is None:
            msg = f"step {prepared.call.key!r} was not prepared by StepRunner.prepare"
            raise TypeError(msg)
        if node.name != prepared.call.key:  # a memoised preparation made for an earlier call
            node = node.model_copy(update={"name": prepared.call.key})
        ctx = AttemptContext(
            run_id=self.run_id,
            node=node,
            attempt=int(attempt_dir.name) if attempt_dir.name.isdigit() else 1,
            attempt_dir=attempt_dir,
            workspace=self.workspace,
            identities=prepared.identities,
            environment=self.graph.environment,
            outputs=lambda _: UNAVAILABLE,
            cancel=cancel,
            on_started=on_started or _no_pid,
            source_environ=self.environ,
            graph=prepared.graph or self.graph,
        )
        if isinstance(node, CommandNode):
            return await self._run_command(ctx)
        return await self._run_agent(ctx)

    async def _run_command(self, ctx: AttemptContext) -> StepResult:
        attempt = await self._commands.execute(ctx)
        streams = await asyncio.to_thread(_read_streams, ctx.attempt_dir, attempt.artifacts)
        code = attempt.exit.get("code") if attempt.exit is not None else None
        value = {"exit_code": code, "stdout": streams["stdout"], "stderr": streams["stderr"]}
        message = attempt.message
        if attempt.exit is not None and attempt.exit.get("kind") == "not_started":
            # verification speaks of plans; a step's files were frozen when the call was prepared
            message = message.replace("after planning; create a new plan", _CHANGED)
        return StepResult(
            state=attempt.state,
            message=message,
            exit=attempt.exit,
            output=streams["stdout"],
            value=value,
            artifacts=attempt.artifacts,
        )

    async def _run_agent(self, ctx: AttemptContext) -> StepResult:
        from rho_notebook.exec.agent import AgentExecutor

        try:
            settings = await asyncio.to_thread(self._settings)
        except (SettingsError, StoreError) as err:
            return StepResult(state=NodeState.FAILURE, message=f"agent config: {err.message}")
        executor = AgentExecutor(settings=settings, graph=ctx.graph, trusted=self.trusted, transport=self.transport)
        attempt = await executor.execute(ctx)
        answer = await asyncio.to_thread(_read_answer, ctx.attempt_dir, attempt)
        value = None if attempt.value is UNAVAILABLE else attempt.value
        return StepResult(
            state=attempt.state,
            message=attempt.message,
            exit=attempt.exit,
            output=answer,
            value=value,
            artifacts=attempt.artifacts,
        )

    async def _run_model(self, call: _ModelCall, *, attempt_dir: Path, cancel: asyncio.Event) -> StepResult:
        from rho_notebook.agents.answer import parse_typed_answer
        from rho_notebook.agents.completion import complete_once
        from rho_notebook.agents.redact import Redactor

        redactor = Redactor()
        selection = call.selection
        started = time.monotonic()
        record: dict[str, Any] = {
            "kind": "model",
            "provider": selection.provider,
            "model": selection.model,
            "credential": selection.credential,
        }
        work = complete_once(selection, call.request, environ=self.environ, redactor=redactor, transport=self.transport)
        try:
            completion = await _unless_cancelled(work, cancel)
        except (ProviderError, AgentFailure) as err:
            kind = err.kind
            record.update(outcome="failure", failure_kind=kind, duration_ms=_ms(started))
            return StepResult(
                state=NodeState.FAILURE, message=f"model {kind}: {redactor.text(err.message)}", exit=record
            )
        if completion is None:
            record.update(outcome="cancellation", duration_ms=_ms(started))
            return StepResult(
                state=NodeState.CANCELLATION, message="cancelled; the in-flight model request was stopped", exit=record
            )
        record.update(
            outcome="success",
            answered_by=completion.model,
            stop_reason=completion.stop_reason,
            truncated=completion.truncated,
            input_tokens=completion.usage.input_tokens,
            output_tokens=completion.usage.output_tokens,
            retries=len(completion.retries),
            duration_ms=_ms(started),
        )
        text = redactor.text(completion.message.content)
        await asyncio.to_thread(_write_completion, attempt_dir, completion, redactor)
        artifacts = {"completion": "completion.json"}
        value: Any = None
        if call.tools:
            value = {
                "content": text,
                "tool_calls": [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in completion.message.tool_calls
                ],
            }
        elif call.output is not None:
            try:
                value = parse_typed_answer(text, call.output)
            except AnswerError as err:
                record.update(outcome="failure", failure_kind=err.kind)
                return StepResult(
                    state=NodeState.FAILURE,
                    message=f"model {err.kind}: {err.message} (the completion is in completion.json)",
                    exit=record,
                    output=text,
                    artifacts=artifacts,
                )
        return StepResult(state=NodeState.SUCCESS, exit=record, output=text, value=value, artifacts=artifacts)


# -- helpers ---------------------------------------------------------------------------------------


def _digest(call: StepCall, inputs: dict[str, Any]) -> str:
    try:
        data = encode(inputs)
    except (TypeError, ValueError) as err:
        msg = f"step {call.key!r}: its arguments are not JSON-shaped data without floats ({err})"
        raise StepInvalid(msg) from None
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _messages(call: StepCall) -> tuple[list[Any], str, tuple[Message, ...]]:
    """(messages as given, system prompt, conversation): leading system messages form the prompt."""
    from rho_notebook.agents.provider import Message

    raw = call.args["messages"]
    if not isinstance(raw, list) or not raw:
        msg = f"step {call.key!r}: messages must be a non-empty list of {{'role', 'content'}} objects"
        raise StepInvalid(msg)
    system: list[str] = []
    conversation: list[Message] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) - _MESSAGE_KEYS:
            msg = f"step {call.key!r}: messages[{index}] must be an object with role and content"
            raise StepInvalid(msg)
        if item.get("role") == "system":
            if conversation or not isinstance(item.get("content"), str) or set(item) - {"role", "content"}:
                msg = f"step {call.key!r}: messages[{index}]: system messages come first and hold only content text"
                raise StepInvalid(msg)
            system.append(item["content"])
            continue
        try:
            conversation.append(Message.model_validate(item))
        except ValidationError as err:
            problem = err.errors()[0]
            where = ".".join(str(p) for p in problem["loc"])
            msg = (
                f"step {call.key!r}: messages[{index}].{where}: {problem['msg']} (roles: system, user, assistant, tool)"
            )
            raise StepInvalid(msg) from None
    if not conversation:
        msg = f"step {call.key!r}: messages hold no user message after the system prompt"
        raise StepInvalid(msg)
    return raw, "\n\n".join(system), tuple(conversation)


def _tools(call: StepCall) -> list[dict[str, Any]]:
    raw = call.args.get("tools")
    if raw is None:
        return []
    if not isinstance(raw, list):
        msg = f"step {call.key!r}: tools must be a list of {{'name', 'description', 'parameters'}} objects"
        raise StepInvalid(msg)
    for index, item in enumerate(raw):
        if (
            not isinstance(item, dict)
            or set(item) != {"name", "description", "parameters"}
            or not isinstance(item["name"], str)
            or not isinstance(item["description"], str)
            or not isinstance(item["parameters"], dict)
        ):
            msg = f"step {call.key!r}: tools[{index}] must be {{'name': str, 'description': str, 'parameters': JSON Schema object}}"
            raise StepInvalid(msg)
    return raw


async def _unless_cancelled(work: Coroutine[Any, Any, Completion], cancel: asyncio.Event) -> Completion | None:
    """``work``'s result, or None when ``cancel`` is set first (``work`` is then cancelled)."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, waiter, return_exceptions=True)
    if task.cancelled():
        return None
    return task.result()


async def _no_pid(pid: int) -> None:
    return None


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


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
    if attempt.artifacts.get("value") == "value.json":
        os.replace(folder / "value.json", folder / "answer-value.json")
        attempt.artifacts["value"] = "answer-value.json"
    name = attempt.artifacts.get("answer")
    if name is None:
        return None
    return (folder / name).read_text(encoding="utf-8", errors="replace")


def _write_completion(folder: Path, completion: Completion, redactor: Redactor) -> None:
    record = completion.model_dump(mode="json")
    record["message"]["content"] = redactor.text(record["message"]["content"])
    atomic_write_json(folder / "completion.json", record)
