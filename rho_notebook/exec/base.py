"""The executor interface: one attempt of one node in, one typed result out.

The run driver owns scheduling, journaling and cancellation; an executor only runs the attempt it
is given. A new node kind (agents, approvals) plugs in by registering an :class:`Executor`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rho_notebook.errors import UnavailableValue
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import EnvironmentPolicy, Graph, Node
from rho_notebook.model.identity import FileIdentity
from rho_notebook.model.itemrun import InstanceLog
from rho_notebook.model.reference import MISSING, OutputRef, Template, render_value, walk_path
from rho_notebook.model.state import NodeState
from rho_notebook.store.artifacts import AttemptFiles

__all__ = [
    "JOURNALED_VALUE_BYTES",
    "Attempt",
    "AttemptContext",
    "AttemptResult",
    "EnvironmentSnapshot",
    "Executor",
    "ModelCalls",
    "output_value",
    "render_template",
    "node_environment",
]


class ModelCalls(Protocol):
    """What an attempt's model calls report to the run (the ledger and budgets).

    Every place that calls a model (an agent's turn, a model step, a flow's model call) awaits
    :meth:`before_call` before sending the request and :meth:`after_call` once it completed.
    ``before_call`` raises :class:`~rho_notebook.errors.BudgetExceeded` when the call could pass a
    budget: the caller must not make the call and must let the error propagate (the run driver
    turns it into a halt)."""

    async def before_call(self, *, max_output_tokens: int | None, key: str | None = None) -> None: ...

    async def after_call(self, call: Mapping[str, Any]) -> None:
        """Journal one completed call: the fields of a ``model_called`` record without ``kind``,
        ``run_id``, ``node`` and ``attempt`` (provider, model, input_tokens, output_tokens,
        cached_tokens?, reasoning_tokens?, retries, tool_calls, seconds, key?)."""
        ...


JOURNALED_VALUE_BYTES = 4096
"""A success's value up to this size as JSON is journaled with its ``node_finished`` (the record's
``step_value``: Python nodes, item steps, script steps) and its ``value.json`` is a copy written
without an fsync: the journal's fsync, which follows anyway, makes the value durable. Readers that
find no copy (lost in a crash) take the record's (``RunFolder.journaled_step_value``)."""


@dataclass(kw_only=True, slots=True)
class Attempt:
    """Where one attempt of one operation runs: its folder, workspace, environment, cancel signal
    and callbacks. Operations (:mod:`rho_notebook.exec.command`, ``agent``, ``model``, ...) take
    this; node executors get the richer :class:`AttemptContext`, which is one."""

    run_id: str
    attempt: int
    files: AttemptFiles
    """The attempt's directory (:attr:`attempt_dir`): the run's, created lazily, or one the caller
    made (:meth:`AttemptFiles.made <rho_notebook.store.artifacts.AttemptFiles.made>`)."""
    workspace: Path
    identities: Mapping[str, FileIdentity]
    environment: EnvironmentPolicy
    cancel: asyncio.Event
    on_started: Callable[[int], Awaitable[None]]
    """Awaited with the process id once the attempt's process exists."""
    on_output: Callable[[str, bytes], Awaitable[None]] | None = None
    """Awaited with (stream, chunk) for live output; optional."""
    model_calls: ModelCalls | None = None
    """Where model calls report their spend and ask the budgets first (None: not recorded, e.g.
    a call outside a run)."""
    source_environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    verified: VerifiedHandles | None = None
    """The run's kept verified descriptors of frozen files; None verifies every path from scratch."""

    @property
    def attempt_dir(self) -> Path:
        """Where the attempt's artifacts go. It may not exist yet: await :meth:`directory` before
        writing into it yourself, or hand non-durable copies to :meth:`write_later`."""
        return self.files.path

    async def directory(self) -> Path:
        """``attempt_dir``, created if it was not yet."""
        return await self.files.ready()

    def has_directory(self) -> bool:
        """Whether ``attempt_dir`` exists or is being created (something was written there)."""
        return self.files.prepared

    def write_later(self, name: str, data: bytes) -> None:
        """Store a non-durable artifact (one the journal also records) without waiting for it."""
        self.files.write_later(name, data)


