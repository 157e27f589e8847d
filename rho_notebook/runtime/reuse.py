"""Reuse keys, which nodes may be reused, the prediction ``diff`` shows, and seeded values.

A node is *reusable* (:func:`reusable`) when it is a Python or agent node declared
``reuse = True`` with ``access = "read_only"`` and every node it needs ended in success (not
skipped, failed, denied, blocked, nor failed with ``allow_failure``). Approval, command and shell
nodes and every mutating node are never reused.

The *reuse key* (:func:`reuse_key`) is ``sha256:`` + sha256 over the canonical encoding
(:func:`rho_notebook.model.canonical.encode`) of a map holding:

- ``format``: :data:`KEY_FORMAT` (a new format tag makes every earlier key a miss);
- ``workspace``: the workspace key (reuse never crosses checkouts);
- ``node``: the node's frozen definition without what does not change its effect (``name``,
  ``needs``, ``when``, ``allow_failure``, ``reuse``; ``reuse_inputs`` is replaced by the current
  digests below): kind, module, function, args, cwd, access, output schema, timeouts, and for
  other kinds their argv, executable and interpreter digests;
- ``environment``: the graph's environment policy;
- ``python`` (Python nodes): sha256 of the frozen runtime (interpreter digest, version,
  ``sys.path``, distributions, harness digest); ``modules``: label -> sha256 of every module the
  node may import; ``args``: the rendered arguments (:func:`rho_notebook.exec.python.render_args`);
- ``agent`` (agent nodes): sha256 of the frozen agent definition (model, provider, tools, body);
  ``prompt``: the rendered prompt;
- ``upstream``: node -> sha256 of the canonical encoding of every upstream output the node reads;
- ``reuse_inputs``: ``//`` path -> sha256 of the file's content *now* (read without following a
  final symlink). A missing or unreadable file means no key: the node launches.

Any error computing a key (an unavailable value, a missing file, a value the encoding refuses)
raises :class:`NoReuseKey`; the driver then launches the node as usual.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.errors import NoReuseKey, RhoError, UnavailableValue
from rho_notebook.exec.base import render_template
from rho_notebook.exec.python import render_args
from rho_notebook.model.canonical import encode
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import AgentNode, Graph, Node, PythonNode
from rho_notebook.model.reference import OutputRef
from rho_notebook.oshelpers import read_regular_nofollow
from rho_notebook.runtime.replay import may_reuse, reusable
from rho_notebook.store.layout import VALUE_FILE, StoreLayout
from rho_notebook.store.reuse import ReuseHit, ReuseIndex
from rho_notebook.store.runs import RunFolder, node_folder

__all__ = [
    "KEY_FORMAT",
    "ReuseKeys",
    "Seed",
    "predict_reuse",
    "reusable",
    "reuse_key",
    "look_up",
    "may_reuse",
    "seeds",
]

KEY_FORMAT = "rho-notebook/reuse-key/v1"

_NOT_IN_KEY = frozenset({"name", "needs", "when", "allow_failure", "reuse", "reuse_inputs"})

ValueLookup = Callable[[str], Any]
"""Validated output of an upstream node, or UNAVAILABLE."""


def _digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(encode(value)).hexdigest()


def _references(node: Node) -> tuple[OutputRef, ...]:
    if isinstance(node, PythonNode):
        return node.references()
    if isinstance(node, AgentNode):
        return node.prompt.references()
    return ()


class ReuseKeys:
    """Computes reuse keys for the nodes of one graph, with the graph-wide parts digested once."""

    def __init__(self, graph: Graph, *, workspace_key: str, workspace: Path) -> None:
        self.graph = graph
        self.workspace_key = workspace_key
        self.workspace = workspace
        self._environment = graph.environment.model_dump(mode="json")
        self._python = None if graph.python is None else _digest(graph.python.model_dump(mode="json"))
        self._modules = {module.label: module.sha256 for module in graph.python_modules}
        self._agents: dict[str, str] = {}

    def key(self, node: Node, outputs: ValueLookup) -> str:
        """The reuse key of ``node`` given the upstream values it reads now.

        Raises
        ------
        NoReuseKey
            Something the key covers is unavailable: an upstream value, a ``reuse_inputs`` file,
            a frozen module or agent, or a value the canonical encoding refuses.
        """
        try:
            return _digest(self._material(node, outputs))
        except NoReuseKey:
            raise
        except (RhoError, OSError, KeyError, TypeError, ValueError) as err:
            msg = f"no reuse key for node {node.name!r}: {type(err).__name__}: {err}"
            raise NoReuseKey(msg) from None

    def _material(self, node: Node, outputs: ValueLookup) -> dict[str, Any]:
        definition = {k: v for k, v in node.model_dump(mode="json").items() if k not in _NOT_IN_KEY}
        material: dict[str, Any] = {
            "format": KEY_FORMAT,
            "workspace": self.workspace_key,
            "node": definition,
            "environment": self._environment,
        }
        upstream: dict[str, str] = {}
        for ref in _references(node):
            if ref.node not in upstream:
                value = outputs(ref.node)
                if value is UNAVAILABLE:
                    msg = f"node {node.name!r} reads the output of {ref.node!r}, which has none"
                    raise NoReuseKey(msg)
                upstream[ref.node] = _digest(value)
        material["upstream"] = upstream
        if isinstance(node, PythonNode):
            if self._python is None:
                msg = f"workflow {self.graph.name!r} froze no Python runtime"
                raise NoReuseKey(msg)
            material["python"] = self._python
            material["modules"] = {label: self._modules[label] for label in node.modules}
            try:
                material["args"] = render_args(node, outputs)
            except UnavailableValue as err:
                raise NoReuseKey(str(err)) from None
            material["reuse_inputs"] = {file.path: self._file_digest(file.path) for file in node.reuse_inputs}
        elif isinstance(node, AgentNode):
            material["agent"] = self._agent(node.agent)
            try:
                material["prompt"] = render_template(node.prompt, outputs)
            except UnavailableValue as err:
                raise NoReuseKey(str(err)) from None
        return material

    def _agent(self, agent_id: str) -> str:
        found = self._agents.get(agent_id)
        if found is None:
            found = self._agents[agent_id] = _digest(self.graph.agent(agent_id).model_dump(mode="json"))
        return found

    def _file_digest(self, label: str) -> str:
        relative = label.removeprefix("//")
        if relative == label or relative.startswith("/") or ".." in Path(relative).parts:
            msg = f"reuse_inputs entry {label!r} is not a //-relative path inside the workspace"
            raise NoReuseKey(msg)
        try:
            data = read_regular_nofollow(self.workspace / relative)
        except OSError as err:
            msg = f"reuse_inputs file {label} cannot be read ({err.strerror or err}); the node launches"
            raise NoReuseKey(msg) from None
        return "sha256:" + hashlib.sha256(data).hexdigest()


def reuse_key(node: Node, graph: Graph, *, workspace_key: str, outputs: ValueLookup, workspace: Path) -> str:
    """The reuse key of ``node`` of ``graph`` (see the module docstring for what it covers).

    Parameters
    ----------
    node
        A node of ``graph``.
    graph
        The frozen graph (its Python runtime, modules, agents and environment policy join the key).
    workspace_key
        The run's or plan's workspace key.
    outputs
        Upstream node name -> its validated output value (UNAVAILABLE when it has none).
    workspace
        The checkout root ``reuse_inputs`` paths are read from.

    Raises
    ------
    NoReuseKey
        Something the key covers is unavailable now (the node is then launched).
    """
    return ReuseKeys(graph, workspace_key=workspace_key, workspace=workspace).key(node, outputs)


def _topological(graph: Graph) -> list[Node]:
    nodes = {node.name: node for node in graph.nodes}
    waiting = {name: len(node.needs) for name, node in nodes.items()}
    children: dict[str, list[str]] = {name: [] for name in nodes}
    for node in graph.nodes:
        for need in node.needs:
            children[need].append(node.name)
    ready = sorted(name for name, count in waiting.items() if count == 0)
    order: list[Node] = []
    while ready:
        name = ready.pop()
        order.append(nodes[name])
        for child in children[name]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    return order


def predict_reuse(graph: Graph, *, layout: StoreLayout, workspace_key: str, workspace: Path) -> dict[str, str]:
    """Node -> ``"reuse"`` or ``"launch"``: what a run of ``graph`` started now would do.

    A node is predicted ``"reuse"`` when its definition allows it (:func:`may_reuse`), every node
    it needs is predicted ``"reuse"`` too, and its key -- computed from the stored values of those
    upstream hits -- has a verified entry in the reuse index. Everything else is ``"launch"``
    (a launch predicted here may still end skipped or blocked at run time).
    """
    index = ReuseIndex(layout)
    keys = ReuseKeys(graph, workspace_key=workspace_key, workspace=workspace)
    values: dict[str, Any] = {}
    predicted: dict[str, str] = {}
    for node in _topological(graph):
        predicted[node.name] = "launch"
        if not may_reuse(node) or any(predicted.get(need) != "reuse" for need in node.needs):
            continue
        try:
            key = keys.key(node, lambda name: values.get(name, UNAVAILABLE))
        except NoReuseKey:
            continue
        hit = index.lookup(key, workspace_key=workspace_key)
        if hit is None:
            continue
        if hit.value_bytes is not None:
            try:
                values[node.name] = json.loads(hit.value_bytes)
            except ValueError:
                continue
        predicted[node.name] = "reuse"
    return predicted


@dataclass(frozen=True)
class Seed:
    """A node's successful attempt in the run a ``try`` takes upstream values from."""

    run_id: str
    node: str
    attempt: int
    value_bytes: bytes | None
    """The bytes of its ``value.json``; None when it stored no value."""


