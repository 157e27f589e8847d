"""The run's event stream (SSE): ids are journal seqs, resumable after any seq, nothing lost or
repeated, and it ends when the run completes. Runs are real: ``true`` / ``sleep`` commands."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError
from tornado.simple_httpclient import HTTPStreamClosedError

from tests.conftest import journaled
from tests.server.helpers import QUICK, STEPS, Message, Store, body, parse_sse, wait_until


async def _stream(
    jp_fetch: Any, run_id: str, *, stop_after: int | None = None, received: bytearray | None = None, **kwargs: Any
) -> list[Message]:
    """Read the event stream of ``run_id``; with ``stop_after``, hang up after that many records.
    The raw bytes are collected in ``received`` (when given) as they arrive."""
    received = bytearray() if received is None else received
    hung_up = False

    def collect(chunk: bytes) -> None:
        nonlocal hung_up
        received.extend(chunk)
        if (
            stop_after is not None
            and sum(1 for m in parse_sse(received.decode()) if m.event == "message") >= stop_after
        ):
            hung_up = True
            raise ConnectionAbortedError("hang up")  # tornado closes the connection

    try:
        response = await jp_fetch(
            "rho", "api", "runs", run_id, "events", streaming_callback=collect, request_timeout=60, **kwargs
        )
    except HTTPStreamClosedError:
        assert hung_up
        messages = parse_sse(received.decode())
        records = [m for m in messages if m.event == "message"]
        return records[:stop_after]  # only what a client would have acted on before hanging up
    assert response.code == 200 and response.headers["Content-Type"].startswith("text/event-stream")
    return parse_sse(received.decode())


def _ids(messages: list[Message]) -> list[int]:
    return [int(m.id) for m in messages if m.event == "message" and m.id is not None]


async def _finished_run(jp_fetch: Any, store: Store) -> str:
    plan = store.plan("quick", QUICK)
    started = body(
        await jp_fetch(
            "rho",
            "api",
            "plans",
            plan.plan_id,
            "runs",
            method="POST",
            body=json.dumps({"graph_digest": plan.graph_digest}),
        )
    )

    async def done() -> bool:
        return bool(body(await jp_fetch("rho", "api", "runs", started["run_id"]))["lifecycle"] == "completed")

    await wait_until(done)
    return str(started["run_id"])


async def test_a_finished_run_streams_its_journal_then_ends(jp_fetch: Any, store: Store) -> None:
    run_id = await _finished_run(jp_fetch, store)
    messages = await _stream(jp_fetch, run_id)
    seqs = store.journal_seqs(run_id)
    assert _ids(messages) == seqs == list(range(1, len(seqs) + 1))
    records = [m.json() for m in messages if m.event == "message"]
    assert [r["seq"] for r in records] == seqs and records[0]["kind"] == "run_created"
    assert "run_completed" in [r["kind"] for r in records]
    assert messages[-1].event == "end" and messages[-1].id is None
    assert messages[-1].json() == {
        "run_id": run_id,
        "last_seq": seqs[-1],
        "lifecycle": "completed",
        "outcome": "success",
    }


async def test_resume_after_a_seq_by_header_or_query(jp_fetch: Any, store: Store) -> None:
    run_id = await _finished_run(jp_fetch, store)
    seqs = store.journal_seqs(run_id)
    middle = seqs[len(seqs) // 2]
    by_header = await _stream(jp_fetch, run_id, headers={"Last-Event-ID": str(middle)})
    assert _ids(by_header) == [s for s in seqs if s > middle]
    by_query = await _stream(jp_fetch, run_id, params={"after_seq": str(middle)})
    assert _ids(by_query) == _ids(by_header)
    both = await _stream(jp_fetch, run_id, params={"after_seq": "0"}, headers={"Last-Event-ID": str(seqs[-2])})
    assert _ids(both) == [seqs[-1]]  # the header (what EventSource resends) wins
    past_the_end = await _stream(jp_fetch, run_id, headers={"Last-Event-ID": str(seqs[-1])})
    assert _ids(past_the_end) == [] and past_the_end[-1].event == "end"
    for bad in ("x", "-1"):
        with pytest.raises(HTTPClientError) as caught:
            await jp_fetch("rho", "api", "runs", run_id, "events", headers={"Last-Event-ID": bad})
        assert caught.value.code == 400


async def test_a_live_terminal_run_is_followed_and_resumed_without_loss_or_duplication(
    jp_fetch: Any, store: Store
) -> None:
    plan = store.plan("steps", STEPS)
    proc = store.cli_run(plan)  # the owner is a terminal process, not the server
    try:

        async def live() -> str | None:
            rows = body(await jp_fetch("rho", "api", "runs"))
            return str(rows[0]["run_id"]) if rows and rows[0]["lifecycle"] == "running" else None

        run_id = await wait_until(live)
        first = await _stream(jp_fetch, run_id, stop_after=4)
        assert _ids(first) == [1, 2, 3, 4]
        assert "run_completed" not in [m.json()["kind"] for m in first]  # we hung up mid-run
        rest = await _stream(jp_fetch, run_id, headers={"Last-Event-ID": first[-1].id or ""})
        assert rest[-1].event == "end" and rest[-1].json()["outcome"] == "success"
        seqs = store.journal_seqs(run_id)
        combined = _ids(first) + _ids(rest)
        assert combined == seqs == list(range(1, len(seqs) + 1))  # every record once, in order
        kinds = [m.json()["kind"] for m in first + rest if m.event == "message"]
        assert kinds.count("node_finished") == 4 and kinds[-1] in ("run_completed", "owner_exited")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()


async def test_a_stream_opened_before_the_run_starts_waits_for_it(jp_fetch: Any, store: Store) -> None:
    plan = store.plan("quick", QUICK)
    run_id = store.project.create_run(plan)  # created, not started: lifecycle planned
    created = await journaled(store.project.home, run_id, "run_created")
    received = bytearray()
    reader = asyncio.ensure_future(_stream(jp_fetch, run_id, received=received))

    async def sent_created() -> bool:  # the server has read the journal and streamed run_created
        return created["seq"] in _ids(parse_sse(received.decode())) or reader.done()

    await wait_until(sent_created)
    assert not reader.done()  # a planned run is followed until someone starts it
    assert "end" not in [m.event for m in parse_sse(received.decode())]
    resumed = body(
        await jp_fetch(
            "rho", "api", "runs", run_id, "resume", method="POST", body=json.dumps({"graph_digest": plan.graph_digest})
        )
    )
    assert resumed["run_id"] == run_id
    messages = await asyncio.wait_for(reader, 30)
    assert _ids(messages) == store.journal_seqs(run_id)
    assert messages[-1].event == "end" and messages[-1].json()["outcome"] == "success"
