"""An item-graph ``aggregate`` step whose list cannot be iterated (the field is missing, is not a
list, or has more than ``max_items`` elements) fails before the launch gate, naming the list's
problem, in every mode that would run it (docs/approvals.md, "Aggregate steps"): nobody is asked
to approve an empty list of instances and no hook reads one. A list that is empty starts nothing:
the step runs without the gate and succeeds.

Real ``rho-notebook run`` processes on a real item graph whose inner step is a real command; the
journal each run leaves is read from disk.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.runhelp import status
from tests.conftest import Project

GRAPH = """\
name: unlistable
steps:
  - id: trigger
    kind: set
    params:
      fields:
        FIELD: LIST
  - id: classify
    kind: aggregate
    params:
      over: tickets
      max_items: 3
      into: categories
      step: {kind: command, params: {argv: [python3, classify.py, "={{ $json.text }}"]}}
  - {id: result, kind: output}
edges:
  - {from: trigger, to: classify}
  - {from: classify, to: result}
"""

CLASSIFY = 'import json, sys\nopen("ran.log", "a").write(sys.argv[1] + "\\n")\nprint(json.dumps("hardware"))\n'

FOUR = "[{text: printer on fire}, {text: no wifi}, {text: slow disk}, {text: blank screen}]"

CASES = {
    "over max_items": (
        "tickets",
        FOUR,
        "aggregate step 'classify': the list at 'tickets' has 4 elements, more than max_items 3; "
        "raise max_items (at most 1000) or shorten the list",
    ),
    "missing": (
        "other",
        FOUR,
        "aggregate step 'classify': over 'tickets' is missing from the item it receives, not a list; "
        "put the list there in an earlier step or point over at the field that holds it",
    ),
    "not a list": (
        "tickets",
        "printer on fire",
        "aggregate step 'classify': over 'tickets' is a str in the item it receives, not a list; "
        "put the list there in an earlier step or point over at the field that holds it",
    ),
}

MODES = {
    "supervised, nobody to decide": ("--mode", "supervised", "--approval-timeout", "0"),
    "auto": ("--mode", "auto"),
}


def journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    path = project.home / "workflows" / "runs" / run_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def unlistable_run(project: Project, case: str, *mode: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    field, value, _ = CASES[case]
    project.write("classify.py", CLASSIFY)
    project.write("unlistable.graph.yaml", GRAPH.replace("FIELD", field).replace("LIST", value))
    ran = project.cli("run", "unlistable.graph.yaml", "--yes", "--output", "jsonl", *mode)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    return status(project, run_id), journal(project, run_id)


def logging_hook(project: Project) -> None:
    """A before hook that appends what it reads to ``hook.log`` in the project and lets it go on."""
    hook = project.home / "hooks" / "log.py"
    hook.parent.mkdir(parents=True)
    hook.write_text(
        "#!/usr/bin/env python3\nimport json, pathlib, sys\n"
        f"pathlib.Path({str(project.root / 'hook.log')!r}).open('a').write(sys.stdin.read() + '\\n')\n"
        'print(json.dumps({"decision": "continue"}))\n'
    )
    hook.chmod(0o755)
    (project.home / "settings.json").write_text(json.dumps({"hooks": {"before_tool_use": [{"command": [str(hook)]}]}}))


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", list(CASES))
def test_an_unlistable_aggregate_fails_before_the_gate_naming_the_list(project: Project, case: str, mode: str) -> None:
    found, records = unlistable_run(project, case, *MODES[mode])
    reason = found["nodes"]["classify"]["reason"]
    assert found["outcome"] == "failure", found
    assert found["nodes"]["classify"]["state"] == "failure", reason
    assert reason == CASES[case][2], reason
    assert found["nodes"]["result"]["state"] == "blocked"
    kinds = {r["kind"] for r in records}
    assert not kinds & {"approval_requested", "approval_decided", "instance_launched"}, sorted(kinds)
    assert not (project.root / "ran.log").exists()  # no instance ran


def test_no_hook_reads_an_empty_list_of_instances(project: Project) -> None:
    """With a before hook configured the gate needs the step's facts even in ``auto`` mode: the
    step fails on its list instead of handing the hook ``"instances": []``."""
    logging_hook(project)
    found, records = unlistable_run(project, "over max_items", "--mode", "auto")
    reason = found["nodes"]["classify"]["reason"]
    assert found["nodes"]["classify"]["state"] == "failure" and reason.endswith(CASES["over max_items"][2]), reason
    assert not any(r["kind"] == "hook_ran" for r in records)
    assert not (project.root / "hook.log").exists()


@pytest.mark.parametrize("mode", list(MODES))
def test_an_aggregate_over_an_empty_list_runs_without_asking_anyone(project: Project, mode: str) -> None:
    """An empty list starts no instance: the step succeeds with an empty list under ``into``
    without an approval request (supervised mode would otherwise deny it after the timeout) and
    without a before hook reading ``"instances": []``."""
    logging_hook(project)
    project.write("classify.py", CLASSIFY)
    project.write("empty.graph.yaml", GRAPH.replace("FIELD", "tickets").replace("LIST", "[]"))
    ran = project.cli("run", "empty.graph.yaml", "--yes", "--output", "jsonl", *MODES[mode])
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    found, records = status(project, run_id), journal(project, run_id)
    assert found["outcome"] == "success", found
    assert found["nodes"]["classify"]["state"] == "success"
    kinds = {r["kind"] for r in records}
    assert not kinds & {"approval_requested", "approval_decided", "instance_launched", "hook_ran"}, sorted(kinds)
    output = [r["value"] for r in records if r["kind"] == "script_output"]
    assert output and output[-1]["categories"] == [], output
    assert not (project.root / "hook.log").exists() and not (project.root / "ran.log").exists()
