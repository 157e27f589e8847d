"""Script steps (runtime/script_steps.py): validation, digests and facts, and real attempts.

Command steps run real processes through the verified launch; agent and model steps talk real HTTP
to the scripted OpenAI-compatible server of tests/agents on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any

import pytest

from rho_notebook.errors import StepInvalid
from rho_notebook.model.graph import Graph, ScriptSpec
from rho_notebook.model.state import NodeState
from rho_notebook.runtime.script_steps import PreparedStep, StepCall, StepResult, StepRunner
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import RunFolder
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.conftest import Project

RUN_ID = "run-steps"
LIMITS = {"timeout_seconds": 30, "max_output_bytes": 10_000}
AGENT = """---
description: test agent
runtime: rho
model-policy: inherit
tools: [read_file]
---
Be brief.
"""
VERDICT = {"type": "record", "fields": {"verdict": {"type": "enum", "members": ["ok", "bad"]}}}


def runner(project: Project, *, script: str = "//scripts/review.py", **extra: Any) -> StepRunner:
    layout = StoreLayout(home=project.home)
    graph = Graph(name="review", inputs=(), nodes=(), script=ScriptSpec(module=script))
    return StepRunner(
        graph=graph,
        workspace=project.root,
        layout=layout,
        run_id=RUN_ID,
        folder=RunFolder(path=layout.runs / RUN_ID),
        environ={**os.environ, KEY_ENV: SECRET},
        **extra,
    )


def command(key: str, argv: list[Any], **args: Any) -> StepCall:
    return StepCall(key=key, kind="command", args={"argv": argv, **LIMITS, **args})


def run(steps: StepRunner, prepared: PreparedStep, *, cancel: asyncio.Event | None = None) -> StepResult:
    attempt = steps.folder.attempt_dir(prepared.call.key, 1)

    async def go() -> StepResult:
        return await steps.run(prepared, attempt_dir=attempt, cancel=cancel or asyncio.Event())

    return asyncio.run(go())


def attempt_files(steps: StepRunner, key: str) -> set[str]:
    return {p.name for p in steps.folder.attempt_dir(key, 1).iterdir()}


# -- command steps: real processes ---------------------------------------------------------------


def test_command_success_keeps_stdout_stderr_and_exit(project: Project) -> None:
    steps = runner(project)
    started: list[int] = []

    async def go() -> StepResult:
        prepared = steps.prepare(command("greet", ["sh", "-c", "echo hello; echo warn >&2"]))

        async def on_started(pid: int) -> None:
            started.append(pid)

        attempt = steps.folder.attempt_dir("greet", 1)
        return await steps.run(prepared, attempt_dir=attempt, cancel=asyncio.Event(), on_started=on_started)

    result = asyncio.run(go())
    assert result.state is NodeState.SUCCESS
    assert result.output == "hello\n"
    assert result.value == {"exit_code": 0, "stdout": "hello\n", "stderr": "warn\n"}
    assert result.exit is not None and result.exit["kind"] == "exit" and started == [result.exit["pid"]]
    assert {"stdout", "stderr", "exit.json"} <= attempt_files(steps, "greet")
    assert (steps.folder.attempt_dir("greet", 1) / "stdout").read_text() == "hello\n"


def test_command_failure_keeps_exit_code(project: Project) -> None:
    steps = runner(project)
    result = run(steps, steps.prepare(command("fail", ["sh", "-c", "echo partial; exit 3"])))
    assert result.state is NodeState.FAILURE
    assert result.message == "exited with code 3"
    assert result.value == {"exit_code": 3, "stdout": "partial\n", "stderr": ""}


def test_command_timeout_stops_the_process(project: Project) -> None:
    steps = runner(project)
    result = run(steps, steps.prepare(command("slow", ["sleep", "60"], timeout_seconds=1)))
    assert result.state is NodeState.FAILURE
    assert "timed out after 1 s" in result.message
    assert result.value == {"exit_code": None, "stdout": "", "stderr": ""}


def test_command_output_is_truncated_to_max_output_bytes(project: Project) -> None:
    steps = runner(project)
    result = run(steps, steps.prepare(command("count", ["seq", "1", "1000"], max_output_bytes=100)))
    full = "".join(f"{n}\n" for n in range(1, 1001))
    assert result.state is NodeState.SUCCESS
    assert result.output == full[:100]
    assert result.exit is not None and result.exit["stdout_truncated"] is True
    assert result.exit["stdout_bytes"] == len(full)


def test_command_cancel_while_running(project: Project) -> None:
    steps = runner(project)
    prepared = steps.prepare(command("wait", ["sleep", "60"]))
    cancel = asyncio.Event()

    async def go() -> StepResult:
        async def on_started(pid: int) -> None:
            cancel.set()

        attempt = steps.folder.attempt_dir("wait", 1)
        return await steps.run(prepared, attempt_dir=attempt, cancel=cancel, on_started=on_started)

    result = asyncio.run(go())
    assert result.state is NodeState.CANCELLATION


def test_replaced_executable_fails_closed(project: Project) -> None:
    tool = project.write("bin/tool", "#!/bin/sh\necho original\n", mode=0o755)
    steps = runner(project)
    prepared = steps.prepare(command("tool", ["./bin/tool"]))
    assert prepared.facts["executable"] == "//bin/tool"
    tool.write_text("#!/bin/sh\necho replaced\n")
    result = run(steps, prepared)
    assert result.state is NodeState.FAILURE
    assert result.exit is not None and result.exit["kind"] == "not_started"
    assert str(tool) in result.message and "after the step call froze it" in result.message
    assert result.output == ""


def test_data_in_interpreter_code_is_refused(project: Project) -> None:
    steps = runner(project)
    data = {"step": "find", "text": "rm -rf /"}
    with pytest.raises(StepInvalid) as caught:
        steps.prepare(command("bad", ["sh", "-c", data]))
    assert "step 'bad'" in caught.value.message and "argv[2]" in caught.value.message
    with pytest.raises(StepInvalid):
        steps.prepare(command("bad", ["python3", data]))
    # a value passed as a positional argument after static code is data, as for command nodes
    ok = steps.prepare(command("good", ["sh", "-c", 'printf %s "$1"', "sh", data]))
    assert ok.inputs["argv"] == ["sh", "-c", 'printf %s "$1"', "sh", "rm -rf /"]
    assert run(steps, ok).output == "rm -rf /"


@pytest.mark.parametrize("cwd", ["../elsewhere", "//../elsewhere", "/tmp", "//missing"])
def test_cwd_outside_the_workspace_or_missing_is_refused(project: Project, cwd: str) -> None:
    with pytest.raises(StepInvalid) as caught:
        runner(project).prepare(command("where", ["pwd"], cwd=cwd))
    assert "step 'where'" in caught.value.message


def test_cwd_forms_resolve_inside_the_workspace(project: Project) -> None:
    (project.root / "sub" / "deep").mkdir(parents=True)
    steps = runner(project)
    labels = [
        steps.prepare(command("where", ["pwd"], cwd=cwd)).inputs["cwd"]
        for cwd in ("//sub/deep", "sub/deep", str(project.root / "sub" / "deep"))
    ]
    assert labels == ["//sub/deep"] * 3
    assert steps.prepare(command("where", ["pwd"])).inputs["cwd"] == "//"
    result = run(steps, steps.prepare(command("where", ["pwd"], cwd="sub")))
    assert result.output == f"{project.root / 'sub'}\n"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"argv": []}, "argv must be a non-empty list"),
        ({"argv": [["nested"]]}, "argv[0] must be literal text"),
        ({"argv": ["echo", 3]}, "argv[1] is not a string"),
        ({"argv": ["echo", "a\x00b"]}, "NUL byte"),
        ({"timeout_seconds": 0}, "timeout_seconds must be a positive integer"),
        ({"max_output_bytes": True}, "max_output_bytes must be a positive integer"),
        ({"timeout_seconds": 10**9}, "budget 'timeout_seconds' exceeded"),
        ({"env": {}}, "unknown command step argument(s) env"),
        ({"argv": ["no-such-program-here"]}, "was not found on PATH"),
    ],
)
def test_command_arguments_are_checked(project: Project, args: dict[str, Any], words: str) -> None:
    call = StepCall(key="c", kind="command", args={"argv": ["echo"], **LIMITS, **args})
    with pytest.raises(StepInvalid) as caught:
        runner(project).prepare(call)
    assert words in caught.value.message


def test_missing_budget_unknown_kind_and_recovery(project: Project) -> None:
    steps = runner(project)
    with pytest.raises(StepInvalid, match="needs max_output_bytes"):
        steps.prepare(StepCall(key="c", kind="command", args={"argv": ["true"], "timeout_seconds": 5}))
    with pytest.raises(StepInvalid, match="unknown step kind 'shell'"):
        steps.prepare(StepCall(key="c", kind="shell", args={}))
    with pytest.raises(StepInvalid, match="recovery must be"):
        steps.prepare(StepCall(key="c", kind="command", args={"argv": ["true"], **LIMITS}, recovery="always"))


def test_command_digest_is_stable_and_follows_argv_cwd_and_executable(project: Project) -> None:
    (project.root / "sub").mkdir()
    tool = project.write("bin/tool", "#!/bin/sh\necho one\n", mode=0o755)
    first = runner(project).prepare(command("t", ["./bin/tool", "x"]))
    again = runner(project).prepare(command("t", ["./bin/tool", "x"]))
    assert first.digest == again.digest and first.digest.startswith("sha256:")
    assert first.facts["sha256"] == first.inputs["executable"]["file"]["sha256"]
    # the key and the data marking are not execution-affecting; argv text is
    marked = runner(project).prepare(command("other", ["./bin/tool", {"step": "s", "text": "x"}]))
    assert marked.digest == first.digest
    assert runner(project).prepare(command("t", ["./bin/tool", "y"])).digest != first.digest
    assert runner(project).prepare(command("t", ["../bin/tool", "x"], cwd="sub")).digest != first.digest
    assert runner(project).prepare(command("t", ["./bin/tool", "x"], timeout_seconds=31)).digest != first.digest
    tool.write_text("#!/bin/sh\necho two\n")
    assert runner(project).prepare(command("t", ["./bin/tool", "x"])).digest != first.digest


def test_a_frozen_executable_is_reused_while_its_files_are_unchanged(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rho_notebook.exec import verify

    monkeypatch.setattr(verify, "SETTLED_SECONDS", 0.0)  # the test's files count as settled at once
    tool = project.write("bin/tool", "#!/bin/sh\necho one\n", mode=0o755)
    steps = runner(project)
    assert steps.prepare_now(command("a", ["./bin/tool"])) is None, "nothing frozen yet: that needs a thread"
    first = steps.prepare(command("a", ["./bin/tool"]))
    again = steps.prepare_now(command("b", ["./bin/tool"]))
    assert again is not None and again.digest == first.digest
    assert first.node is not None and again.node is not None and again.node.executable is first.node.executable
    assert (again.call.key, again.node.name, first.node.name) == ("b", "b", "a"), "the same step, under its own key"
    assert again.facts == first.facts and again.facts is not first.facts
    assert steps.prepare_now(command("c", ["./bin/tool"], cwd="bin")) is None, "another cwd is another freeze"
    assert steps.prepare_now(agent("p")) is None
    tool.write_text("#!/bin/sh\necho two, longer\n")
    assert steps.prepare_now(command("d", ["./bin/tool"])) is None, "the file changed: freeze it again"
    changed = steps.prepare(command("d", ["./bin/tool"]))
    assert changed.digest != first.digest
    assert run(steps, changed).output == "two, longer\n"
    # a call prepared from the reused freeze whose file changes before it runs fails closed at the launch
    stale = steps.prepare_now(command("f", ["./bin/tool"]))
    assert stale is not None
    tool.write_text("#!/bin/sh\necho four\n")
    assert run(steps, stale).state is NodeState.FAILURE


def test_a_file_changed_within_the_settle_time_is_frozen_again_every_call(project: Project) -> None:
    project.write("bin/tool", "#!/bin/sh\necho one\n", mode=0o755)  # just written: not settled
    steps = runner(project)
    steps.prepare(command("a", ["./bin/tool"]))
    assert steps.prepare_now(command("b", ["./bin/tool"])) is None


# -- agent and model steps against a local OpenAI-compatible server --------------------------------


def configure(project: Project, server: ScriptedServer) -> None:
    write_settings_for(project.home, server)
    project.write(".rho/agents/tester.md", AGENT)


def agent(prompt: str, output: Mapping[str, Any] | None = None) -> StepCall:
    return StepCall(key="ask", kind="agent", args={"agent": "tester", "prompt": prompt, "output": output})


def model(messages: list[dict[str, Any]], **args: Any) -> StepCall:
    return StepCall(key="complete", kind="model", args={"messages": messages, **args})


def test_agent_step_answers_a_prompt(project: Project) -> None:
    with ScriptedServer([OPENAI.answer("All good.")]) as server:
        configure(project, server)
        steps = runner(project)
        prepared = steps.prepare(agent("Review the change."))
        digest = prepared.facts.pop("definition_sha256")
        assert digest.startswith("sha256:")  # of the whole definition: an edited agent is asked again
        assert prepared.facts == {
            "agent": "tester",
            "runtime": "rho",
            "tools": ["read_file"],
            "access": "mutating",
            "prompt": "Review the change.",
        }
        result = run(steps, prepared)
        assert OPENAI.task(server.requests[0]).startswith("Review the change.")
    assert result.state is NodeState.SUCCESS, result.message
    assert result.output == "All good."
    assert result.value is None
    assert result.exit is not None and result.exit["kind"] == "agent"
    assert "transcript.json" in attempt_files(steps, "ask")


def test_agent_step_validates_its_schema(project: Project) -> None:
    with ScriptedServer([OPENAI.answer('{"verdict": "ok"}'), OPENAI.answer("not json")]) as server:
        configure(project, server)
        steps = runner(project)
        good = run(steps, steps.prepare(agent("Judge it.", VERDICT)))
        bad_steps = runner(project)
        bad_call = StepCall(
            key="ask2", kind="agent", args={"agent": "tester", "prompt": "Judge it.", "output": VERDICT}
        )
        bad = run(bad_steps, bad_steps.prepare(bad_call))
    assert good.state is NodeState.SUCCESS, good.message
    assert good.value == {"verdict": "ok"}
    assert good.output == '{"verdict": "ok"}'
    files = attempt_files(steps, "ask")
    assert "value.json" not in files and "answer-value.json" in files
    assert bad.state is NodeState.FAILURE and "not one JSON value" in bad.message
    assert bad.output == "not json"


def test_agent_step_digest_follows_prompt_schema_and_definition(project: Project) -> None:
    with ScriptedServer([]) as server:
        configure(project, server)
        first = runner(project).prepare(agent("Review."))
        assert runner(project).prepare(agent("Review.")).digest == first.digest
        assert runner(project).prepare(agent("Review again.")).digest != first.digest
        assert runner(project).prepare(agent("Review.", VERDICT)).digest != first.digest
        project.write(".rho/agents/tester.md", AGENT.replace("Be brief.", "Be thorough."))
        assert runner(project).prepare(agent("Review.")).digest != first.digest
    assert server.requests == []


def test_agent_step_checks_its_arguments(project: Project) -> None:
    with ScriptedServer([]) as server:
        configure(project, server)
        steps = runner(project)
        with pytest.raises(StepInvalid, match="agent.unknown"):
            steps.prepare(StepCall(key="a", kind="agent", args={"agent": "nobody", "prompt": "hi"}))
        with pytest.raises(StepInvalid, match="prompt must be non-empty"):
            steps.prepare(StepCall(key="a", kind="agent", args={"agent": "tester", "prompt": "  "}))
        with pytest.raises(StepInvalid, match="output is not a schema"):
            steps.prepare(agent("hi", {"type": "tuple"}))


def test_model_step_one_completion(project: Project) -> None:
    with ScriptedServer([OPENAI.answer("Paris")]) as server:
        configure(project, server)
        steps = runner(project)
        messages = [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "Capital of France?"},
        ]
        prepared = steps.prepare(model(messages))
        assert prepared.facts["provider"] == "local" and prepared.facts["model"] == "test-model"
        assert prepared.facts["credential"] == f"environment variable {KEY_ENV}"
        result = run(steps, prepared)
        sent = server.requests[0]
    assert result.state is NodeState.SUCCESS, result.message
    assert result.output == "Paris" and result.value is None
    assert sent.body["model"] == "test-model"
    assert sent.body["messages"] == [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Capital of France?"},
    ]
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    stored = (steps.folder.attempt_dir("complete", 1) / "completion.json").read_text()
    assert "Paris" in stored and SECRET not in stored
    assert result.exit is not None and SECRET not in json.dumps(result.exit)


def test_model_step_schema_and_tools(project: Project) -> None:
    user = [{"role": "user", "content": "Judge."}]
    tool = {"name": "lookup", "description": "Look a word up", "parameters": {"type": "object"}}

    def check_tools(request: Recorded) -> Reply:
        assert [t["function"]["name"] for t in request.body["tools"]] == ["lookup"]
        return OPENAI.tools(("call-1", "lookup", {"word": "x"}))

    with ScriptedServer([OPENAI.answer('{"verdict": "bad"}'), check_tools]) as server:
        configure(project, server)
        steps = runner(project)
        typed = run(steps, steps.prepare(model(user, output=VERDICT)))
        system = OPENAI.system(server.requests[0])
        called = run(
            steps, steps.prepare(StepCall(key="tools", kind="model", args={"messages": user, "tools": [tool]}))
        )
    assert typed.state is NodeState.SUCCESS and typed.value == {"verdict": "bad"}
    assert "exactly one JSON value" in system
    assert called.state is NodeState.SUCCESS, called.message
    assert called.value == {
        "content": "",
        "tool_calls": [{"id": "call-1", "name": "lookup", "arguments": {"word": "x"}}],
    }


def test_model_step_digest_follows_model_messages_and_schema(project: Project) -> None:
    user = [{"role": "user", "content": "Hi"}]
    with ScriptedServer([]) as server:
        configure(project, server)
        first = runner(project).prepare(model(user))
        assert runner(project).prepare(model(user, provider="local", model="test-model")).digest == first.digest
        assert runner(project).prepare(model(user, model="bigger-model")).digest != first.digest
        assert runner(project).prepare(model([{"role": "user", "content": "Hello"}])).digest != first.digest
        assert runner(project).prepare(model(user, output=VERDICT)).digest != first.digest


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"provider": "elsewhere"}, "provider 'elsewhere' is not defined"),
        ({"model": "@fast"}, "model alias '@fast' is not defined"),
        ({"messages": []}, "messages must be a non-empty list"),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]},
            "system messages come first",
        ),
        ({"messages": [{"role": "robot", "content": "a"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": "a", "score": 0.5}]}, "must be an object with role and content"),
        ({"tools": [{"name": "x"}]}, "tools[0] must be"),
        (
            {"tools": [{"name": "x", "description": "", "parameters": {}}], "output": VERDICT},
            "give tools or output, not both",
        ),
        (
            {
                "messages": [{"role": "user", "content": "a"}],
                "tools": [{"name": "x", "description": "", "parameters": {"m": 0.5}}],
            },
            "without floats",
        ),
    ],
)
def test_model_step_checks_its_arguments(project: Project, args: dict[str, Any], words: str) -> None:
    with ScriptedServer([]) as server:
        configure(project, server)
        call = model([{"role": "user", "content": "Hi"}])
        with pytest.raises(StepInvalid) as caught:
            runner(project).prepare(StepCall(key=call.key, kind="model", args={**call.args, **args}))
    assert words in caught.value.message


def test_model_step_provider_failure_is_a_step_failure(project: Project) -> None:
    with ScriptedServer([OPENAI.error(400, "bad request")]) as server:
        configure(project, server)
        steps = runner(project)
        result = run(steps, steps.prepare(model([{"role": "user", "content": "Hi"}])))
    assert result.state is NodeState.FAILURE
    assert result.message.startswith("model ") and "bad request" in result.message


def test_an_agent_the_step_cannot_resolve_is_said_once_without_a_nested_rule(project: Project) -> None:
    """``step 'ask': [agent.unknown] unknown agent 'nosuch' ...``, not ``step 'ask':
    error[agent.unknown]: ...``; a problem in an agent's definition file keeps its file and line."""
    steps = runner(project)
    with pytest.raises(StepInvalid) as caught:
        steps.prepare(StepCall(key="ask", kind="agent", args={"agent": "nosuch", "prompt": "hi"}))
    assert caught.value.message.startswith("step 'ask': [agent.unknown] unknown agent 'nosuch'"), caught.value.message
    assert "error[" not in caught.value.message
    project.write("scripts/agents/broken.md", "---\nid: broken\ndescription: x\nruntime: nope\n---\nhi\n")
    with pytest.raises(StepInvalid) as caught:
        steps.prepare(StepCall(key="ask", kind="agent", args={"agent": "broken", "prompt": "hi"}))
    assert caught.value.message.startswith("step 'ask': "), caught.value.message
    assert "agents/broken.md:4:1: runtime: 'nope' is not allowed" in caught.value.message, caught.value.message
    assert "error[" not in caught.value.message
