"""The extension application: settings, routes, and a stop that leaves the runs it started going."""

from __future__ import annotations

from pathlib import Path

from jupyter_server.extension.application import ExtensionApp
from traitlets import Float

from rho_notebook.server import API_PREFIX
from rho_notebook.server._context import CONTEXT_KEY, ServerContext
from rho_notebook.service import Service, default_runner

__all__ = ["RhoServerApp"]

LABEXTENSION = "rho-notebook"
"""The JupyterLab extension that talks to these routes (built from labextension/)."""


class RhoServerApp(ExtensionApp):
    """Serves the rho_notebook application service under ``<base_url>/rho/api/``."""

    name = "rho_notebook"
    load_other_extensions = True

    stop_timeout = Float(
        10.0,
        help="Unused: a run started from the server has an owner process of its own and outlives the "
        "server, which no longer cancels anything on shutdown (kept so that existing configurations load).",
    ).tag(config=True)

    context: ServerContext | None = None

    def initialize_settings(self) -> None:
        service = Service.default()
        self.context = ServerContext(service=service, runner=default_runner(), log=self.log)
        self.settings[CONTEXT_KEY] = self.context
        self.log.info("rho_notebook: workflow API at /%s/ over the store %s", API_PREFIX, service.layout.home)
        if not _labextension_installed():
            self.log.warning(
                "rho_notebook: the JupyterLab extension %r is not installed, so the Workflows sidebar is missing; "
                "reinstall rho-notebook (pip install -e . builds it when Node.js is on PATH)",
                LABEXTENSION,
            )

    def initialize_handlers(self) -> None:
        from rho_notebook.server.handlers import routes
        from rho_notebook.service.planning import use_warm_planner

        use_warm_planner()  # the sidebar plans again and again: keep one planning worker warm
        self.handlers.extend(routes(f"/{API_PREFIX}"))

    async def stop_extension(self) -> None:
        """Stop following; the runs this server started go on in their own owner processes."""
        if self.context is None:
            return
        for run_id in self.context.live_runs():
            self.log.info(
                "rho_notebook: run %s goes on in its own owner process; follow it with "
                "`rho-notebook events %s --follow`, cancel it with `rho-notebook cancel %s`",
                run_id,
                run_id,
                run_id,
            )


def _labextension_installed() -> bool:
    try:
        from jupyter_core.paths import jupyter_path
    except ImportError:  # pragma: no cover - jupyter_core comes with jupyter_server
        return True
    return any((Path(base) / LABEXTENSION / "package.json").is_file() for base in jupyter_path("labextensions"))
