"""``%%script NAME`` cells: a script held at ``//<notebook folder>/NAME.py`` and checked, never run in
the kernel; ``%workflow run NAME`` runs it in its own interpreter process and ``%workflow resume``
replays its stored steps; export writes ``NAME.py`` and ``rho-notebook run NOTEBOOK.ipynb`` runs it
headless.

The first tests use a real Jupyter kernel (nbclient); the rest the in-process IPython shell. Every
step appends a line to its own side-effect file, so a step that ran again would show.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from rho_notebook.service.cells import ScriptCell
from rho_notebook.store.journal import read_journal
from tests.conftest import Project
from tests.kernel.helpers import ok, usage_error
from tests.kernel.test_kernel import kernel

BODY = """\
from pathlib import Path

from rho_notebook.script import emit_output, run_command


def sh(command, **options):
    return run_command(["sh", "-c", command], timeout_seconds=60, max_output_bytes=10000, **options)


Path("effects").mkdir(exist_ok=True)
count = sh("echo ran >> effects/count.log; echo 3")
words = sh("echo ran >> effects/words.log; echo alpha beta gamma", step_id="words")
if not Path("go").exists():
    raise SystemExit(3)
emit_output({"count": count.output.strip(), "words": words.output.split(), "replayed": [count.replayed, words.replayed]})
"""
SCRIPT = "%%script review\n" + BODY


def journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    return list(read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events)


def kinds(project: Project, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [record for record in journal(project, run_id) if record["kind"] == kind]


def effects(project: Project, name: str) -> int:
    path = project.root / "effects" / f"{name}.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_script_cell_runs_out_of_the_kernel_and_resume_replays_its_steps(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            shown = await k.ok(SCRIPT)
            assert "script review: stored as //review.py" in shown["text"], shown
            assert "not run in this kernel" in shown["text"]
            assert effects(ws, "count") == 0  # running the cell ran nothing
            # the kernel never imported the script: its names are not in the user namespace
            assert await k.json("import json\nprint(json.dumps('sh' in globals()))") is False

            first = await k.cell("run = %workflow run review --yes --wait")
            assert first["errors"] == [], first  # the run ended (outcome failure: no go file yet)
            info = await k.json(
                "final = run.data  # --wait returns the status report of the stopped run\n"
                "print(json.dumps({'run': final.run_id, 'outcome': final.outcome, 'pid': __import__('os').getpid()}))"
            )
            assert info["outcome"] == "failure", info
            run_id = info["run"]
            assert (effects(ws, "count"), effects(ws, "words")) == (1, 1)
            # the script ran in its own process, not the kernel's
            launched = kinds(ws, run_id, "script_launched")
            assert launched and all(record["pid"] != info["pid"] for record in launched)
            assert [r["node"] for r in kinds(ws, run_id, "node_launched")] == ["call-1", "words"]

            (ws.root / "go").write_text("")
            resumed = await k.cell(f"%workflow resume {run_id} --yes --wait")
            assert resumed["errors"] == [], resumed
            assert "lifecycle  completed   outcome success" in resumed["text"], resumed
            assert (effects(ws, "count"), effects(ws, "words")) == (1, 1)  # replayed: nothing ran again
            replayed = kinds(ws, run_id, "step_replayed")
            assert [(r["node"], r["attempt"]) for r in replayed] == [("call-1", 1), ("words", 1)]
            assert [r["value"] for r in kinds(ws, run_id, "script_output")] == [
                {"count": "3", "words": ["alpha", "beta", "gamma"], "replayed": [True, True]}
            ]
            result = ws.cli("result", run_id, "--output", "json")
            assert result.returncode == 0, result.stderr
            assert json.loads(result.stdout)["output"]["words"] == ["alpha", "beta", "gamma"]

    asyncio.run(scenario())


def test_an_exported_script_runs_headless_with_the_kernels_label(ws: Project) -> None:
    notebook = new_notebook(cells=[new_code_cell("%load_ext rho_notebook"), new_code_cell(SCRIPT)])
    path = ws.root / "review.ipynb"
    nbformat.write(notebook, os.fspath(path))  # type: ignore[no-untyped-call]
    (ws.root / "go").write_text("")

    exported = ws.cli("export", "review.ipynb", "out", "--workflow", "review")
    assert exported.returncode == 0, exported.stderr
    assert (ws.root / "out" / "review.py").read_text() == BODY  # the body verbatim, no magic line

    ran = ws.cli("run", "review.ipynb", "--workflow", "review", "--yes", "--output", "jsonl")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    run_id = events[0]["run_id"]
    assert [r["value"] for r in kinds(ws, run_id, "script_output")] == [
        {"count": "3", "words": ["alpha", "beta", "gamma"], "replayed": [False, False]}
    ]
    # planned headless, the script keeps the label the kernel gives the cell
    plans = json.loads(ws.cli("plans", "--output", "json").stdout)
    assert [plan["entry"] for plan in plans] == ["//review.py"], plans
    assert not list(ws.root.glob(".rho-notebook-export-*"))  # the temporary export is gone


# -- the in-process shell ----------------------------------------------------------------------------


def test_a_script_cell_is_held_and_checked_but_never_executed(ip: Any, ws: Project) -> None:
    from rho_notebook.notebook.extension import current_session

    report, _ = ok(ip, "%%script probe\nfrom pathlib import Path\nPath('touched').write_text('x')\n")
    assert "script probe: stored as //probe.py (2 lines)" in repr(report)
    assert not (ws.root / "touched").exists()
    session = current_session()
    cell = session.cells.scripts["probe"]
    assert isinstance(cell, ScriptCell) and cell.text == "from pathlib import Path\nPath('touched').write_text('x')\n"
    plan = session.validated["probe"]
    assert plan.graph.script is not None and plan.graph.script.module == "//probe.py"
    assert [m.text for m in plan.graph.python_modules] == [cell.text]
    assert "probe" in session.workflow_names()


def test_a_script_cell_shows_the_dag_widget_and_its_picture(ip: Any) -> None:
    """As a %%workflow cell: the live DAG widget (a script's steps appear as nodes while it runs)
    and the picture saved and untrusted notebooks show (PNG and SVG, no HTML)."""
    _, captured = ok(ip, "%%script drawn\nprint('hello')\n")
    [shown] = [output.data for output in captured.outputs]
    assert "application/vnd.jupyter.widget-view+json" in shown
    assert shown["image/png"] and "text/html" not in shown
    assert "steps appear as nodes while it runs" in shown["image/svg+xml"]
    assert shown["text/plain"].startswith("script drawn: its steps appear as nodes while it runs")


def test_a_script_cell_replaces_a_workflow_of_the_same_name(ip: Any) -> None:
    from rho_notebook.notebook.extension import current_session

    ok(
        ip,
        '%%workflow same\ndef build(inputs):\n    return workflow(name = "same", nodes = [\n'
        '        command(name = "a", argv = ["true"], timeout_seconds = 5, max_output_bytes = 100),\n'
        "    ])\n\nWORKFLOW = define(inputs = {}, build = build)\n",
    )
    ok(ip, "%%script same\nx = 1\n")
    session = current_session()
    assert "same" not in session.cells.workflows and "same" in session.cells.scripts
    assert session.source("same").entry.label == "//same.py"


def test_script_lint_errors_point_at_cell_lines(ip: Any) -> None:
    message = usage_error(ip, "%%script bad\nimport json\nfrom rho_notebook.service import Service\n")
    assert "%%script bad" in message and "script.import" in message
    assert ":3:" in message  # line 2 of the script is line 3 of the cell
    assert "required: name" in usage_error(ip, "%%script\nx = 1\n")
    assert "a-z, 0-9 and _" in usage_error(ip, "%%script fan-out\nx = 1\n")
    assert "a-z, 0-9 and _" in usage_error(ip, "%%script Review\nx = 1\n")


def test_decide_flags_are_checked(ip: Any) -> None:
    assert "--decide STEP=rerun" in usage_error(ip, "%workflow resume someid --decide words=again")
    assert "twice" in usage_error(ip, "%workflow resume someid --decide a=rerun --decide a=skip")


def test_unloading_gives_back_ipythons_script_magic(ip: Any) -> None:
    ours = ip.magics_manager.magics["cell"]["script"]
    assert getattr(ours, "__self__", None).__class__.__name__ == "WorkflowMagics"
    ip.run_line_magic("unload_ext", "rho_notebook")
    try:
        restored = ip.magics_manager.magics["cell"]["script"]
        assert restored.__self__.__class__.__name__ == "ScriptMagics"
    finally:
        ip.run_line_magic("load_ext", "rho_notebook")


def test_exported_folder_of_a_script(ip: Any, ws: Project) -> None:
    ok(ip, "%%py //helpers/words.py\ndef split(text):\n    return text.split()\n")
    ok(ip, "%%script tidy\nfrom helpers.words import split\nprint(split('a b'))\n")
    report, _ = ok(ip, "%workflow export out --workflow tidy")
    assert (ws.root / "out" / "tidy.py").read_text() == "from helpers.words import split\nprint(split('a b'))\n"
    assert (ws.root / "out" / "helpers" / "words.py").exists()
    assert Path(report.data.entry).name == "tidy.py"


def test_validate_plan_and_the_plan_card_of_a_script(ip: Any, ws: Project) -> None:
    ok(
        ip,
        "%%script card\nfrom rho_notebook.script import run_command\nrun_command(['true'], timeout_seconds=5, max_output_bytes=10)\n",
    )
    validated, _ = ok(ip, "%workflow validate card")
    assert "script card: stored as //card.py (2 lines); valid" in repr(validated)
    planned, _ = ok(ip, "%workflow plan card")
    assert "sources\n  //card.py" in repr(planned) and "interpreter" in repr(planned)
    _, captured = ok(ip, "%workflow run card")  # no --yes: a plan card asks, nothing starts
    assert f"digest {planned.data.graph_digest}" in captured.stdout
    assert json.loads(ws.cli("runs", "--output", "json").stdout) == []


def test_a_shell_body_says_how_to_reach_ipythons_script_magic(ip: Any) -> None:
    message = usage_error(ip, "%%script bash\necho hi\n")
    assert "python.syntax" in message and "use IPython's %%bash or %%sh" in message


def test_a_script_name_that_is_no_program_is_not_offered_as_a_magic(ip: Any) -> None:
    message = usage_error(ip, "%%script tidy\nx = = 1\n")  # a typo in a script workflow named tidy
    assert "python.syntax" in message and "%%tidy" not in message and "use IPython's %%sh," in message
    message = usage_error(ip, "%%script py\nx = = 1\n")  # %%py is rho_notebook's, not a program's
    assert "%%py" not in message and "use IPython's %%sh," in message


MANUAL = """\
%%script manual
from pathlib import Path

from rho_notebook.script import emit_output, run_command

Path("effects").mkdir(exist_ok=True)
flaky = run_command(
    ["sh", "-c", "echo ran >> effects/flaky.log; test -f ok"],
    step_id="flaky",
    recovery="manual",
    timeout_seconds=30,
    max_output_bytes=1000,
)
emit_output({"ok": flaky.ok})
if not flaky.ok:
    raise SystemExit(3)  # the outcome follows the script: one that goes on from the failure succeeds
"""


def test_a_halted_step_waits_for_decide_in_the_notebook(ip: Any, ws: Project) -> None:
    ok(ip, MANUAL)
    first, _ = ok(ip, "%workflow run manual --yes --wait")
    run_id = first.data.run_id
    assert first.data.outcome == "failure" and effects(ws, "flaky") == 1

    halted, _ = ok(ip, f"%workflow resume {run_id} --yes --wait")  # recovery="manual": a person decides
    assert halted.data.lifecycle.value == "needs_decision", repr(halted)
    assert effects(ws, "flaky") == 1
    [record] = kinds(ws, run_id, "step_halted")
    assert record["node"] == "flaky" and 'recovery="manual"' in record["why"]

    (ws.root / "ok").write_text("")
    decided, _ = ok(ip, f"%workflow resume {run_id} --decide flaky=rerun --yes --wait")
    assert decided.data.outcome == "success", repr(decided)
    assert effects(ws, "flaky") == 2  # exactly one more attempt
    assert [(r["node"], r["decision"]) for r in kinds(ws, run_id, "decision_recorded")] == [("flaky", "rerun")]
    assert [r["value"] for r in kinds(ws, run_id, "script_output")][-1] == {"ok": True}
