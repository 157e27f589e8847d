"""The REST routes under ``/rho/api/`` (see docs/jupyterlab.md for every payload).

=======  ====================================================  ===============================================
GET      plans                                                 saved plans
GET      plans/<plan>                                          one plan, with the layout of its DAG
DELETE   plans/<plan>                                          delete a saved plan (its runs keep their copy)
POST     plans/<plan>/runs  {"graph_digest", "mode"?}          confirm the digest, start a run (owned here)
GET      runs?state=&limit=                                    the run list, oldest first
GET      runs/<run>                                            status (``rho-notebook status --output json``)
DELETE   runs/<run>                                            delete a run that no owner holds (409 if live)
GET      runs/<run>/result                                     ``rho-notebook result --output json``
GET      runs/<run>/view?layout=                               what the DAG view draws: layout, node and run views
GET      runs/<run>/nodes/<node>                               a node's pane: definition, attempts, output tails
GET      runs/<run>/nodes/<node>/artifacts/<name>              one attempt file, bounded (offset, limit, attempt)
GET      runs/<run>/events                                     the journal as Server-Sent Events (``_events.py``)
POST     runs/<run>/cancel                                     durable cancel request, bounded acknowledgement
POST     runs/<run>/resume  {"graph_digest", "recover_uncertain"?}   resume (owned here)
GET      runs/<run>/approvals                                  undecided approval requests
POST     runs/<run>/approvals/<request>  {"decision", "comment"?}   approve or deny
=======  ====================================================  ===============================================

``<plan>``, ``<run>`` and ``<request>`` are IDs or unique prefixes (hex and dashes only);
``<node>`` follows the node-name rule; ``<name>`` must be one of :data:`ARTIFACTS`.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from rho_notebook.errors import NotFound
from rho_notebook.model.state import Lifecycle
from rho_notebook.policy.approvals import read_decision
from rho_notebook.run.events import now_iso
from rho_notebook.run.state import RunState
from rho_notebook.server import API_PREFIX
from rho_notebook.server._base import ApiError, RhoHandler
from rho_notebook.store.files import check_no_symlink
from rho_notebook.store.journal import read_journal
from rho_notebook.store.runs import OwnerLock
from rho_notebook.views import approval_json, plan_json, result_json, status_json
from rho_notebook.dagview import load_detail, node_view, run_times, run_view_of

__all__ = ["ARTIFACTS", "ARTIFACT_LIMIT", "routes"]

ID = r"(?P<{}>[0-9a-fA-F][0-9a-fA-F-]{{0,35}})"
NODE = r"(?P<node>[a-z][a-z0-9_-]{0,62})"

ARTIFACTS: dict[str, tuple[str, ...]] = {
    "stdout": ("stdout",),
    "stderr": ("stderr",),
    "exit.json": ("exit.json",),
    "exit": ("exit.json",),
    "value.json": ("value.json",),
    "value": ("value.json",),
    "answer.md": ("answer.md",),
    "answer.txt": ("answer.txt",),
    "answer": ("answer.md", "answer.txt"),
    "prompt.md": ("prompt.md",),
    "prompt": ("prompt.md",),
    "transcript.json": ("transcript.json",),
    "transcript": ("transcript.json",),
    "usage.json": ("usage.json",),
    "usage": ("usage.json",),
    "system-prompt.txt": ("system-prompt.txt",),
    "system_prompt": ("system-prompt.txt",),
}
"""Artifact names the API serves (file names and the short keys results use) -> candidate files."""

ARTIFACT_LIMIT = 1 << 20
"""At most this many bytes of an artifact per request (page with ``offset``)."""
_ARTIFACT_DEFAULT = 256 * 1024
_CANCEL_WAIT_MAX = 10.0
_MODES = ("auto", "plan", "supervised")


def _confirmed(body: dict[str, Any], digest: str, *, what: str) -> None:
    """The body's ``graph_digest`` must be exactly this digest: the person's confirmation."""
    given = body.get("graph_digest")
    if not isinstance(given, str) or not given.strip():
        msg = f"{what} needs confirmation of graph digest {digest}: send {{\"graph_digest\": \"{digest}\"}}"
        raise ApiError(409, msg, rule="confirmation_required")
    given = given.strip()
    if not given.startswith("sha256:"):
        given = "sha256:" + given
    if given != digest:
        msg = f"{what}: you confirmed digest {given}, but the graph digest is {digest}; nothing was started"
        raise ApiError(409, msg, rule="confirmation_required")


class PlansHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        manifests = await self.offload(self.ctx.service.list_plans)
        self.send_json([plan_json(m) for m in manifests])


class PlanHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self, plan: str) -> None:
        def read() -> dict[str, Any]:
            loaded = self.ctx.service.load_plan(plan)
            return {**plan_json(loaded.manifest), "layout": self.ctx.layout(loaded.graph_digest, loaded.graph)}

        self.send_json(await self.offload(read))

    @web.authenticated
    @authorized
    async def delete(self, plan: str) -> None:
        plan_id = await self.offload(self.ctx.service.plans.delete, plan)
        self.send_json({"plan_id": plan_id, "deleted": True})


class PlanRunsHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def post(self, plan: str) -> None:
        body = self.json_body()
        mode = body.get("mode", "auto")
        if mode not in _MODES:
            raise ApiError(400, f"mode must be one of {', '.join(_MODES)}, not {mode!r}", rule="bad_request")
        service = self.ctx.service
        loaded = await self.offload(service.load_plan, plan)
        _confirmed(body, loaded.graph_digest, what=f"run plan {loaded.plan_id[:13]}")
        run_id = await self.offload(service.create_run, loaded, mode=mode, origin="server")
        await self.offload(self.ctx.start, run_id)
        state = await self.offload(service.status, run_id)
        self.set_header("Location", url_path_join(self.base_url, API_PREFIX, "runs", run_id))
        self.send_json(status_json(state), status=201)


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
        limit = self.int_argument("limit", default=0, low=0)
        self.send_json(await self.offload(self.ctx.run_rows, lifecycle=lifecycle, limit=limit))


class RunHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self, run: str) -> None:
        state: RunState = await self.offload(self.ctx.service.status, run)
        data = status_json(state)
        data.update(last_seq=state.last_seq, updated_at=state.updated_at, cancel_pending=list(state.cancel_pending))
        self.send_json(data)

    @web.authenticated
    @authorized
    async def delete(self, run: str) -> None:
        def remove() -> str:
            service = self.ctx.service
            run_id = service.resolve_run(run)
            if OwnerLock.is_held(service.runs.folder(run_id).lock):
                msg = f"run {run_id} is live (an owner holds it); cancel it first"
                raise ApiError(409, msg, rule="live")
            service.runs.delete(run_id)
            return run_id

        self.send_json({"run_id": await self.offload(remove), "deleted": True})


class ResultHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self, run: str) -> None:
        def read() -> dict[str, Any]:
            service = self.ctx.service
            state = service.status(run)
            return result_json(service.runs.folder(state.run_id), state)

        self.send_json(await self.offload(read))


class ViewHandler(RhoHandler):
    """Everything the DAG view module draws for a run; ``?layout=0`` leaves the layout out."""

    @web.authenticated
    @authorized
    async def get(self, run: str) -> None:
        with_layout = self.get_query_argument("layout", "1") not in ("0", "false", "no")

        def read() -> dict[str, Any]:
            service = self.ctx.service
            run_id = service.resolve_run(run)
            events = read_journal(service.runs.folder(run_id).events).events
            state = service.status(run_id)
            started, ended = run_times(events)
            run_view = dict(run_view_of(state, started_at=started, ended_at=ended, version=state.last_seq))
            view: dict[str, Any] = {
                "title": state.workflow,
                "mode": "run",
                "now": now_iso(),
                "last_seq": state.last_seq,
                "nodes": {name: node_view(record, state.last_seq) for name, record in sorted(state.nodes.items())},
                "run": run_view,
            }
            if with_layout:
                graph = service.runs.graph(run_id, expected_digest=state.graph_digest)
                view["layout"] = self.ctx.layout(state.graph_digest, graph)
            return view

        self.send_json(await self.offload(read))


class NodeHandler(RhoHandler):
    """The output pane of one node: definition, attempts, exit, bounded tails of its streams."""

    @web.authenticated
    @authorized
    async def get(self, run: str, node: str) -> None:
        def read() -> dict[str, Any]:
            service = self.ctx.service
            state = service.status(run)
            record = state.nodes.get(node)
            if record is None:
                raise NotFound(f"run {state.run_id} has no node {node!r}; its nodes: {', '.join(sorted(state.nodes))}")
            graph = service.runs.graph(state.run_id, expected_digest=state.graph_digest)
            folder = service.runs.folder(state.run_id)
            attempt_dir = folder.attempt_dir(node, record.attempt) if record.attempt else None
            if attempt_dir is not None:
                check_no_symlink(attempt_dir, below=service.layout.home)
            return dict(load_detail(node=graph.node(node), record=record, attempt_dir=attempt_dir))

        self.send_json(await self.offload(read))


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
        attempt_arg = self.int_argument("attempt", default=0, low=0)

        def read() -> tuple[str, bytes, int]:
            service = self.ctx.service
            state = service.status(run)
            record = state.nodes.get(node)
            if record is None:
                raise NotFound(f"run {state.run_id} has no node {node!r}")
            attempt = attempt_arg or record.attempt
            if attempt < 1 or attempt > record.attempt:
                raise NotFound(f"node {node!r} of run {state.run_id} has no attempt {attempt} (it has {record.attempt})")
            attempt_dir = service.runs.folder(state.run_id).attempt_dir(node, attempt)
            check_no_symlink(attempt_dir, below=service.layout.home)
            for file in candidates:
                try:
                    fd = os.open(attempt_dir / file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue
                except OSError:
                    raise ApiError(403, f"artifact {file} of {node!r} attempt {attempt} is not a regular file", rule="unsafe_artifact") from None
                try:
                    info = os.fstat(fd)
                    if not stat.S_ISREG(info.st_mode):
                        raise ApiError(403, f"artifact {file} of {node!r} attempt {attempt} is not a regular file", rule="unsafe_artifact")
                    return file, os.pread(fd, limit, offset), info.st_size
                finally:
                    os.close(fd)
            raise NotFound(f"node {node!r} attempt {attempt} of run {state.run_id} has no {name} artifact")

        file, data, size = await self.offload(read)
        self.set_header("X-Rho-Artifact", file)
        self.set_header("X-Rho-Size", str(size))
        self.set_header("X-Rho-Offset", str(offset))
        self.set_header("X-Rho-Next-Offset", str(offset + len(data)))
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")
        kind = "application/json" if file.endswith(".json") else "text/markdown" if file.endswith(".md") else "text/plain"
        self.finish(data, set_content_type=f"{kind}; charset=utf-8")


class CancelHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def post(self, run: str) -> None:
        body = self.json_body()
        wait = body.get("wait_seconds", 2.0)
        if not isinstance(wait, (int, float)) or isinstance(wait, bool) or not 0 <= wait <= _CANCEL_WAIT_MAX:
            raise ApiError(400, f"wait_seconds must be a number from 0 to {_CANCEL_WAIT_MAX:g}", rule="bad_request")
        result = await self.offload(self.ctx.service.cancel, run, wait_seconds=float(wait))
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
        run_id = await self.offload(service.resolve_run, run)
        manifest = await self.offload(service.runs.manifest, run_id)
        _confirmed(body, manifest.graph_digest, what=f"resume run {run_id[:13]}")
        await self.offload(self.ctx.start, run_id, resume=True, recover_uncertain=recover)
        self.send_json(status_json(await self.offload(service.status, run_id)))


class ApprovalsHandler(RhoHandler):
    @web.authenticated
    @authorized
    async def get(self, run: str) -> None:
        def read() -> list[dict[str, Any]]:
            service = self.ctx.service
            state = service.status(run)
            waiting = set(state.waiting_requests().values())
            return [approval_json(r, waiting=r.request_id in waiting) for r in service.pending_approvals(state.run_id)]

        self.send_json(await self.offload(read))


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

        def decide() -> dict[str, Any]:
            service = self.ctx.service
            found = service.approval_request(run, request)
            standing = read_decision(service.runs.folder(found.run_id).requests, found.request_id)
            if standing is not None:
                msg = f"request {found.request_id} was already decided: {standing.decision} by {standing.by} via {standing.via} at {standing.at}"
                raise ApiError(409, msg, rule="already_decided")
            made = service.decide(found, approve=decision == "approve", comment=comment or None, via="server")
            return made.model_dump(mode="json")

        self.send_json(await self.offload(decide))


def routes(prefix: str) -> list[tuple[str, type[RhoHandler]]]:
    """URL patterns (below the base URL) and their handlers."""
    from rho_notebook.server._events import EventsHandler

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
        (rf"{prefix}/runs/{run}/cancel/?", CancelHandler),
        (rf"{prefix}/runs/{run}/resume/?", ResumeHandler),
        (rf"{prefix}/runs/{run}/approvals/?", ApprovalsHandler),
        (rf"{prefix}/runs/{run}/approvals/{ID.format('request')}/?", DecisionHandler),
    ]
