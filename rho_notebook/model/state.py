"""Node states, workflow outcomes and run lifecycle values, and the outcome rule."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

__all__ = [
    "NodeState",
    "Outcome",
    "Lifecycle",
    "TERMINAL_STATES",
    "node_state",
    "not_completed",
    "workflow_outcome",
]


class NodeState(str, Enum):
    PENDING = "pending"
    READY = "ready"
    RUNNING = "running"
    SUCCESS = "success"
    FAILURE = "failure"
    DENIAL = "denial"
    CANCELLATION = "cancellation"
    SKIPPED = "skipped"
    BLOCKED = "blocked"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES


_BY_VALUE = {member._value_: member for member in NodeState}


def node_state(value: str) -> NodeState:
    """The state a journal or snapshot names: ``NodeState(value)``, looked up in a dict (calling
    the enum takes 25 times as long, and every ``node_finished`` record folds through here).

    Raises
    ------
    ValueError
        ``value`` names no state.
    """
    return _BY_VALUE.get(value) or NodeState(value)


TERMINAL_STATES = frozenset(
    {
        NodeState.SUCCESS,
        NodeState.FAILURE,
        NodeState.DENIAL,
        NodeState.CANCELLATION,
        NodeState.SKIPPED,
        NodeState.BLOCKED,
    }
)


class Outcome(str, Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    DENIAL = "denial"
    CANCELLATION = "cancellation"
    STALLED = "stalled"
    """An item-graph run in which a step that succeeded had out-edges that all had conditions and
    none passed: the item went nowhere (docs/graphs.md)."""
    BLOCKED = "blocked"


class Lifecycle(str, Enum):
    """Where a run is. All but ``damaged`` follow from journaled events; ``damaged`` is a verdict
    made when the run is read (its journal contradicts what was fsynced: docs/running.md) and is
    never journaled."""

    PLANNED = "planned"
    RUNNING = "running"
    WAITING = "waiting"
    CANCELLING = "cancelling"
    COMPLETED = "completed"
    NEEDS_RECOVERY = "needs_recovery"
    NEEDS_DECISION = "needs_decision"
    """A script run stopped at a halted step: ``resume --decide STEP=rerun|skip`` goes on."""
    DAMAGED = "damaged"


def not_completed(run_id: str, lifecycle: Lifecycle, *, action: str) -> str:
    """Why ``action`` (``fork``, ``record``: verbs that read a whole run) refuses run ``run_id``
    whose lifecycle is not completed, and what to do about it: wait for a live run to end; any
    other run goes on as ``status`` says (a decision, a recovery, an approval)."""
    short = run_id[:13]
    if lifecycle in (Lifecycle.RUNNING, Lifecycle.CANCELLING):
        then = f"wait for it to end (`rho-notebook wait {short}`), then {action} it"
    else:
        then = f"{action} it once it has completed (`rho-notebook status {short}` says how it goes on)"
    return f"run {run_id} is {lifecycle.value}, not completed: {then}"


def workflow_outcome(states: Iterable[tuple[NodeState, bool]], *, stalled: bool = False) -> Outcome:
    """The outcome of a finished run from (state, allow_failure) of every node.

    Parameters
    ----------
    states
        (state, allow_failure) of every node of the run.
    stalled
        Whether the run stalled: an item-graph step that succeeded had out-edges that all had
        conditions and none passed (the runtime decides this; a Starlark workflow never stalls).

    Returns
    -------
    Outcome
        Cancellation of any node wins; then, over nodes without allow_failure: denial > failure >
        stalled > blocked > success. Skipped nodes count as success. ``stalled`` matters only when
        no counted node was denied or failed, and it beats blocked.
    """
    seen = list(states)
    if any(state is NodeState.CANCELLATION for state, _ in seen):
        return Outcome.CANCELLATION
    counted = {state for state, allow_failure in seen if not allow_failure}
    for state, outcome in (
        (NodeState.DENIAL, Outcome.DENIAL),
        (NodeState.FAILURE, Outcome.FAILURE),
    ):
        if state in counted:
            return outcome
    if stalled:
        return Outcome.STALLED
    if NodeState.BLOCKED in counted:
        return Outcome.BLOCKED
    return Outcome.SUCCESS
