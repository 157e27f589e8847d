"""``rho-notebook record RUN DIR``: a finished run becomes a pytest file that replays it.

The generated test runs in a real ``python -m pytest`` subprocess; editing a step's argv or
prompt in the workspace makes it fail naming that step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.agents.fakeserver import OPENAI, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.cli.runhelp import run
from tests.conftest import REPO, Project, star

C = "timeout_seconds = 30, max_output_bytes = 100000"

GRAPH = f"""
return workflow(name = "count", nodes = [
    shell(name = "make", executable = "sh", arguments = ["-c"],
          command = "echo made >> side-effects.txt; echo '{{\\"n\\": 3}}'",
          output = schema.stdout_json(schema.record({{"n": schema.integer()}})), {C}),
    command(name = "show", argv = ["sh", "-c", "echo shown >> side-effects.txt; echo n=$1", "sh", output("make", ["n"])],
            needs = ["make"], {C}),
])
"""


SCRIPT = """\
from rho_notebook.script import emit_output, run_command, run_step

LIMITS = {"timeout_seconds": 30, "max_output_bytes": 100000}

lint = run_command(argv=["sh", "-c", "echo linted >> side-effects.txt; echo 'two warnings'"], step_id="lint", **LIMITS)
count = run_command(argv=["echo", "checked"], **LIMITS)
review = run_step(agent="reviewer", prompt="Review these lint results: " + lint.output, step_id="review")
emit_output({"lint": lint.output, "count": count.output, "review": review.output})
"""

AGENT = """\
---
id: reviewer
description: Reviews lint results
runtime: rho
tools: [read_file]
---
Answer in one sentence.
"""


def configure(project: Project, server: ScriptedServer) -> None:
    """settings.json in the test's store home, pointing at the local OpenAI-compatible server."""
    write_settings_for(project.home, server)


def pytest_of(project: Project, test: Path) -> subprocess.CompletedProcess[str]:
    """The generated test run by a real pytest in its own process (same store, no plugins)."""
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO), KEY_ENV: SECRET}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(test.parent), str(test)],
        cwd=test.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def record(project: Project, run_id: str, folder: str, *args: str) -> dict[str, object]:
    result = project.cli("record", run_id, folder, "--output", "json", *args)
    assert result.returncode == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_a_recorded_script_run_replays_without_the_model_and_fails_naming_an_edited_step(project: Project) -> None:
    project.write("review.py", SCRIPT)
    project.write(".rho/agents/reviewer.md", AGENT)
    with ScriptedServer([OPENAI.answer("Two warnings, both harmless.")]) as server:
        configure(project, server)
        ran = project.cli("run", "review.py", "--yes", "--output", "jsonl", env={KEY_ENV: SECRET})
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert len(server.requests) == 1
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    data = record(project, run_id, "tests/recordings/review")
    folder = project.root / "tests" / "recordings" / "review"
    recording = json.loads((folder / "recording.json").read_text())
    assert recording["kind"] == "script" and list(recording["steps"]) == ["lint", "call-1", "review"]
    assert recording["steps"]["review"]["value"]["output"] == "Two warnings, both harmless."
    assert recording["steps"]["lint"]["stdout"] == "two warnings\n"
    assert recording["output"]["review"] == "Two warnings, both harmless."
    assert (folder / "sources" / "review.py").read_text() == SCRIPT
    assert "collect_ignore_glob" in (folder / "conftest.py").read_text()
    test = Path(str(data["test"]))
    assert test.name == "test_review.py"

    effects = project.root / "side-effects.txt"
    assert effects.read_text() == "linted\n"
    passed = pytest_of(project, test)  # the server is gone: the agent step is answered from the recording
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert effects.read_text() == "linted\n"  # the command step was replayed, not launched

    project.write("review.py", SCRIPT.replace("Review these lint results", "Judge these lint results"))
    failed = pytest_of(project, test)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "step 'review' diverged from the recording: recorded digest sha256:" in failed.stdout
    report = failed.stdout.split("differs from its recording")[-1]
    assert "'lint'" not in report and "'call-1'" not in report


def test_a_recorded_graph_run_replays_and_fails_naming_an_edited_node(project: Project) -> None:
    project.write("wf.star", star(GRAPH))
    _, status = run(project)
    run_id = str(status["run_id"])
    assert status["outcome"] == "success"
    data = record(project, run_id, "tests/recordings/count")
    folder = project.root / "tests" / "recordings" / "count"
    recording = json.loads((folder / "recording.json").read_text())
    assert recording["kind"] == "graph" and list(recording["steps"]) == ["make", "show"]
    assert recording["steps"]["make"]["value"] == {"n": 3}
    assert recording["steps"]["show"]["stdout"] == "n=3\n"
    assert (folder / "sources" / "wf.star").read_text() == (project.root / "wf.star").read_text()
    test = Path(str(data["test"]))
    assert test == folder / "test_count.py"
    assert "answered from recording.json" in test.read_text()

    effects = project.root / "side-effects.txt"
    before = effects.read_text()
    passed = pytest_of(project, test)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert effects.read_text() == before  # commands were replayed, not launched

    project.write("wf.star", star(GRAPH.replace("echo n=$1", "echo count=$1")))
    failed = pytest_of(project, test)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "step 'show' diverged from the recording" in failed.stdout
    assert "'make'" not in failed.stdout.split("differs from its recording")[-1]


