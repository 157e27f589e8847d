"""Data never becomes code, end to end in every form (issue 27; docs/workflows.md "Data is never
code"): real `rho-notebook` processes refuse an item graph's, a Starlark workflow's and a
script's data where an interpreter reads code, before anything runs or is journaled, naming the
node or step, the argument and where it is; the positional form still runs the value as data.
The full matrix of interpreters and wrappers is tests/unit/test_code_argument_matrix.py."""

from __future__ import annotations

import json
import os

from rho_notebook.store.journal import read_journal
from tests.conftest import Project, star

C = "timeout_seconds = 30, max_output_bytes = 100000"
GRAPH = """\
name: g
inputs:
  c: {{type: string}}
steps:
  - {{id: run, kind: command, params: {{argv: {argv}, into: out}}}}
  - {{id: done, kind: output}}
edges:
  - {{from: run, to: done}}
"""
PAYLOAD = 'c="touch PWNED"'


def graph(project: Project, argv: str) -> None:
    project.write("g.graph.yaml", GRAPH.format(argv=argv))


def flat(text: str) -> str:
    return " ".join(text.split())


def test_an_item_graph_that_used_to_run_data_as_shell_code_is_refused_at_plan(project: Project) -> None:
    graph(project, '[sh, -c, "={{ $json.c }}"]')
    ran = project.cli("run", "g.graph.yaml", "--input", PAYLOAD, "--yes")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    message = flat(ran.stderr)
    assert "g.graph.yaml:5:54: error[argv.code]: step 'run': argv[2] is {{ $json.c }} (an item field)" in message
    assert "pass values as positional arguments" in message.lower()
    assert not (project.root / "PWNED").exists()
    assert project.stored_plans() == [] and json.loads(project.cli("runs", "--output", "json").stdout) == []
    validated = project.cli("validate", "g.graph.yaml")
    assert validated.returncode == 1 and "error[argv.code]" in validated.stderr
    converted = project.cli("convert", "g.graph.yaml")
    assert converted.returncode == 1 and "error[argv.code]" in converted.stderr and converted.stdout == ""


def test_the_positional_form_runs_the_item_field_as_data(project: Project) -> None:
    graph(project, '[python3, -c, "import json, sys; print(json.dumps(sys.argv[1]))", "={{ $json.c }}"]')
    ran = project.cli("run", "g.graph.yaml", "--input", PAYLOAD, "--yes", "--output", "jsonl")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    output = json.loads(project.cli("result", run_id, "--output", "json").stdout)["output"]
    assert output["out"] == "touch PWNED"
    assert not (project.root / "PWNED").exists()


def test_a_symlinked_interpreter_is_known_by_its_file_at_validate_and_plan(project: Project) -> None:
    (project.root / "tools").mkdir()
    os.symlink(os.path.realpath("/bin/sh"), project.root / "tools" / "runner")
    graph(project, '[env, -, ./tools/runner, -c, "={{ $json.c }}"]')
    for verb in ("validate", "plan"):
        done = project.cli(verb, "g.graph.yaml", "--input", PAYLOAD)
        assert done.returncode == 1, done.stdout
        assert "g.graph.yaml:5:74: error[argv.code]: step 'run': argv[4] is {{ $json.c }}" in flat(done.stderr)
    assert project.stored_plans() == []


def test_a_starlark_env_dash_is_refused_by_validate_and_plan(project: Project) -> None:
    producer = (
        'command(name = "a", argv = ["printf", "%s", "{\\"v\\": \\"touch PWNED\\"}"], '
        f'output = schema.stdout_json(schema.record({{"v": schema.string()}})), {C})'
    )
    argv = '["env", "-", "sh", "-c", output("a", ["v"])]'
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "c", nodes = [{producer}, command(name = "b", argv = {argv}, needs = ["a"], {C})])'
        ),
    )
    for verb in ("validate", "plan"):
        done = project.cli(verb, "wf.star")
        assert done.returncode != 0, (verb, done.stdout)
        message = flat(done.stderr)
        assert "wf.star:2:" in message and 'error[argv.code]: node \'b\': argv[4] is output("a", ["v"])' in message
    assert project.stored_plans() == []


SCRIPT = """\
from rho_notebook.script import emit_output, run_command

found = run_command(["printf", "touch PWNED"], step_id="find", timeout_seconds=30, max_output_bytes=1000)
safe = run_command(["sh", "-c", 'printf %s "$1"', "sh", found.output], step_id="safe", timeout_seconds=30, max_output_bytes=1000)
emit_output(safe.output)
run_command(["env", "-", "sh", "-c", found.output], step_id="use", timeout_seconds=30, max_output_bytes=1000)
"""


def test_a_script_step_is_refused_when_prepared_naming_its_key_and_line(project: Project) -> None:
    project.write("flow.py", SCRIPT)
    ran = project.cli("run", "flow.py", "--yes", "--output", "jsonl")
    assert ran.returncode != 0
    records = [json.loads(line) for line in ran.stdout.splitlines()]
    run_id = records[0]["run_id"]
    completed = next(r for r in records if r["kind"] == "run_completed")
    assert completed["outcome"] == "failure"
    message = flat(completed["message"])
    assert "step 'use'" in message and "argv[4] is step 'find' (a step value)" in message, message
    assert "//flow.py:6" in message, message
    assert not (project.root / "PWNED").exists()
    events = list(read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events)
    launched = [e["node"] for e in events if e["kind"] == "node_launched"]
    assert launched == ["find", "safe"], launched  # the refused step journaled nothing
    assert json.loads(project.cli("result", run_id, "--output", "json").stdout)["output"] == "touch PWNED"
