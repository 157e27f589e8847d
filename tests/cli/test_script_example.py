"""examples/scripts/fanout_review.py through the real CLI, offline: its command steps list and count
the files, its agent steps (a ThreadPoolExecutor fan-out with explicit ids) ask the example's
reviewer agent, served by a local OpenAI-compatible server on 127.0.0.1, and its output combines
the verdicts. A fan-in that fails is reported as an empty summary: the script goes on and exits 0,
so the run succeeds and the fan-in shows ``failure (handled)``."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rho_notebook.store.journal import read_journal
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.conftest import REPO, Project

Serve = Callable[..., ScriptedServer]
EXAMPLE = REPO / "examples" / "scripts"
ENV = {KEY_ENV: SECRET}
SOURCES = {
    "src/app.py": "def main():\n    return 42\n",
    "src/util/strings.py": "def shout(text):\n    return text.upper()\n\n\ndef whisper(text):\n    return text.lower()\n",
    "src/Old Code.py": "# TODO remove\nimport os\nprint(os.getcwd())\n",
}


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve([replies...])`` starts a scripted server on 127.0.0.1, stopped after the test."""
    started: list[ScriptedServer] = []

    def start(script: list[Any], **kwargs: Any) -> ScriptedServer:
        server = ScriptedServer(script, **kwargs).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


def reviewer(request: Recorded) -> Reply:
    """Answer a review by the file the prompt names; the fan-in step with a summary line."""
    prompt = request.body["messages"][-1]["content"]
    if "Combine these file reviews" in prompt:
        return OPENAI.answer("One file needs work; the rest are fine.")
    name = re.search(r"Review the file (.+?) \(", prompt)
    assert name is not None, prompt
    verdict = "revise" if "TODO" in prompt else "ok"
    return OPENAI.answer(json.dumps({"verdict": verdict, "summary": f"{name[1]} reviewed"}))


def setup(project: Project, server: ScriptedServer) -> None:
    shutil.copy(EXAMPLE / "fanout_review.py", project.root / "fanout_review.py")
    shutil.copytree(EXAMPLE / "agents", project.root / "agents")
    for relative, text in SOURCES.items():
        project.write(relative, text)
    write_settings_for(project.home, server)


def journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    return list(read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events)


def test_the_fanout_review_example_runs_offline(project: Project, serve: Serve) -> None:
    server = serve([reviewer], repeat_last=True)
    setup(project, server)

    checked = project.cli("validate", "fanout_review.py", env=ENV)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 errors, 0 warnings" in checked.stdout, checked.stdout  # explicit ids, sorted input, no clock

    ran = project.cli("run", "fanout_review.py", "--yes", "--output", "jsonl", "--input", "workers=3", env=ENV)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = next(json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{"))["run_id"]

    result = project.cli("result", run_id, "--output", "json", env=ENV)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["output"] == {
        "files": {
            "Old Code.py": {"lines": 3, "verdict": "revise", "summary": "Old Code.py reviewed"},
            "app.py": {"lines": 2, "verdict": "ok", "summary": "app.py reviewed"},
            "util/strings.py": {"lines": 6, "verdict": "ok", "summary": "util/strings.py reviewed"},
        },
        "revise": ["Old Code.py"],
        "summary": "One file needs work; the rest are fine.",
    }
    assert len(server.requests) == 4  # three reviews and the fan-in, nothing else

    launched = {r["node"]: r["step"] for r in journal(project, run_id) if r["kind"] == "node_launched"}
    assert sorted(launched) == sorted(
        ["list", "count", "review-1-old-code-py", "review-2-app-py", "review-3-util-strings-py", "combine"]
    )
    assert {launched[key]["kind"] for key in ("list", "count")} == {"command"}
    assert launched["review-2-app-py"]["kind"] == "agent"
    # edges: each review after the count, the fan-in after every review
    assert launched["review-2-app-py"]["after"] == ["count"]
    assert sorted(launched["combine"]["after"]) == [
        "review-1-old-code-py",
        "review-2-app-py",
        "review-3-util-strings-py",
    ]


def test_a_failed_fan_in_the_example_goes_on_from_is_handled_and_the_run_succeeds(
    project: Project, serve: Serve
) -> None:
    """The example reports an empty summary when the fan-in fails and exits 0: the outcome follows
    the script (issue 33), so the run succeeds and the fan-in shows ``failure (handled)``."""
    combines: list[str] = []

    def flaky(request: Recorded) -> Reply:
        if "Combine these file reviews" in request.body["messages"][-1]["content"]:
            combines.append("asked")
            if len(combines) == 1:  # the provider is down the first time the fan-in asks
                return Reply(status=500, body={"error": {"message": "upstream unavailable"}})
        return reviewer(request)

    server = serve([flaky], repeat_last=True)
    setup(project, server)
    ran = project.cli("run", "fanout_review.py", "--yes", "--output", "jsonl", env=ENV)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = next(json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{"))["run_id"]
    assert len(server.requests) == 4

    state = json.loads(project.cli("status", run_id, "--output", "json").stdout)
    assert state["outcome"] == "success"
    combine = state["nodes"]["combine"]
    assert (combine["state"], combine["shown"]) == ("failure", "failure_handled")
    assert {state["nodes"][key]["shown"] for key in state["nodes"] if key != "combine"} == {"success"}
    output = json.loads(project.cli("result", run_id, "--output", "json").stdout)["output"]
    assert output["revise"] == ["Old Code.py"] and output["summary"] == ""
    again = project.cli("resume", run_id, "--yes", env=ENV)
    assert again.returncode != 0 and "nothing to resume" in again.stderr, again.stdout + again.stderr
    assert len(server.requests) == 4
