"""What changed between two frozen graphs: nodes added, removed and changed, each change by field.

Pure. A node is compared field by field on its JSON form (``model_dump``), so a field added to a
node kind later is compared without a change here. Fields are named as the Starlark author writes
them (``output``, ``when``, ``argv``, ``module``...), and three more facts that live outside the
node record are attributed to the nodes they decide:

- ``module source``: a Python node whose module, or a module it may import (``modules``), has
  another content digest in ``Graph.python_modules`` (or is absent from one side);
- ``agent``: an agent node whose agent ID is the same but whose resolved definition
  (``Graph.agents``) differs;
- ``interpreter``: a Python node of a graph whose Python runtime (``Graph.python``: interpreter,
  version, installed distributions, harness) differs.

Graph-level changes (``name``, ``inputs``, ``environment``, ``concurrency``, ``interpreter``) are
listed apart in :attr:`PlanDiff.graph`; a changed input value also shows in every node whose
rendered text it changed, since inputs are substituted at plan time.
"""

from __future__ import annotations

from typing import Any

from rho_notebook.model.base import FrozenModel
from rho_notebook.model.graph import AgentNode, Graph, Node, PythonNode

__all__ = ["NodeChange", "PlanDiff", "diff_graphs", "node_changes", "ancestors"]

_FIELD_NAMES = {"output": "output", "when": "when", "modules": "module source"}
"""Node fields whose user-facing name differs from the model's; the rest keep theirs."""

_SKIPPED = frozenset({"name"})

_GRAPH_FIELDS = (
    ("name", "name"),
    ("inputs", "inputs"),
    ("environment", "environment"),
    ("scheduler", "concurrency"),
    ("python", "interpreter"),
)


class NodeChange(FrozenModel):
    """One node present in both graphs whose definition differs."""

    node: str
    fields: tuple[str, ...]
    """Changed fields by their Starlark names, in the node kind's field order, then ``module
    source``, ``agent`` and ``interpreter``."""


class PlanDiff(FrozenModel):
    """The difference between an old and a new graph."""

    old_digest: str = ""
    new_digest: str = ""
    added: tuple[str, ...] = ()
    """Nodes only in the new graph, sorted."""
    removed: tuple[str, ...] = ()
    """Nodes only in the old graph, sorted."""
    changed: tuple[NodeChange, ...] = ()
    """Nodes in both whose definition differs, sorted by name."""
    unchanged: tuple[str, ...] = ()
    """Nodes in both with the same definition, sorted."""
    graph: tuple[str, ...] = ()
    """Graph-level fields that differ: ``name``, ``inputs``, ``environment``, ``concurrency``,
    ``interpreter``."""

    @property
    def same(self) -> bool:
        """Whether nothing differs (the graph digests are then equal too)."""
        return not (self.added or self.removed or self.changed or self.graph)

    def change(self, node: str) -> NodeChange | None:
        """The change of ``node``, or None when it is unchanged, added or removed."""
        return next((c for c in self.changed if c.node == node), None)


def _user_name(field: str) -> str:
    return _FIELD_NAMES.get(field, field)


def _module_digests(graph: Graph, node: PythonNode) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for label in (node.module, *node.modules):
        try:
            found[label] = graph.python_module(label).sha256
        except KeyError:
            found[label] = None
    return found


def _agent_dump(graph: Graph, agent_id: str) -> dict[str, Any] | None:
    try:
        return graph.agent(agent_id).model_dump(mode="json")
    except KeyError:
        return None


def node_changes(old: Graph, new: Graph, name: str) -> tuple[str, ...]:
    """The fields by which node ``name`` differs between ``old`` and ``new`` (both must have it).

    Raises
    ------
    KeyError
        ``name`` is missing from either graph.
    """
    before: Node = old.node(name)
    after: Node = new.node(name)
    dumped_before = before.model_dump(mode="json")
    dumped_after = after.model_dump(mode="json")
    order = [*type(before).model_fields, *(f for f in type(after).model_fields if f not in type(before).model_fields)]
    fields: list[str] = []
    for field in order:
        if field in _SKIPPED:
            continue
        if dumped_before.get(field) != dumped_after.get(field):
            user = _user_name(field)
            if user not in fields:
                fields.append(user)
    if isinstance(before, PythonNode) and isinstance(after, PythonNode):
        if _module_digests(old, before) != _module_digests(new, after) and "module source" not in fields:
            fields.append("module source")
        if _dump(old.python) != _dump(new.python):
            fields.append("interpreter")
    if isinstance(before, AgentNode) and isinstance(after, AgentNode) and before.agent == after.agent:
        if _agent_dump(old, before.agent) != _agent_dump(new, after.agent):
            fields.append("agent")
    return tuple(fields)


def _dump(value: FrozenModel | None) -> dict[str, Any] | None:
    return None if value is None else value.model_dump(mode="json")


def _graph_changes(old: Graph, new: Graph) -> tuple[str, ...]:
    before = old.model_dump(mode="json")
    after = new.model_dump(mode="json")
    return tuple(user for field, user in _GRAPH_FIELDS if before.get(field) != after.get(field))


def diff_graphs(old: Graph, new: Graph, *, old_digest: str = "", new_digest: str = "") -> PlanDiff:
    """What changed from ``old`` to ``new`` (digests, when given, are carried into the answer)."""
    old_names = {node.name for node in old.nodes}
    new_names = {node.name for node in new.nodes}
    changed: list[NodeChange] = []
    unchanged: list[str] = []
    for name in sorted(old_names & new_names):
        fields = node_changes(old, new, name)
        if fields:
            changed.append(NodeChange(node=name, fields=fields))
        else:
            unchanged.append(name)
    return PlanDiff(
        old_digest=old_digest,
        new_digest=new_digest,
        added=tuple(sorted(new_names - old_names)),
        removed=tuple(sorted(old_names - new_names)),
        changed=tuple(changed),
        unchanged=tuple(unchanged),
        graph=_graph_changes(old, new),
    )


def ancestors(graph: Graph, name: str) -> tuple[str, ...]:
    """Every node ``name`` transitively needs, sorted (not ``name`` itself).

    Raises
    ------
    KeyError
        The graph has no node ``name``.
    """
    by_name = {node.name: node for node in graph.nodes}
    if name not in by_name:
        msg = f"no node named {name!r} in workflow {graph.name!r}"
        raise KeyError(msg)
    found: set[str] = set()
    stack = list(by_name[name].needs)
    while stack:
        current = stack.pop()
        if current in found or current not in by_name:
            continue
        found.add(current)
        stack.extend(by_name[current].needs)
    return tuple(sorted(found))
