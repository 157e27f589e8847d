"""POST /rho/api/runs/<run>/fork through a real jupyter-server (issue 35, "fork from here").

A completed chain a -> b -> c -> d (and ``side``, not downstream of c) is forked at c: a body
without ``graph_digest`` only plans the fork and answers the derived plan's digest (no run is
created); a value that does not match c's output schema is refused 400 naming the field, before
anything starts; a wrong digest is refused 409; the confirmed digest starts the fork, whose d
gets the edited value while a, b, c and side are not launched; ``runs`` rows carry the lineage.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from tests.fork_chain import fork_chain, launched
from tests.server.helpers import Store, body, wait_until


async def _finished(jp_fetch: Any, run_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        data: dict[str, Any] = body(await jp_fetch("rho", "api", "runs", run_id))
        return data if data["lifecycle"] == "completed" else None

    found: dict[str, Any] = await wait_until(done, timeout=60)
    return found


async def _completed_chain(jp_fetch: Any, store: Store) -> str:
    plan = store.plan("chain", fork_chain())
    response = await jp_fetch(
        "rho", "api", "plans", plan.plan_id, "runs", method="POST", body=json.dumps({"graph_digest": plan.graph_digest})
    )
    run_id = str(body(response)["run_id"])
    assert (await _finished(jp_fetch, run_id))["outcome"] == "success"
    return run_id


async def _fork(jp_fetch: Any, run_id: str, payload: dict[str, Any]) -> Any:
    return await jp_fetch("rho", "api", "runs", run_id, "fork", method="POST", body=json.dumps(payload))


async def _error(jp_fetch: Any, run_id: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(HTTPClientError) as caught:
        await _fork(jp_fetch, run_id, payload)
    response = caught.value.response
    assert response is not None
    return caught.value.code, json.loads(response.body.decode())


async def _run_ids(jp_fetch: Any) -> set[str]:
    return {row["run_id"] for row in body(await jp_fetch("rho", "api", "runs"))}


async def test_fork_is_planned_then_started_with_the_confirmed_digest(jp_fetch: Any, store: Store) -> None:
    run_id = await _completed_chain(jp_fetch, store)
    before = await _run_ids(jp_fetch)
    edited = {"node": "c", "value": {"word": "seven", "count": 7}}

    # refusals before anything starts: no node, a value that misses the schema (naming the field)
    code, error = await _error(jp_fetch, run_id, {"value": 1})
    assert code == 400 and error["rule"] == "bad_request" and "node" in error["message"]
    code, error = await _error(jp_fetch, run_id, {"node": "c", "value": {"word": "seven", "count": "seven"}})
    assert code == 400 and error["rule"] == "fork" and "count" in error["message"], error
    assert await _run_ids(jp_fetch) == before

    # planned only: the derived plan's digest, no run
    planned = body(await _fork(jp_fetch, run_id, edited))
    assert planned["graph_digest"].startswith("sha256:") and planned["forked_from"] == {"run": run_id, "node": "c"}
    assert planned["taken"] == ["a", "b", "side"] and planned["anew"] == ["d"]
    assert planned["summary"].startswith(f"Fork run {run_id} at c (c takes the edited value, what follows runs anew)")
    assert "run_id" not in planned
    assert await _run_ids(jp_fetch) == before

    # a digest that is not the derived plan's: 409, nothing created
    confirm = {"node": "c", "plan_id": planned["plan_id"]}
    code, error = await _error(jp_fetch, run_id, {**confirm, "graph_digest": "sha256:" + "0" * 64})
    assert code == 409 and error["rule"] == "confirmation_required", error
    # a digest without the planned plan's ID, or the plan of another node: 400
    code, error = await _error(jp_fetch, run_id, {"node": "c", "graph_digest": planned["graph_digest"]})
    assert code == 400 and "plan_id" in error["message"]
    code, error = await _error(jp_fetch, run_id, {**confirm, "node": "d", "graph_digest": planned["graph_digest"]})
    assert code == 400 and "not a fork of run" in error["message"]
    assert await _run_ids(jp_fetch) == before

    # confirmed: the fork starts; d gets the edited value, nothing else is launched
    response = await _fork(jp_fetch, run_id, {**confirm, "graph_digest": planned["graph_digest"]})
    assert response.code == 201
    started = body(response)
    fork_id = started["run_id"]
    assert started["forked_from"] == {"run": run_id, "node": "c"} and fork_id not in before
    assert (await _finished(jp_fetch, fork_id))["outcome"] == "success"
    assert launched(store.project.home, fork_id) == ["d"]
    detail = body(await jp_fetch("rho", "api", "runs", fork_id, "nodes", "d"))
    assert "d got seven" in detail["stdout"]["text"]
    # c's pane in the fork: the edited value, said to be a person's edit (nothing launched)
    pane_c = body(await jp_fetch("rho", "api", "runs", fork_id, "nodes", "c"))
    assert pane_c["value"] == {"word": "seven", "count": 7} and "edited" in pane_c["reason"], pane_c
    # a's pane in the fork: taken, so its output is the source attempt's (the fork copied only its value)
    pane_a = body(await jp_fetch("rho", "api", "runs", fork_id, "nodes", "a"))
    assert pane_a["stdout"]["text"] == "a ran\n", pane_a
    rows = {row["run_id"]: row for row in body(await jp_fetch("rho", "api", "runs"))}
    assert rows[fork_id]["lineage"] == [{"run": run_id, "node": "c"}]
    assert not rows[run_id].get("lineage")


async def test_rerun_from_here_launches_the_node_and_what_follows(jp_fetch: Any, store: Store) -> None:
    run_id = await _completed_chain(jp_fetch, store)
    planned = body(await _fork(jp_fetch, run_id, {"node": "c"}))
    assert planned["anew"] == ["c", "d"] and planned["taken"] == ["a", "b", "side"]
    confirm = {"node": "c", "plan_id": planned["plan_id"], "graph_digest": planned["graph_digest"]}
    response = await _fork(jp_fetch, run_id, confirm)
    fork_id = body(response)["run_id"]
    assert (await _finished(jp_fetch, fork_id))["outcome"] == "success"
    assert sorted(launched(store.project.home, fork_id)) == ["c", "d"]


async def test_a_value_that_is_not_json_is_400_before_anything_is_planned(jp_fetch: Any, store: Store) -> None:
    """``"value": NaN`` (Python's json writes and reads it) was planned as a fork and refused 409,
    as if the run could not be forked there: it is the request's mistake, 400 ``bad_request``."""
    run_id = await _completed_chain(jp_fetch, store)
    plans = store.project.stored_plans()
    for text in ("NaN", "Infinity", "-Infinity"):
        payload = '{"node": "c", "value": {"word": "w", "count": ' + text + "}}"
        with pytest.raises(HTTPClientError) as caught:
            await jp_fetch("rho", "api", "runs", run_id, "fork", method="POST", body=payload)
        response = caught.value.response
        assert response is not None
        error = json.loads(response.body.decode())
        assert caught.value.code == 400 and error["rule"] == "bad_request", error
        assert error["message"].startswith("the request body is not JSON: " + text), error
    assert store.project.stored_plans() == plans


async def test_a_refusal_names_the_json_field_the_client_sent_not_a_flag(jp_fetch: Any, store: Store) -> None:
    """A value for d (no output schema) was refused with ``fork it without --value``: a REST client
    has no flags; it sent the field ``"value"``."""
    run_id = await _completed_chain(jp_fetch, store)
    code, error = await _error(jp_fetch, run_id, {"node": "d", "value": "d got eight"})
    assert code == 409 and error["rule"] == "fork", error
    assert error["message"].endswith('fork it without the "value" field'), error
    assert "--value" not in error["message"]
