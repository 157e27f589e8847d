"""``status``, ``result`` and ``runs --state`` of a script run that stopped at a step (lifecycle
``needs_decision``) after emitting an output, through the real CLI.

The run is a real run of a stored script plan; its journal is written as the script driver writes
it (step nodes, script_output, step_halted, run_halted).
"""

from __future__ import annotations

import json
from typing import Any

from rho_notebook.store.journal import JournalWriter
from tests.conftest import Project

AT = "2026-12-03T10:00:00.000+00:00"

SCRIPT = """\
from rho_notebook.script import emit_output, run_command

first = run_command(argv=["true"])
emit_output({"findings": 3})
"""


def _step(after: list[str]) -> dict[str, Any]:
    return {"kind": "command", "digest": "sha256:ab", "facts": {"argv": ["true"]}, "after": after, "recovery": None}


def _halted_run(project: Project) -> str:
    project.write("review.py", SCRIPT)
    run_id = project.create_run(project.plan("review.py"))
    folder = project.service.run_store.folder(run_id)
    with JournalWriter.open(folder.events, mark=folder.mark if folder.mark.exists() else None) as writer:
        writer.append(
            [
                {"kind": "run_started", "at": AT, "pid": 1},
                {"kind": "node_launched", "at": AT, "node": "zeta", "attempt": 1, "step": _step([])},
                {"kind": "node_finished", "at": AT, "node": "zeta", "attempt": 1, "state": "success", "exit": None},
                {"kind": "node_launched", "at": AT, "node": "call-2", "attempt": 1, "step": _step(["zeta"])},
                {"kind": "script_output", "at": AT, "value": {"findings": 3}},
                {"kind": "step_halted", "at": AT, "node": "call-2", "why": "started and never settled"},
                {"kind": "run_halted", "at": AT, "steps": [{"step": "call-2", "why": "started and never settled"}]},
            ]
        )
        writer.sync()
    return run_id


def test_status_result_and_runs_show_a_run_that_needs_a_decision(project: Project) -> None:
    run_id = _halted_run(project)

    status = project.cli("status", run_id, check=True).stdout
    assert "lifecycle  needs_decision" in status
    assert status.index("zeta") < status.index("call-2")  # arrival order, not by name
    assert "command step" in status
    assert 'output     {"findings": 3}' in status
    assert "  call-2: started and never settled" in status
    assert f"  rho-notebook resume {run_id} --decide call-2=rerun|skip" in status

    data = json.loads(project.cli("status", run_id, "--output", "json", check=True).stdout)
    assert data["lifecycle"] == "needs_decision"
    assert data["halted"] == [{"step": "call-2", "why": "started and never settled"}]
    assert data["output"] == {"findings": 3}
    assert list(data["nodes"]) == ["zeta", "call-2"]
    assert data["nodes"]["call-2"]["step"]["after"] == ["zeta"]

    result = json.loads(project.cli("result", run_id, "--output", "json", check=True).stdout)
    assert result["output"] == {"findings": 3}
    assert result["halted"] == [{"step": "call-2", "why": "started and never settled"}]
    text = project.cli("result", run_id, check=True).stdout
    assert 'output of the script: {"findings": 3}' in text
    assert "needs a decision: call-2: started and never settled" in text

    rows = json.loads(project.cli("runs", "--state", "needs_decision", "--output", "json", check=True).stdout)
    assert [row["run_id"] for row in rows] == [run_id]
    assert json.loads(project.cli("runs", "--state", "completed", "--output", "json", check=True).stdout) == []
