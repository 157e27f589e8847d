"""Helpers for flow CLI tests: a local OpenAI-compatible server whose answers follow the request,
settings pointing at it, and reading a run's journal."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rho_notebook.store.journal import read_journal
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.conftest import REPO, Project

Serve = Callable[..., ScriptedServer]
EXAMPLES = REPO / "examples" / "flows"
ENV = {KEY_ENV: SECRET}


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(answer)`` starts a server on 127.0.0.1 answering every request with ``answer``."""
    started: list[ScriptedServer] = []

    def start(answer: Callable[[Recorded], Reply]) -> ScriptedServer:
        server = ScriptedServer([answer], repeat_last=True).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


def system_of(request: Recorded) -> str:
    """The system prompt of a chat completions request ('' when none)."""
    first = request.body["messages"][0]
    return str(first["content"]) if first["role"] == "system" else ""


def last_user(request: Recorded) -> str:
    return str([m for m in request.body["messages"] if m["role"] == "user"][-1]["content"])


def echo(request: Recorded) -> Reply:
    """``[<first word of the system prompt's second word>] <last user message>``: an answer that
    names who was asked and what, so a result shows which calls fed it."""
    words = system_of(request).split()
    role = words[3].rstrip(".") if len(words) > 3 else "model"
    return OPENAI.answer(f"[{role}] {last_user(request)}")


def setup(project: Project, server: ScriptedServer, *examples: str) -> None:
    """Copy ``examples`` into the workspace and point the default provider at ``server``."""
    for name in examples:
        shutil.copy(EXAMPLES / name, project.root / name)
    write_settings_for(project.home, server)


def journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    return list(read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events)


def kinds(project: Project, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [record for record in journal(project, run_id) if record["kind"] == kind]


def run_flow(project: Project, file: str, flow: str, prompt: str) -> tuple[int, str, str]:
    """``run FILE --flow NAME --input prompt=...``: (exit code, run ID, stdout + stderr)."""
    ran = project.cli(
        "run", file, "--flow", flow, "--input", f"prompt={json.dumps(prompt)}", "--yes", "--output", "jsonl", env=ENV
    )
    lines = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    assert lines, ran.stdout + ran.stderr
    return ran.returncode, str(lines[0]["run_id"]), ran.stdout + ran.stderr


def result(project: Project, run_id: str) -> dict[str, Any]:
    shown = project.cli("result", run_id, "--output", "json", env=ENV)
    assert shown.returncode == 0, shown.stderr
    data: dict[str, Any] = json.loads(shown.stdout)
    return data
