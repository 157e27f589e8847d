"""POST /rho/api/runs/<run>/approvals/<request>/answer: a human step's form answered through a real
jupyter-server, on the triage example of examples/graphs/ (its ``escalate`` step waits for a person)."""

from __future__ import annotations

import concurrent.futures
import json
import shutil
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from rho_notebook.model.plan import Plan
from tests.conftest import REPO
from tests.server.helpers import Store, body, wait_until

EXAMPLES = REPO / "examples" / "graphs"


def _triage(store: Store, score: int) -> Plan:
    """The triage example copied into the workspace and planned (off the test's event loop)."""
    for source in EXAMPLES.iterdir():
        if source.is_file():
            shutil.copy(source, store.project.root / source.name)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(store.project.plan, "triage.graph.yaml", {"score": score}).result(timeout=120)


async def _start(jp_fetch: Any, plan: Plan) -> str:
    response = await jp_fetch(
        "rho", "api", "plans", plan.plan_id, "runs", method="POST", body=json.dumps({"graph_digest": plan.graph_digest})
    )
    assert response.code == 201
    return str(body(response)["run_id"])


async def _form(jp_fetch: Any, run_id: str) -> dict[str, Any]:
    """The run's waiting request, once its owner waits on it."""

    async def waiting() -> dict[str, Any] | None:
        found: list[dict[str, Any]] = body(await jp_fetch("rho", "api", "runs", run_id, "approvals"))
        return next((r for r in found if r["waiting"]), None)

    request: dict[str, Any] = await wait_until(waiting, timeout=60)
    return request


async def _finished(jp_fetch: Any, run_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        data: dict[str, Any] = body(await jp_fetch("rho", "api", "runs", run_id))
        return data if data["lifecycle"] == "completed" else None

    found: dict[str, Any] = await wait_until(done, timeout=60)
    return found


async def _post(jp_fetch: Any, run_id: str, *parts: str, payload: dict[str, Any]) -> Any:
    return await jp_fetch("rho", "api", "runs", run_id, "approvals", *parts, method="POST", body=json.dumps(payload))


async def _error(jp_fetch: Any, run_id: str, *parts: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(HTTPClientError) as caught:
        await _post(jp_fetch, run_id, *parts, payload=payload)
    response = caught.value.response
    assert response is not None
    return caught.value.code, json.loads(response.body.decode())


async def test_a_form_answered_through_the_api_merges_over_the_item(jp_fetch: Any, store: Store) -> None:
    run_id = await _start(jp_fetch, _triage(store, 70))
    request = await _form(jp_fetch, run_id)
    assert request["kind"] == "form" and request["node"] == "escalate"
    assert request["facts"]["prompt"] == "Escalate ticket 70 (hardware, 3 words)?"
    assert request["facts"]["form"]["assignee"]["choices"] == ["oncall", "backlog"]
    request_id = request["request_id"]

    # a wrong type, an unknown choice and a missing required field: 400 naming the field
    code, error = await _error(jp_fetch, run_id, request_id, "answer", payload={"values": {"assignee": 5}})
    assert code == 400 and error["rule"] == "input" and "assignee" in error["message"]
    code, error = await _error(
        jp_fetch, run_id, request_id, "answer", payload={"values": {"assignee": "oncall", "note": 3}}
    )
    assert code == 400 and "note" in error["message"]
    code, error = await _error(jp_fetch, run_id, request_id, "answer", payload={"values": {"note": "x"}})
    assert code == 400 and "assignee" in error["message"]
    code, error = await _error(jp_fetch, run_id, request_id, "answer", payload={"values": ["oncall"]})
    assert code == 400 and error["rule"] == "bad_request"
    # a form is answered, not approved: the decision route refuses approve
    code, error = await _error(jp_fetch, run_id, request_id, payload={"decision": "approve"})
    assert code == 409 and error["rule"] == "approval_refused" and "answer" in error["message"]
    assert (await _form(jp_fetch, run_id))["request_id"] == request_id  # nothing was recorded

    answered = body(
        await _post(
            jp_fetch,
            run_id,
            request_id[:13],
            "answer",
            payload={"values": {"assignee": "oncall", "note": "paged"}, "comment": "on it"},
        )
    )
    assert answered["decision"] == "approve" and answered["via"] == "server" and answered["comment"] == "on it"
    assert answered["answer"] == {"assignee": "oncall", "note": "paged"}
    code, error = await _error(jp_fetch, run_id, request_id, "answer", payload={"values": {"assignee": "backlog"}})
    assert code == 409 and error["rule"] == "already_decided"

    final = await _finished(jp_fetch, run_id)
    assert final["outcome"] == "success"
    output = body(await jp_fetch("rho", "api", "runs", run_id, "result"))["output"]
    assert output["assignee"] == "oncall" and output["note"] == "paged"
    assert output["level"] == "high" and output["label"] == "ticket 70"
    detail = body(await jp_fetch("rho", "api", "runs", run_id, "nodes", "escalate"))
    assert detail["has_input"] and "assignee" not in detail["input"] and detail["input"]["level"] == "high"
    assert detail["has_value"] and detail["value"]["assignee"] == "oncall"


async def test_a_default_is_filled_in_and_deny_declines_the_form(jp_fetch: Any, store: Store) -> None:
    plan = _triage(store, 70)
    first = await _start(jp_fetch, plan)
    request = await _form(jp_fetch, first)
    await _post(jp_fetch, first, request["request_id"], "answer", payload={"values": {"assignee": "backlog"}})
    assert (await _finished(jp_fetch, first))["outcome"] == "success"
    output = body(await jp_fetch("rho", "api", "runs", first, "result"))["output"]
    assert output["assignee"] == "backlog" and output["note"] == ""

    second = await _start(jp_fetch, plan)
    request = await _form(jp_fetch, second)
    denied = body(await _post(jp_fetch, second, request["request_id"], payload={"decision": "deny", "comment": "no"}))
    assert denied["decision"] == "deny"
    assert (await _finished(jp_fetch, second))["outcome"] == "denial"


async def test_an_approval_node_has_no_form_to_answer(jp_fetch: Any, store: Store) -> None:
    from tests.server.helpers import GATE

    gate = store.plan("gate", GATE)
    run_id = await _start(jp_fetch, gate)
    request = await _form(jp_fetch, run_id)
    assert request["kind"] == "node"
    code, error = await _error(jp_fetch, run_id, request["request_id"], "answer", payload={"values": {}})
    assert code == 400 and error["rule"] == "not_a_form"
    await _post(jp_fetch, run_id, request["request_id"], payload={"decision": "deny"})
    assert (await _finished(jp_fetch, run_id))["outcome"] == "denial"
