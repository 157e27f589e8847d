"""Fixtures for notebook tests: a workspace + store home as the process's cwd and environment,
and a real IPython shell with the extension loaded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents.conftest import serve  # noqa: F401 - the fixture serve([replies...]), for notebook tests of agents
from tests.conftest import Project
from tests.kernel.helpers import stop_owners


@pytest.fixture(autouse=True)
def no_owner_outlives_the_test(project: Project) -> Iterator[None]:
    """Runs have owner processes of their own, which outlive the kernel that started them: cancel
    whatever still runs when the test ends."""
    yield
    stop_owners(project.home)


@pytest.fixture
def ws(project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    """The project as this process sees it: cwd = workspace, RHO_NOTEBOOK_HOME = its store."""
    monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(project.home))
    monkeypatch.chdir(project.root)
    return project


@pytest.fixture
def ip(ws: Project) -> Iterator[Any]:
    """IPython's test shell (in-memory history) with ``%load_ext rho_notebook`` done."""
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "rho_notebook")
    try:
        yield shell
    finally:
        shell.run_line_magic("unload_ext", "rho_notebook")
        for name in ("run", "final", "resumed"):
            shell.user_ns.pop(name, None)
