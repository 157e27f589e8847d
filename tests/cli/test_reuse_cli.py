"""Reuse end to end: real plans of Python nodes, real `rho-notebook run` processes, real journals.

Every node function appends a line to a side-effect file outside the workspace, so a launch is
seen there and a reuse is not. The journal says the same thing: ``node_reused`` and no
``node_launched`` for a reused node.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rho_notebook.service import Consent, StartRun
from rho_notebook.store.journal import read_journal
from tests.cli.runhelp import run
from tests.conftest import Project, star

STEPS = """\
def step(tag, log, upstream=None):
    with open(log, "a") as f:
        f.write(tag + "\\n")
    if tag == "boom":
        raise RuntimeError("boom")
    return {"total": len(tag) + (upstream["total"] if upstream else 0)}
"""

C = "timeout_seconds = 30, max_output_bytes = 10000"


def _py(name: str, *, module: str = "//nodes/steps.py", up: str | None = None, extra: str = "") -> str:
    reads = f', "upstream": output("{up}")' if up else ""
    needs = f'needs = ["{up}"], ' if up else ""
    return (
        f'python(name = "{name}", module = "{module}", function = "step", {needs}'
        f'args = {{"tag": "{name}", "log": LOG{reads}}}, output = R, access = "read_only", reuse = True, {C}{extra})'
    )


def _workflow(project: Project, *nodes: str) -> Path:
    log = project.root.parent / "side.log"
    listed = ",\n    ".join(nodes)
    body = (
        f"R = schema.record({{'total': schema.integer()}})\nLOG = {str(log)!r}\n"
        f"return workflow(name = 'reuse', nodes = [\n    {listed},\n])"
    )
    project.write("nodes/steps.py", STEPS)
    project.write("nodes/other.py", STEPS)
    project.write("wf.star", star(body))
    return log


CHAIN = (_py("a"), _py("b", module="//nodes/other.py", up="a"), _py("c", up="b"))


def _kinds(project: Project, run_id: str) -> dict[str, list[str]]:
    """Journal kind -> the nodes it names, in order."""
    found: dict[str, list[str]] = {}
    for record in read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events:
        if "node" in record:
            found.setdefault(record["kind"], []).append(record["node"])
    return found


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_an_unchanged_plan_run_again_reuses_every_node(project: Project) -> None:
    log = _workflow(project, *CHAIN)
    _, first = run(project)
    assert first["outcome"] == "success"
    assert _lines(log) == ["a", "b", "c"]
    _, second = run(project)
    assert second["outcome"] == "success"
    assert _lines(log) == ["a", "b", "c"]  # nothing ran again
    kinds = _kinds(project, second["run_id"])
    assert kinds["node_reused"] == ["a", "b", "c"]
    assert "node_launched" not in kinds
    state = project.status(second["run_id"])
    for name in "abc":
        assert second["nodes"][name]["state"] == "success"
        current = state.nodes[name].current
        assert current is not None
        assert current.reused_from == {"run_id": first["run_id"], "node": name, "attempt": 1}
    result = asyncio.run(project.service.result(second["run_id"]))
    assert result["nodes"]["c"]["output"] == {"total": 3}


def test_editing_one_module_relaunches_exactly_its_node_and_downstream(project: Project) -> None:
    log = _workflow(project, *CHAIN)
    run(project)
    project.write("nodes/other.py", STEPS.replace("len(tag)", "len(tag) + 10"))
    _, second = run(project)
    assert second["outcome"] == "success"
    assert _lines(log) == ["a", "b", "c", "b", "c"]
    kinds = _kinds(project, second["run_id"])
    assert kinds["node_reused"] == ["a"]
    assert kinds["node_launched"] == ["b", "c"]
    _, third = run(project)  # the edited plan's own results are reused now
    assert _kinds(project, third["run_id"])["node_reused"] == ["a", "b", "c"]
    assert _lines(log) == ["a", "b", "c", "b", "c"]


def test_an_edit_that_keeps_the_value_relaunches_only_the_edited_node(project: Project) -> None:
    log = _workflow(project, *CHAIN)
    run(project)
    project.write("nodes/other.py", STEPS + "\n# a comment changes the module digest, not b's value\n")
    _, second = run(project)
    assert _lines(log) == ["a", "b", "c", "b"]
    kinds = _kinds(project, second["run_id"])
    assert kinds["node_launched"] == ["b"]
    assert kinds["node_reused"] == ["a", "c"]  # c reads the same value of b as before


def test_no_reuse_launches_every_node_and_records_it(project: Project) -> None:
    log = _workflow(project, *CHAIN)
    run(project)
    _, second = run(project, "wf.star", "--no-reuse")
    assert second["outcome"] == "success"
    assert _lines(log) == ["a", "b", "c"] * 2
    kinds = _kinds(project, second["run_id"])
    assert kinds["node_launched"] == ["a", "b", "c"]
    assert "node_reused" not in kinds
    manifest = project.home / "workflows" / "runs" / second["run_id"] / "manifest.json"
    assert '"reuse": false' in manifest.read_text()


def test_mutating_python_and_command_nodes_always_launch(project: Project) -> None:
    mutating = (
        'python(name = "m", module = "//nodes/steps.py", function = "step", '
        f'args = {{"tag": "m", "log": LOG}}, output = R, {C})'
    )
    command = f'command(name = "cmd", argv = ["sh", "-c", "echo cmd >> \\"$1\\"", "sh", LOG], {C})'
    log = _workflow(project, _py("a"), mutating, command)
    run(project)
    _, second = run(project)
    assert second["outcome"] == "success"
    assert sorted(_lines(log)) == sorted(["a", "m", "cmd", "m", "cmd"])
    kinds = _kinds(project, second["run_id"])
    assert kinds["node_reused"] == ["a"]
    assert sorted(kinds["node_launched"]) == ["cmd", "m"]


def test_a_failed_upstream_allowed_to_fail_prevents_reuse_downstream(project: Project) -> None:
    boom = _py("boom", extra=", allow_failure = True")
    after = (
        'python(name = "after", module = "//nodes/steps.py", function = "step", needs = ["boom"], '
        'when = condition.equals(status("boom"), "failure"), '
        f'args = {{"tag": "after", "log": LOG}}, output = R, access = "read_only", reuse = True, {C})'
    )
    log = _workflow(project, boom, after)
    _, first = run(project)
    assert first["nodes"]["boom"]["state"] == "failure"
    assert first["nodes"]["after"]["state"] == "success"
    _, second = run(project)
    assert _lines(log) == ["boom", "after"] * 2
    assert "node_reused" not in _kinds(project, second["run_id"])


def test_a_deleted_source_run_is_a_miss_and_the_node_launches(project: Project) -> None:
    log = _workflow(project, *CHAIN)
    _, first = run(project)
    deleted = project.cli("delete", first["run_id"], "--yes")
    assert deleted.returncode == 0, deleted.stderr
    _, second = run(project)
    assert second["outcome"] == "success"
    assert _lines(log) == ["a", "b", "c"] * 2
    assert _kinds(project, second["run_id"])["node_launched"] == ["a", "b", "c"]


def _start(project: Project, **options: Any) -> dict[str, Any]:
    service = project.service
    plan = project.plan("wf.star")

    async def go() -> Any:
        request = StartRun(plan=plan.plan_id, consent=Consent(yes=True), **options)
        return await service.run(request)

    state = asyncio.run(go())
    return {"run_id": state.run_id, "outcome": state.outcome, "state": state}


def test_a_seeded_run_takes_the_named_nodes_from_the_source_run(project: Project) -> None:
    log = _workflow(project, *CHAIN)
    _, first = run(project)
    tried = _start(project, reuse=False, seed_from=first["run_id"][:13], seed_nodes=("a", "b"))
    assert tried["outcome"] == "success"
    assert _lines(log) == ["a", "b", "c", "c"]  # only c ran again
    kinds = _kinds(project, tried["run_id"])
    assert kinds["node_reused"] == ["a", "b"]
    assert kinds["node_launched"] == ["c"]
    state = tried["state"]
    assert state.nodes["b"].current.reused_from == {"run_id": first["run_id"], "node": "b", "attempt": 1}
    result = asyncio.run(project.service.result(tried["run_id"]))
    assert result["nodes"]["c"]["output"] == {"total": 3}


def test_a_seeded_node_without_a_success_in_the_source_run_fails_with_why(project: Project) -> None:
    _workflow(project, _py("boom", extra=", allow_failure = True"), _py("c"))
    _, first = run(project)
    tried = _start(project, seed_from=first["run_id"], seed_nodes=("boom",))
    node = tried["state"].nodes["boom"]
    assert node.state.value == "failure"
    assert f"run {first['run_id']} has no successful attempt of node 'boom'" in node.current.message


def test_a_reused_value_is_read_from_its_source_on_resume(project: Project) -> None:
    log = _workflow(project, *CHAIN)
    _, first = run(project)
    plan = project.plan("wf.star")
    # killed right after the first pass journaled "a reused"; a reused attempt has no folder of its own
    crashed = project.cli("run", plan.plan_id, "--yes", env={"RHO_NOTEBOOK_FAILPOINT": "after_decisions_append:1"})
    assert crashed.returncode == 1 and "stopped before the run ended" in crashed.stderr, crashed.stderr  # owner died
    run_id = sorted(p.name for p in (project.home / "workflows" / "runs").iterdir() if p.name != first["run_id"])[0]
    assert _kinds(project, run_id)["node_reused"] == ["a"]
    assert not (project.home / "workflows" / "runs" / run_id / "nodes" / "a" / "attempts" / "1" / "value.json").exists()
    resumed = project.cli("resume", run_id, "--yes")
    assert resumed.returncode == 0, resumed.stderr
    assert _lines(log) == ["a", "b", "c"]  # b's key read a's value from its source: nothing launched
    kinds = _kinds(project, run_id)
    assert kinds["node_reused"] == ["a", "b", "c"] and "node_launched" not in kinds
    result = asyncio.run(project.service.result(run_id))
    assert result["nodes"]["a"]["output"] == {"total": 1}


def test_a_declared_input_file_decides_reuse_by_its_content(project: Project) -> None:
    project.write("data/x.csv", "1,2\n")
    log = _workflow(project, _py("a", extra=', reuse_inputs = ["//data/x.csv"]'))
    run(project)
    _, same = run(project)
    assert _kinds(project, same["run_id"]).get("node_reused") == ["a"]
    project.write("data/x.csv", "1,3\n")
    _, changed = run(project)
    assert _kinds(project, changed["run_id"]).get("node_launched") == ["a"]
    project.write("data/x.csv", "1,2\n")  # back to the first content: the first run's success holds again
    _, back = run(project)
    assert _kinds(project, back["run_id"]).get("node_reused") == ["a"]
    assert _lines(log) == ["a", "a"]
