"""The REST routes under ``/rho/api/`` (see docs/jupyterlab.md for every payload).

=======  ====================================================  ===============================================
GET      plans                                                 saved plans
GET      plans/<plan>                                          one plan, with the layout of its DAG
DELETE   plans/<plan>                                          delete a saved plan (its runs keep their copy)
POST     plans/<plan>/runs  {"graph_digest", "mode"?}          confirm the digest, start a run (own process)
GET      runs?state=&limit=                                    the run list, oldest first
GET      runs/<run>                                            status (``rho-notebook status --output json``)
DELETE   runs/<run>                                            delete a run that no owner holds (409 if live)
GET      runs/<run>/result                                     ``rho-notebook result --output json``
GET      runs/<run>/view?layout=                               what the DAG view draws: layout, node and run views
GET      runs/<run>/nodes/<node>                               a node's pane: definition, attempts, output tails
GET      runs/<run>/nodes/<node>/artifacts/<name>              one attempt file, bounded (offset, limit, attempt)
GET      runs/<run>/events                                     the journal as Server-Sent Events (``_events.py``)
GET      runs/<run>/timeline                                   the Timeline tab's rows (``_timeline.py``)
POST     runs/<run>/cancel                                     durable cancel request, bounded acknowledgement
POST     runs/<run>/resume  {"graph_digest", "recover_uncertain"?}   resume (own process)
POST     runs/<run>/fork  {"node", "value"?, "graph_digest"?}   plan a fork (no digest) or start it (``_fork.py``)
GET      runs/<run>/compare/<other>                            plan diff and per-node changes from <run> to <other>
GET      runs/<run>/approvals                                  undecided approval requests
POST     runs/<run>/approvals/<request>  {"decision", "comment"?}   approve or deny
POST     runs/<run>/approvals/<request>/answer  {"values", "comment"?}   answer a human step's form
=======  ====================================================  ===============================================

``<plan>``, ``<run>`` and ``<request>`` are IDs or unique prefixes (hex and dashes only);
``<node>`` follows the node-name rule; ``<name>`` must be one of :data:`ARTIFACTS`.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from rho_notebook.errors import NotFound, RunRefused
from rho_notebook.model.state import Lifecycle
from rho_notebook.server import API_PREFIX
from rho_notebook.server._base import ApiError, RhoHandler
from rho_notebook.service import ApprovalRequest, Consent, ResumeRun, RunsQuery, Service, StartRun
from rho_notebook.service.core_names import SERVED_ARTIFACTS
from rho_notebook.service.wire import approval_json, plan_json, status_json
from rho_notebook.views.dag import read_node_detail, read_run_view
from rho_notebook.views.layout import layout_graph

__all__ = ["ARTIFACTS", "ARTIFACT_LIMIT", "routes"]

ID = r"(?P<{}>[0-9a-fA-F][0-9a-fA-F-]{{0,35}})"
NODE = r"(?P<node>[^/]{1,400})"
"""A node name, percent-encoded in the path (a flow step key holds `/` and `#`); the service refuses a
name the run does not have before any file is read."""

ARTIFACTS = SERVED_ARTIFACTS
"""Artifact names the API serves (file names and the short keys results use) -> candidate files
(the store owns the names: :data:`rho_notebook.store.layout.SERVED_ARTIFACTS`)."""

ARTIFACT_LIMIT = 1 << 20
"""At most this many bytes of an artifact per request (page with ``offset``)."""
_ARTIFACT_DEFAULT = 256 * 1024
_CANCEL_WAIT_MAX = 10.0
_MODES = ("auto", "plan", "supervised")
_CONSENT_HINT = 'send {{"graph_digest": "{digest}"}}'
"""How this front end asks for consent, named in a 409 ``confirmation_required``."""


def _consent(body: dict[str, Any]) -> Consent:
    """The body's ``graph_digest``: the person's confirmation of exactly that digest."""
    given = body.get("graph_digest")
    return Consent(digest=given if isinstance(given, str) else None, hint=_CONSENT_HINT)


class PlansHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        manifests = await self.ctx.service.plans()
        self.send_json([plan_json(m) for m in manifests])


class PlanHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self, plan: str) -> None:
        loaded = await self.ctx.service.load_plan(plan)
        layout = await asyncio.to_thread(layout_graph, loaded.graph, digest=loaded.graph_digest)
        self.send_json({**plan_json(loaded.manifest), "layout": layout.to_wire()})

    @web.authenticated
    @authorized
    async def delete(self, plan: str) -> None:
        deleted = await self.ctx.service.delete_plan(plan)
        self.send_json({"plan_id": deleted["id"], "deleted": True})


class PlanRunsHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def post(self, plan: str) -> None:
        body = self.json_body()
        mode = body.get("mode", "auto")
        if mode not in _MODES:
            raise ApiError(400, f"mode must be one of {', '.join(_MODES)}, not {mode!r}", rule="bad_request")
        service = self.ctx.service
        loaded = await service.load_plan(plan)
        request = StartRun(plan=loaded.plan_id, consent=_consent(body), mode=mode, origin="server")
        run_id = await service.create_run_of(loaded, request)
        await self.offload(self.ctx.start, run_id)
        state = await service.status(run_id)
        self.set_header("Location", url_path_join(self.base_url, API_PREFIX, "runs", run_id))
        self.send_json(status_json(state, layout=service.layout), status=201)


class RunsHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        wanted = self.get_query_argument("state", None) or None
        lifecycle = None
        if wanted is not None:
            try:
                lifecycle = Lifecycle(wanted)
            except ValueError:
                names = ", ".join(lc.value for lc in Lifecycle)
                raise ApiError(400, f"unknown lifecycle {wanted!r}; one of {names}", rule="bad_request") from None
        query = RunsQuery(state=lifecycle, limit=self.int_argument("limit", default=0, low=0))
        self.send_json(await self.ctx.service.run_rows(query, cache=self.ctx.rows))


class RunHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self, run: str) -> None:
        state = await self.ctx.service.status(run)
        data: dict[str, Any] = dict(status_json(state, layout=self.ctx.service.layout))
        data.update(last_seq=state.last_seq, updated_at=state.updated_at, cancel_pending=list(state.cancel_pending))
        self.send_json(data)

    @web.authenticated
    @authorized
    async def delete(self, run: str) -> None:
        try:
            deleted = await self.ctx.service.delete(run, include_plans=False)
        except RunRefused as err:  # an owner holds it
            raise ApiError(409, err.message, rule="live") from None
        self.send_json({"run_id": deleted["id"], "deleted": True})


class ResultHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self, run: str) -> None:
        self.send_json(await self.ctx.service.result(run))


class ViewHandler(RhoHandler):
    """Everything the DAG view module draws for a run; ``?layout=0`` leaves the layout out (not
    for a script run, whose layout grows while it runs)."""

    @web.authenticated
    @authorized
    async def get(self, run: str) -> None:
        with_layout = self.get_query_argument("layout", "1") not in ("0", "false", "no")
        view = await read_run_view(self.ctx.service, run)
        # a script run's layout grows as its steps launch: it always travels
        self.send_json(view.to_wire(with_layout=with_layout or view.script))


class NodeHandler(RhoHandler):
    """The output pane of one node: definition, attempts, exit, bounded tails of its streams."""

    @web.authenticated
    @authorized
    async def get(self, run: str, node: str) -> None:
        self.send_json(await read_node_detail(self.ctx.service, run, node))


class ArtifactHandler(RhoHandler):
    """One file of a node attempt, read without following symlinks, at most ARTIFACT_LIMIT bytes.

    Query: ``attempt`` (default: the latest), ``offset`` (default 0) and ``limit`` (default 256
    KiB). Headers: ``X-Rho-Size`` (file size), ``X-Rho-Offset``, ``X-Rho-Next-Offset``.
    """

    @web.authenticated
    @authorized
    async def get(self, run: str, node: str, name: str) -> None:
        candidates = ARTIFACTS.get(name)
        if candidates is None:
            known = ", ".join(sorted(ARTIFACTS))
            raise ApiError(404, f"unknown artifact {name!r}; one of {known}", rule="unknown_artifact")
        offset = self.int_argument("offset", default=0, low=0)
        limit = self.int_argument("limit", default=_ARTIFACT_DEFAULT, low=1, high=ARTIFACT_LIMIT)
        attempt = await self.ctx.service.node_attempt(run, node, attempt=self.int_argument("attempt", default=0, low=0))
        if attempt.folder is None:
            raise NotFound(f"node {node!r} of run {attempt.run_id} has not started: it has no attempt yet")
        what = f"of {node!r} attempt {attempt.attempt}"
        found = await self.offload(_read_artifact, attempt.folder, candidates, offset=offset, limit=limit, what=what)
        if found is None:
            raise NotFound(f"node {node!r} attempt {attempt.attempt} of run {attempt.run_id} has no {name} artifact")
        file, data, size = found
        self.set_header("X-Rho-Artifact", file)
        self.set_header("X-Rho-Size", str(size))
        self.set_header("X-Rho-Offset", str(offset))
        self.set_header("X-Rho-Next-Offset", str(offset + len(data)))
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")
        kind = (
            "application/json" if file.endswith(".json") else "text/markdown" if file.endswith(".md") else "text/plain"
        )
        self.finish(data, set_content_type=f"{kind}; charset=utf-8")


def _read_artifact(
    folder: Path, candidates: tuple[str, ...], *, offset: int, limit: int, what: str
) -> tuple[str, bytes, int] | None:
    """(file, at most ``limit`` bytes from ``offset``, file size) of the first candidate present
    in the attempt folder, never through a symlink; None when none is."""
    for file in candidates:
        try:
            fd = os.open(folder / file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError:
            raise ApiError(403, f"artifact {file} {what} is not a regular file", rule="unsafe_artifact") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ApiError(403, f"artifact {file} {what} is not a regular file", rule="unsafe_artifact")
            # past the end there is nothing to read (and pread refuses an offset near 2**63)
            return file, os.pread(fd, limit, offset) if offset < info.st_size else b"", info.st_size
        finally:
            os.close(fd)
    return None


class CancelHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def post(self, run: str) -> None:
        body = self.json_body()
        wait = body.get("wait_seconds", 2.0)
        if not isinstance(wait, (int, float)) or isinstance(wait, bool) or not 0 <= wait <= _CANCEL_WAIT_MAX:
            raise ApiError(400, f"wait_seconds must be a number from 0 to {_CANCEL_WAIT_MAX:g}", rule="bad_request")
        result = await self.ctx.service.cancel(run, wait_seconds=float(wait))
        self.send_json(result.to_json())


class ResumeHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def post(self, run: str) -> None:
        body = self.json_body()
        recover = body.get("recover_uncertain", False)
        if not isinstance(recover, bool):
            raise ApiError(400, "recover_uncertain must be true or false", rule="bad_request")
        service = self.ctx.service
        run_id = await service.check_resume(ResumeRun(run=run, consent=_consent(body), recover_uncertain=recover))
        await self.offload(self.ctx.start, run_id, resume=True, recover_uncertain=recover)
        self.send_json(status_json(await service.status(run_id), layout=service.layout))


class CompareHandler(RhoHandler):
    """Two runs side by side (``_compare.py``): the plan diff as ``diff`` shows it, and per node
    the state shown, exit code and value of each run."""

    @web.authenticated
    @authorized
    async def get(self, run: str, other: str) -> None:
        from rho_notebook.server._compare import compare_runs

        self.send_json(await compare_runs(self.ctx.service, run, other))


class ApprovalsHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self, run: str) -> None:
        service = self.ctx.service
        state = await service.status(run)
        waiting = set(state.waiting_requests().values())
        pending = await service.pending_approvals(state.run_id)
        self.send_json([approval_json(r, waiting=r.request_id in waiting) for r in pending])


async def _refuse_decided(service: Service, request: ApprovalRequest) -> None:
    """409 ``already_decided`` naming who decided, when a decision stands on ``request``."""
    standing = await service.decision(request)
    if standing is not None:
        msg = (
            f"request {request.request_id} was already decided: {standing.decision} by {standing.by} "
            f"via {standing.via} at {standing.at}"
        )
        raise ApiError(409, msg, rule="already_decided")


class DecisionHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def post(self, run: str, request: str) -> None:
        body = self.json_body()
        decision = body.get("decision")
        if decision not in ("approve", "deny"):
            raise ApiError(400, 'decision must be "approve" or "deny"', rule="bad_request")
        comment = body.get("comment")
        if comment is not None and not isinstance(comment, str):
            raise ApiError(400, "comment must be a string", rule="bad_request")
        service = self.ctx.service
        found = await service.approval_request(run, request)
        await _refuse_decided(service, found)
        made = await service.decide(found, approve=decision == "approve", comment=comment or None, via="server")
        self.send_json(made.model_dump(mode="json"))


class AnswerHandler(RhoHandler):
    """Answer the form of an item graph's human step (a request of kind ``form``) with values;
    they are checked against the form's fields (400 naming the field when one is wrong). Declining
    the form is a ``deny`` on :class:`DecisionHandler`; ``approve`` there is refused for a form."""

    @web.authenticated
    @authorized
    async def post(self, run: str, request: str) -> None:
        body = self.json_body()
        values = body.get("values")
        if not isinstance(values, dict):
            raise ApiError(
                400, 'values must be a JSON object of the form\'s fields: {"values": {...}}', rule="bad_request"
            )
        comment = body.get("comment")
        if comment is not None and not isinstance(comment, str):
            raise ApiError(400, "comment must be a string", rule="bad_request")
        service = self.ctx.service
        found = await service.approval_request(run, request)
        if found.kind != "form":
            msg = f"request {found.request_id} ({found.kind} {found.node}) has no form to answer; approve or deny it"
            raise ApiError(400, msg, rule="not_a_form")
        await _refuse_decided(service, found)
        made = await service.answer(found, values, comment=comment or None, via="server")
        self.send_json(made.model_dump(mode="json"))


def routes(prefix: str) -> list[tuple[str, type[RhoHandler]]]:
    """URL patterns (below the base URL) and their handlers."""
    from rho_notebook.server._events import EventsHandler
    from rho_notebook.server._fork import ForkHandler
    from rho_notebook.server._timeline import TimelineHandler

    run = ID.format("run")
    return [
        (rf"{prefix}/plans/?", PlansHandler),
        (rf"{prefix}/plans/{ID.format('plan')}/?", PlanHandler),
        (rf"{prefix}/plans/{ID.format('plan')}/runs/?", PlanRunsHandler),
        (rf"{prefix}/runs/?", RunsHandler),
        (rf"{prefix}/runs/{run}/?", RunHandler),
        (rf"{prefix}/runs/{run}/result/?", ResultHandler),
        (rf"{prefix}/runs/{run}/view/?", ViewHandler),
        (rf"{prefix}/runs/{run}/nodes/{NODE}/?", NodeHandler),
        (rf"{prefix}/runs/{run}/nodes/{NODE}/artifacts/(?P<name>[A-Za-z0-9_.-]{{1,40}})", ArtifactHandler),
        (rf"{prefix}/runs/{run}/events/?", EventsHandler),
        (rf"{prefix}/runs/{run}/timeline/?", TimelineHandler),
        (rf"{prefix}/runs/{run}/cancel/?", CancelHandler),
        (rf"{prefix}/runs/{run}/resume/?", ResumeHandler),
        (rf"{prefix}/runs/{run}/fork/?", ForkHandler),
        (rf"{prefix}/runs/{run}/compare/{ID.format('other')}/?", CompareHandler),
        (rf"{prefix}/runs/{run}/approvals/?", ApprovalsHandler),
        (rf"{prefix}/runs/{run}/approvals/{ID.format('request')}/?", DecisionHandler),
        (rf"{prefix}/runs/{run}/approvals/{ID.format('request')}/answer/?", AnswerHandler),
    ]
