"""Request bodies the REST API refuses cleanly (issue 14, item 5): a body over the cap is 413
before it is read, a deeply nested one is 400, and no body at all, however odd, is ever a 500."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tornado.httpclient import HTTPClientError

from tests.server.helpers import QUICK, Store

MAX_BODY_BYTES = 1 << 20
"""The documented cap (docs/jupyterlab.md): 1 MiB."""


async def _answer(jp_fetch: Any, *parts: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of any answer, success or error."""
    try:
        response = await jp_fetch(*parts, **kwargs)
    except HTTPClientError as err:
        if err.response is None:
            raise
        response = err.response
    text = response.body.decode() if response.body else ""
    return response.code, (json.loads(text) if text.strip() else {})


async def test_body_over_the_cap_is_413_from_content_length(jp_fetch: Any, store: Store) -> None:
    quick = store.plan("quick", QUICK)
    huge = b'{"graph_digest": "' + b"x" * (20 * MAX_BODY_BYTES) + b'"}'  # 20 MiB
    code, error = await _answer(
        jp_fetch, "rho", "api", "plans", quick.plan_id, "runs", method="POST", body=huge, request_timeout=60
    )
    assert code == 413
    assert error["rule"] == "body_too_large"
    assert str(MAX_BODY_BYTES) in error["message"]


async def test_chunked_body_over_the_cap_is_413(jp_fetch: Any, store: Store) -> None:
    quick = store.plan("quick", QUICK)

    async def produce(write: Any) -> None:  # no Content-Length: chunked transfer encoding
        for _ in range(3):
            await write(b" " * MAX_BODY_BYTES)

    code, error = await _answer(
        jp_fetch, "rho", "api", "plans", quick.plan_id, "runs", method="POST", body_producer=produce
    )
    assert code == 413
    assert error["rule"] == "body_too_large"


async def test_body_at_the_cap_is_read(jp_fetch: Any, store: Store) -> None:
    quick = store.plan("quick", QUICK)
    sent = json.dumps({"graph_digest": "sha256:" + "0" * 64}).encode()
    padded = sent + b" " * (MAX_BODY_BYTES - len(sent))
    code, error = await _answer(jp_fetch, "rho", "api", "plans", quick.plan_id, "runs", method="POST", body=padded)
    assert code == 409, error  # read and understood: the digest is not the plan's


@pytest.mark.parametrize("depth", [2_000, 100_000])
async def test_deeply_nested_body_is_400(jp_fetch: Any, store: Store, depth: int) -> None:
    quick = store.plan("quick", QUICK)
    nested = "[" * depth + "]" * depth
    for parts in (("plans", quick.plan_id, "runs"), ("runs", "0" * 8, "cancel")):
        code, error = await _answer(jp_fetch, "rho", "api", *parts, method="POST", body=nested)
        assert code == 400, (parts, error)
        assert error["rule"] == "bad_request"


# -- fuzz: any body, any POST route: never a 500 -----------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
fields = st.sampled_from(["graph_digest", "mode", "wait_seconds", "recover_uncertain", "decision", "comment"])
bodies = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.dictionaries(fields, json_values, max_size=4).map(lambda value: json.dumps(value).encode()),
    st.integers(min_value=1, max_value=5_000).map(lambda depth: b"{" + b'"a":{' * depth + b"}" * (depth + 1)),
)


async def test_fuzzed_bodies_never_answer_500(jp_fetch: Any, store: Store) -> None:
    quick = store.plan("quick", QUICK)
    run_id = store.project.create_run(quick)  # created, never started: cancel and resume reach the service
    loop = asyncio.get_running_loop()
    routes = [
        ("plans", quick.plan_id, "runs"),
        ("runs", run_id, "cancel"),
        ("runs", run_id, "resume"),
        ("runs", "0" * 8, "cancel"),
        ("runs", run_id, "approvals", "0" * 8),
    ]
    seen: list[tuple[int, str]] = []

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(route=st.sampled_from(routes), raw=bodies)
    def never_500(route: tuple[str, ...], raw: bytes) -> None:
        future = asyncio.run_coroutine_threadsafe(
            _answer(jp_fetch, "rho", "api", *route, method="POST", body=raw), loop
        )
        code, answer = future.result(timeout=60)
        seen.append((code, answer.get("rule", "")))
        assert code < 500, (route, raw[:200], answer)

    await asyncio.to_thread(never_500)
    assert seen
