"""Edges of the /rho/api/ routes a client can reach with values the routes accept: paging past
the end of a file, IDs and names a client typed."""

from __future__ import annotations

import json
from typing import Any

from tests.server.helpers import QUICK, Store, body, wait_until


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
