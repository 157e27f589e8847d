"""Issue 33 point 11, from the seed's own example (manykind-workflows.txt, "The graph" and "The
carried item"): `{{ $run.members }}` and `{{ $run.participants }}` resolve in a real graph run.

The graph is the seed's ticket triage, `trigger → classify (model) → branch → escalate (human) →
reply (connector action) → result (output)`, with the seed's own prompt mapping
("=Summarise this ticket from {{ $json.customer }}:\\n{{ $json.text }}") as the human step's
question. Adapted only where docs/graphs.md names a difference: there are no connectors nor local
models offline, so `classify` and `reply` are command steps (`reply` passes the run's people to its
program, as a connector action would); the trigger's payload is the run's inputs. Locally there is
no team ("Differences from Manykind" in docs/graphs.md): members is the initiator, and
participants is the initiator then each person who answered or approved in this run.

Three people act, each a real `rho-notebook` process with its own OS account name (`getpass`
reads LOGNAME): alice starts the run, carol approves the supervised `classify` launch, bob answers
the human step, and alice approves `reply` (she is listed once). The owner is killed with SIGKILL
while `reply` waits, and dave resumes the run: the lists are folded from the journal, so the
resumed run resolves the same ones, and the initiator stays alice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tests.cli.runhelp import kill_owner, status, wait_for_event
from tests.conftest import REPO, Project

TRIAGE = """\
name: triage
inputs:
  customer: {type: string}
  text: {type: string}
steps:
  - {id: trigger, kind: set, params: {fields: {customer: "={{ $json.customer }}", text: "={{ $json.text }}"}}}
  - {id: classify, kind: command, params: {argv: [printf, '"hardware"'], into: category}}
  - {id: branch, kind: branch}
  - id: escalate
    kind: human
    params:
      question: "=Summarise this ticket from {{ $json.customer }}:\\n{{ $json.text }}"
      fields:
        assignee: {type: enum, choices: [oncall, backlog]}
  - id: reply
    kind: command
    params:
      argv: [sh, -c, 'printf "%s" "$1"', sh, "={{ $run.participants }}"]
      into: notified
  - id: file
    kind: set
    params:
      fields:
        initiator: "={{ $run.initiator }}"
        members: "={{ $run.members }}"
        participants: "={{ $run.participants }}"
        summary: "=Seen by {{ $run.participants }} of {{ $run.members }}"
  - {id: result, kind: output}
edges:
  - {from: trigger, to: classify}
  - {from: classify, to: branch}
  - {from: branch, to: escalate, when: {field: category, op: eq, value: hardware}}
  - {from: branch, to: file}
  - {from: escalate, to: reply}
  - {from: reply, to: file}
  - {from: file, to: result}
"""


def person(name: str) -> dict[str, str]:
    """The environment of a process run by ``name`` (who_am_i reads LOGNAME first)."""
    return {"LOGNAME": name, "USER": name, "LNAME": name, "USERNAME": name}


def start(project: Project, name: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO), **person(name)}
    return subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", *args, "--yes", "--output", "jsonl", "--approval-timeout", "300"],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def asked(proc: subprocess.Popen[str], node: str) -> tuple[str, dict[str, Any]]:
    return wait_for_event(proc, lambda e: e["kind"] == "approval_requested" and e["node"] == node, timeout=120)


def acts(project: Project, name: str, *args: str) -> None:
    done = project.cli(*args, env=person(name), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_members_and_participants_resolve_from_the_journal_across_a_resume(project: Project) -> None:
    project.write("triage.graph.yaml", TRIAGE)
    inputs = ["--input", 'customer="Ada Lovelace"', "--input", 'text="printer on fire"']
    run = start(project, "alice", "run", "triage.graph.yaml", *inputs, "--mode", "supervised")
    run_id, launch = asked(run, "classify")
    acts(project, "carol", "approve", run_id, launch["request_id"][:13])

    _, form = asked(run, "escalate")
    assert form["facts"]["prompt"] == "Summarise this ticket from Ada Lovelace:\nprinter on fire"
    acts(project, "bob", "answer", run_id, "escalate", 'assignee="oncall"')

    _, reply = asked(run, "reply")  # the launch shows the people it will be given
    assert reply["facts"]["argv"][-1] == '["alice","carol","bob"]'
    kill_owner(project, run_id)
    assert run.wait(timeout=60) == 1

    resumed = start(project, "dave", "resume", run_id)  # the initiator stays the run's: alice
    _, again = asked(resumed, "reply")
    assert again["request_id"] == reply["request_id"] and again["facts"] == reply["facts"]
    acts(project, "alice", "approve", run_id, again["request_id"][:13])  # the initiator: listed once
    assert resumed.wait(timeout=120) == 0, resumed.stderr.read() if resumed.stderr else ""

    data = json.loads(project.cli("result", run_id, "--output", "json").stdout)
    assert data["outcome"] == "success"
    output = data["output"]
    assert output["notified"] == ["alice", "carol", "bob"]  # the command's stdout, parsed as JSON
    assert output["initiator"] == "alice" and output["members"] == ["alice"]
    assert output["participants"] == ["alice", "carol", "bob"]
    assert output["summary"] == 'Seen by ["alice","carol","bob"] of ["alice"]'
    assert output["assignee"] == "oncall" and output["category"] == "hardware"
    assert status(project, run_id)["lifecycle"] == "completed"
