"""``GET /rho/api/runs/<run>/timeline``: where a run's time went, for the sidebar's Timeline tab.

The answer is :func:`rho_notebook.views.timeline.read_timeline`'s fold of the run's journal (rows,
attempt bars, queued time, waits for a person, the critical path; docs/usage.md, "Timeline"). It is
its own route rather than a field of ``/view``: the fold reads the whole journal, and only an open
Timeline tab needs it (it asks again as the run's event stream moves).
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from rho_notebook.server._base import RhoHandler
from rho_notebook.views.timeline import read_timeline

__all__ = ["TimelineHandler"]


class TimelineHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self, run: str) -> None:
        self.send_json(dict(await read_timeline(self.ctx.service, run)))
