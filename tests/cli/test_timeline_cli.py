"""``rho-notebook timeline RUN`` on a real run: six command nodes, one cancelled while it ran and
started again by ``resume`` (its earlier attempt is a retry), the text Gantt and its JSON."""

from __future__ import annotations

import json

from tests.cli.runhelp import start_run, wait_for_event
from tests.conftest import Project, star

C = "timeout_seconds = 60, max_output_bytes = 4096"

# `flaky` sleeps until cancelled on its first attempt and succeeds at once on its second
SIX = star(f"""
return workflow(name = "six", nodes = [
    command(name = "fetch", argv = ["sleep", "0.2"], {C}),
    command(name = "lint", argv = ["sleep", "0.1"], needs = ["fetch"], {C}),
    command(name = "flaky", argv = ["sh", "-c", "if [ -e tried ]; then sleep 0.3; else touch tried; sleep 60; fi"],
            needs = ["fetch"], {C}),
    command(name = "test", argv = ["sleep", "0.1"], needs = ["fetch"], {C}),
    command(name = "package", argv = ["true"], needs = ["flaky", "lint", "test"], {C}),
    command(name = "report", argv = ["true"], needs = ["package"], {C}),
])
""")


def six_with_a_retry(project: Project) -> str:
    """Run SIX, cancel it while `flaky` runs, resume it to success: the run ID."""
    project.write("wf.star", SIX)
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda r: r.get("kind") == "process_started" and r.get("node") == "flaky")
    assert project.cli("cancel", run_id, timeout=60).returncode == 0
    proc.wait(timeout=60)
    resumed = project.cli("resume", run_id, "--yes", "--output", "json", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    return run_id


def test_timeline_json_and_gantt(project: Project) -> None:
    run_id = six_with_a_retry(project)
    result = project.cli("timeline", run_id[:13], "--output", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    rows = {row["name"]: row for row in data["rows"]}
    assert set(rows) == {"fetch", "lint", "flaky", "test", "package", "report"}
    flaky = rows["flaky"]["bars"]
    assert [(bar["attempt"], bar["state"], bar["retry"]) for bar in flaky] == [
        (1, "cancellation", True),
        (2, "success", False),
    ]
    assert all(bar["started"] is not None for bar in flaky)  # both attempts' processes existed
    last_need = max(("flaky", "lint", "test"), key=lambda name: rows[name]["bars"][-1]["finished"])
    assert data["critical_path"] == ["fetch", last_need, "package", "report"]  # the need that ended last
    assert not data["running"] and data["span"] >= flaky[1]["finished"]

    text = project.cli("timeline", run_id, "--width", "72")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert all(len(line) <= 72 for line in lines)
    flaky_line = next(line for line in lines if line.startswith("flaky "))
    assert "▒" in flaky_line and "█" in flaky_line
    assert any(line.startswith("critical path: fetch") for line in lines)


def test_timeline_of_an_unknown_run_names_it(project: Project) -> None:
    project.write("wf.star", SIX)
    result = project.cli("timeline", "01nosuchrun")
    assert result.returncode != 0 and "01nosuchrun" in result.stderr


SCRIPT = """\
from rho_notebook.script import run_command

def sh(command, **options):
    return run_command(argv=["sh", "-c", command], timeout_seconds=60, max_output_bytes=10000, **options)

fetch = sh("sleep 0.1", step_id="fetch")
check = sh("if [ -e tried ]; then exit 0; fi; touch tried; exit 1", step_id="check", after=[fetch])
if not check.ok:
    raise SystemExit("check failed")
sh("true", step_id="report", after=[check])
"""


def test_timeline_of_a_script_run_retried_by_resume(project: Project) -> None:
    """A script's failed step runs again on resume (its first attempt is the retry); the steps that
    succeeded are replayed (marks, not bars); the needs are the steps' `after`."""
    project.write("flow.py", SCRIPT)
    first = project.cli("run", "flow.py", "--yes", "--output", "jsonl")
    assert first.returncode == 1, first.stderr
    run_id = json.loads(first.stdout.splitlines()[0])["run_id"]
    resumed = project.cli("resume", run_id, "--yes", "--output", "json")
    assert resumed.returncode == 0, resumed.stderr
    data = json.loads(project.cli("timeline", run_id, "--output", "json").stdout)
    rows = {row["name"]: row for row in data["rows"]}
    assert set(rows) == {"fetch", "check", "report"} and {row["kind"] for row in rows.values()} == {"step"}
    assert rows["check"]["needs"] == ["fetch"] and rows["report"]["needs"] == ["check"]
    assert [(bar["state"], bar["retry"]) for bar in rows["check"]["bars"]] == [("failure", True), ("success", False)]
    assert len(rows["fetch"]["bars"]) == 1 and len(rows["fetch"]["replays"]) == 1  # answered from the journal
    assert data["critical_path"] == ["fetch", "check", "report"]


def test_a_width_the_gantt_cannot_fit_is_refused_not_replaced(project: Project) -> None:
    """``--width 0`` and ``--width -5`` were taken as the terminal's width and ``--width 3`` as 40:
    the Gantt came out in other columns than asked, without a word."""
    for width in ("0", "-5", "3"):
        result = project.cli("timeline", "01nosuchrun", "--width", width)
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"argument --width: '{width}': give 40 columns or more" in result.stderr, result.stderr
    result = project.cli("timeline", "01nosuchrun", "--width", "wide")
    assert result.returncode == 2 and "'wide' is not a whole number of columns" in result.stderr


def test_a_terminal_that_cannot_show_the_blocks_gets_ascii_not_a_traceback(project: Project) -> None:
    """With an ASCII standard output, a node name cut to fit (and any step key the terminal cannot
    encode) crashed ``timeline`` with a UnicodeEncodeError."""
    name = "a-node-with-a-really-long-name-indeed"
    project.write(
        "long.star",
        star(f'return workflow(name = "long", nodes = [command(name = "{name}", argv = ["true"], {C})])'),
    )
    assert project.cli("run", "long.star", "--yes").returncode == 0
    run_id = json.loads(project.cli("runs", "--output", "json").stdout)[0]["run_id"]
    shown = project.cli("timeline", run_id, "--width", "80", env={"PYTHONIOENCODING": "ascii"})
    assert shown.returncode == 0, shown.stderr
    assert f"{name[:27]}~" in shown.stdout and "#" in shown.stdout
