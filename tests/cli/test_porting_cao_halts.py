"""CAO's halts and ``--decide`` (issue 33 point 6): a halt or a divergence arrives in the script as
an exception raised by the step call, every time, so the script's ``except`` and ``finally`` run;
the runner gives the script a grace to exit, then stops its process group; the run still ends
``needs_decision`` or diverged, whatever the script does.

Real runs through the real CLI; the reviewer agent is answered by a local OpenAI-compatible server
on 127.0.0.1 whose answer about one item fails (HTTP 500) until the test lets it succeed.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from rho_notebook.store.journal import read_journal
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.cli.runhelp import status
from tests.conftest import Project

ENV = {KEY_ENV: SECRET}

REVIEWER = """\
---
id: reviewer
description: Summarizes one item; reads, never writes
runtime: rho
tools: []
---
You summarize what you are given. Return the summary only.
"""

# The seed's fan-out ("Fan-out (concurrency)") with its "Halts and --decide" warning applied: the
# blanket handler re-raises a halt or divergence (CAO: "Re-raise when .status == 409"; ours:
# RunStopped). Adapted as in test_porting_cao_outcome.py (handles, `if not h.ok: raise`), plus a
# handler that writes what it caught and a `finally` that writes too (what this test looks for),
# recovery="manual" (the seed's "its author declared recovery=\"manual\"" halt), and an exit 3
# while `go` is absent so that a run with a failed item can be resumed.
FANOUT = """\
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from rho_notebook.script import run_step, emit_output, RunStopped

some_items = ["gamma", "alpha", "beta"]


def note(name, line):
    Path("handled").mkdir(exist_ok=True)
    with open(f"handled/{name}", "a") as out:
        out.write(line + "\\n")


def summarize(name):
    try:
        h = run_step("reviewer",
                     f"Summarize {name}. Return the summary only.",
                     step_id=f"summarize:{name}",   # STABLE, explicit step_id (required)
                     recovery="manual")
        if not h.ok:
            raise RuntimeError(h.message)
        return name, h.output
    except RunStopped as exc:                         # the 409: re-raise it
        note(name, f"except {type(exc).__name__} {exc.step}")
        raise
    except Exception as exc:                          # per-unit tolerance
        return name, f"ERROR: {exc}"
    finally:
        note(name, "finally")

items = sorted(some_items)                            # sorted() -> stable item->step_id map
with ThreadPoolExecutor(max_workers=2) as pool:       # 2 is a good default for claude_code
    results = dict(pool.map(summarize, items))
emit_output(results)
if any(value.startswith("ERROR") for value in results.values()) and not Path("go").exists():
    sys.exit(3)
"""

SUMMARY = re.compile(r"Summarize (\w+)\.")


class Provider:
    """Answers ``summary of NAME``; fails the request about ``beta`` while ``failing``."""

    def __init__(self) -> None:
        self.failing = True

    def __call__(self, request: Recorded) -> Reply:
        name = SUMMARY.search(str(request.body["messages"][-1]["content"]))
        assert name is not None
        if name[1] == "beta" and self.failing:
            return Reply(status=500, body={"error": {"message": "upstream unavailable"}})
        return OPENAI.answer(f"summary of {name[1]}")


def journal(project: Project, run_id: str) -> list[dict[str, object]]:
    return list(read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events)


def first_run(project: Project, server: ScriptedServer) -> str:
    """Run the fan-out once: beta fails, the script exits 3 (no ``go``); the run ID."""
    write_settings_for(project.home, server)
    project.write("agents/reviewer.md", REVIEWER)
    project.write("fanout.py", FANOUT)
    ran = project.cli("run", "fanout.py", "--yes", "--output", "jsonl", env=ENV)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    run_id = str(next(json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{"))["run_id"])
    assert status(project, run_id)["nodes"]["summarize:beta"]["state"] == "failure"
    return run_id


def handled(project: Project) -> dict[str, list[str]]:
    """What each item's handler wrote in this execution (the folder is emptied before each)."""
    folder = project.root / "handled"
    return {path.name: path.read_text().splitlines() for path in sorted(folder.iterdir())} if folder.exists() else {}


