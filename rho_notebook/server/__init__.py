"""The jupyter-server extension: the application service over REST under ``/rho/api/``.

Enabled on install by ``etc/jupyter/jupyter_server_config.d/rho_notebook.json`` (from
``jupyter-config/`` in the source tree); ``jupyter server extension list`` shows it as
``rho_notebook.server``. Every route needs an authenticated user (jupyter-server's token or login
cookie) and every POST and DELETE made with a cookie needs the ``_xsrf`` token, exactly as for
jupyter-server's own API. Routes, payloads and the event stream are described in
docs/jupyterlab.md; the JupyterLab sidebar (``labextension/``) is the front end that uses them.

Nothing is imported from jupyter_server until the server loads the extension.
"""

from __future__ import annotations

from typing import Any

__all__ = ["API_PREFIX"]

API_PREFIX = "rho/api"
"""Where the routes live, below the server's base URL."""


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """The extension point jupyter-server loads: one :class:`~rho_notebook.server.app.RhoServerApp`."""
    from rho_notebook.server.app import RhoServerApp

    return [{"module": "rho_notebook.server", "app": RhoServerApp}]
