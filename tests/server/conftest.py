"""Fixtures for the jupyter-server extension tests: pytest-jupyter's server fixtures (jp_serverapp,
jp_fetch, ...) with the rho_notebook extension enabled over a private store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

# pytest-jupyter is not an auto-registered plugin, and ``pytest_plugins`` is refused outside the
# root conftest; importing its fixtures and async-test hooks here scopes them to tests/server.
from pytest_jupyter.jupyter_server import *  # noqa: F403

from tests.conftest import Project
from tests.kernel.helpers import stop_owners
from tests.server.helpers import Store


@pytest.fixture
def store(project: Project, monkeypatch: pytest.MonkeyPatch) -> Store:
    """The test's workspace and RHO_NOTEBOOK_HOME (set before the server app starts)."""
    monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(project.home))
    return Store(project)


@pytest.fixture(autouse=True)
def no_owner_outlives_the_test(project: Project) -> Iterator[None]:
    """A run started through the API has an owner process of its own, which outlives the server:
    cancel whatever still runs when the test ends."""
    yield
    stop_owners(project.home)


@pytest.fixture
def jp_server_config(store: Store) -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"rho_notebook.server": True}}}
