"""Edges of the /rho/api/ routes a client can reach with values the routes accept: paging past
the end of a file, IDs and names a client typed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from rho_notebook.store.run_locks import OwnerLock
from tests.server.helpers import LONG, QUICK, Store, body, wait_until


async def _finished_run(jp_fetch: Any, store: Store) -> str:
    quick = store.plan("quick", QUICK)
    started = await jp_fetch(
        "rho",
        "api",
        "plans",
        quick.plan_id,
        "runs",
        method="POST",
        body=json.dumps({"graph_digest": quick.graph_digest}),
    )
    run_id = str(body(started)["run_id"])

    async def done() -> bool:
        return bool(body(await jp_fetch("rho", "api", "runs", run_id))["lifecycle"] == "completed")

    await wait_until(done)
    return run_id


async def test_an_artifact_offset_past_its_end_answers_nothing_however_large(jp_fetch: Any, store: Store) -> None:
    run_id = await _finished_run(jp_fetch, store)
    for offset in ("3", "4", str(2**63 - 1), str(2**63), "9" * 30):
        page = await jp_fetch(
            "rho", "api", "runs", run_id, "nodes", "hello", "artifacts", "stdout", params={"offset": offset}
        )
        assert page.code == 200 and page.body == b"", offset
        assert page.headers["X-Rho-Size"] == "3" and page.headers["X-Rho-Next-Offset"] == offset


async def test_resuming_a_live_run_is_refused_and_a_run_whose_owner_is_letting_go_is_resumed(
    jp_fetch: Any, store: Store
) -> None:
    long = store.plan("long", LONG)
    digest = json.dumps({"graph_digest": long.graph_digest})
    started = await jp_fetch("rho", "api", "plans", long.plan_id, "runs", method="POST", body=digest)
    run_id = str(body(started)["run_id"])

    async def running() -> bool:
        return bool(body(await jp_fetch("rho", "api", "runs", run_id))["lifecycle"] == "running")

    await wait_until(running)
    with pytest.raises(HTTPClientError) as caught:
        await jp_fetch("rho", "api", "runs", run_id, "resume", method="POST", body=digest)
    refusal = json.loads(caught.value.response.body.decode()) if caught.value.response else {}
    assert (caught.value.code, refusal["rule"]) == (409, "refused")
    assert (
        refusal["message"] == f"run {run_id} is owned by another live process and goes on by itself; nothing to resume"
    )

    await jp_fetch("rho", "api", "runs", run_id, "cancel", method="POST", body=json.dumps({"wait_seconds": 5}))

    async def free() -> bool:
        done = body(await jp_fetch("rho", "api", "runs", run_id))["lifecycle"] == "completed"
        return bool(done and not store.project.service.is_owned(run_id))

    await wait_until(free)
    lock = OwnerLock(store.project.service.run_store.folder(run_id).lock)
    assert lock.try_acquire()  # an owner that journaled the run's end, a moment before it lets go
    asyncio.get_running_loop().call_later(0.5, lock.release)
    resumed = body(await jp_fetch("rho", "api", "runs", run_id, "resume", method="POST", body=digest))
    assert resumed["lifecycle"] == "running"
