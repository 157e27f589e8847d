"""``POST /rho/api/runs/<run>/fork``: "Fork from here" of the sidebar's node pane (issue 35, docs/fork.md).

Body: ``{"node": NODE, "value"?: JSON}`` plans, ``{"node": NODE, "plan_id", "graph_digest"}``
starts. With ``value`` (any JSON, ``null`` too: the key's presence counts) NODE takes that value,
checked against its output schema before anything starts (a mismatch is answered 400 naming the
field); without it NODE runs again.

The fork is a derived plan, stored like any plan (:meth:`Service.fork`), and consent is for its
digest exactly as for ``POST plans/<plan>/runs``: a body without ``graph_digest`` only plans the
fork and is answered 200 with ``{"plan_id", "graph_digest", "forked_from", "taken", "anew",
"summary"}`` (nothing starts; the sidebar shows the digest to confirm). A body with that plan's ID
and digest starts exactly that planned fork (planning again would give a new digest: the edit
record carries its time) in an owner process of its own, answered 201 with its status (as ``POST
plans/<plan>/runs``) plus ``forked_from``. A digest that is not the plan's is refused 409
``confirmation_required``.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from rho_notebook.errors import ForkRefused
from rho_notebook.server import API_PREFIX
from rho_notebook.server._base import ApiError, RhoHandler
from rho_notebook.service import Consent, Service, StartRun
from rho_notebook.service.fork import ForkPlan, create_fork_run
from rho_notebook.service.wire import status_json

__all__ = ["ForkHandler", "plan_fork"]

_CONSENT_HINT = 'send {{"node": ..., "plan_id": ..., "graph_digest": "{digest}"}}'
"""How this front end asks for consent, named in a 409 ``confirmation_required``."""


async def plan_fork(service: Service, run: str, node: str, body: dict[str, Any]) -> ForkPlan:
    """The stored derived plan of the fork of ``run`` at ``node`` (:meth:`Service.fork`): the
    node takes ``body["value"]`` when the key is there, else it runs again.

    Raises
    ------
    ApiError
        400 ``fork`` with the ``field`` when the edited value does not fit the node's output
        schema; 409 ``fork`` for the other refusals (the run is not completed, a node to be taken
        did not succeed), naming the node. Other service errors pass (their own status).
    """
    try:
        edited = "value" in body
        return await service.fork(run, at=node, value=body.get("value"), edited=edited, via="server")
    except ForkRefused as err:
        raise ApiError(400 if err.fields else 409, err.message, rule=err.rule) from None


def _fork_json(planned: ForkPlan, node: str) -> dict[str, Any]:
    plan = planned.plan
    return {
        "plan_id": plan.plan_id,
        "graph_digest": plan.graph_digest,
        "forked_from": {"run": planned.source_run, "node": node},
        "taken": list(planned.taken),
        "anew": list(planned.anew),
        "summary": planned.summary(),
    }


async def planned_fork(service: Service, run: str, node: str, plan_id: str) -> ForkPlan:
    """The fork planned by an earlier call (``plan_id``), checked to be a fork of ``run`` at
    ``node``: what the person confirmed is that stored plan (planning again would make a new
    digest, the edit record carrying its time)."""
    plan = await service.load_plan(plan_id)
    fork = plan.graph.fork
    source = (await service.status(run)).run_id
    if fork is None or fork.source_run != source or fork.node != node:
        msg = (
            f"plan {plan.plan_id} is not a fork of run {source} at {node!r}: send the plan_id the planning answer gave"
        )
        raise ApiError(400, msg, rule="bad_request")
    taken = tuple(sorted(t.node for t in fork.taken))
    return ForkPlan(plan=plan, source_run=source, node=node, taken=taken, edited=fork.edit is not None, anew=())


class ForkHandler(RhoHandler):
    """Plan a fork of a completed run at a node, or start the planned one once its digest is confirmed."""

    @web.authenticated
    @authorized
    async def post(self, run: str) -> None:
        body = self.json_body()
        node = body.get("node")
        if not isinstance(node, str) or not node:
            raise ApiError(400, 'node must name a node of the run: {"node": "NODE", "value"?: ...}', rule="bad_request")
        given, plan_id = body.get("graph_digest"), body.get("plan_id")
        if given is None:
            planned = await plan_fork(self.ctx.service, run, node, body)
            self.send_json(_fork_json(planned, node))
            return
        if not isinstance(given, str) or not isinstance(plan_id, str):
            msg = 'to start a planned fork send {"node", "plan_id", "graph_digest"} as the planning answer gave them'
            raise ApiError(400, msg, rule="bad_request")
        await self._start(await planned_fork(self.ctx.service, run, node, plan_id), given)

    async def _start(self, planned: ForkPlan, digest: str) -> None:
        """Create the fork's run with consent for ``digest`` (as for any run) and start it."""
        service = self.ctx.service
        consent = Consent(digest=digest, hint=_CONSENT_HINT)
        request = StartRun(plan=planned.plan.plan_id, consent=consent, mode="auto", origin="server", via="server")
        run_id = await create_fork_run(service.layout, planned, request)
        await self.offload(self.ctx.start, run_id)
        state = await service.status(run_id)
        self.set_header("Location", url_path_join(self.base_url, API_PREFIX, "runs", run_id))
        lineage = {"run": planned.source_run, "node": planned.node}
        self.send_json({**status_json(state, layout=service.layout), "forked_from": lineage}, status=201)