AGENT_GRAPH = f"""
return workflow(name = "inspect", nodes = [
    agent(name = "inspect", agent = "reviewer", access = "read_only",
          prompt = template(["Inspect ", inputs["target"], " and return the required JSON value."]),
          output = schema.record({{"decision": schema.enum_(["approve", "revise"]), "summary": schema.string()}}),
          {C}),
    command(name = "check", argv = ["echo", "summary:", output("inspect", ["summary"])], needs = ["inspect"], {C}),
])
"""


def test_a_recorded_graph_run_answers_agent_nodes_from_the_recording(project: Project) -> None:
    project.write("wf.star", star(AGENT_GRAPH).replace("inputs = {}", 'inputs = {"target": input.string()}'))
    answer = '{"decision": "approve", "summary": "looks fine"}'
    with ScriptedServer([OPENAI.answer(answer)]) as server:
        configure(project, server)
        planned = project.cli("plan", "wf.star", "--input", 'target="src"', "--output", "json")
        assert planned.returncode == 0, planned.stderr
        plan = json.loads(planned.stdout)["plan_id"]
        ran = project.cli("run", plan, "--yes", "--output", "jsonl", env={KEY_ENV: SECRET})
        assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    data = record(project, run_id, "rec")
    recording = json.loads((project.root / "rec" / "recording.json").read_text())
    assert recording["inputs"] == {"target": "src"}
    assert recording["steps"]["inspect"]["value"] == json.loads(answer)
    test = Path(str(data["test"]))
    passed = pytest_of(project, test)  # no server any more: the agent node is answered from the recording
    assert passed.returncode == 0, passed.stdout + passed.stderr

    project.write("wf.star", (project.root / "wf.star").read_text().replace('"Inspect "', '"Look at "'))
    failed = pytest_of(project, test)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "step 'inspect' diverged from the recording" in failed.stdout


def test_live_commands_run_for_real_and_the_test_says_so(project: Project) -> None:
    project.write("wf.star", star(GRAPH))
    _, status = run(project)
    data = record(project, str(status["run_id"]), "rec", "--live-commands")
    test = Path(str(data["test"]))
    assert "Command steps run for real" in test.read_text()
    assert "live_commands=True" in test.read_text()
    effects = project.root / "side-effects.txt"
    before = effects.read_text().count("made")
    passed = pytest_of(project, test)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert effects.read_text().count("made") == before + 1


def test_a_changed_output_fails_naming_the_node(project: Project) -> None:
    project.write("wf.star", star(GRAPH))
    _, status = run(project)
    data = record(project, str(status["run_id"]), "rec", "--live-commands")
    project.write("wf.star", star(GRAPH.replace('\\"n\\": 3', '\\"n\\": 4')))
    failed = pytest_of(project, Path(str(data["test"])))
    assert failed.returncode == 1
    assert "step 'make'" in failed.stdout


def test_record_refuses_an_unfinished_run(project: Project) -> None:
    project.write("wf.star", star(GRAPH))
    plan = project.plan("wf.star")
    run_id = project.create_run(plan)
    result = project.cli("record", run_id, "rec")
    assert result.returncode == 1
    assert "not completed" in result.stderr


def notebook_of(path: Path, workflow_cell: str) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    nbformat.write(new_notebook(cells=[new_code_cell("%load_ext rho_notebook"), new_code_cell(workflow_cell)]), path)


NB_CELL = f"""%%workflow count
def build(inputs):
    return workflow(name = "count", nodes = [
        command(name = "show", argv = ["sh", "-c", "echo shown >> side-effects.txt; echo n=3"], {C}),
    ])

WORKFLOW = define(build = build)
"""


def test_a_run_of_a_notebook_replays_from_the_notebooks_cell(project: Project) -> None:
    """A notebook's workflow is exported to a temporary folder and planned under a label by the
    notebook's folder, which is no file: the recording names the notebook and replays its cell,
    as it is now (an edit fails naming the node). Of two notebooks with that cell, the unchanged one."""
    (project.root / "notebooks").mkdir()
    notebook_of(project.root / "notebooks" / "counting.ipynb", NB_CELL)
    ran = project.cli("run", "notebooks/counting.ipynb", "--yes", "--output", "jsonl")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    notebook_of(project.root / "notebooks" / "other.ipynb", NB_CELL.replace("n=3", "n=4"))  # same name, edited
    data = record(project, run_id, "tests/recordings/count")
    recording = json.loads((project.root / "tests/recordings/count/recording.json").read_text())
    assert recording["entry"] == "//notebooks/count.star" and recording["notebook"] == "notebooks/counting.ipynb"
    test = Path(str(data["test"]))
    assert "the cell 'count' of notebooks/counting.ipynb (as it is now)" in test.read_text()
    passed = pytest_of(project, test)
    assert passed.returncode == 0, passed.stdout + passed.stderr

    notebook_of(project.root / "notebooks" / "counting.ipynb", NB_CELL.replace("n=3", "n=5"))
    failed = pytest_of(project, test)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "step 'show' diverged from the recording" in failed.stdout

    (project.root / "notebooks" / "counting.ipynb").unlink()
    (project.root / "notebooks" / "other.ipynb").unlink()
    refused = project.cli("record", run_id, "rec2")
    assert refused.returncode == 1
    assert "its entry //notebooks/count.star is no file of the workspace" in refused.stderr
    assert "no notebook in notebooks has a cell named 'count'" in refused.stderr