def seeds(layout: StoreLayout, run_id: str, names: tuple[str, ...]) -> dict[str, Seed | str]:
    """For each of ``names``: its successful attempt in run ``run_id``, or why there is none.

    Raises
    ------
    StoreError
        The source run cannot be read (missing, damaged store entries).
    """
    from rho_notebook.runtime.status import journal_state

    state = journal_state(layout, run_id)
    if state.damage is not None:
        return {name: f"run {run_id} is damaged ({state.damage}); no value is taken from it" for name in names}
    succeeded = state.succeeded_attempts()
    index = ReuseIndex(layout)
    found: dict[str, Seed | str] = {}
    for name in names:
        attempt = succeeded.get(name)
        if attempt is None:
            record = state.nodes.get(name)
            how = "is not in it" if record is None else f"ended {record.state.value}"
            found[name] = f"run {run_id} has no successful attempt of node {name!r} to take its value from ({how})"
            continue
        path = index.layout.run_dir(run_id) / "nodes" / node_folder(name) / "attempts" / str(attempt) / VALUE_FILE
        data: bytes | None = None
        try:
            data = read_regular_nofollow(path)
            json.loads(data)
        except (OSError, ValueError) as err:
            journaled = RunFolder(path.parents[4]).journaled_step_value(path)  # its copy lost in a crash?
            data = None if journaled is None else json.dumps(journaled).encode()
            if data is None and not isinstance(err, FileNotFoundError):
                found[name] = f"the value of node {name!r} in run {run_id} cannot be read: {err}"
                continue
        found[name] = Seed(run_id, name, attempt, data)
    return found


# -- what the driver journals and looks up --------------------------------------------------------


def look_up(
    keys: ReuseKeys | None,
    names: list[str],
    *,
    nodes: Mapping[str, Node],
    outputs: ValueLookup,
    index: ReuseIndex | None,
    workspace_key: str,
) -> dict[str, tuple[str, ReuseHit | None, Any]]:
    """Node -> (reuse key, verified hit or None, the hit's decoded value) for each of ``names``
    that has a key; ``index`` None (``run --no-reuse``) looks nothing up. Reuse only saves work:
    any failure computing a key or reading an entry leaves the node out (it launches)."""
    if keys is None:
        return {}
    found: dict[str, tuple[str, ReuseHit | None, Any]] = {}
    for name in names:
        try:
            key = keys.key(nodes[name], outputs)
            hit = index.lookup(key, workspace_key=workspace_key) if index is not None else None
        except NoReuseKey:
            continue
        except Exception:  # reuse only saves work: any failure in it launches the node, never ends the run
            continue
        value: Any = UNAVAILABLE
        if hit is not None and hit.value_bytes is not None:
            try:
                value = json.loads(hit.value_bytes)
            except ValueError:
                hit = None
        found[name] = (key, hit, value)
    return found
