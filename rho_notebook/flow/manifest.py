"""The static manifest of a workflow tree: what :meth:`Workflow.compile` returns, without a model call.

The manifest is JSON data::

    {
      "format": "rho-flow-manifest/1",
      "root": "review_flow",                 # the key prefix (the flow's name in snake case)
      "modules": [                           # depth-first pre-order
        {"path": "review_flow", "class": "ReviewFlow", "description": "",
         "agents": ["writer"], "children": ["research"]}, ...],
      "agents": [                            # every AgentParam, in module order then by attribute
        {"path": "review_flow.writer", "module": "review_flow", "attribute": "writer",
         "agent": null, "system": "Write a first draft.",
         "provider": {"name": "local", "model": "m", "credential_ref": "settings:providers.local"},
         "definition_digest": "sha256:..."}, ...],
      "dynamic": [                           # every Selector: compile cannot know its choice
        {"path": "review_flow.route", "kind": "selector", "reason": "...",
         "candidates": [{"path": "review_flow.triage", "class": "Agent", "description": "..."}]}]
    }

``provider`` is a snapshot of the placement with the credential *reference* only (this layer reads
no settings and never sees a key): ``settings:providers.NAME`` is the credential the settings
give that provider (its ``api_key_env`` or auth profile), ``settings:default_provider`` the default
provider's; null for a catalog agent (``"agent": ID``), whose definition names its provider and
model (``name`` and ``model`` are null too: validate resolves them through the catalog). ``definition_digest`` is :meth:`AgentParam.digest`: sha256 of the canonical JSON of
``{"agent", "system"}``, so an edited prompt changes it and a new placement does not. A candidate
not registered in the tree has ``"path": null``.
"""

from __future__ import annotations

from typing import Any

from rho_notebook.flow import keys
from rho_notebook.flow.module import AgentParam, Workflow
from rho_notebook.flow.presets import Selector

__all__ = ["MANIFEST_FORMAT", "compile_manifest"]

MANIFEST_FORMAT = "rho-flow-manifest/1"


def compile_manifest(workflow: Workflow, *, name: str | None = None) -> dict[str, Any]:
    """The manifest of ``workflow``'s tree, its paths prefixed by ``name`` (default: the class name),
    both in snake case as step keys have them."""
    if not isinstance(workflow, Workflow):
        msg = f"compile_manifest takes a Workflow, got {type(workflow).__name__}"
        raise TypeError(msg)
    root = keys.root_name(name if name is not None else type(workflow).__name__)
    named = workflow.named_modules()
    paths = {id(module): _join(root, path) for path, module in named}
    modules: list[dict[str, Any]] = []
    agents: list[dict[str, Any]] = []
    dynamic: list[dict[str, Any]] = []
    for path, module in named:
        where = _join(root, path)
        modules.append(
            {
                "path": where,
                "class": type(module).__name__,
                "description": module.description,
                "agents": [attribute for attribute, _ in module.named_agents()],
                "children": [attribute for attribute, _ in module.named_children()],
            }
        )
        agents.extend(_agent(where, attribute, param) for attribute, param in module.named_agents())
        if isinstance(module, Selector):
            dynamic.append(
                {
                    "path": where,
                    "kind": "selector",
                    "reason": "a Selector chooses its next workflow at run time from the model's answer",
                    "candidates": [
                        {"path": paths.get(id(c)), "class": type(c).__name__, "description": c.description}
                        for c in module.candidates
                    ],
                }
            )
    return {"format": MANIFEST_FORMAT, "root": root, "modules": modules, "agents": agents, "dynamic": dynamic}


def _agent(module: str, attribute: str, param: AgentParam) -> dict[str, Any]:
    reference: str | None
    if param.agent is not None:
        reference = None
    elif param.provider is not None:
        reference = f"settings:providers.{param.provider}"
    else:
        reference = "settings:default_provider"
    return {
        "path": f"{module}.{attribute}",
        "module": module,
        "attribute": attribute,
        "agent": param.agent,
        "system": param.system,
        "provider": {"name": param.provider, "model": param.model, "credential_ref": reference},
        "definition_digest": param.digest(),
    }


def _join(root: str, path: str) -> str:
    return f"{root}.{path}" if path else root
