"""Node states, workflow outcomes and run lifecycle values, and the outcome rule."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

__all__ = ["NodeState", "Outcome", "Lifecycle", "TERMINAL_STATES", "workflow_outcome"]


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


def workflow_outcome(states: Iterable[tuple[NodeState, bool]]) -> Outcome:
    """The outcome of a finished run from (state, allow_failure) of every node.

    Cancellation of any node wins; then, over nodes without allow_failure: denial > failure >
    blocked > success. Skipped nodes count as success.
    """
    seen = list(states)
    if any(state is NodeState.CANCELLATION for state, _ in seen):
        return Outcome.CANCELLATION
    counted = {state for state, allow_failure in seen if not allow_failure}
    for state, outcome in (
        (NodeState.DENIAL, Outcome.DENIAL),
        (NodeState.FAILURE, Outcome.FAILURE),
        (NodeState.BLOCKED, Outcome.BLOCKED),
    ):
        if state in counted:
            return outcome
    return Outcome.SUCCESS
