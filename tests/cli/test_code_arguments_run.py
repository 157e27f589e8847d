"""Data never becomes code through an interpreter's -c, end to end (issue 14 item 3): the plan
is refused, nothing runs; the positional-argument form runs the value as data."""

from __future__ import annotations

import json
import os

from tests.conftest import Project, star

C = "timeout_seconds = 30, max_output_bytes = 100000"
PRODUCER = (
    'command(name = "a", argv = ["printf", "%s", "{\\"v\\": \\"x; touch PWNED\\"}"], '
    f'output = schema.stdout_json(schema.record({{"v": schema.string()}})), {C})'
)


def two_nodes(project: Project, argv: str) -> None:
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "c", nodes = [{PRODUCER}, command(name = "b", argv = {argv}, needs = ["a"], {C})])'
        ),
    )


def refused(project: Project) -> str:
    result = project.cli("plan", "wf.star")
    assert result.returncode != 0, result.stdout
    assert project.stored_plans() == []
    return " ".join(result.stderr.split())


def run_ok(project: Project, *plan_args: str) -> str:
    planned = project.cli("plan", "wf.star", "--output", "json", *plan_args)
    assert planned.returncode == 0, planned.stderr
    ran = project.cli("run", json.loads(planned.stdout)["plan_id"], "--yes", "--output", "jsonl")
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    status = json.loads(project.cli("status", run_id, "--output", "json").stdout)
    assert status["outcome"] == "success", (ran.stdout, ran.stderr)
    return run_id


def test_an_output_in_sh_c_text_is_refused_and_never_runs(project: Project) -> None:
    two_nodes(project, '["sh", "-c", template(["echo ", output("a", ["v"])])]')
    message = refused(project)
    assert "node 'b'" in message and "argv[2]" in message
    assert "pass values as positional arguments" in message.lower()
    assert '["sh", "-c", "echo \\"$1\\"", "sh", output(...)]' in message
    assert not (project.root / "PWNED").exists()


def test_combined_flags_and_wrappers_are_refused(project: Project) -> None:
    for argv in (
        '["bash", "-ec", output("a", ["v"])]',
        '["python3", "-Ic", output("a", ["v"])]',
        '["env", "timeout", "5", "sh", "-lc", output("a", ["v"])]',
        '["perl", "-e", "print 1", output("a", ["v"])]',
    ):
        two_nodes(project, argv)
        assert "argv[" in refused(project), argv


def test_a_symlinked_interpreter_is_known_by_its_file(project: Project) -> None:
    (project.root / "tools").mkdir()
    os.symlink(os.path.realpath("/bin/sh"), project.root / "tools" / "runner")
    two_nodes(project, '["./tools/runner", "-c", output("a", ["v"])]')
    assert "argv[2]" in refused(project)


def test_positional_arguments_run_the_value_as_data(project: Project) -> None:
    two_nodes(project, '["sh", "-c", "echo \\"$1\\"", "sh", output("a", ["v"])]')
    run_id = run_ok(project)
    assert project.cli("logs", run_id, "b", "--stream", "stdout").stdout == "x; touch PWNED\n"
    assert not (project.root / "PWNED").exists()


def test_inputs_are_static_plan_content(project: Project) -> None:
    project.write(
        "wf.star",
        "def build(inputs):\n"
        f'    return workflow(name = "i", nodes = [command(name = "b", argv = ["sh", "-c", '
        f'template(["echo ", inputs["word"]])], {C})])\n\n'
        'WORKFLOW = define(inputs = {"word": input.string(default = "hello")}, build = build)\n',
    )
    run_id = run_ok(project, "--input", 'word="there"')
    assert project.cli("logs", run_id, "b", "--stream", "stdout").stdout == "there\n"
