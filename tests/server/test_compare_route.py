"""``GET runs/<run>/compare/<other>``: the plan diff ``diff`` shows and per-node changes, over real runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from tests.conftest import star
from tests.server.helpers import Store, body, wait_until

C = "timeout_seconds = 60, max_output_bytes = 10000"


def _source(greeting: str, extra: bool) -> str:
    more = f'command(name = "extra", argv = ["true"], needs = ["greet"], {C}),' if extra else ""
    return star(f"""
return workflow(name = "cmp", nodes = [
    command(name = "first", argv = ["echo", "same"], {C}),
    command(name = "greet", argv = ["echo", "{greeting}"], needs = ["first"], {C}),
    {more}
])
""")


async def _run(jp_fetch: Any, plan: Any) -> str:
    response = await jp_fetch(
        "rho", "api", "plans", plan.plan_id, "runs", method="POST", body=json.dumps({"graph_digest": plan.graph_digest})
    )
    run_id = str(body(response)["run_id"])

    async def done() -> bool:
        data = body(await jp_fetch("rho", "api", "runs", run_id))
        return bool(data["lifecycle"] == "completed")

    await wait_until(done, timeout=60)
    return run_id


async def test_compare_shows_the_plan_diff_and_changed_nodes(jp_fetch: Any, store: Store) -> None:
    old_plan = store.plan("cmp-old", _source("hello", extra=False))
    new_plan = store.plan("cmp-new", _source("bonjour", extra=True))
    old = await _run(jp_fetch, old_plan)
    new = await _run(jp_fetch, new_plan)

    answer = body(await jp_fetch("rho", "api", "runs", old[:13], "compare", new))
    assert answer["old_run"] == old and answer["new_run"] == new
    plan = answer["plan"]
    assert plan["old"] == {"kind": "run", "id": old, "graph_digest": old_plan.graph_digest, "workflow": "cmp"}
    assert plan["added"] == ["extra"] and plan["removed"] == []
    assert [c["node"] for c in plan["changed"]] == ["greet"] and "argv" in plan["changed"][0]["fields"]
    assert (
        answer["text"][0].startswith("diff run ")
        and "~ greet: " + ", ".join(plan["changed"][0]["fields"]) in answer["text"]
    )

    nodes = {n["node"]: n for n in answer["nodes"]}
    assert sorted(nodes) == ["extra", "first", "greet"]
    assert nodes["first"]["changed"] == [] and nodes["first"]["old"]["preview"] == "same\n"
    assert nodes["greet"]["changed"] == ["value"]
    assert nodes["greet"]["old"]["preview"] == "hello\n" and nodes["greet"]["new"]["preview"] == "bonjour\n"
    assert nodes["greet"]["old"]["state"] == nodes["greet"]["new"]["state"] == "success"
    assert nodes["extra"]["old"] is None and nodes["extra"]["changed"] == ["presence"]
    assert answer["changed_nodes"] == 2

    # the same run on both sides: nothing changed
    same = body(await jp_fetch("rho", "api", "runs", new, "compare", new))
    assert same["plan"]["same"] and same["changed_nodes"] == 0


@pytest.mark.parametrize("other", ["0123456789ab", "abc"])
async def test_compare_refuses_unknown_runs(jp_fetch: Any, store: Store, other: str) -> None:
    with pytest.raises(HTTPClientError) as caught:
        await jp_fetch("rho", "api", "runs", "0123456789ab", "compare", other)
    assert caught.value.code == 404
    error = json.loads(caught.value.response.body.decode())  # type: ignore[union-attr]
    assert error["rule"] == "not_found"


async def test_compare_refuses_a_malformed_id(jp_fetch: Any, store: Store) -> None:
    with pytest.raises(HTTPClientError) as caught:
        await jp_fetch("rho", "api", "runs", "0123456789ab", "compare", "not-hex!")
    assert caught.value.code == 404
