"""Every journal record kind, typed once. All writers and readers use these names.

A journal line is one JSON object: ``{"seq", "run_id", "at", "kind", "node"?, "attempt"?, ...,
"h"?}`` where ``at`` is an ISO-8601 UTC timestamp, ``h`` is the hash chain of a ``chained-v1``
journal (:mod:`rho_notebook.store.journal`) and the other keys depend on the kind. Each kind is
one ``TypedDict`` below, tagged by its ``kind`` (a ``Literal``); :data:`JournalEvent` is their
union, discriminated by ``kind``, and :data:`EVENT_TYPES` maps a tag to its type.

The types cost nothing at run time: a record stays the plain dict that :func:`event` builds and
the journal writes (the JSON on disk is unchanged), and :func:`rho_notebook.model.run_fold.apply`
dispatches on the tag. :func:`event_problems` checks a record read from elsewhere against its
type (keys only: the journal's own reader already checked ``seq`` and the chain).
"""

import time
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, Literal, NotRequired, TypedDict, get_args

from rho_notebook.model.progress import PROGRESS_KINDS, TERMINAL_PROGRESS_KINDS, describe_event

__all__ = [
    "EVENT_TYPES",
    "PROGRESS_KINDS",
    "TERMINAL_PROGRESS_KINDS",
    "ApprovalCarried",
    "ApprovalDecided",
    "ApprovalRequested",
    "ArtifactFailed",
    "AttemptUncertain",
    "CancelAcknowledged",
    "CancelRequested",
    "DecisionRecorded",
    "EventKind",
    "HaltedStep",
    "HookIgnored",
    "HookRan",
    "InstanceFinished",
    "InstanceLaunched",
    "JournalEvent",
    "JournalRepaired",
    "BudgetSet",
    "ModelCalled",
    "LiveEvent",
    "NeedsRecovery",
    "NodeBlocked",
    "NodeFinished",
    "NodeLaunched",
    "NodeReady",
    "NodeReset",
    "NodeReused",
    "NodeSkipped",
    "OrphanStopped",
    "OutputChunk",
    "OwnerExited",
    "PlanApproval",
    "ProcessStarted",
    "RecoveryConfirmed",
    "RunCompleted",
    "RunCreated",
    "RunHalted",
    "RunStarted",
    "ScriptExited",
    "ScriptLaunched",
    "ScriptOutput",
    "StepFacts",
    "StepDiverged",
    "StepHalted",
    "StepReplayed",
    "describe_event",
    "event",
    "event_problems",
    "now_iso",
]


class EventKind(str, Enum):
    RUN_CREATED = "run_created"
    RUN_STARTED = "run_started"
    OWNER_EXITED = "owner_exited"
    JOURNAL_REPAIRED = "journal_repaired"
    NODE_READY = "node_ready"
    NODE_SKIPPED = "node_skipped"
    NODE_BLOCKED = "node_blocked"
    NODE_LAUNCHED = "node_launched"
    NODE_REUSED = "node_reused"
    PROCESS_STARTED = "process_started"
    OUTPUT_CHUNK = "output_chunk"
    NODE_FINISHED = "node_finished"
    NODE_RESET = "node_reset"
    ATTEMPT_UNCERTAIN = "attempt_uncertain"
    ORPHAN_STOPPED = "orphan_stopped"
    RECOVERY_CONFIRMED = "recovery_confirmed"
    CANCEL_REQUESTED = "cancel_requested"
    CANCEL_ACKNOWLEDGED = "cancel_acknowledged"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"
    APPROVAL_CARRIED = "approval_carried"
    HOOK_RAN = "hook_ran"
    HOOK_IGNORED = "hook_ignored"
    PLAN_APPROVAL = "plan_approval"
    ARTIFACT_FAILED = "artifact_failed"
    SCRIPT_LAUNCHED = "script_launched"
    SCRIPT_EXITED = "script_exited"
    SCRIPT_OUTPUT = "script_output"
    STEP_REPLAYED = "step_replayed"
    STEP_HALTED = "step_halted"
    RUN_HALTED = "run_halted"
    STEP_DIVERGED = "step_diverged"
    DECISION_RECORDED = "decision_recorded"
    RUN_COMPLETED = "run_completed"
    NEEDS_RECOVERY = "needs_recovery"
    INSTANCE_LAUNCHED = "instance_launched"
    INSTANCE_FINISHED = "instance_finished"
    MODEL_CALLED = "model_called"
    BUDGET_SET = "budget_set"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ISO_LAST = [(0, "1970-01-01T00:00:00.000+00:00", "1970-01-01T00:00:00")]  # (ms, its text, text to the second)


