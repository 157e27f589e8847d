"""Where a script step's value is kept (runtime/script_attempts.py, script_values.py): a small
success travels in its ``node_finished`` record and its ``value.json`` is a copy written without
waiting, made only when the step has a folder anyway (a silent step gets none, as a silent command
node gets none); a replay whose copy is gone or torn answers from the journal, running nothing
again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rho_notebook.exec.base import JOURNALED_VALUE_BYTES
from rho_notebook.runtime.script_attempts import STEP_VALUE_FIELD
from tests.cli.runhelp import status
from tests.cli.test_script_runs import effects, kinds, resume, run, write_script
from tests.conftest import Project

BODY = f"""\
small = sh("echo ran >> effects/small.log; echo one", step_id="small")
big = sh("echo ran >> effects/big.log; head -c {JOURNALED_VALUE_BYTES + 100} /dev/zero | tr '\\\\0' x", step_id="big")
silent = run_command(["true"], step_id="silent", timeout_seconds=60, max_output_bytes=100)
failed = sh("echo ran >> effects/failed.log; echo no >&2; [ -f go ] || exit 4", step_id="failed")
if not Path("go").exists():
    sys.exit(3)
emit_output({{"small": small.output, "big": len(big.output), "silent": silent.value, "replayed": [small.replayed, silent.replayed]}})
"""


def attempt_dir(project: Project, run_id: str, key: str) -> Path:
    return project.home / "workflows" / "runs" / run_id / "nodes" / key / "attempts" / "1"


def finished(project: Project, run_id: str) -> dict[str, dict[str, object]]:
    return {r["node"]: r for r in kinds(project, run_id, "node_finished") if r["attempt"] == 1}


def test_a_small_success_is_journaled_with_its_node_finished_and_copied_to_its_value_file(project: Project) -> None:
    script = write_script(project, BODY)
    result, run_id = run(project, script)
    assert result.returncode == 1, result.stdout + result.stderr
    records = finished(project, run_id)
    stored = json.loads((attempt_dir(project, run_id, "small") / "value.json").read_text())
    assert (
        records["small"][STEP_VALUE_FIELD]
        == stored
        == {
            "output": "one\n",
            "value": {"exit_code": 0, "stdout": "one\n", "stderr": ""},
        }
    )
    # a silent step leaves no folder, as a silent command node leaves none: its value and its exit
    # record are journaled with its node_finished
    assert not (project.home / "workflows" / "runs" / run_id / "nodes" / "silent").exists()
    assert records["silent"][STEP_VALUE_FIELD] == {"output": "", "value": {"exit_code": 0, "stdout": "", "stderr": ""}}
    assert records["silent"]["exit"]["code"] == 0
    # one that printed has its streams and exit.json, as a command node's folder
    assert {"stdout", "exit.json", "value.json"} <= {p.name for p in attempt_dir(project, run_id, "small").iterdir()}
    # a big value and a failure's are only in their (durable) value files
    for key in ("big", "failed"):
        assert STEP_VALUE_FIELD not in records[key]
        assert (attempt_dir(project, run_id, key) / "value.json").is_file()
    big = json.loads((attempt_dir(project, run_id, "big") / "value.json").read_text())
    assert len(big["output"]) == JOURNALED_VALUE_BYTES + 100
    failed = json.loads((attempt_dir(project, run_id, "failed") / "value.json").read_text())
    assert failed["value"] == {"exit_code": 4, "stdout": "", "stderr": "no\n"}


def lose_copy(path: Path, how: str) -> None:
    """What a machine crash may leave of a copy written without waiting: none, or an empty file."""
    if how == "gone":
        path.unlink()
    else:
        path.write_text("")


@pytest.mark.parametrize("how", ["gone", "torn"])
def test_a_replay_whose_value_copy_is_gone_or_torn_answers_from_the_journal(project: Project, how: str) -> None:
    script = write_script(project, BODY)
    result, run_id = run(project, script)
    assert result.returncode == 1, result.stdout + result.stderr
    lose_copy(attempt_dir(project, run_id, "small") / "value.json", how)
    assert not attempt_dir(project, run_id, "silent").exists()  # (a silent step has no copy)

    (project.root / "go").write_text("")
    resume(project, run_id)  # (it reports the torn copy as damage when it shows the step's value)
    assert status(project, run_id)["outcome"] == "success"
    assert (effects(project, "small"), effects(project, "big")) == (1, 1)  # nothing ran again
    assert effects(project, "failed") == 2  # a failure is executed again
    replayed = {r["node"] for r in kinds(project, run_id, "step_replayed")}
    assert {"small", "big", "silent"} <= replayed
    assert not kinds(project, run_id, "step_halted")
    assert [r["value"] for r in kinds(project, run_id, "script_output")] == [
        {
            "small": "one\n",
            "big": JOURNALED_VALUE_BYTES + 100,
            "silent": {"exit_code": 0, "stdout": "", "stderr": ""},
            "replayed": [True, True],
        }
    ]


@pytest.mark.parametrize("how", ["gone", "torn"])
def test_result_shows_a_journaled_value_whose_copy_is_gone_or_torn(project: Project, how: str) -> None:
    """After a machine crash a small step's value.json copy may be missing or torn: ``result``
    answers from the step's node_finished record instead of calling the store damaged."""
    script = write_script(project, BODY)
    _, run_id = run(project, script)
    before = json.loads(project.cli("result", run_id, "--output", "json").stdout)["nodes"]
    lose_copy(attempt_dir(project, run_id, "small") / "value.json", how)
    assert not attempt_dir(project, run_id, "silent").exists()  # (a silent step has no copy)
    shown = project.cli("result", run_id, "--output", "json")
    assert shown.returncode == 0, shown.stderr
    after = json.loads(shown.stdout)["nodes"]
    for key in ("small", "silent"):
        assert after[key]["output"] == before[key]["output"] == finished(project, run_id)[key][STEP_VALUE_FIELD]
    # a torn value file of a graph node stays damage: only script steps journal their value
    assert "output" in after["big"] and "output" not in after["failed"]
