"""The extension application: settings, routes, and a clean stop of the runs this server owns."""

from __future__ import annotations

import asyncio
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
        help="On shutdown, how long to wait for the runs this server owns to acknowledge cancellation.",
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

        self.handlers.extend(routes(f"/{API_PREFIX}"))

    async def stop_extension(self) -> None:
        if self.context is None:
            return
        stopped = await asyncio.to_thread(self.context.stop_owned_runs, timeout=self.stop_timeout)
        if stopped:
            self.log.info(
                "rho_notebook: cancelled %d run(s) owned by this server; resume them with `rho-notebook resume`",
                len(stopped),
            )


def _labextension_installed() -> bool:
    try:
        from jupyter_core.paths import jupyter_path
    except ImportError:  # pragma: no cover - jupyter_core comes with jupyter_server
        return True
    return any((Path(base) / LABEXTENSION / "package.json").is_file() for base in jupyter_path("labextensions"))