def test_a_halt_is_an_exception_the_scripts_handler_sees_every_time_and_decide_reruns_it(project: Project) -> None:
    """Seed: cao-workflows.txt "Halts and `--decide`" (a recovery="manual" step halts on resume;
    the halt arrives in the script; ``resume --decide STEP=rerun`` re-executes it), on the
    "Fan-out (concurrency)" example."""
    provider = Provider()
    with ScriptedServer([provider], repeat_last=True) as server:
        run_id = first_run(project, server)
        for _ in range(3):
            shutil.rmtree(project.root / "handled", ignore_errors=True)
            halted = project.cli("resume", run_id, "--yes", env=ENV, timeout=120)
            assert halted.returncode == 1, halted.stdout + halted.stderr
            state = status(project, run_id)
            assert state["lifecycle"] == "needs_decision"
            assert [h["step"] for h in state["halted"]] == ["summarize:beta"]
            assert 'recovery="manual"' in state["halted"][0]["why"]
            assert "--decide summarize:beta=rerun|skip" in halted.stdout
            # the handler around the halting call ran, and so did its finally
            assert handled(project)["beta"] == ["except DecisionRequired summarize:beta", "finally"]
            assert handled(project)["alpha"] == ["finally"]  # replayed
            assert len(server.requests) == 3  # a halt asks nothing; alpha and gamma replayed

        provider.failing = False
        done = project.cli("resume", run_id, "--yes", "--decide", "summarize:beta=rerun", env=ENV, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(server.requests) == 4  # only the decided step asked again
        state = status(project, run_id)
        assert state["outcome"] == "success"
        assert state["output"] == {n: f"summary of {n}" for n in ("alpha", "beta", "gamma")}
        kinds = [str(r["kind"]) for r in journal(project, run_id)]
        assert kinds.count("run_halted") == 3 and kinds.count("step_halted") == 3


def test_a_divergence_is_an_exception_the_scripts_handler_sees_every_time(project: Project) -> None:
    """Seed: cao-workflows.txt "Resume" (a changed step diverges and the run fails with
    ReplayDivergenceError) on the "Fan-out (concurrency)" example: the reviewer's definition is
    edited between the run and its resumes, so every item's call diverges."""
    with ScriptedServer([Provider()], repeat_last=True) as server:
        run_id = first_run(project, server)
        project.write("agents/reviewer.md", REVIEWER.replace("summary only", "summary only, in French"))
        for _ in range(3):
            shutil.rmtree(project.root / "handled", ignore_errors=True)
            resumed = project.cli("resume", run_id, "--yes", env=ENV, timeout=120)
            assert resumed.returncode == 1, resumed.stdout + resumed.stderr
            completed = [r for r in journal(project, run_id) if r["kind"] == "run_completed"][-1]
            assert completed["outcome"] == "failure" and "diverged" in str(completed["message"])
            seen = handled(project)
            # alpha and beta run at once (two workers); gamma starts only if a worker frees before
            # pool.map's iterator re-raises the first RunStopped, which cancels items not started
            assert {"alpha", "beta"} <= set(seen) <= {"alpha", "beta", "gamma"}
            for name, lines in seen.items():  # each thread's call raised; its handler and finally ran
                assert len(lines) == 2 and lines[0].startswith("except ReplayDivergenceError summarize:"), (name, lines)
                assert lines[1] == "finally"
        assert len(server.requests) == 3  # nothing ran again
        diverged = [r for r in journal(project, run_id) if r["kind"] == "step_diverged"]
        assert len(diverged) == 3  # one per resume: every later call got the same answer


CATCHER = """\
import sys
import time
from pathlib import Path
from rho_notebook.script import DecisionRequired, emit_output, run_command

check = None
try:
    check = run_command(["sh", "-c", "echo ran >> check.log; [ -f fixed ]"], step_id="check",
                        recovery="manual", timeout_seconds=60, max_output_bytes=1000)
except DecisionRequired as first:                 # swallowed: the run stops all the same
    Path("caught.txt").write_text(first.step)
    try:
        run_command(["sh", "-c", "echo ran >> other.log"], step_id="other", recovery=None,
                    timeout_seconds=60, max_output_bytes=1000)
    except DecisionRequired as again:
        Path("again.txt").write_text(again.step)
    emit_output({"swallowed": first.step})
    if Path("sleep").exists():
        time.sleep(3600)
    sys.exit(0)
if not check.ok:
    sys.exit(3)
"""


def test_a_script_that_swallows_the_halt_still_halts_and_one_that_sleeps_is_stopped(project: Project) -> None:
    """Not from the seed (it warns that a catch-all absorbs a halt; here it cannot): a script that
    catches the halt and exits 0 leaves the run ``needs_decision``; a later step call in the grace
    gets the same halt and launches nothing; a script that then sleeps is stopped after the grace."""
    project.write("catcher.py", CATCHER)
    ran = project.cli("run", "catcher.py", "--yes", "--output", "jsonl")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    run_id = str(next(json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{"))["run_id"])

    swallowed = project.cli("resume", run_id, "--yes", timeout=120)
    assert swallowed.returncode == 1, swallowed.stdout + swallowed.stderr
    state = status(project, run_id)
    assert state["lifecycle"] == "needs_decision" and [h["step"] for h in state["halted"]] == ["check"]
    assert (project.root / "caught.txt").read_text() == "check"
    assert (project.root / "again.txt").read_text() == "check"  # the same halt, nothing launched
    assert "other" not in state["nodes"] and not (project.root / "other.log").exists()
    exits = [r["exit"] for r in journal(project, run_id) if r["kind"] == "script_exited"]
    assert exits[-1]["kind"] == "exit" and exits[-1]["code"] == 0  # it exited by itself, 0

    (project.root / "sleep").write_text("")
    (project.root / "caught.txt").unlink()
    stopped = project.cli("resume", run_id, "--yes", timeout=120)  # the grace is 5 s; an hour's sleep is not waited
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert status(project, run_id)["lifecycle"] == "needs_decision"
    assert (project.root / "caught.txt").read_text() == "check"
    exits = [r["exit"] for r in journal(project, run_id) if r["kind"] == "script_exited"]
    assert exits[-1]["kind"] == "cancelled"  # the runner stopped its process group
    assert Path(project.root / "check.log").read_text().count("ran") == 1  # the halted step never ran again
