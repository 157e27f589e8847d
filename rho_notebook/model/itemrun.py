"""How the item travels through a frozen item graph (docs/graphs.md): pure functions of the frozen
nodes, their states and their values, shared by the scheduler (which step runs, which is skipped),
the step executor (which item a step receives) and the run's end (whether it stalled).

An edge *delivers* when its source step succeeded and chose it: a ``branch`` chooses the first
out-edge whose condition holds, any other step every out-edge whose condition holds (an edge
without ``when`` always holds). A node's value is the item it passed on. An ``aggregate`` node's
attempt runs its inner step once per element, each an *instance* ``STEP[i]`` journaled with
``instance_launched`` / ``instance_finished`` (:class:`InstanceLog`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import ItemNode, ItemRoute, Node
from rho_notebook.model.itemgraph import Condition
from rho_notebook.model.state import NodeState

__all__ = [
    "InstanceLog",
    "chosen_routes",
    "delivered_items",
    "instance_key",
    "instance_name",
    "item_verdict",
    "merge_join",
    "stalled_steps",
]

_BLOCKING = frozenset({NodeState.FAILURE, NodeState.DENIAL, NodeState.CANCELLATION, NodeState.BLOCKED})


def instance_name(step: str, round_number: int | None) -> str:
    """The node of one step: ``step``, or ``step@N`` for round N of a looped step."""
    return step if round_number is None else f"{step}@{round_number}"


def instance_key(node: str, index: int) -> str:
    """An aggregate step's instance: ``STEP[i]`` (``STEP@N[i]`` in loop round N), ``i`` from 0."""
    return f"{node}[{index}]"


@dataclass(frozen=True)
class InstanceLog:
    """What an ``aggregate`` attempt knows of its instances in the run's journal: the results of
    instances that succeeded in earlier attempts (a resumed run takes them instead of running them
    again), and how to journal one (:meth:`write`)."""

    done: Mapping[int, Any] = field(default_factory=dict)
    emit: Callable[..., None] | None = None
    """Appends records to the journal (and folds them into the run's state)."""
    sync: Callable[[], None] | None = None
    """Makes every appended record durable (an fsync)."""

    @classmethod
    def of(
        cls, instances: Mapping[int, Mapping[str, Any]], emit: Callable[..., None], sync: Callable[[], None]
    ) -> InstanceLog:
        """The log of a node whose folded instance records are ``instances``
        (:attr:`~rho_notebook.model.run_state.NodeRecord.instances`)."""
        done = {i: r["value"] for i, r in instances.items() if r.get("state") == "success" and "value" in r}
        return cls(done=done, emit=emit, sync=sync)

    def write(self, record: dict[str, Any], *, durable: bool) -> None:
        """Journal ``record``; ``durable``: fsynced before this returns, as ``node_launched`` is
        before a launch with effects outside the run."""
        if self.emit is not None:
            self.emit(record)
        if durable and self.sync is not None:
            self.sync()


@lru_cache(maxsize=1024)
def _condition(encoded: str) -> Condition:
    return Condition.model_validate(json.loads(encoded))


def _holds(route: ItemRoute, item: Any) -> bool:
    if route.when is None:
        return True
    return _condition(json.dumps(route.when, sort_keys=True)).holds(item)


def chosen_routes(node: ItemNode, item: Any) -> tuple[str, ...]:
    """The nodes ``node`` sends ``item`` to: a branch's first route whose condition holds, or
    every route whose condition holds."""
    chosen: list[str] = []
    for route in node.routes:
        if _holds(route, item):
            chosen.append(route.to)
            if node.step_kind == "branch":
                break
    return tuple(chosen)


def delivered_items(node: ItemNode, nodes: Mapping[str, Node], outputs: Callable[[str], Any]) -> list[tuple[str, Any]]:
    """(source node, item) of each in-edge of ``node`` that delivered, in document edge order."""
    found: list[tuple[str, Any]] = []
    for source in node.sources:
        value = outputs(source)
        upstream = nodes[source]
        if value is UNAVAILABLE or not isinstance(upstream, ItemNode):
            continue
        if node.name in chosen_routes(upstream, value):
            found.append((source, value))
    return found


def merge_join(delivered: list[tuple[str, Any]], nodes: Mapping[str, Node]) -> dict[str, Any]:
    """A join's item: the delivered items merged in edge order (a later one wins a clash), then
    each added under its source step's id."""
    merged: dict[str, Any] = {}
    for _, item in delivered:
        if isinstance(item, dict):
            merged.update(item)
    for source, item in delivered:
        upstream = nodes[source]
        merged[upstream.step if isinstance(upstream, ItemNode) else source] = item
    return merged


def item_verdict(
    node: ItemNode,
    nodes: Mapping[str, Node],
    states: Mapping[str, NodeState],
    outputs: Callable[[str], Any],
) -> tuple[NodeState, str]:
    """READY, SKIPPED or BLOCKED for a node whose in-edge sources are all terminal.

    A step without in-edges is ready (it receives the first item). A join runs when any in-edge
    delivered and is blocked when one of its sources failed, was denied, cancelled or blocked; any
    other step runs when an in-edge delivered, else is blocked by such a source, else skipped (no
    edge delivered: a branch chose another way, or a condition failed, or a loop round was not
    needed)."""
    if not node.sources:
        return NodeState.READY, ""
    delivered = delivered_items(node, nodes, outputs)
    broken = [s for s in node.sources if states[s] in _BLOCKING]
    if broken and (node.step_kind == "join" or not delivered):
        return NodeState.BLOCKED, f"in-edge from {broken[0]!r}, which ended in {states[broken[0]].value}"
    if delivered:
        return NodeState.READY, ""
    return NodeState.SKIPPED, "no in-edge delivered the item"


def stalled_steps(
    nodes: Mapping[str, Node], states: Mapping[str, NodeState], outputs: Callable[[str], Any]
) -> list[str]:
    """Nodes that succeeded and have out-edges, none of which delivered: the item went nowhere.
    A run with any ends ``stalled`` (unless cancellation, denial or failure came first)."""
    stalled: list[str] = []
    for name, node in nodes.items():
        if not isinstance(node, ItemNode) or not node.routes or states.get(name) is not NodeState.SUCCESS:
            continue
        value = outputs(name)
        if value is not UNAVAILABLE and not chosen_routes(node, value):
            stalled.append(name)
    return sorted(stalled)
