"""Agents: Rho-compatible definition files, the agent catalog and its built-in agents."""
