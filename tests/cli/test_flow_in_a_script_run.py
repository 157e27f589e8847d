"""A flow inside a real script run (``rho-notebook run FILE.py`` through the real CLI), its model
calls answered by a local OpenAI-compatible server: every agent call and tool call is a journaled
step under its flow key, and resume replays them all without a new model request.

The script calls :func:`rho_notebook.flow.run_flow` itself (the ``--flow NAME`` plumbing is not
needed for that); the flow's steps are the script tier's own ``model`` and ``command`` steps.
"""

from __future__ import annotations

import json

from tests.agents.fakeserver import OPENAI, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET
from tests.agents.test_end_to_end import configure
from tests.cli.runhelp import status
from tests.cli.test_script_runs import kinds
from tests.conftest import Project

ENV = {KEY_ENV: SECRET}

FLOW = """\
import sys
from pathlib import Path
from rho_notebook.flow import AgentParam, Session, Tool, Workflow, run_flow, run_session_loop
from rho_notebook.script import emit_output

COUNT = Tool(
    name="count_words",
    description="Count the words of a text",
    argv=("sh", "tools/count.sh"),
    parameters={"type": "object", "properties": {"text": {"type": "string"}}},
)


class Review(Workflow):
    def __init__(self):
        super().__init__()
        self.writer = AgentParam(system="Write a first draft.")
        self.reviewer = AgentParam(system="Review the draft and tighten it.")

    def forward(self, session):
        draft = run_session_loop(session, self.writer, tools=[COUNT])
        return run_session_loop(draft, self.reviewer)


final = run_flow(Review(), Session.from_user_message("Describe rho in five words."), name="review")
if not Path("go").exists():
    sys.exit(3)
emit_output({"text": final.text(), "messages": len(final.messages)})
"""


def test_a_flow_run_is_journaled_steps_and_resume_replays_them_without_model_requests(project: Project) -> None:
    replies = [
        OPENAI.tools(("c1", "count_words", {"text": "rho runs durable agent workflows"})),
        OPENAI.answer("Rho runs durable agent workflows."),
        OPENAI.answer("Rho: durable agent workflows."),
    ]
    with ScriptedServer(replies) as server:
        configure(project, server)
        project.write("review.py", FLOW)
        project.write(
            "tools/count.sh",
            'printf "%s" "$1" | python3 -c "import json,sys; print(len(json.load(sys.stdin)[\'text\'].split()))"\n',
        )

        first = project.cli("run", "review.py", "--yes", "--output", "jsonl", env=ENV)
        lines = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
        assert lines, first.stdout + first.stderr
        run_id = str(lines[0]["run_id"])
        state = status(project, run_id)
        assert state["outcome"] == "failure", state  # the script stopped itself (no `go` yet)
        keys = ["review.writer#1", "review.writer#2", "review.writer#3", "review.reviewer#1"]
        assert {key: state["nodes"][key]["state"] for key in keys} == dict.fromkeys(keys, "success")
        assert len(server.requests) == 3
        # the tool's output went back to the model as a tool message
        assert OPENAI.tool_results(server.requests[1]) == [("c1", "5\n", False)]
        assert OPENAI.system(server.requests[2]) == "Review the draft and tighten it."

        (project.root / "go").write_text("")
        resumed = project.cli("resume", run_id, "--yes", env=ENV)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert len(server.requests) == 3  # every model call was replayed from the journal
        assert [r["node"] for r in kinds(project, run_id, "step_replayed")] == keys
        assert [r["value"] for r in kinds(project, run_id, "script_output")] == [
            {"text": "Rho: durable agent workflows.", "messages": 5}
        ]
        assert status(project, run_id)["outcome"] == "success"


def test_tool_arguments_are_model_step_data_which_the_runner_never_runs_as_code(project: Project) -> None:
    """The model's tool arguments reach the command as data of the model step that asked for them:
    a tool whose argv would run them as code (``sh -c``) is refused before anything runs."""
    script = FLOW.replace("tools=[COUNT]", "tools=[Tool(name='shell', description='run', argv=('sh', '-c'))]")
    with ScriptedServer([OPENAI.tools(("c1", "shell", {"command": "touch pwned"}))]) as server:
        configure(project, server)
        project.write("review.py", script)
        done = project.cli("run", "review.py", "--yes", "--output", "jsonl", env=ENV)
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        completed = [e for e in events if e["kind"] == "run_completed"]
        assert completed and completed[-1]["outcome"] == "failure", done.stdout + done.stderr
        message = completed[-1]["message"]
        assert "step 'review.writer#2'" in message and "data would run as code" in message
        assert len(server.requests) == 1
        assert not (project.root / "pwned").exists()