def now_iso() -> str:
    """UTC now to the millisecond, as ``isoformat(timespec="milliseconds")`` writes it. Formatted once per
    ms, date and time once per second (``_ISO_LAST``, one tuple for threads): a turn stamps many records."""
    ms = time.time_ns() // 1_000_000
    last, text, whole = _ISO_LAST[0]
    if ms != last:
        if ms // 1000 != last // 1000:  # isoformat to the second, without "+00:00" (2 us)
            whole = (_EPOCH + timedelta(seconds=ms // 1000)).isoformat(timespec="seconds")[:-6]
        text = f"{whole}.{ms % 1000:03d}+00:00"
        _ISO_LAST[0] = (ms, text, whole)
    return text


def event(kind: EventKind, run_id: str, *, node: str | None = None, **data: Any) -> dict[str, Any]:
    """A journal record without its seq, which the journal assigns (``_value_``: ``.value`` is slow)."""
    record: dict[str, Any] = {"run_id": run_id, "at": now_iso(), "kind": kind._value_}
    if node is not None:
        record["node"] = node
    record.update(data)
    return record


# --------------------------------------------------------------------------- the record types


class _Live(TypedDict):
    """What every record carries from :func:`event`."""

    run_id: str
    at: str


class _Journaled(_Live):
    """What the journal adds when it appends a record."""

    seq: int
    h: NotRequired[str]
    """The chain hash (``chained-v1`` journals only)."""


class _OfNode(_Journaled):
    node: str


class _OfAttempt(_OfNode):
    attempt: int


class RunCreated(_Journaled):
    """The run store was created from a plan."""

    kind: Literal["run_created"]
    plan_id: str
    graph_digest: str
    mode: str
    reuse: NotRequired[bool]
    """Present (False) only when reuse was turned off for the run."""
    seed_from: NotRequired[str]
    seed_nodes: NotRequired[list[str]]


class RunStarted(_Journaled):
    """An owner began executing (or resuming)."""

    kind: Literal["run_started"]
    pid: int
    resumed: bool


class OwnerExited(_Journaled):
    """The owner released the run cleanly (no writer journals it now; a journal that has it is still folded)."""

    kind: Literal["owner_exited"]
    pid: int


class JournalRepaired(_Journaled):
    """A torn last line of this many bytes was cut off when the journal was opened."""

    kind: Literal["journal_repaired"]
    bytes: int


class NodeReady(_OfNode):
    """Its dependencies are decided: it may launch."""

    kind: Literal["node_ready"]


class NodeSkipped(_OfNode):
    """Its condition evaluated false, or a need was skipped."""

    kind: Literal["node_skipped"]
    reason: NotRequired[str]


class NodeBlocked(_OfNode):
    """A needed value or dependency is unavailable."""

    kind: Literal["node_blocked"]
    reason: NotRequired[str]


class StepFacts(TypedDict):
    """What a script step's ``node_launched`` records about the call."""

    kind: str
    digest: str
    facts: dict[str, Any]
    after: list[str]
    recovery: str | None
    args: NotRequired[Any]
    """The call's arguments when small enough (a later replay offer is checked from them)."""


class NodeLaunched(_OfAttempt):
    """An attempt is about to start (durable before the launch). A script step carries ``step``
    and creates its node; ``decision`` is ``rerun`` when resume --decide asked for it."""

    kind: Literal["node_launched"]
    step: NotRequired[StepFacts]
    decision: NotRequired[str]


class NodeReused(_OfAttempt):
    """A read-only node with reuse took a stored success with the same reuse key: nothing
    launched (``reuse_key`` null: a ``try`` run took it from its source run). A
    ``node_finished`` follows at once."""

    kind: Literal["node_reused"]
    source_run: str
    source_node: str
    source_attempt: int
    reuse_key: str | None


class ProcessStarted(_OfAttempt):
    """The attempt's process exists."""

    kind: Literal["process_started"]
    pid: int


class OutputChunk(_Live):
    """Bytes retained from stdout/stderr (their size only); given to live listeners, never journaled."""

    kind: Literal["output_chunk"]
    node: str
    attempt: int
    stream: str
    bytes: int


class NodeFinished(_OfAttempt):
    """The attempt ended: success, failure, denial or cancellation."""

    kind: Literal["node_finished"]
    state: str
    exit: dict[str, Any] | None
    """The exit record: ``{"kind": exit|signal|timeout|cancelled|abnormal|..., "code", "signal"}``."""
    message: str
    step_value: NotRequired[Any]
    """The content of a small success's ``value.json``, journaled with its end (the file is then a
    non-durable copy): a script step's ``{"output", "value"}``
    (:mod:`rho_notebook.runtime.script_attempts`), a Python node's value (not null;
    :mod:`rho_notebook.exec.python`). Readers that do not know the field ignore it."""


class NodeReset(_OfNode):
    """Resume (or cancellation) returned the node to pending."""

    kind: Literal["node_reset"]
    reason: str


class AttemptUncertain(_OfAttempt):
    """Recovery found an attempt without a journaled result (or a remote one lost it)."""

    kind: Literal["attempt_uncertain"]
    message: NotRequired[str]


class OrphanStopped(_Journaled):
    """Recovery stopped a process tree proven to be the run's."""

    kind: Literal["orphan_stopped"]
    pid: int


class RecoveryConfirmed(_Journaled):
    """``--recover-uncertain`` accepted the uncertain attempts of these nodes."""

    kind: Literal["recovery_confirmed"]
    nodes: list[str]


class CancelRequested(_Journaled):
    """A cancel request was found."""

    kind: Literal["cancel_requested"]
    request_id: str


class CancelAcknowledged(_Journaled):
    """Active work stopped and the outcomes were stored."""

    kind: Literal["cancel_acknowledged"]
    request_id: str


class ApprovalRequested(_OfAttempt):
    """A person must decide: an approval node, a form, or a supervised launch (``facts`` = the
    exact process facts)."""

    kind: Literal["approval_requested"]
    request_id: str
    approval: str
    facts: dict[str, Any]
    facts_sha256: str
    timeout_seconds: NotRequired[float | None]


class ApprovalDecided(_OfAttempt):
    """The decision, who made it, when, through what, and the digest of the facts they were
    shown; ``answer`` holds a form's answer."""

    kind: Literal["approval_decided"]
    request_id: str
    decision: str
    by: str
    comment: str
    decided_at: str
    via: str
    facts_sha256: str
    answer: NotRequired[Any]


class ApprovalCarried(_OfAttempt):
    """A supervised launch approved earlier in this workspace with the same facts digest: not asked."""

    kind: Literal["approval_carried"]
    facts_sha256: str
    from_run: str
    by: str
    decided_at: str


class HookRan(_OfAttempt):
    """A before/after_tool_use hook ran: its verdict (``continue`` or ``deny``)."""

    kind: Literal["hook_ran"]
    hook_event: str
    hook: str
    verdict: str
    reason: str


class HookIgnored(_OfAttempt):
    """A hook tried to do more than deny: these keys were ignored."""

    kind: Literal["hook_ignored"]
    hook_event: str
    hook: str
    keys: list[str]
    reason: str


class PlanApproval(_Journaled):
    """The plan approval record this run relied on."""

    kind: Literal["plan_approval"]
    graph_digest: str
    by: str
    approved_at: str


class ArtifactFailed(_Journaled):
    """Non-durable artifact copies (exit.json, a stream folder) could not be written."""

    kind: Literal["artifact_failed"]
    errors: list[str]


class ScriptLaunched(_Journaled):
    """A script run's own process exists."""

    kind: Literal["script_launched"]
    pid: int


class ScriptExited(_Journaled):
    """The script process ended (its exit record)."""

    kind: Literal["script_exited"]
    exit: dict[str, Any]


class ScriptOutput(_Journaled):
    """The script called emit_output(value) (or an item graph's output step succeeded)."""

    kind: Literal["script_output"]
    value: Any


class StepReplayed(_OfAttempt):
    """A script step call was answered from the journal: nothing ran (``attempt`` is the stored
    one; ``decision`` is ``skip`` when resume --decide skipped it)."""

    kind: Literal["step_replayed"]
    digest: str
    decision: NotRequired[str]


class StepHalted(_OfNode):
    """A script step cannot be decided alone."""

    kind: Literal["step_halted"]
    why: str


class HaltedStep(TypedDict):
    step: str
    why: str


class RunHalted(_Journaled):
    """The script run stopped: its lifecycle is needs_decision."""

    kind: Literal["run_halted"]
    steps: list[HaltedStep]


class StepDiverged(_OfNode):
    """A step key's inputs changed since it ran: the run fails."""

    kind: Literal["step_diverged"]
    stored_digest: str
    digest: str


class DecisionRecorded(_OfNode):
    """resume --decide: rerun or skip, one attempt's worth."""

    kind: Literal["decision_recorded"]
    decision: str
    by: str
    via: str


class RunCompleted(_Journaled):
    """Every node is terminal (or the run was cancelled)."""

    kind: Literal["run_completed"]
    outcome: str
    message: NotRequired[str]
    """Why a script run did not succeed."""


class InstanceLaunched(_OfAttempt):
    """An item-graph ``aggregate`` step's attempt starts instance ``STEP[instance]`` (durable
    before it starts when it has effects outside the run, like ``node_launched``)."""

    kind: Literal["instance_launched"]
    instance: int


class InstanceFinished(_OfAttempt):
    """Instance ``STEP[instance]`` of an aggregate's attempt ended; ``value`` is a success's
    result (a resumed attempt takes it instead of running the instance again)."""

    kind: Literal["instance_finished"]
    instance: int
    state: str
    message: str
    value: NotRequired[Any]


class ModelCalled(_OfAttempt):
    """One model call completed: journaled as it completes, so the ledger and the budgets fold
    from the journal alone (:mod:`rho_notebook.model.ledger`)."""

    kind: Literal["model_called"]
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cached_tokens: NotRequired[int]
    reasoning_tokens: NotRequired[int]
    retries: int
    """Transport retries of this call."""
    tool_calls: int
    seconds: float
    """Wall time of the call, retries included."""
    key: NotRequired[str]
    """Where in the attempt, finer than the node: a flow's module path, a fork branch, ``STEP[i]``."""


class BudgetSet(_Journaled):
    """The run's spending limits from now on (at start, and on ``resume --raise-budget``); a
    limit left out is unlimited. ``node`` limits one node's spend instead of the run's."""

    kind: Literal["budget_set"]
    max_tokens: NotRequired[int | None]
    max_cost_usd: NotRequired[float | None]
    max_wall_seconds: NotRequired[float | None]
    node: NotRequired[str]
    source: str
    """Where the limits came from: ``run`` (flags or API), ``workflow`` (its source), ``raise``."""


class NeedsRecovery(_Journaled):
    """An unclean exit left uncertain attempts on these nodes."""

    kind: Literal["needs_recovery"]
    nodes: list[str]


JournalEvent = (
    RunCreated
    | RunStarted
    | OwnerExited
    | JournalRepaired
    | NodeReady
    | NodeSkipped
    | NodeBlocked
    | NodeLaunched
    | NodeReused
    | ProcessStarted
    | NodeFinished
    | NodeReset
    | AttemptUncertain
    | OrphanStopped
    | RecoveryConfirmed
    | CancelRequested
    | CancelAcknowledged
    | ApprovalRequested
    | ApprovalDecided
    | ApprovalCarried
    | HookRan
    | HookIgnored
    | PlanApproval
    | ArtifactFailed
    | ScriptLaunched
    | ScriptExited
    | ScriptOutput
    | StepReplayed
    | StepHalted
    | RunHalted
    | StepDiverged
    | DecisionRecorded
    | RunCompleted
    | NeedsRecovery
    | InstanceLaunched
    | InstanceFinished
    | ModelCalled
    | BudgetSet
)
"""One record of ``events.jsonl``, discriminated by its ``kind`` (see :data:`EVENT_TYPES`)."""

LiveEvent = JournalEvent | OutputChunk
"""One record given to a live listener (``on_event``): a journal record, or an output chunk."""

EVENT_TYPES: dict[str, type[Any]] = {get_args(t.__annotations__["kind"])[0]: t for t in get_args(LiveEvent)}
"""Each kind's tag -> its record type (the discriminator of :data:`JournalEvent` and :data:`LiveEvent`)."""


def event_problems(record: dict[str, Any]) -> list[str]:
    """What makes ``record`` not a journal record of its kind: an unknown kind, a missing key or
    a key its type does not name (types of values are not checked). Empty when it fits."""
    kind = record.get("kind")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return [f"unknown journal record kind {kind!r}"]
    required: frozenset[str] = cls.__required_keys__
    problems = [f"{kind} record lacks {key!r}" for key in sorted(required - record.keys())]
    known = required | cls.__optional_keys__
    problems += [f"{kind} record has an unknown key {key!r}" for key in sorted(record.keys() - known)]
    return problems
