"""The frozen facts of a node as short texts: the "definition" part of the node pane."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rho_notebook.model.graph import (
    AgentNode,
    ApprovalNode,
    CommandNode,
    ItemNode,
    Node,
    PythonNode,
    ShellNode,
)
from rho_notebook.views.text import condition_text, reference_text, schema_text, template_text

__all__ = ["definition_of"]


def definition_of(node: Node) -> dict[str, Any]:
    """The frozen facts of a node, as short texts for the output pane."""
    found: dict[str, Any] = {"kind": node.kind, "needs": list(node.needs)}
    for kind, facts in _KIND_FACTS:
        if isinstance(node, kind):
            found.update(facts(node))
            break
    if node.when is not None:
        found["when"] = condition_text(node.when)
    if node.output is not None:
        found["output"] = schema_text(node.output)
    if isinstance(node, (CommandNode, ShellNode, PythonNode)):
        found["placement"] = node.placement
        if node.resources:
            found["resources"] = [f"{key}={amount}" for key, amount in node.resources]
    found["allow_failure"] = node.allow_failure
    found["timeout_seconds"] = node.timeout_seconds
    found["max_output_bytes"] = node.max_output_bytes
    return found


def _command_facts(node: CommandNode) -> dict[str, Any]:
    return {
        "argv": [template_text(part) for part in node.argv],
        "cwd": node.cwd,
        "executable": node.executable.file.path,
    }


def _shell_facts(node: ShellNode) -> dict[str, Any]:
    return {
        "executable": node.executable.file.path,
        "arguments": list(node.arguments),
        "command": node.command,
        "cwd": node.cwd,
    }


def _agent_facts(node: AgentNode) -> dict[str, Any]:
    found: dict[str, Any] = {"agent": node.agent, "access": node.access, "prompt": template_text(node.prompt)}
    if node.reuse:
        found["reuse"] = True
    return found


def _item_facts(node: ItemNode) -> dict[str, Any]:
    found: dict[str, Any] = {"step": node.step, "step_kind": node.step_kind}
    if node.round is not None:
        found["round"] = node.round
    found["params"] = node.params
    found["edges"] = [
        route.to
        + (
            f" when {route.when['field']} {route.when['op']} {json.dumps(route.when.get('value'))}"
            if route.when
            else ""
        )
        for route in node.routes
    ]
    return found


def _python_facts(node: PythonNode) -> dict[str, Any]:
    found: dict[str, Any] = {
        "module": node.module,
        "function": node.function,
        "args": [
            f"{arg.name}={{{reference_text(arg.ref)}}}"
            if arg.ref is not None
            else f"{arg.name}={json.dumps(arg.value)}"
            for arg in node.args
        ],
        "cwd": node.cwd,
        "access": node.access,
    }
    if node.reuse:
        found["reuse"] = True
        found["reuse_inputs"] = [frozen.path for frozen in node.reuse_inputs]
    return found


def _approval_facts(node: ApprovalNode) -> dict[str, Any]:
    return {"prompt": template_text(node.prompt)}


_KIND_FACTS: tuple[tuple[type[Any], Callable[[Any], dict[str, Any]]], ...] = (
    (CommandNode, _command_facts),
    (ShellNode, _shell_facts),
    (AgentNode, _agent_facts),
    (ItemNode, _item_facts),
    (PythonNode, _python_facts),
    (ApprovalNode, _approval_facts),
)
"""What each node kind adds to the definition, checked in this order."""
