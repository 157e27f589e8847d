"""Every /rho/api/ route through a real jupyter-server (pytest-jupyter), over a private store."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from typing import Any
from urllib.parse import quote

import pytest
from tornado.httpclient import HTTPClientError

from tests.conftest import journaled
from tests.kernel.helpers import owner_pid
from tests.server.helpers import GATE, LONG, QUICK, Store, body, wait_until


async def _status(jp_fetch: Any, run_id: str) -> dict[str, Any]:
    return body(await jp_fetch("rho", "api", "runs", run_id))


async def _finished(jp_fetch: Any, run_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        data = await _status(jp_fetch, run_id)
        return data if data["lifecycle"] == "completed" else None

    found: dict[str, Any] = await wait_until(done)
    return found


async def _start(jp_fetch: Any, plan: Any) -> str:
    response = await jp_fetch(
        "rho", "api", "plans", plan.plan_id, "runs", method="POST", body=json.dumps({"graph_digest": plan.graph_digest})
    )
    assert response.code == 201
    data = body(response)
    assert response.headers["Location"].endswith(f"/rho/api/runs/{data['run_id']}")
    return str(data["run_id"])


async def _error(fetch: Any, *parts: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(HTTPClientError) as caught:
        await fetch(*parts, **kwargs)
    response = caught.value.response
    assert response is not None
    return caught.value.code, json.loads(response.body.decode())


# -- plans ------------------------------------------------------------------------------------------


async def test_plans_list_show_and_delete(jp_fetch: Any, store: Store) -> None:
    quick = store.plan("quick", QUICK)
    listed = body(await jp_fetch("rho", "api", "plans"))
    assert [p["plan_id"] for p in listed] == [quick.plan_id]
    assert listed[0]["graph_digest"] == quick.graph_digest and listed[0]["workflow"] == "quick"
    assert {item["kind"] for item in listed[0]["authority"]} >= {"executable"}

    shown = body(await jp_fetch("rho", "api", "plans", quick.plan_id[:13]))
    assert shown["plan_id"] == quick.plan_id
    assert [n["name"] for n in shown["layout"]["nodes"]] == ["first", "hello"]

    deleted = body(await jp_fetch("rho", "api", "plans", quick.plan_id, method="DELETE"))
    assert deleted == {"plan_id": quick.plan_id, "deleted": True}
    assert body(await jp_fetch("rho", "api", "plans")) == []
    code, error = await _error(jp_fetch, "rho", "api", "plans", quick.plan_id)
    assert code == 404 and error["rule"] == "not_found" and "no plan matches" in error["message"]


# -- starting, status, result, view, artifacts -------------------------------------------------------


async def test_start_needs_the_exact_digest(jp_fetch: Any, store: Store) -> None:
    quick = store.plan("quick", QUICK)
    for sent in ({}, {"graph_digest": "sha256:" + "0" * 64}, {"graph_digest": quick.graph_digest[:20]}):
        code, error = await _error(
            jp_fetch, "rho", "api", "plans", quick.plan_id, "runs", method="POST", body=json.dumps(sent)
        )
        assert code == 409 and error["rule"] == "confirmation_required"
        assert quick.graph_digest in error["message"]
    assert body(await jp_fetch("rho", "api", "runs")) == []  # nothing was created
    code, error = await _error(jp_fetch, "rho", "api", "plans", quick.plan_id, "runs", method="POST", body="[1]")
    assert code == 400 and error["rule"] == "bad_request"
    code, error = await _error(
        jp_fetch,
        "rho",
        "api",
        "plans",
        quick.plan_id,
        "runs",
        method="POST",
        body=json.dumps({"graph_digest": quick.graph_digest, "mode": "yolo"}),
    )
    assert code == 400 and "mode" in error["message"]


async def test_run_status_result_view_and_artifacts(jp_fetch: Any, store: Store) -> None:
    quick = store.plan("quick", QUICK)
    run_id = await _start(jp_fetch, quick)
    final = await _finished(jp_fetch, run_id)
    assert final["outcome"] == "success" and final["plan_id"] == quick.plan_id
    assert final["nodes"]["hello"] == {
        "state": "success",
        "shown": "success",
        "attempt": 1,
        "exit_code": 0,
        "reason": "",
        "uncertain": False,
    }
    assert final["last_seq"] > 0

    rows = body(await jp_fetch("rho", "api", "runs"))
    assert [r["run_id"] for r in rows] == [run_id]
    assert rows[0]["origin"] == "server" and rows[0]["counts"] == {"success": 2} and rows[0]["live"] is False
    assert [r["run_id"] for r in body(await jp_fetch("rho", "api", "runs", params={"state": "completed"}))] == [run_id]
    assert body(await jp_fetch("rho", "api", "runs", params={"state": "running"})) == []
    code, error = await _error(jp_fetch, "rho", "api", "runs", params={"state": "bogus"})
    assert code == 400 and "unknown lifecycle" in error["message"]

    result = body(await jp_fetch("rho", "api", "runs", run_id, "result"))
    assert result["outcome"] == "success"
    assert {"stdout", "exit"} <= set(result["nodes"]["hello"]["artifacts"])

    view = body(await jp_fetch("rho", "api", "runs", run_id, "view"))
    assert view["run"]["lifecycle"] == "completed" and view["run"]["can_resume"] is False
    assert view["nodes"]["hello"]["state"] == "success" and view["layout"]["edge_count"] == 1
    assert "layout" not in body(await jp_fetch("rho", "api", "runs", run_id, "view", params={"layout": "0"}))

    detail = body(await jp_fetch("rho", "api", "runs", run_id, "nodes", "hello"))
    assert detail["node"] == "hello" and detail["stdout"]["text"] == "hi\n" and detail["definition"]["argv"]

    stdout = await jp_fetch("rho", "api", "runs", run_id, "nodes", "hello", "artifacts", "stdout")
    assert stdout.body == b"hi\n" and stdout.headers["X-Rho-Size"] == "3"
    assert stdout.headers["Content-Type"].startswith("text/plain")
    part = await jp_fetch(
        "rho", "api", "runs", run_id, "nodes", "hello", "artifacts", "stdout", params={"offset": "1", "limit": "1"}
    )
    assert part.body == b"i" and part.headers["X-Rho-Next-Offset"] == "2"
    exit_record = body(await jp_fetch("rho", "api", "runs", run_id, "nodes", "hello", "artifacts", "exit.json"))
    assert exit_record["kind"] == "exit" and exit_record["code"] == 0

    for name, rule in (("manifest.json", "unknown_artifact"), ("..", "unknown_artifact"), ("value", "not_found")):
        code, error = await _error(jp_fetch, "rho", "api", "runs", run_id, "nodes", "hello", "artifacts", name)
        assert (code, error["rule"]) == (404, rule)
    code, error = await _error(
        jp_fetch, "rho", "api", "runs", run_id, "nodes", "hello", "artifacts", "stdout", params={"limit": str(2 << 20)}
    )
    assert code == 400
    code, error = await _error(
        jp_fetch, "rho", "api", "runs", run_id, "nodes", "hello", "artifacts", "stdout", params={"attempt": "2"}
    )
    assert code == 404
    code, error = await _error(jp_fetch, "rho", "api", "runs", run_id, "nodes", "nope", "artifacts", "stdout")
    assert code == 404 and error["rule"] == "not_found"


async def test_artifacts_never_follow_symlinks(jp_fetch: Any, store: Store) -> None:
    quick = store.plan("quick", QUICK)
    run_id = await _start(jp_fetch, quick)
    await _finished(jp_fetch, run_id)
    secret = store.project.root / "secret.txt"
    secret.write_text("do not serve me")
    stdout = store.project.home / "workflows" / "runs" / run_id / "nodes" / "hello" / "attempts" / "1" / "stdout"
    stdout.unlink()
    os.symlink(secret, stdout)
    code, error = await _error(jp_fetch, "rho", "api", "runs", run_id, "nodes", "hello", "artifacts", "stdout")
    assert code == 403 and error["rule"] == "unsafe_artifact"
    attempts = stdout.parent.parent
    (attempts / "1").rename(attempts / "real")
    os.symlink(attempts / "real", attempts / "1")
    code, error = await _error(jp_fetch, "rho", "api", "runs", run_id, "nodes", "hello", "artifacts", "exit.json")
    assert code == 500 and error["rule"] == "store" and "symlink" in error["message"]


async def test_unknown_and_malformed_ids(jp_fetch: Any, store: Store) -> None:
    code, error = await _error(jp_fetch, "rho", "api", "runs", "0123abcd")
    assert code == 404 and error["rule"] == "not_found"
    with pytest.raises(HTTPClientError) as caught:
        await jp_fetch("rho", "api", "runs", "..", "result")
    assert caught.value.code == 404


# -- cancel, resume, delete --------------------------------------------------------------------------


async def test_cancel_resume_and_delete(jp_fetch: Any, store: Store) -> None:
    long = store.plan("long", LONG)
    run_id = await _start(jp_fetch, long)
    code, error = await _error(jp_fetch, "rho", "api", "runs", run_id, method="DELETE")
    assert code == 409 and error["rule"] == "live"
    code, error = await _error(
        jp_fetch, "rho", "api", "runs", run_id, "cancel", method="POST", body=json.dumps({"wait_seconds": 99})
    )
    assert code == 400

    cancelled = body(
        await jp_fetch("rho", "api", "runs", run_id, "cancel", method="POST", body=json.dumps({"wait_seconds": 5}))
    )
    assert cancelled["cancellation_state"] == "acknowledged" and cancelled["request_id"]
    final = await _finished(jp_fetch, run_id)
    assert final["outcome"] == "cancellation" and final["nodes"]["wait"]["state"] == "cancellation"
    again = body(await jp_fetch("rho", "api", "runs", run_id, "cancel", method="POST", body=b""))
    assert again["cancellation_state"] == "already_completed"

    code, error = await _error(jp_fetch, "rho", "api", "runs", run_id, "resume", method="POST", body=b"{}")
    assert code == 409 and error["rule"] == "confirmation_required"
    resumed = body(
        await jp_fetch(
            "rho", "api", "runs", run_id, "resume", method="POST", body=json.dumps({"graph_digest": long.graph_digest})
        )
    )
    assert resumed["lifecycle"] == "running"

    async def second_attempt() -> bool:
        return bool((await _status(jp_fetch, run_id))["nodes"]["wait"]["attempt"] == 2)

    await wait_until(second_attempt)
    code, error = await _error(
        jp_fetch,
        "rho",
        "api",
        "runs",
        run_id,
        "resume",
        method="POST",
        body=json.dumps({"graph_digest": long.graph_digest}),
    )
    assert code == 409 and error["rule"] == "refused"  # owned (by this server) already

    await jp_fetch("rho", "api", "runs", run_id, "cancel", method="POST", body=b"{}")
    await _finished(jp_fetch, run_id)
    deleted = body(await jp_fetch("rho", "api", "runs", run_id[:13], method="DELETE"))
    assert deleted == {"run_id": run_id, "deleted": True}
    code, error = await _error(jp_fetch, "rho", "api", "runs", run_id)
    assert code == 404


async def test_resume_after_an_unclean_exit_needs_recover_uncertain(jp_fetch: Any, store: Store) -> None:
    long = store.plan("long", LONG)
    proc = store.cli_run(long)
    try:

        async def running() -> str | None:
            rows = body(await jp_fetch("rho", "api", "runs"))
            return str(rows[0]["run_id"]) if rows and rows[0]["counts"].get("running") else None

        run_id = await wait_until(running)
        await journaled(store.project.home, run_id, "process_started", node="wait")  # the launched `sleep` is journaled
        owner = owner_pid(store.project.home, run_id)
        assert owner
        os.kill(owner, signal.SIGKILL)  # the terminal's run's owner dies; its `sleep` is left uncertain
        proc.wait(30)
        assert (await _status(jp_fetch, run_id))["lifecycle"] == "needs_recovery"
        confirm = {"graph_digest": long.graph_digest}
        code, error = await _error(
            jp_fetch, "rho", "api", "runs", run_id, "resume", method="POST", body=json.dumps(confirm)
        )
        assert code == 409 and error["rule"] == "needs_recovery" and "--recover-uncertain" in error["message"]
        code, error = await _error(
            jp_fetch,
            "rho",
            "api",
            "runs",
            run_id,
            "resume",
            method="POST",
            body=json.dumps({**confirm, "recover_uncertain": "yes"}),
        )
        assert code == 400
        resumed = body(
            await jp_fetch(
                "rho",
                "api",
                "runs",
                run_id,
                "resume",
                method="POST",
                body=json.dumps({**confirm, "recover_uncertain": True}),
            )
        )
        assert resumed["lifecycle"] == "running"
        await jp_fetch("rho", "api", "runs", run_id, "cancel", method="POST", body=b"{}")
        final = await _finished(jp_fetch, run_id)
        assert final["outcome"] == "cancellation"
        kinds = [
            json.loads(line)["kind"]
            for line in (store.project.home / "workflows" / "runs" / run_id / "events.jsonl").read_text().splitlines()
        ]
        assert "recovery_confirmed" in kinds
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


async def test_server_stop_leaves_the_runs_it_started_going(jp_serverapp: Any, jp_fetch: Any, store: Store) -> None:
    long = store.plan("long", LONG)
    run_id = await _start(jp_fetch, long)
    owner = owner_pid(store.project.home, run_id)
    assert owner not in (None, 0, os.getpid())  # the run's owner is a process of its own
    await jp_serverapp.cleanup_extensions()
    data = store.project.status(run_id)
    assert data.lifecycle.value == "running" and data.outcome is None  # stopping the server stops nothing
    assert owner_pid(store.project.home, run_id) == owner
    answer = store.project.cli("cancel", run_id)  # only a cancel stops it
    assert answer.returncode == 0, answer.stderr
    deadline = time.monotonic() + 30
    while store.project.status(run_id).lifecycle.value != "completed" and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert store.project.status(run_id).outcome == "cancellation"


# -- approvals ---------------------------------------------------------------------------------------


async def test_approve_from_the_api(jp_fetch: Any, store: Store) -> None:
    gate = store.plan("gate", GATE)
    run_id = await _start(jp_fetch, gate)

    async def pending() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = body(await jp_fetch("rho", "api", "runs", run_id, "approvals"))
        return found if found and found[0]["waiting"] else []  # the request file is written just before it is journaled

    requests = await wait_until(pending)
    assert len(requests) == 1 and requests[0]["waiting"] is True and requests[0]["kind"] == "node"
    assert requests[0]["facts"]["prompt"] == "Ship it?" and requests[0]["node"] == "ok"
    assert (await _status(jp_fetch, run_id))["lifecycle"] == "waiting"
    request_id = requests[0]["request_id"]

    code, error = await _error(
        jp_fetch,
        "rho",
        "api",
        "runs",
        run_id,
        "approvals",
        request_id,
        method="POST",
        body=json.dumps({"decision": "maybe"}),
    )
    assert code == 400
    decided = body(
        await jp_fetch(
            "rho",
            "api",
            "runs",
            run_id,
            "approvals",
            request_id[:13],
            method="POST",
            body=json.dumps({"decision": "approve", "comment": "go"}),
        )
    )
    assert decided["decision"] == "approve" and decided["via"] == "server" and decided["comment"] == "go"
    code, error = await _error(
        jp_fetch,
        "rho",
        "api",
        "runs",
        run_id,
        "approvals",
        request_id,
        method="POST",
        body=json.dumps({"decision": "deny"}),
    )
    assert code == 409 and error["rule"] == "already_decided"

    final = await _finished(jp_fetch, run_id)
    assert final["outcome"] == "success"
    result = body(await jp_fetch("rho", "api", "runs", run_id, "result"))
    assert result["nodes"]["ok"]["output"]["comment"] == "go"
    assert body(await jp_fetch("rho", "api", "runs", run_id, "approvals")) == []
    prompt = await jp_fetch("rho", "api", "runs", run_id, "nodes", "ok", "artifacts", "prompt")
    assert prompt.body == b"Ship it?" and prompt.headers["Content-Type"].startswith("text/markdown")


async def test_deny_a_run_owned_by_a_terminal(jp_fetch: Any, store: Store) -> None:
    gate = store.plan("gate", GATE)
    proc = store.cli_run(gate)
    try:

        async def waiting() -> list[dict[str, Any]]:
            rows = body(await jp_fetch("rho", "api", "runs"))
            return [r for r in rows if r["waiting"]]

        row = (await wait_until(waiting))[0]
        assert row["origin"] == "cli" and row["lifecycle"] == "waiting"
        requests = body(await jp_fetch("rho", "api", "runs", row["run_id"], "approvals"))
        decided = body(
            await jp_fetch(
                "rho",
                "api",
                "runs",
                row["run_id"],
                "approvals",
                requests[0]["request_id"],
                method="POST",
                body=json.dumps({"decision": "deny"}),
            )
        )
        assert decided["decision"] == "deny"
        final = await _finished(jp_fetch, row["run_id"])
        assert final["outcome"] == "denial" and final["nodes"]["ship"]["state"] == "blocked"
    finally:
        proc.kill()
        proc.wait()


async def test_a_step_key_with_slash_and_hash_is_one_node_in_the_api(
    http_server_client: Any, jp_auth_header: dict[str, str], jp_base_url: str, store: Store
) -> None:
    # a flow's model and tool calls are keyed like this (docs/flows.md); the sidebar asks for the
    # node pane and artifacts with the name as one percent-encoded path segment (encodeURIComponent)
    key = "team.research.writer/f1#2"
    store.project.write(
        "keyed.py",
        "from rho_notebook.script._steps import _keyed_step\n"
        f"_keyed_step('command', {key!r}, "
        "{'argv': ['echo', 'hi'], 'cwd': None, 'timeout_seconds': 60, 'max_output_bytes': 1000})\n",
    )
    done = await asyncio.to_thread(store.project.cli, "run", "keyed.py", "--yes", "--output", "jsonl")
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = json.loads(done.stdout.splitlines()[0])["run_id"]

    async def get(*parts: str) -> Any:
        path = "/".join(quote(part, safe="") for part in ("rho", "api", "runs", run_id, "nodes", *parts))
        return await http_server_client.fetch(
            f"{jp_base_url.rstrip('/')}/{path}", headers=jp_auth_header, raise_error=False
        )

    detail = await get(key)
    assert detail.code == 200, detail.body
    shown = json.loads(detail.body)
    assert shown["node"] == key and shown["stdout"]["text"] == "hi\n"
    stdout = await get(key, "artifacts", "stdout")
    assert (stdout.code, stdout.body) == (200, b"hi\n")
    assert (await get("../nodes")).code == 404
