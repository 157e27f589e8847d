"""docs/porting.md's Manykind ports run end to end (issue 33): the ticket triage
(docs/examples/porting/manykind_triage.graph.yaml) and the ticket digest
(docs/examples/porting/manykind_digest.graph.yaml), read from their files (one copy: the page
shows those files byte for byte, tests/unit/test_porting_docs.py validates them; here they run).

Real runs through the real CLI: the ports' provider ``main`` is a local OpenAI-compatible server
on 127.0.0.1 (settings name it, as a porter's would), the ``human`` steps are answered by a second
``rho-notebook`` process, and the command steps are real subprocesses.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.cli.flowhelp import journal
from tests.cli.runhelp import status, wait_for_event
from tests.conftest import REPO, Project

PORTS = REPO / "docs" / "examples" / "porting"
ENV = {KEY_ENV: SECRET}


def answer(request: Recorded) -> Reply:
    """The model ``small``: a typed triage of the ticket when the call asks for one (urgent when
    the text says "fire"), else ``summary: LAST LINE`` of the prompt."""
    prompt = str(request.body["messages"][-1]["content"])
    last = prompt.splitlines()[-1]
    if prompt.startswith("Summarise this ticket from "):
        return OPENAI.answer(json.dumps({"summary": last, "urgent": "fire" in last}))
    return OPENAI.answer(f"summary: {last}")


@pytest.fixture
def server(project: Project) -> Iterator[ScriptedServer]:
    """The model server, named ``main`` in settings (the ports' provider), model ``small``."""
    with ScriptedServer([answer], repeat_last=True) as started:
        main = {"type": "openai", "base_url": OPENAI.base(started.url), "api_key_env": KEY_ENV}
        write_settings_for(project.home, started, providers={"main": main}, default_provider="main")
        yield started


def start(project: Project, name: str, *inputs: str) -> subprocess.Popen[str]:
    """``rho-notebook run PORT --input ...`` in the background, reading its jsonl."""
    shutil.copy(PORTS / name, project.root / name)
    env = {**os.environ, **ENV, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    args = [arg for value in inputs for arg in ("--input", value)]
    return subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "run", name, *args, "--yes", "--output", "jsonl"],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def form(proc: subprocess.Popen[str], step: str) -> tuple[str, dict[str, Any]]:
    return wait_for_event(proc, lambda e: e["kind"] == "approval_requested" and e["node"] == step, timeout=120)


def answer_step(project: Project, run_id: str, step: str, *fields: str) -> None:
    done = project.cli("answer", run_id, step, *fields, env=ENV, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def finish(proc: subprocess.Popen[str]) -> None:
    code = proc.wait(timeout=180)
    assert code == 0, proc.stderr.read() if proc.stderr else ""


def test_the_triage_port_escalates_an_urgent_ticket_to_a_person_and_replies(
    project: Project, server: ScriptedServer
) -> None:
    run = start(project, "manykind_triage.graph.yaml", 'customer="Ada Lovelace"', 'text="printer on fire"')
    run_id, asked = form(run, "escalate")
    (call,) = server.requests
    assert call.body["model"] == "small"
    assert call.body["messages"][-1]["content"] == "Summarise this ticket from Ada Lovelace:\nprinter on fire"
    assert asked["facts"]["prompt"] == "Urgent ticket from Ada Lovelace: printer on fire. What do we answer?"
    answer_step(project, run_id, "escalate", 'answer="A technician is on the way"')
    finish(run)

    data = status(project, run_id)
    assert data["outcome"] == "success"
    nodes = {key: node["state"] for key, node in data["nodes"].items()}
    assert (nodes["classify"], nodes["escalate"], nodes["reply"]) == ("success", "success", "success")
    assert nodes["file"] != "success"  # the branch took the first edge whose condition holds
    finished = [r for r in journal(project, run_id) if r["kind"] == "node_finished" and r["node"] == "reply"]
    assert finished[-1]["state"] == "success"
    reply = project.cli("logs", run_id, "reply", env=ENV)
    assert "To Ada Lovelace: A technician is on the way" in reply.stdout, reply.stdout + reply.stderr


def test_the_triage_port_files_a_ticket_that_is_not_urgent(project: Project, server: ScriptedServer) -> None:
    run = start(project, "manykind_triage.graph.yaml", 'customer="Bob"', 'text="no wifi"')
    finish(run)
    run_id = json.loads(run.stdout.readline() if run.stdout else "{}")["run_id"]
    data = status(project, run_id)
    assert data["outcome"] == "success"
    assert data["output"]["filed"] == "Filed: no wifi"
    assert data["output"]["triage"] == {"summary": "no wifi", "urgent": False}
    assert data["nodes"]["escalate"]["state"] != "success"


def test_the_digest_port_summarises_every_line_and_names_the_people(project: Project, server: ScriptedServer) -> None:
    """The aggregate's model instances (``summarise[0]``, ...) run in element order; the human step's
    question names the run's members; the result names who answered (``$run.participants``)."""
    tickets = "printer on fire\nno wifi\nslow disk"
    run = start(project, "manykind_digest.graph.yaml", f"tickets={json.dumps(tickets)}")
    run_id, asked = form(run, "approve")
    prompts = [str(r.body["messages"][-1]["content"]) for r in server.requests]
    assert prompts == [f"Summarise this ticket in one line:\n{line}" for line in tickets.splitlines()]
    question = asked["facts"]["prompt"]
    assert re.match(r'Send this digest to \["[^"]+"\]\?\n', question), question
    assert '"summary: printer on fire"' in question
    answer_step(project, run_id, "approve", "send=true")
    finish(run)

    data = status(project, run_id)
    assert data["outcome"] == "success"
    output = data["output"]
    assert output["digest"] == [f"summary: {line}" for line in tickets.splitlines()]
    assert output["send"] is True
    assert isinstance(output["reviewed_by"], list) and output["reviewed_by"], output
    launched = [r["instance"] for r in journal(project, run_id) if r["kind"] == "instance_launched"]
    assert launched == [0, 1, 2]
