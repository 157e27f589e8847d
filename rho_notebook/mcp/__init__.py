"""The model-facing tool: ``rho-notebook mcp`` serves the workflow tools and run resources over
the Model Context Protocol (docs/mcp.md). A front end: it calls :class:`rho_notebook.service.Service`
and nothing below it."""

from rho_notebook.mcp.server import WorkflowTools, build_server, serve_stdio
from rho_notebook.mcp.tools import TOOLS, ToolSpec

__all__ = ["TOOLS", "ToolSpec", "WorkflowTools", "build_server", "serve_stdio"]