@dataclass(kw_only=True, slots=True)
class AttemptContext(Attempt):
    """One attempt of one node of a graph: the :class:`Attempt` plus the node, its upstream values
    and the run's graph (what a node executor turns into an operation)."""

    node: Node
    outputs: Callable[[str], Any]
    """Validated output of an ancestor (UNAVAILABLE when it has none)."""
    request_approval: Callable[[dict[str, Any], float], Awaitable[Any]] | None = None
    """Ask a person to decide ``facts`` within a timeout: returns an ApprovalDecision, None on
    timeout, or "cancelled". Only approval nodes use it; agents never get it."""
    graph: Graph | None = None
    """The run's frozen graph (Python nodes need its interpreter and modules)."""
    run_fields: Mapping[str, Any] = field(default_factory=dict)
    """What item-graph mappings read as ``{{ $run.NAME }}``: who started the run (``initiator``,
    ``via``, ``client`` of the run manifest) and, taken when this attempt began, the run's
    ``members`` and ``participants`` (:func:`~rho_notebook.model.mapping.with_people`)."""
    instances: InstanceLog | None = None
    """An item graph's ``aggregate`` step: its instances in the journal (None for other nodes)."""


@dataclass(slots=True)
class AttemptResult:
    state: NodeState
    message: str = ""
    exit: dict[str, Any] | None = None
    value: Any = UNAVAILABLE
    """The validated output value, or UNAVAILABLE when the node has none."""
    artifacts: dict[str, str] = field(default_factory=dict)
    """Artifact name -> path relative to the attempt directory."""
    journal_value: bool = False
    """The (small, non-null) ``value`` is journaled with ``node_finished`` (``step_value``): the
    attempt's ``value.json`` is then a copy written without an fsync (a Python node's)."""


class Executor(Protocol):
    async def execute(self, ctx: AttemptContext) -> AttemptResult: ...


def render_template(template: Template, outputs: Callable[[str], Any]) -> str:
    """Concatenate literal text and referenced values (strings as-is, others as compact JSON)."""
    pieces: list[str] = []
    for part in template.parts:
        pieces.append(part if isinstance(part, str) else render_value(output_value(part, outputs)))
    return "".join(pieces)


def output_value(ref: OutputRef, outputs: Callable[[str], Any]) -> Any:
    """The value ``ref`` points at; raises :class:`UnavailableValue` when there is none."""
    value = outputs(ref.node)
    if value is not UNAVAILABLE:
        value = walk_path(value, ref.path)
    if value is UNAVAILABLE or value is MISSING:
        path = "".join(f"[{step!r}]" for step in ref.path)
        msg = f"output({ref.node!r}){path} is unavailable ({ref.node!r} has no validated output at that path)"
        raise UnavailableValue(msg)
    return value


class EnvironmentSnapshot(Mapping[str, str]):
    """An immutable copy of a process environment, taken once per run, that remembers the part
    each environment policy allows (so a launch does not filter the whole environment again)."""

    def __init__(self, source: Mapping[str, str]) -> None:
        self._data = dict(source)
        self._allowed: dict[EnvironmentPolicy, dict[str, str]] = {}

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def allowed(self, policy: EnvironmentPolicy) -> dict[str, str]:
        """The variables ``policy`` lets through (do not modify the returned dict)."""
        found = self._allowed.get(policy)
        if found is None:
            found = self._allowed[policy] = _allowed(policy, self._data)
        return found


def _allowed(policy: EnvironmentPolicy, source: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in source.items() if k in policy.names or k.startswith(policy.prefixes)}


def node_environment(policy: EnvironmentPolicy, source: Mapping[str, str], *, run_id: str, node: str) -> dict[str, str]:
    """The environment a command node receives: the frozen allowlist, plus RHO_RUN_ID and RHO_NODE."""
    env = dict(source.allowed(policy)) if isinstance(source, EnvironmentSnapshot) else _allowed(policy, source)
    env["RHO_RUN_ID"] = run_id
    env["RHO_NODE"] = node
    return env
