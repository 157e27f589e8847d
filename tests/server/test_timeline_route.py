"""``GET runs/<run>/timeline``: the Timeline tab's rows for a real run, and a 404 naming a missing run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from tests.conftest import star
from tests.server.helpers import Store, body, wait_until

C = "timeout_seconds = 60, max_output_bytes = 10000"

SOURCE = star(f"""
return workflow(name = "tl", nodes = [
    command(name = "first", argv = ["sleep", "0.1"], {C}),
    command(name = "second", argv = ["true"], needs = ["first"], {C}),
    command(name = "never", argv = ["true"], needs = ["first"], when = condition.equals(exit_code("first"), 9), {C}),
])
""")


async def test_timeline_route_answers_the_fold(jp_fetch: Any, store: Store) -> None:
    plan = store.plan("tl", SOURCE)
    response = await jp_fetch(
        "rho", "api", "plans", plan.plan_id, "runs", method="POST", body=json.dumps({"graph_digest": plan.graph_digest})
    )
    run_id = str(body(response)["run_id"])

    async def done() -> bool:
        return bool(body(await jp_fetch("rho", "api", "runs", run_id))["lifecycle"] == "completed")

    await wait_until(done, timeout=60)
    answer = body(await jp_fetch("rho", "api", "runs", run_id[:13], "timeline"))
    assert answer["run_id"] == run_id and not answer["running"]
    rows = {row["name"]: row for row in answer["rows"]}
    assert [bar["state"] for bar in rows["first"]["bars"]] == ["success"]
    assert rows["never"]["state"] == "skipped" and rows["never"]["bars"] == []
    assert answer["critical_path"] == ["first", "second"]


async def test_timeline_of_a_missing_run_is_404(jp_fetch: Any, store: Store) -> None:
    with pytest.raises(HTTPClientError) as caught:
        await jp_fetch("rho", "api", "runs", "0123abcd", "timeline")
    assert caught.value.code == 404
    assert "0123abcd" in json.loads(caught.value.response.body)["message"]
