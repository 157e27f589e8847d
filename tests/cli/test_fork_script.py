"""Forks of script and flow runs at a step key (issue 35, point 2; docs/fork.md).

Every step is a real step (a verified command appending a line to its own side-effect file, or a
model call to a local OpenAI-compatible server on 127.0.0.1), so a step that ran again shows in a
counter; the source run is made by the real CLI, the fork by the fork's real pieces: its record
checked and frozen into a derived plan (consent for its digest), its taken values copied into the
new run, and its owner executing the script from the top.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import ForkRefused
from rho_notebook.model.fork import UNSET
from rho_notebook.model.plan import Plan
from rho_notebook.policy.approvals import who_am_i
from rho_notebook.runtime.owner import create_run, execute_run
from rho_notebook.runtime.script_fork import edited_payload, fork_script_record
from rho_notebook.script import schema as script_schema
from rho_notebook.service import Consent, StartRun
from rho_notebook.service.background import default_runner
from rho_notebook.service.fork import create_fork_run, derive_fork_plan
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.plans import PlanStore
from rho_notebook.store.runs import RunStore
from tests.agents.fakeserver import OPENAI, Recorded, Reply
from tests.cli.flowhelp import ENV, Serve, run_flow, serve, setup
from tests.cli.runhelp import status
from tests.cli.test_script_runs import effects, kinds, run, write_script
from tests.conftest import Project

__all__ = ["serve"]  # the fixture, used by name

CHAIN = """\
def step(name, text):
    return sh(f"echo ran >> effects/{name}.log; echo {text}", step_id=name)

a = step("a", "alpha")
b = step("b", "beta")
c = step("c", "gamma")
d = sh(f"echo ran >> effects/d.log; printf '%s' '{c.output.strip()}' > effects/d.seen; echo delta", step_id="d")
emit_output({"c": c.output, "replayed": [a.replayed, b.replayed, c.replayed, d.replayed]})
"""


def fork(project: Project, run_id: str, at: str, value: Any = UNSET) -> str:
    """Fork ``run_id`` at step ``at`` (with ``value`` when given) and run the fork to its end: the
    derived plan (the fork record in its digest), consent for that digest, the taken values copied
    into the new run, its owner started. Returns the fork's run ID."""
    layout = StoreLayout(home=project.home)
    forked = derive_fork_plan(layout, run_id, at=at, value=value, via="cli")
    plan = forked.plan
    assert plan.graph.fork is not None and plan.graph_digest != RunStore(layout).manifest(run_id).graph_digest
    request = StartRun(plan=plan.plan_id, consent=Consent(digest=plan.graph_digest))
    fork_id = default_runner().call(create_fork_run(layout, forked, request))
    asyncio.run(execute_run(layout, fork_id, resume=False))
    return fork_id


def test_a_script_forked_at_a_step_replays_the_steps_before_takes_the_edit_and_runs_the_rest(
    project: Project,
) -> None:
    script = write_script(project, CHAIN)
    result, source = run(project, script)
    assert result.returncode == 0, result.stdout + result.stderr
    counts = {name: effects(project, name) for name in "abcd"}
    assert counts == dict.fromkeys("abcd", 1)

    forked = fork(project, source, "c", "edited by hand\n")

    state = status(project, forked)
    assert state["outcome"] == "success", state
    # a and b replayed from the fork's copies, c took the edit: none of them ran; d ran once
    assert {name: effects(project, name) for name in "abcd"} == {"a": 1, "b": 1, "c": 1, "d": 2}
    assert (project.root / "effects" / "d.seen").read_text() == "edited by hand"
    launched = kinds(project, forked, "node_launched")
    assert [(r["node"], "taken_from" in r, "edited" in r) for r in launched] == [
        ("a", True, False),
        ("b", True, False),
        ("c", False, True),
        ("d", False, False),
    ]
    assert launched[0]["taken_from"] == {"run": source, "node": "a", "attempt": 1}
    edit = launched[2]["edited"]
    assert edit["by"] == who_am_i() and edit["via"] == "cli" and edit["value_digest"].startswith("sha256:")
    assert [r["node"] for r in kinds(project, forked, "process_started")] == ["d"]
    assert sorted(r["node"] for r in kinds(project, forked, "step_replayed")) == ["a", "b", "c"]
    assert kinds(project, forked, "script_output")[-1]["value"] == {
        "c": "edited by hand\n",
        "replayed": [True, True, True, False],
    }
    # the fork never changes its source
    assert status(project, source)["outcome"] == "success"
    assert not kinds(project, source, "step_replayed")


