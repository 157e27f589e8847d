"""No /rho/api/ route works unauthenticated, and cookie-authenticated writes need the XSRF token."""

from __future__ import annotations

import json
import re
from http.cookies import SimpleCookie
from typing import Any

import pytest

from rho_notebook.server.handlers import routes
from tests.server.helpers import QUICK, Store

# (method, path) for every route; {plan}, {run} and {request} are filled with real IDs
ROUTES = [
    ("GET", "plans"),
    ("GET", "plans/{plan}"),
    ("DELETE", "plans/{plan}"),
    ("POST", "plans/{plan}/runs"),
    ("GET", "runs"),
    ("GET", "runs/{run}"),
    ("DELETE", "runs/{run}"),
    ("GET", "runs/{run}/result"),
    ("GET", "runs/{run}/view"),
    ("GET", "runs/{run}/nodes/hello"),
    ("GET", "runs/{run}/nodes/hello/artifacts/stdout"),
    ("GET", "runs/{run}/events"),
    ("GET", "runs/{run}/timeline"),
    ("POST", "runs/{run}/cancel"),
    ("POST", "runs/{run}/resume"),
    ("POST", "runs/{run}/fork"),
    ("GET", "runs/{run}/compare/{run}"),
    ("GET", "runs/{run}/approvals"),
    ("POST", "runs/{run}/approvals/{request}"),
    ("POST", "runs/{run}/approvals/{request}/answer"),
]

ID = "01234567-89ab-7def-8123-456789abcdef"


def test_the_route_table_covers_every_handler_method() -> None:
    table = routes("/rho/api")
    wanted = set()
    for pattern, handler in table:
        for method in ("get", "post", "delete", "put", "patch"):
            if method in vars(handler):
                wanted.add((method.upper(), pattern))
    covered = set()
    for method, path in ROUTES:
        url = "/rho/api/" + path.format(plan=ID, run=ID, request=ID)
        hits = [pattern for pattern, _ in table if re.fullmatch(pattern, url)]
        assert len(hits) == 1, (method, path, hits)
        covered.add((method, hits[0]))
    assert covered == wanted


@pytest.fixture
def ids(store: Store) -> dict[str, str]:
    plan = store.plan("quick", QUICK)
    return {"plan": plan.plan_id, "run": ID, "request": ID}


@pytest.fixture
def raw(http_server_client: Any, jp_base_url: str) -> Any:
    """Fetch without pytest-jupyter's token header (``jp_fetch`` always adds it)."""

    async def fetch(method: str, path: str, *, headers: dict[str, str] | None = None, body: bytes | None = None) -> Any:
        return await http_server_client.fetch(
            f"{jp_base_url}{path}",
            method=method,
            headers=headers or {},
            body=body if body is not None else (b"{}" if method == "POST" else None),
            raise_error=False,
            follow_redirects=False,
            request_timeout=20,
        )

    return fetch


async def test_every_route_refuses_requests_without_credentials(raw: Any, ids: dict[str, str], store: Store) -> None:
    for method, path in ROUTES:
        response = await raw(method, "rho/api/" + path.format(**ids))
        assert response.code == 403, (method, path, response.code)
        error = json.loads(response.body)
        assert error["rule"] == "forbidden" and error["message"], (method, path)
    for method, path in ROUTES:  # a wrong token is no better
        response = await raw(method, "rho/api/" + path.format(**ids), headers={"Authorization": "token not-the-token"})
        assert response.code == 403, (method, path, response.code)
    assert store.project.stored_plans() == [ids["plan"]]  # DELETE did nothing
    assert not (store.project.home / "workflows" / "runs").exists() or not any(
        (store.project.home / "workflows" / "runs").iterdir()
    )


def _cookies(response: Any) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for header in response.headers.get_list("Set-Cookie"):
        jar.load(header)
    return {name: morsel.value for name, morsel in jar.items()}


async def test_cookie_authenticated_writes_need_the_xsrf_token(
    raw: Any, jp_serverapp: Any, ids: dict[str, str], store: Store
) -> None:
    token = jp_serverapp.identity_provider.token
    first = await raw("GET", f"rho/api/plans?token={token}")
    assert first.code == 200
    login = {name: value for name, value in _cookies(first).items() if name.startswith("username-")}
    assert login, "a token-authenticated request sets the login cookie"
    cookie = "; ".join(f"{k}={v}" for k, v in login.items())

    assert (
        await raw("GET", "rho/api/plans", headers={"Cookie": cookie})
    ).code == 200  # the cookie alone authenticates reads
    for method, path in ROUTES:
        if method == "GET":
            continue
        response = await raw(method, "rho/api/" + path.format(**ids), headers={"Cookie": cookie})
        assert response.code == 403, (method, path, response.code)
        error = json.loads(response.body)
        assert error["rule"] == "forbidden" and "_xsrf" in error["message"], (method, path, error)
    assert store.project.stored_plans() == [ids["plan"]]

    page = await raw("GET", "login")
    xsrf = _cookies(page)["_xsrf"]
    with_xsrf = {"Cookie": f"{cookie}; _xsrf={xsrf}", "X-XSRFToken": xsrf}
    wrong = {"Cookie": f"{cookie}; _xsrf={xsrf}", "X-XSRFToken": "2|00000000|" + "0" * 32 + "|1"}
    assert (await raw("POST", f"rho/api/plans/{ids['plan']}/runs", headers=wrong)).code == 403
    passed = await raw("POST", f"rho/api/plans/{ids['plan']}/runs", headers=with_xsrf)
    assert (
        passed.code == 409 and json.loads(passed.body)["rule"] == "confirmation_required"
    )  # past XSRF, into our checks
    deleted = await raw("DELETE", f"rho/api/plans/{ids['plan']}", headers=with_xsrf)
    assert deleted.code == 200 and store.project.stored_plans() == []
