"""The deterministic scheduler: a pure function of (frozen graph, node states, outputs) -> actions.

One pass:

1. Decide pending nodes whose needs are all terminal, in node-ID order, until nothing changes.
   A node with ``when`` is decided by its condition alone (true -> ready, false -> skipped,
   unavailable -> blocked). Without ``when`` it is ready only if every need succeeded; any need
   that failed, was denied, cancelled or blocked makes it blocked (blocked wins over skipped);
   otherwise any skipped need makes it skipped.
2. Walk ready nodes in node-ID order and launch each that fits. The walk *stops* at the first node
   that does not fit total capacity or the checkout (read-only nodes share it up to
   ``checkout_readers``; a mutating node needs it alone), and *skips* a node whose kind (agent or
   command) is at its own limit. Approval nodes need no capacity. With a remote executor
   (``Scheduler(graph, remote=True)``) and a workflow whose ``checkout = "shared"``, nodes that
   may run remotely (``placement = "any"``) do not use the owner's checkout at all (each worker
   has its own copy), so they take no checkout slot; every other limit holds.

The same states always give the same decision. ``dirty`` and ``ready`` only narrow which nodes
are looked at; they never change the result for a consistent state.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.model.condition import UNAVAILABLE, evaluate
from rho_notebook.model.graph import AgentNode, ApprovalNode, Graph, ItemNode, Node, PythonNode, placement_of
from rho_notebook.model.itemrun import item_verdict
from rho_notebook.model.reference import MISSING, ExitCodeRef, Reference, StatusRef, walk_path
from rho_notebook.model.state import TERMINAL_STATES, NodeState

__all__ = ["Decision", "OpenNeeds", "Scheduler", "ValueLookup"]

_BLOCKING = frozenset({NodeState.FAILURE, NodeState.DENIAL, NodeState.CANCELLATION, NodeState.BLOCKED})

ValueLookup = Callable[[str], Any]
"""Validated output of a successful node (or UNAVAILABLE)."""


@dataclass(frozen=True)
class Decision:
    decided: list[tuple[str, NodeState, str]] = field(default_factory=list)
    """(node, READY | SKIPPED | BLOCKED, reason) in the order they were decided."""
    launches: list[str] = field(default_factory=list)


def slot_of(node: Node) -> str:
    """The limit an attempt counts against: ``agent``, ``command``, or ``none`` (approval nodes,
    and item steps the owner computes itself or that wait for a person)."""
    if isinstance(node, ApprovalNode):
        return "none"
    if isinstance(node, ItemNode):
        return node.slot
    return "agent" if isinstance(node, AgentNode) else "command"


def uses_checkout(node: Node) -> bool:
    """Whether an attempt of ``node`` takes a checkout slot at all."""
    return slot_of(node) != "none"


def uses_checkout_alone(node: Node) -> bool:
    if not uses_checkout(node):
        return False
    if isinstance(node, (AgentNode, PythonNode, ItemNode)):
        return node.access != "read_only"
    return True


class Scheduler:
    """Static indexes of one frozen graph; :meth:`decide` is pure."""

    def __init__(self, graph: Graph, *, remote: bool = False) -> None:
        self.graph = graph
        self.nodes: dict[str, Node] = {node.name: node for node in graph.nodes}
        off_checkout = remote and graph.checkout == "shared"
        self._no_checkout = frozenset(node.name for node in graph.nodes if off_checkout and placement_of(node) == "any")
        """Nodes that take no checkout slot (see the module docstring)."""
        self.children: dict[str, list[str]] = {name: [] for name in self.nodes}
        for node in graph.nodes:
            for need in node.needs:
                self.children[need].append(node.name)
        self.limits = graph.scheduler
        self._slots: dict[str, tuple[str, bool, bool]] = {}
        """Node -> (its slot, holds the checkout alone, shares it): constant, worked out once when
        the node first launches (:meth:`slot_facts`)."""

    # -- step 1 ----------------------------------------------------------------------------------

    def _lookup(
        self, states: Mapping[str, NodeState], exit_codes: Mapping[str, int | None], outputs: ValueLookup
    ) -> Callable[[Reference], object]:
        def lookup(ref: Reference) -> object:
            state = states[ref.node]
            if state not in TERMINAL_STATES:
                return UNAVAILABLE
            if isinstance(ref, StatusRef):
                return state.value
            if isinstance(ref, ExitCodeRef):
                code = exit_codes.get(ref.node)
                return UNAVAILABLE if code is None else code
            if state is not NodeState.SUCCESS:
                return UNAVAILABLE
            value = outputs(ref.node)
            if value is UNAVAILABLE:
                return UNAVAILABLE
            found = walk_path(value, ref.path)
            return UNAVAILABLE if found is MISSING else found

        return lookup

    def _decide_one(
        self,
        node: Node,
        states: Mapping[str, NodeState],
        lookup: Callable[[Reference], object],
        outputs: ValueLookup,
    ) -> tuple[NodeState, str] | None:
        succeeded = _needs_ended(node.needs, states)
        if succeeded is None:  # the common case on a hot path: some need is still open
            return None
        if succeeded and node.when is None and not isinstance(node, ItemNode):
            return _READY  # every need succeeded (the common case once they are all terminal)
        if isinstance(node, ItemNode):
            return item_verdict(node, self.nodes, states, outputs)
        need_states = [states[n] for n in node.needs]
        if node.when is not None:
            verdict = evaluate(node.when, lookup)
            if verdict is True:
                return NodeState.READY, ""
            if verdict is False:
                return NodeState.SKIPPED, "condition is false"
            return NodeState.BLOCKED, "condition needs a value that is unavailable"
        bad = [n for n, s in zip(node.needs, need_states) if s in _BLOCKING]
        if bad:
            return NodeState.BLOCKED, f"need {bad[0]!r} ended in {states[bad[0]].value}"
        skipped = [n for n, s in zip(node.needs, need_states) if s is NodeState.SKIPPED]
        if skipped:
            return NodeState.SKIPPED, f"need {skipped[0]!r} was skipped"
        return NodeState.READY, ""

    # -- the pass --------------------------------------------------------------------------------

    def decide(
        self,
        states: Mapping[str, NodeState],
        *,
        exit_codes: Mapping[str, int | None],
        outputs: ValueLookup,
        launching: bool = True,
        dirty: Iterable[str] | None = None,
        ready: Iterable[str] | None = None,
        running: Iterable[str] | None = None,
    ) -> Decision:
        """Decide pending nodes, then pick launches (none when ``launching`` is False)."""
        current = dict(states)
        lookup = self._lookup(current, exit_codes, outputs)
        nodes, children = self.nodes, self.children
        order = sorted({n for n in (self.nodes if dirty is None else dirty) if current[n] is _PENDING})
        queued = set(order)
        heap: list[str] = []
        """Children queued while deciding; taken merged with ``order``, so names go in ID order."""
        decided: list[tuple[str, NodeState, str]] = []
        index, count = 0, len(order)
        while True:
            if heap and (index >= count or heap[0] < order[index]):
                name = heapq.heappop(heap)
            elif index < count:
                name = order[index]
                index += 1
            else:
                break
            queued.discard(name)
            if current[name] is not _PENDING:
                continue
            verdict = self._decide_one(nodes[name], current, lookup, outputs)
            if verdict is None:
                continue
            new_state = current[name] = verdict[0]
            decided.append((name, new_state, verdict[1]))
            if new_state is not NodeState.READY and new_state in TERMINAL_STATES:
                for child in children[name]:
                    if child not in queued and current[child] is _PENDING:
                        heapq.heappush(heap, child)
                        queued.add(child)
        if ready is not None:
            ready = set(ready) | {name for name, new_state, _ in decided if new_state is NodeState.READY}
        launches = self._launches(current, ready, running) if launching else []
        return Decision(decided=decided, launches=launches)

    def _launches(
        self, current: Mapping[str, NodeState], ready: Iterable[str] | None, running_names: Iterable[str] | None
    ) -> list[str]:
        if running_names is None:
            running_names = [n for n, s in current.items() if s is NodeState.RUNNING]
        facts = self.slot_facts
        slots = _Slots.taken_by([facts(n) for n in running_names if current[n] is NodeState.RUNNING])
        # taken in ID order from a heap: the walk often stops after a few of hundreds of ready nodes
        names = list(ready) if ready is not None else [n for n, s in current.items() if s is NodeState.READY]
        heapq.heapify(names)
        launches: list[str] = []
        while names:
            name = heapq.heappop(names)
            if current[name] is not NodeState.READY:
                continue
            verdict = self._admit(self.nodes[name], slots)
            if verdict == _STOP:
                break
            if verdict == _TAKE:
                launches.append(name)
        return launches

    def slot_facts(self, name: str) -> tuple[str, bool, bool]:
        """(the slot an attempt of ``name`` takes, whether it holds the checkout alone, whether it
        shares it); neither for a node that takes no checkout slot (see the module docstring)."""
        found = self._slots.get(name)
        if found is None:
            found = self._slots[name] = _slot_facts(self.nodes[name], off=name in self._no_checkout)
        return found

    def _admit(self, node: Node, slots: _Slots) -> int:
        """Whether ready ``node`` launches now (its slots are then taken), waits for a slot of its
        kind (_SKIP: later nodes may still launch), or stops the pass (_STOP: the total or the
        checkout is full, and launching later nodes first would starve it)."""
        slot, alone, shares = self.slot_facts(node.name)
        if slot == "none":
            return _TAKE
        limits = self.limits
        if slots.total >= limits.total:
            return _STOP
        if alone:
            if slots.writers or slots.readers:
                return _STOP
        elif shares and (slots.writers or slots.readers >= limits.checkout_readers):
            return _STOP
        if slot == "agent":
            if slots.agents >= limits.agent:
                return _SKIP
        elif slots.commands >= limits.command:
            return _SKIP
        slots.take(slot, alone=alone, checkout=alone or shares)
        return _TAKE


class OpenNeeds:
    """How many needs of each node have not ended, kept by the driver as nodes end: the nodes a
    pass must look at are those whose last open need just ended. Without it, a node with ten
    needs is looked at after each of them ends (the layered benchmark's pass did that for every
    child of every node). It only narrows ``dirty``: :meth:`Scheduler.decide` still checks every
    need of a node it looks at, and a driver that ends a run does one full pass first."""

    __slots__ = ("_children", "_ended", "_open")

    def __init__(self, scheduler: Scheduler, states: Mapping[str, NodeState]) -> None:
        self._children = scheduler.children
        self._ended = {name for name, state in states.items() if state in TERMINAL_STATES}
        ended = self._ended
        self._open = {
            name: sum(1 for need in node.needs if need not in ended) for name, node in scheduler.nodes.items()
        }

    def ended(self, name: str, dirty: set[str]) -> None:
        """``name`` is terminal: add to ``dirty`` the children it leaves without an open need
        (a node counts once, however often it is reported)."""
        if name in self._ended:
            return
        self._ended.add(name)
        open_needs = self._open
        for child in self._children[name]:
            left = open_needs[child] - 1
            open_needs[child] = left
            if left == 0:
                dirty.add(child)


def _needs_ended(needs: Iterable[str], states: Mapping[str, NodeState]) -> bool | None:
    """None while some need is not terminal; else whether every need succeeded."""
    succeeded = True
    for need in needs:
        need_state = states[need]
        if need_state is not NodeState.SUCCESS:
            if need_state not in TERMINAL_STATES:
                return None
            succeeded = False
    return succeeded


def _slot_facts(node: Node, *, off: bool) -> tuple[str, bool, bool]:
    """(the slot of ``node``, whether it holds the checkout alone, whether it shares it);
    ``off``: it takes no checkout slot (a remote node of a shared checkout)."""
    slot = slot_of(node)
    if off or slot == "none":
        return slot, False, False
    alone = uses_checkout_alone(node)
    return slot, alone, not alone


_PENDING = NodeState.PENDING
_READY = (NodeState.READY, "")
"""The verdict on a node without ``when`` whose needs all succeeded."""

_STOP, _SKIP, _TAKE = 0, 1, 2
"""What :meth:`Scheduler._admit` says of one ready node."""


@dataclass(slots=True)
class _Slots:
    """The slots running attempts hold: in all, per kind, and of the checkout (alone or shared)."""

    total: int
    agents: int
    commands: int
    writers: int
    readers: int

    @classmethod
    def taken_by(cls, running: list[tuple[str, bool, bool]]) -> _Slots:
        """The slots held by running attempts, given each one's :func:`_slot_facts` (one pass:
        a wide fan has hundreds running at each turn)."""
        slots = cls(total=0, agents=0, commands=0, writers=0, readers=0)
        for slot, alone, shares in running:
            if slot == "none":
                continue
            slots.total += 1
            if slot == "agent":
                slots.agents += 1
            elif slot == "command":
                slots.commands += 1
            if alone:
                slots.writers += 1
            elif shares:  # read-only agents, Python nodes and item steps share the checkout
                slots.readers += 1
        return slots

    def take(self, slot: str, *, alone: bool, checkout: bool) -> None:
        """One more attempt of ``slot`` runs (holding the checkout alone, shared, or not at all)."""
        if slot == "agent":
            self.agents += 1
        else:
            self.commands += 1
        self.total += 1
        if alone:
            self.writers += 1
        elif checkout:
            self.readers += 1