def test_a_fork_without_a_value_runs_the_step_again_and_everything_after_it(project: Project) -> None:
    script = write_script(project, CHAIN)
    result, source = run(project, script)
    assert result.returncode == 0, result.stdout + result.stderr

    forked = fork(project, source, "c")

    assert status(project, forked)["outcome"] == "success"
    assert {name: effects(project, name) for name in "abcd"} == {"a": 1, "b": 1, "c": 2, "d": 2}
    assert [r["node"] for r in kinds(project, forked, "process_started")] == ["c", "d"]
    assert (project.root / "effects" / "d.seen").read_text() == "gamma"


def test_a_forks_values_are_its_own_so_deleting_the_source_breaks_nothing(project: Project) -> None:
    script = write_script(project, CHAIN)
    result, source = run(project, script)
    assert result.returncode == 0, result.stdout + result.stderr
    layout = StoreLayout(home=project.home)
    runs = RunStore(layout)
    manifest = runs.manifest(source)
    graph = runs.graph(source, expected_digest=manifest.graph_digest)
    record = fork_script_record(layout, source, graph, at="d", value=UNSET, has_value=False, by="t", via="cli")
    assert [(t.node, t.attempt) for t in record.taken] == [("a", 1), ("b", 1), ("c", 1)]

    forked = fork(project, source, "d")
    deleted = project.cli("delete", source, "--yes")
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert not (project.home / "workflows" / "runs" / source).exists()

    shown = project.cli("result", forked, "--output", "json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert json.loads(shown.stdout)["output"]["c"] == "gamma\n"
    for key in "abc":
        value = project.home / "workflows" / "runs" / forked / "nodes" / key / "attempts" / "1" / "value.json"
        assert oct(value.stat().st_mode & 0o777) == "0o600"
        assert json.loads(value.read_text())["output"]


def test_a_fork_whose_copies_were_never_written_takes_its_steps_when_they_are_called(project: Project) -> None:
    """A crash between creating the fork and journaling its copies (``create_run_of`` writes them
    right after the run exists): its owner takes each step when the script calls it."""
    script = write_script(project, CHAIN)
    result, source = run(project, script)
    assert result.returncode == 0, result.stdout + result.stderr
    layout = StoreLayout(home=project.home)
    forked = derive_fork_plan(layout, source, at="c", value="late\n", via="cli")
    assert forked.lines()[1:] == [
        f"taken from run {source[:13]}: a, b",
        "runs anew: every step the script calls after it",
    ]
    fork_id = create_run(layout, forked.plan)  # a crash before the copies: the run alone, nothing copied

    asyncio.run(execute_run(layout, fork_id, resume=False))

    assert status(project, fork_id)["outcome"] == "success"
    assert {name: effects(project, name) for name in "abcd"} == {"a": 1, "b": 1, "c": 1, "d": 2}
    assert (project.root / "effects" / "d.seen").read_text() == "late"
    launched = kinds(project, fork_id, "node_launched")
    assert [(r["node"], "taken_from" in r, "edited" in r) for r in launched] == [
        ("a", True, False),
        ("b", True, False),
        ("c", False, True),
        ("d", False, False),
    ]
    assert [r["node"] for r in kinds(project, fork_id, "process_started")] == ["d"]


def test_a_fork_without_copies_whose_source_is_gone_launches_no_taken_step(project: Project) -> None:
    script = write_script(project, CHAIN)
    result, source = run(project, script)
    assert result.returncode == 0, result.stdout + result.stderr
    layout = StoreLayout(home=project.home)
    forked = derive_fork_plan(layout, source, at="c", value="edited\n", via="cli")
    fork_id = create_run(layout, forked.plan)  # as above: created, never copied
    deleted = project.cli("delete", source, "--yes")
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr

    asyncio.run(execute_run(layout, fork_id, resume=False))

    assert {name: effects(project, name) for name in "abcd"} == dict.fromkeys("abcd", 1)
    finished = {r["node"]: r for r in kinds(project, fork_id, "node_finished")}
    assert sorted(finished) == ["a", "b", "c"]
    assert all(r["state"] == "failure" and "nothing was launched" in r["message"] for r in finished.values())
    assert not kinds(project, fork_id, "process_started")
    assert status(project, fork_id)["outcome"] == "failure"


def test_refusals_name_the_step_and_change_nothing(project: Project) -> None:
    script = write_script(
        project,
        """\
a = sh("echo ran >> effects/a.log; echo alpha", step_id="a")
b = sh("echo ran >> effects/b.log; exit 4", step_id="b")
c = sh("echo ran >> effects/c.log; echo gamma", step_id="c")
""",
    )
    result, source = run(project, script)
    assert result.returncode == 0, result.stdout + result.stderr  # b failed, handled by going on
    layout = StoreLayout(home=project.home)
    runs = RunStore(layout)
    graph = runs.graph(source, expected_digest=runs.manifest(source).graph_digest)

    def refused(at: str, value: Any = UNSET) -> ForkRefused:
        with pytest.raises(ForkRefused) as caught:
            fork_script_record(
                layout, source, graph, at=at, value=value, has_value=value is not UNSET, by="t", via="cli"
            )
        return caught.value

    unknown = refused("nope")
    assert "no step 'nope'" in unknown.message and "a, b, c" in unknown.message
    failed = refused("c")
    assert failed.node == "b" and "'b'" in failed.message and "failure" in failed.message
    assert refused("b", 7).node == "b"  # a command step's edited value is its output text
    fork_script_record(layout, source, graph, at="b", value="fixed\n", has_value=True, by="t", via="cli")

    planned = project.create_run(runs_plan(project, source))
    with pytest.raises(ForkRefused) as caught:
        fork_script_record(layout, planned, graph, at="a", value=UNSET, has_value=False, by="t", via="cli")
    assert "not completed" in caught.value.message
    assert len(os.listdir(project.home / "workflows" / "runs")) == 2  # nothing else was stored


def runs_plan(project: Project, run_id: str) -> Plan:
    layout = StoreLayout(home=project.home)
    return PlanStore(layout).load(RunStore(layout).manifest(run_id).plan_id)


def test_an_edited_value_is_checked_against_the_steps_output_schema_naming_the_field() -> None:
    schema = script_schema.record({"verdict": script_schema.enum(["ok", "bad"]), "score": script_schema.integer()})
    step = {"kind": "agent", "digest": "sha256:x", "args": {"agent": "reviewer", "prompt": "p", "output": schema}}
    with pytest.raises(ForkRefused) as caught:
        edited_payload("review", step, {"verdict": "ok", "score": "high"})
    assert "$.score" in caught.value.message and "review" in caught.value.message
    assert caught.value.fields == ("score",)
    assert edited_payload("review", step, {"verdict": "bad", "score": 2}) == {
        "output": {"verdict": "bad", "score": 2},
        "value": {"verdict": "bad", "score": 2},
    }
    command = {"kind": "command", "args": {"argv": ["true"]}}
    assert edited_payload("c", command, "text\n")["value"] == {"exit_code": 0, "stdout": "text\n", "stderr": ""}


def test_a_value_that_is_no_text_is_refused_naming_what_the_front_end_sent() -> None:
    """A REST client was told to write ``--value '"..."'``: it has no flags, it sent ``"value"``."""
    command = {"kind": "command", "args": {"argv": ["true"]}}
    for via, said in (("cli", "(--value '\"...\"'), not int"), ("server", '(the "value" field), not int')):
        with pytest.raises(ForkRefused) as caught:
            edited_payload("c", command, 3, via=via)
        assert caught.value.message.endswith(said), caught.value.message


BRANCHES = """\
from rho_notebook.flow import AgentParam, Session, Workflow, run_session_loop


class Research(Workflow):
    def __init__(self):
        super().__init__()
        self.writer = AgentParam(system="You are the researcher. Research one angle.")

    def forward(self, session: Session) -> Session:
        first = run_session_loop(session, self.writer)
        return run_session_loop(first.append("user", "deeper: " + first.text()), self.writer)


class Team(Workflow):
    def __init__(self):
        super().__init__()
        self.research = Research()
        self.editor = AgentParam(system="You are the editor. Combine the research.")

    def forward(self, session: Session) -> Session:
        left = self.research(session.fork().append("user", "angle: bear"))
        right = self.research(session.fork().append("user", "angle: bull"))
        combined = Session.from_user_message("\\n".join(branch.text() for branch in [left, right]))
        return run_session_loop(combined, self.editor)
"""


def echo(request: Recorded) -> Reply:
    messages = request.body["messages"]
    role = str(messages[0]["content"]).split()[3].rstrip(".")
    return OPENAI.answer(f"[{role}] {[m for m in messages if m['role'] == 'user'][-1]['content']}")


def test_a_flow_forked_at_a_fork_branch_key(project: Project, serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve(echo)
    setup(project, server)
    project.write("team.py", BRANCHES)
    code, source, shown = run_flow(project, "team.py", "Team", "Should we buy?")
    assert code == 0, shown
    order = [r["node"] for r in kinds(project, source, "node_launched")]
    assert order == [
        "team.research.writer/f1#1",
        "team.research.writer/f1#2",
        "team.research.writer/f2#1",
        "team.research.writer/f2#2",
        "team.editor#1",
    ]
    asked = len(server.requests)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)

    forked = fork(project, source, "team.research.writer/f1#2", "[researcher] the bear case, edited")

    assert status(project, forked)["outcome"] == "success"
    # f1#1 replayed, f1#2 took the edit, the other branch and the editor asked anew
    assert len(server.requests) == asked + 3
    asked_now = [json.dumps(r.body["messages"]) for r in server.requests[asked:]]
    assert "the bear case, edited" in asked_now[-1]
    assert sorted(r["node"] for r in kinds(project, forked, "step_replayed")) == [
        "team.research.writer/f1#1",
        "team.research.writer/f1#2",
    ]
    output = kinds(project, forked, "script_output")[-1]["value"]
    assert output["text"].startswith("[editor] [researcher] the bear case, edited\n")


def test_a_fork_of_a_fork_takes_from_the_fork(project: Project) -> None:
    script = write_script(project, CHAIN)
    result, source = run(project, script)
    assert result.returncode == 0, result.stdout + result.stderr
    first = fork(project, source, "c", "first edit\n")
    second = fork(project, first, "d", "second edit\n")
    assert status(project, second)["outcome"] == "success"
    launched = kinds(project, second, "node_launched")
    assert [(r["node"], r.get("taken_from", {}).get("run")) for r in launched] == [
        ("a", first),
        ("b", first),
        ("c", first),
        ("d", None),
    ]
    assert kinds(project, second, "script_output")[-1]["value"]["c"] == "first edit\n"
    assert effects(project, "d") == 2  # d ran in the first fork only
    assert Path(project.root / "effects" / "d.seen").read_text() == "first edit"


def test_the_fork_verb_forks_a_script_run(project: Project) -> None:
    script = write_script(project, CHAIN)
    result, source = run(project, script)
    assert result.returncode == 0, result.stdout + result.stderr

    forked = project.cli("fork", source, "--at", "c", "--value", '"from the cli\\n"', "--yes", "--output", "jsonl")

    assert forked.returncode == 0, forked.stdout + forked.stderr
    fork_id = str(json.loads(next(line for line in forked.stdout.splitlines() if line.startswith("{")))["run_id"])
    assert fork_id != source
    assert {name: effects(project, name) for name in "abcd"} == {"a": 1, "b": 1, "c": 1, "d": 2}
    assert (project.root / "effects" / "d.seen").read_text() == "from the cli"
    refused = project.cli("fork", source, "--at", "nope", "--yes")
    assert refused.returncode == 3 and "no step 'nope'" in refused.stderr, refused.stderr


JUDGE = """\
from rho_notebook.script import emit_output, run_command, run_model, schema

VERDICT = schema.record({"verdict": schema.enum(["ok", "bad"]), "score": schema.integer()})
judged = run_model([{"role": "user", "content": "judge it"}], provider="local", model="test-model", output=VERDICT, step_id="judge")
acted = run_command(argv=["sh", "-c", "echo ran >> effects/act.log; echo acted"], step_id="act", timeout_seconds=60, max_output_bytes=1000)
emit_output({"verdict": judged.value, "acted": acted.output})
"""


def test_a_value_for_a_step_with_an_output_schema_is_checked_before_anything_is_stored(
    project: Project, serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve(lambda request: OPENAI.answer('{"verdict": "ok", "score": 3}'))
    setup(project, server)
    project.write("judge.py", JUDGE)
    (project.root / "effects").mkdir()
    ran = project.cli("run", "judge.py", "--yes", "--output", "jsonl", env=ENV)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    source = str(json.loads(ran.stdout.splitlines()[0])["run_id"])
    plans_before = sorted(os.listdir(project.home / "workflows" / "plans"))

    refused = project.cli("fork", source, "--at", "judge", "--value", '{"verdict": "ok", "score": "high"}', "--yes")

    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "$.score: expected integer" in refused.stderr and "'judge'" in refused.stderr
    assert sorted(os.listdir(project.home / "workflows" / "plans")) == plans_before  # nothing stored
    assert len(os.listdir(project.home / "workflows" / "runs")) == 1
    asked = len(server.requests)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)

    forked = fork(project, source, "judge", {"verdict": "bad", "score": 1})

    assert len(server.requests) == asked  # the edited model step was not asked again
    assert effects(project, "act") == 2
    assert kinds(project, forked, "script_output")[-1]["value"] == {
        "verdict": {"verdict": "bad", "score": 1},
        "acted": "acted\n",
    }
