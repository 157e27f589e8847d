"""What a person or a launch hook decides on before a graph node starts: its launch facts.

One function for every node kind (the facts themselves are built next to each kind's executor);
the run driver asks for them only when the launch gate needs them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rho_notebook.exec.base import render_template
from rho_notebook.exec.command import process_facts
from rho_notebook.exec.item import item_launch_facts
from rho_notebook.exec.python import python_facts
from rho_notebook.model.agent import agent_launch_facts
from rho_notebook.model.graph import AgentNode, CommandNode, Graph, ItemNode, Node, PythonNode, ShellNode
from rho_notebook.model.mapping import RunContext

__all__ = ["node_launch_facts", "rendered_part"]


def node_launch_facts(node: Node, graph: Graph, outputs: Callable[[str], Any], run: RunContext) -> dict[str, Any]:
    """The launch facts of ``node`` with upstream values from ``outputs``; ``run`` is who started
    the run (an item step's facts and its parameters resolve against the same people as its
    attempt). Empty for kinds that launch nothing (approval nodes).

    Raises
    ------
    UnavailableValue
        A value the facts render is missing.
    """
    if isinstance(node, (CommandNode, ShellNode)):
        return process_facts(node, outputs)
    if isinstance(node, PythonNode):
        return python_facts(node, graph, outputs)
    if isinstance(node, ItemNode):
        return item_launch_facts(node, graph, outputs, run)
    if isinstance(node, AgentNode):
        prompt = render_template(node.prompt, outputs)
        return agent_launch_facts(graph.agent(node.agent), access=node.access, prompt=prompt)
    return {}


def rendered_part(node: Node) -> str:
    """What of ``node`` is rendered from upstream values, as an error message names it."""
    if isinstance(node, AgentNode) or (isinstance(node, ItemNode) and node.slot == "agent"):
        return "the prompt"
    return "args" if isinstance(node, PythonNode) else "argv"
