"""Flow runs through the real CLI against a local OpenAI-compatible server on 127.0.0.1 that counts
requests: an owner SIGKILLed while a model call is pending halts on resume until ``--decide``, and
finished calls replay without new requests; an edited prompt diverges at its call with both
digests; forked branches on a thread pool replay by key; ``validate --flow`` fails naming the
module path of an unknown agent or provider. Step keys (``review.reviewer#1``,
``team.research.writer/f1#2``) are node names in the journal, folders, status and result."""

from __future__ import annotations

import json
import subprocess
import threading
from typing import Any

import pytest

from tests.agents.fakeserver import OPENAI, Recorded, Reply
from tests.agents.helpers import KEY_ENV, SECRET
from tests.cli.flowhelp import ENV, Serve, echo, kinds, result, run_flow, serve, setup, system_of
from tests.cli.runhelp import status
from tests.cli.test_script_runs import background, kill_owner_when
from tests.conftest import Project

__all__ = ["serve"]


def resume(project: Project, run_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    return project.cli("resume", run_id, "--yes", *args, env=ENV)


def test_an_owner_killed_during_a_model_call_halts_and_decide_reruns_only_that_call(
    project: Project, serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    never = threading.Event()  # the first reviewer request is held until its client goes away
    reviews: list[str] = []

    def answer(request: Recorded) -> Reply:
        if system_of(request).startswith("You are the reviewer"):
            reviews.append("asked")
            if len(reviews) == 1:
                return Reply(hold=never, body=OPENAI.answer("too late").body)
        return echo(request)

    server = serve(answer)
    setup(project, server, "review.py")
    monkeypatch.setenv(KEY_ENV, SECRET)  # the owner's environment
    owner = background(project, "run", "review.py", "--flow", "Review", "--input", 'prompt="Explain replay"', "--yes")

    def reviewer_pending(record: dict[str, Any]) -> bool:
        if record.get("kind") != "node_launched" or record.get("node") != "review.reviewer#1":
            return False
        server.wait_for_requests(2)  # the reviewer's request is at the server, unanswered
        return True

    run_id = kill_owner_when(project, owner, reviewer_pending)

    halted = resume(project, run_id)
    assert halted.returncode == 1, halted.stdout + halted.stderr
    state = status(project, run_id)
    assert state["lifecycle"] == "needs_decision"
    assert state["halted"] == [{"step": "review.reviewer#1", "why": "started and never settled"}]
    assert "--decide review.reviewer#1=rerun|skip" in halted.stdout
    assert len(server.requests) == 2  # the writer replayed; the halt asked nothing

    done = resume(project, run_id, "--decide", "review.reviewer#1=rerun")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(server.requests) == 3  # only the decided call asked again
    assert [r["decision"] for r in kinds(project, run_id, "decision_recorded")] == ["rerun"]
    assert {r["node"] for r in kinds(project, run_id, "step_replayed")} == {"review.writer#1"}
    output = result(project, run_id)["output"]
    assert output["text"] == "[reviewer] Explain replay"
    assert [m["content"] for m in output["messages"]["messages"]][1:] == ["[writer] Explain replay", output["text"]]
    state = status(project, run_id)
    assert state["nodes"]["review.reviewer#1"]["attempt"] == 2
    assert state["nodes"]["review.reviewer#1"]["state"] == "success"


EDITABLE = """\
from pathlib import Path

from rho_notebook.flow import AgentParam, Session, Workflow, run_session_loop


class Review(Workflow):
    def __init__(self):
        super().__init__()
        self.writer = AgentParam(system="You are the writer. Draft it.")
        self.reviewer = AgentParam(system=Path("prompts/reviewer.txt").read_text())
        self.publisher = AgentParam(system="You are the publisher. Publish it.")

    def forward(self, session: Session) -> Session:
        draft = run_session_loop(session, self.writer)
        reviewed = run_session_loop(draft, self.reviewer)
        return run_session_loop(reviewed, self.publisher)
"""


def flaky(prompt_start: str) -> Any:
    """Echo, but the first request whose system prompt starts with ``prompt_start`` fails (HTTP 500)."""
    failed: list[str] = []

    def answer(request: Recorded) -> Reply:
        if system_of(request).startswith(prompt_start) and not failed:
            failed.append("once")
            return Reply(status=500, body={"error": {"message": "upstream unavailable"}})
        return echo(request)

    return answer


def test_an_edited_prompt_diverges_at_that_call_naming_both_digests(project: Project, serve: Serve) -> None:
    server = serve(flaky("You are the publisher"))
    setup(project, server)
    project.write("review.py", EDITABLE)
    project.write("prompts/reviewer.txt", "You are the reviewer. Tighten it.")

    code, run_id, shown = run_flow(project, "review.py", "Review", "Explain digests")
    assert code == 1, shown  # the publisher's provider failed once
    assert len(server.requests) == 3
    stored = next(r for r in kinds(project, run_id, "node_launched") if r["node"] == "review.reviewer#1")["step"]

    project.write("prompts/reviewer.txt", "You are the reviewer. Be harsh.")  # read when the flow is built
    resumed = resume(project, run_id)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    diverged = kinds(project, run_id, "step_diverged")
    assert [(r["node"], r["stored_digest"]) for r in diverged] == [("review.reviewer#1", stored["digest"])]
    new = diverged[0]["digest"]
    assert new != stored["digest"]
    assert stored["digest"] in resumed.stdout and new in resumed.stdout
    assert {r["node"] for r in kinds(project, run_id, "step_replayed")} == {"review.writer#1"}
    assert len(server.requests) == 3  # nothing was asked again: the writer replayed, the reviewer diverged


TEAM = """\
from concurrent.futures import ThreadPoolExecutor

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
        left = session.fork().append("user", "angle: bear")
        right = session.fork().append("user", "angle: bull")
        with ThreadPoolExecutor(max_workers=2) as pool:
            branches = list(pool.map(self.research, [left, right]))
        combined = Session.from_user_message("\\n".join(branch.text() for branch in branches))
        return run_session_loop(combined, self.editor)
"""

BRANCH_KEYS = [
    "team.research.writer/f1#1",
    "team.research.writer/f1#2",
    "team.research.writer/f2#1",
    "team.research.writer/f2#2",
]


def test_forked_branches_on_a_thread_pool_replay_by_key(project: Project, serve: Serve) -> None:
    server = serve(flaky("You are the editor"))
    setup(project, server)
    project.write("team.py", TEAM)
    checked = project.cli("validate", "team.py", "--flow", "Team", env=ENV)
    assert checked.returncode == 0 and "0 warnings" in checked.stdout, checked.stdout + checked.stderr

    code, run_id, shown = run_flow(project, "team.py", "Team", "Should we buy?")
    assert code == 1, shown  # the editor's provider failed once
    assert len(server.requests) == 5
    assert sorted(r["node"] for r in kinds(project, run_id, "node_launched")) == ["team.editor#1", *BRANCH_KEYS]

    resumed = resume(project, run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(server.requests) == 6  # only the editor asked again
    assert sorted(r["node"] for r in kinds(project, run_id, "step_replayed")) == BRANCH_KEYS
    assert result(project, run_id)["output"]["text"] == (
        "[editor] [researcher] deeper: [researcher] angle: bear\n[researcher] deeper: [researcher] angle: bull"
    )
    nodes = status(project, run_id)["nodes"]
    assert {key: nodes[key]["state"] for key in BRANCH_KEYS} == dict.fromkeys(BRANCH_KEYS, "success")
    assert nodes["team.editor#1"]["attempt"] == 2
    folder = project.home / "workflows" / "runs" / run_id / "nodes" / "team.research.writer%2Ff1#2"
    assert (folder / "attempts" / "1" / "completion.json").is_file()
    shown_result = project.cli("result", run_id, env=ENV)
    assert "team.research.writer/f1#2" in shown_result.stdout


BAD = """\
from rho_notebook.flow import AgentParam, Session, Workflow, run_session_loop


class Bad(Workflow):
    def __init__(self):
        super().__init__()
        self.writer = AgentParam("no-such-agent")
        self.checker = AgentParam(system="Check it.", provider="nowhere")

    def forward(self, session: Session) -> Session:
        return run_session_loop(run_session_loop(session, self.writer), self.checker)
"""


def test_validate_fails_naming_the_module_path_of_an_unknown_agent_and_provider(project: Project, serve: Serve) -> None:
    server = serve(echo)
    setup(project, server)
    project.write("bad.py", BAD)

    checked = project.cli("validate", "bad.py", "--flow", "Bad", env=ENV)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "error[flow.agent]: bad.writer: agent 'no-such-agent' is not in the agent catalog" in checked.stderr
    assert "error[flow.provider]: bad.checker: provider 'nowhere' is not defined in settings" in checked.stderr
    assert "invalid: flow Bad of bad.py (2 errors" in checked.stdout

    as_json = json.loads(project.cli("validate", "bad.py", "--flow", "Bad", "--output", "json", env=ENV).stdout)
    assert as_json["valid"] is False
    assert sorted(d["rule"] for d in as_json["diagnostics"]) == ["flow.agent", "flow.provider"]

    planned = project.cli("plan", "bad.py", "--flow", "Bad", "--input", 'prompt="x"', env=ENV)
    assert planned.returncode != 0 and "bad.writer" in planned.stderr  # a plan is refused on the same errors
    missing = project.cli("validate", "bad.py", "--flow", "Missing", env=ENV)
    assert missing.returncode == 1 and "defines no Missing" in missing.stdout + missing.stderr
    assert server.requests == []


def test_a_flow_module_checked_or_run_as_a_script_is_told_the_flow_to_pass(project: Project, serve: Serve) -> None:
    """Without ``--flow`` a flow module is a script whose top-level code runs nothing: validate,
    plan and run say so (a warning; the run itself is what was asked for, and calls no model)."""
    server = serve(echo)
    setup(project, server, "review.py")
    warning = "warning[flow.unnamed]: the module defines the flow Review and its top-level code runs nothing"
    checked = project.cli("validate", "review.py", env=ENV)
    assert checked.returncode == 0 and warning in checked.stderr and "1 warning" in checked.stdout, checked.stderr
    for verb in (["plan", "review.py"], ["run", "review.py", "--yes"]):
        done = project.cli(*verb, env=ENV)
        assert done.returncode == 0, done.stdout + done.stderr
        assert warning in done.stderr and done.stderr.rstrip().endswith("pass --flow Review"), done.stderr
    as_flow = project.cli("validate", "review.py", "--flow", "Review", env=ENV)
    assert as_flow.returncode == 0 and "flow.unnamed" not in as_flow.stdout + as_flow.stderr
    assert server.requests == []


def test_a_flow_plan_keeps_its_manifest_and_needs_a_prompt(project: Project, serve: Serve) -> None:
    server = serve(echo)
    setup(project, server, "review.py")
    unplanned = project.cli("plan", "review.py", "--flow", "Review", env=ENV)
    assert unplanned.returncode != 0 and "prompt" in unplanned.stderr

    planned = project.cli(
        "plan", "review.py", "--flow", "Review", "--input", 'prompt="hi"', "--output", "json", env=ENV
    )
    assert planned.returncode == 0, planned.stderr
    plan_id = json.loads(planned.stdout)["plan_id"]
    manifest = json.loads((project.home / "workflows" / "plans" / plan_id / "manifest.json").read_text())
    assert manifest["flow"]["root"] == "review"
    assert [a["path"] for a in manifest["flow"]["agents"]] == ["review.reviewer", "review.writer"]
    graph = json.loads((project.home / "workflows" / "plans" / plan_id / "graph.json").read_text())
    assert graph["script"]["flow"] == "Review"
    text = project.cli("plan", "review.py", "--flow", "Review", "--input", 'prompt="hi"', env=ENV)
    assert "flow        Review of //review.py" in text.stdout and "writer: inline prompt" in text.stdout
