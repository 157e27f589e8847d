"""Agents: Rho-compatible definition files and the catalog, model providers, and the agent loop.

Definitions and catalog: :mod:`~rho_notebook.agents.definition`, :mod:`~rho_notebook.agents.catalog`.
Running an agent: :mod:`~rho_notebook.agents.settings` (providers by name, credentials by
reference), :mod:`~rho_notebook.agents.resolve` (provider, model and credential of an agent),
:mod:`~rho_notebook.agents.provider` (the async provider interface) with
:mod:`~rho_notebook.agents.openai` and :mod:`~rho_notebook.agents.anthropic`,
:mod:`~rho_notebook.agents.tools` (workspace tools), :mod:`~rho_notebook.agents.loop` (runtime rho),
:mod:`~rho_notebook.agents.claude_cli` (runtime claude-cli), :mod:`~rho_notebook.agents.answer`
(typed answers), :mod:`~rho_notebook.agents.session` and :mod:`~rho_notebook.agents.redact`
(what an attempt records, secrets removed). The node executor is
:class:`rho_notebook.exec.agent.AgentExecutor`.
"""
