"""Freezing the agents a plan names: each definition resolved from the agent catalog once per
plan and its provider checked against the settings (Starlark agent nodes, item-graph agent and
model steps)."""

from __future__ import annotations

from typing import Any

from rho_notebook.model.agent import READ_ONLY_TOOLS, AgentDefinition
from rho_notebook.planning.request import PlanRequest

__all__ = ["AgentResolver", "catalog_resolver", "frozen_agent", "mutating_tools"]

AgentResolver = Any  # (agent_id, workflow_dir, workspace, user_home, overlay) -> (AgentDefinition, Path | None)


def catalog_resolver(agent_id: str, **where: Any) -> Any:
    """The agent catalog's resolver (imported on first use: planning without agents never loads it)."""
    from rho_notebook.agents.catalog import resolve_agent

    return resolve_agent(agent_id, **where)


def frozen_agent(
    agent_id: str, agents: dict[str, AgentDefinition], *, request: PlanRequest, resolve_agent: AgentResolver
) -> AgentDefinition:
    """The definition of ``agent_id`` from the catalog (``request``'s workflow folder, overlays,
    workspace and user home), its provider checked against the settings; kept in ``agents`` so
    each agent is resolved once per plan.

    Raises
    ------
    InvalidWorkflow, PlanError
        The agent is not found, its definition is invalid, or its provider is unknown.
    """
    from rho_notebook.agents.resolve import check_agent_provider

    if agent_id not in agents:
        definition, where = resolve_agent(
            agent_id,
            workflow_dir=request.workflow_dir,
            workspace=request.workspace.root,
            user_home=request.user_home,
            overlay=request.overlay_agents,
        )
        agents[agent_id] = definition  # a provider problem is said once, at the first node naming it
        check_agent_provider(
            definition,
            user_home=request.user_home,
            workspace=request.workspace.root,
            trusted=request.workspace_trusted,
            file=where,
        )
    return agents[agent_id]


def mutating_tools(definition: AgentDefinition) -> list[str]:
    """The tools of ``definition`` that are not read-only, sorted."""
    return sorted(definition.capability_set() - READ_ONLY_TOOLS)
