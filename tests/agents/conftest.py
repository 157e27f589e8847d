"""Fixtures for agent tests (helpers live in tests.agents.helpers)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.fakeserver import ScriptedServer, Step
from tests.agents.helpers import KEY_ENV, SECRET, Runner


@pytest.fixture
def runner(tmp_path: Path) -> Runner:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Demo\nThe answer is 42.\n")
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("def main():\n    return 42  # TODO tidy\n")
    return Runner(tmp_path=tmp_path, workspace=workspace.resolve(), environ={KEY_ENV: SECRET})


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedServer]]:
    """``serve([replies...])`` starts a scripted server that is stopped after the test."""
    started: list[ScriptedServer] = []

    def start(script: list[Step], **kwargs: Any) -> ScriptedServer:
        server = ScriptedServer(script, **kwargs).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)
