"""The authority list of a plan: everything its nodes (or its script) may do, as a person confirms
it before the first run. One function for every authoring form; :mod:`~rho_notebook.planning.seal`
records its answer in the manifest."""

from __future__ import annotations

from typing import Literal

from rho_notebook.errors import PlanError
from rho_notebook.model.graph import (
    AgentNode,
    ApprovalNode,
    CommandNode,
    FrozenExecutable,
    FrozenFile,
    Graph,
    ItemNode,
    PythonNode,
    ShellNode,
)
from rho_notebook.model.plan import AuthorityItem
from rho_notebook.planning.resolve import Resolver

__all__ = ["authority_of"]

_Kind = Literal["executable", "interpreter", "directory", "agent", "capability"]


class _Authority:
    """The items found so far (a set: two nodes running one program confirm it once), as
    (kind, value, detail): a model is built once per distinct item, not once per node."""

    def __init__(self, graph: Graph, resolver: Resolver) -> None:
        self.graph = graph
        self.resolver = resolver
        self.items: set[tuple[_Kind, str, str]] = set()

    def add(self, kind: _Kind, value: str, detail: str) -> None:
        self.items.add((kind, value, detail))

    def interpreter(self, file: FrozenFile) -> None:
        self.add("interpreter", file.path, "; ".join((file.sha256, *self.resolver.via(file.path))))

    def process(self, exe: FrozenExecutable, cwd: str) -> None:
        self.add("executable", exe.file.path, "; ".join((exe.file.sha256, *self.resolver.via(exe.file.path))))
        for interp in exe.interpreters:
            self.interpreter(interp)
        self.add("directory", cwd, "working directory (mutating)")
        self.add("capability", "process", "run frozen commands in the workspace")

    def agent(self, agent_id: str, access: str) -> None:
        agent = self.graph.agent(agent_id)
        tools = "all" if agent.tools == "all" else ", ".join(agent.tools)
        self.add("agent", agent.id, f"{agent.runtime} agent from {agent.origin}; tools: {tools}; access: {access}")
        for cap in sorted(agent.capability_set()):
            self.add("capability", f"agent:{cap}", f"tool available to agent {agent.id!r}")

    def item(self, node: ItemNode) -> None:
        if node.executable is not None:
            self.process(node.executable, node.cwd)
        elif node.acting_kind == "agent" and node.agent is not None:
            self.agent(node.agent, node.access)
        elif node.acting_kind == "model":
            detail = (
                f"one completion from agent {node.agent!r}'s model"
                if node.agent
                else f"one completion from {node.acting_params.get('provider')}/{node.acting_params.get('model')}"
            )
            self.add("capability", "model", detail)
        elif node.step_kind == "human":
            self.add("capability", "approval", f"a person answers step {node.step!r}")

    def python(self, node: PythonNode) -> None:
        if self.graph.python is None:
            msg = f"python node {node.name!r} in a graph without a Python runtime"
            raise PlanError(msg)
        self.interpreter(self.graph.python.interpreter.file)
        mode = "read-only, declared" if node.access == "read_only" else "mutating"
        self.add("directory", node.cwd, f"working directory ({mode})")
        self.add("capability", "process", "run frozen Python functions in the workspace")

    def node(self, node: object) -> None:
        if isinstance(node, (CommandNode, ShellNode)):
            self.process(node.executable, node.cwd)
        elif isinstance(node, ItemNode):
            self.item(node)
        elif isinstance(node, PythonNode):
            self.python(node)
        elif isinstance(node, ApprovalNode):
            self.add("capability", "approval", f"a person decides node {node.name!r}")
        elif isinstance(node, AgentNode):
            self.agent(node.agent, node.access)

    def script(self, module: str) -> None:
        if self.graph.python is None:  # a script is always frozen with its interpreter
            msg = f"script {module} was frozen without an interpreter"
            raise PlanError(msg)
        self.add("capability", "process", "run the script and the steps it asks for")
        self.add("directory", "//", "working directory of the script (mutating)")
        self.interpreter(self.graph.python.interpreter.file)


def authority_of(graph: Graph, resolver: Resolver) -> tuple[AuthorityItem, ...]:
    """Everything the plan's nodes (a script plan: its script) may do, as a person confirms it,
    sorted by kind, value and detail.

    Raises
    ------
    PlanError
        A python node or a script in a graph without a Python runtime (a planner bug).
    """
    found = _Authority(graph, resolver)
    if graph.script is not None:
        found.script(graph.script.module)
    for node in graph.nodes:
        found.node(node)
    return tuple(AuthorityItem(kind=kind, value=value, detail=detail) for kind, value, detail in sorted(found.items))
