"""``rho-notebook fork RUN --at NODE`` on real runs (issue 35, docs/fork.md): a chain a -> b -> c -> d
and a branch a -> e, each node a Python node appending to a side-effect log, so what launched is
what the log says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rho_notebook.store.journal import read_journal
from tests.conftest import Project, star, started_gated_run
from tests.processes import wait_gone

STEPS = """\
def step(tag, log, upstream=None):
    with open(log, "a") as f:
        f.write(tag + ":" + str(upstream["total"] if upstream else "-") + "\\n")
    return {"total": len(tag) + (upstream["total"] if upstream else 0)}
"""

C = "timeout_seconds = 30, max_output_bytes = 10000"


def _py(name: str, up: str | None = None) -> str:
    reads = f', "upstream": output("{up}")' if up else ""
    needs = f'needs = ["{up}"], ' if up else ""
    return (
        f'python(name = "{name}", module = "//nodes/steps.py", function = "step", {needs}'
        f'args = {{"tag": "{name}", "log": LOG{reads}}}, output = R, {C})'
    )


NODES = (_py("a"), _py("b", "a"), _py("c", "b"), _py("d", "c"), _py("e", "a"))


def _workflow(project: Project) -> Path:
    log = project.root.parent / "side.log"
    listed = ",\n    ".join(NODES)
    body = (
        f"R = schema.record({{'total': schema.integer()}})\nLOG = {str(log)!r}\n"
        f"return workflow(name = 'chain', nodes = [\n    {listed},\n])"
    )
    project.write("nodes/steps.py", STEPS)
    project.write("wf.star", star(body))
    return log


def _run_json(project: Project, *args: str) -> dict[str, Any]:
    done = project.cli(*args, "--yes", "--output", "json", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _launched(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def _journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    return list(read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events)


def _first_run(project: Project) -> tuple[Path, str]:
    log = _workflow(project)
    first = _run_json(project, "run", "wf.star")
    assert sorted(_launched(log)) == ["a:-", "b:1", "c:2", "d:3", "e:1"]
    return log, str(first["run_id"])


def test_fork_with_an_edited_value_launches_only_downstream(project: Project) -> None:
    log, run = _first_run(project)
    forked = _run_json(project, "fork", run, "--at", "c", "--value", '{"total": 100}')
    assert _launched(log) == ["d:100"]  # a, b, e taken; c edited; d once with the new value
    fork = str(forked["run_id"])
    records = _journal(project, fork)
    reused = {r["node"]: r for r in records if r["kind"] == "node_reused"}
    assert sorted(reused) == ["a", "b", "c", "e"]
    assert reused["a"]["taken_from"] == {"run": run, "node": "a", "attempt": 1}
    assert reused["c"]["edited"]["via"] == "cli" and reused["c"]["edited"]["value_digest"].startswith("sha256:")
    assert [r["node"] for r in records if r["kind"] == "node_launched"] == ["d"]
    finished = {r["node"]: r for r in records if r["kind"] == "node_finished"}
    assert "edited by" in finished["c"]["message"]
    result = json.loads(project.cli("result", fork, "--output", "json", check=True).stdout)
    assert result["nodes"]["d"]["output"] == {"total": 101}  # len("d") + the edited 100
    assert result["nodes"]["c"]["output"] == {"total": 100}

    manifest = json.loads((project.home / "workflows" / "runs" / fork / "manifest.json").read_text())
    assert manifest["forked_from"] == {"run": run, "node": "c"}
    source = json.loads((project.home / "workflows" / "runs" / run / "manifest.json").read_text())
    assert "forked_from" not in source  # a fork never changes RUN

    diff = project.cli("diff", run, fork)
    assert diff.returncode == 0, diff.stderr
    lines = diff.stdout.splitlines()
    assert "= a: success (taken)" in lines and "= e: success (taken)" in lines
    assert "~ c: success -> success, value changed (edited)" in lines
    assert "~ d: success -> success, value changed (launched)" in lines
    answer = json.loads(project.cli("diff", run, fork, "--output", "json", check=True).stdout)
    by_node = {row["node"]: row for row in answer["runs"]}
    assert by_node["b"]["old_value"] == by_node["b"]["new_value"] and by_node["b"]["how"] == "taken"

    rows = json.loads(project.cli("runs", "--output", "json", check=True).stdout)
    lineage = {row["run_id"]: row.get("lineage") for row in rows}
    assert lineage == {run: None, fork: [{"run": run, "node": "c"}]}
    assert f"forked from {run[:13]} at c" in project.cli("runs", check=True).stdout


def test_fork_without_a_value_reruns_the_node_and_downstream(project: Project) -> None:
    log, run = _first_run(project)
    _run_json(project, "fork", run, "--at", "c")
    assert _launched(log) == ["c:2", "d:3"]


def test_fork_of_a_fork_and_deleting_the_source(project: Project) -> None:
    log, run = _first_run(project)
    first = str(_run_json(project, "fork", run, "--at", "c", "--value", '{"total": 10}')["run_id"])
    assert _launched(log) == ["d:10"]
    second = str(_run_json(project, "fork", first, "--at", "d")["run_id"])
    assert _launched(log) == ["d:10"]  # c's edited value taken from the first fork
    manifest = json.loads((project.home / "workflows" / "runs" / second / "manifest.json").read_text())
    assert manifest["forked_from"] == {"run": first, "node": "d"}
    rows = {row["run_id"]: row for row in json.loads(project.cli("runs", "--output", "json", check=True).stdout)}
    assert rows[second]["lineage"] == [{"run": first, "node": "d"}, {"run": run, "node": "c"}]

    deleted = project.cli("delete", run, "--yes")
    assert deleted.returncode == 0, deleted.stderr
    deleted = project.cli("delete", first, "--yes")
    assert deleted.returncode == 0, deleted.stderr
    result = json.loads(project.cli("result", second, "--output", "json", check=True).stdout)
    assert result["nodes"]["d"]["output"] == {"total": 11}  # d: 1 + the edited 10
    assert result["nodes"]["c"]["output"] == {"total": 10} and result["nodes"]["a"]["output"] == {"total": 1}
    status = project.cli("status", second)
    assert status.returncode == 0, status.stderr


def test_schema_mismatch_is_refused_before_the_run_naming_the_field(project: Project) -> None:
    log, run = _first_run(project)
    plans_before = project.stored_plans()
    done = project.cli("fork", run, "--at", "c", "--value", '{"total": "many"}', "--yes")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "c.total" in done.stderr and "integer" in done.stderr
    project.write("value.json", '{"total": 1, "extra": true}')
    from_file = project.cli("fork", run, "--at", "c", "--value-file", "value.json", "--yes")
    assert from_file.returncode == 3 and "extra" in from_file.stderr, from_file.stderr
    assert _launched(log) == []
    assert project.stored_plans() == plans_before  # refused before anything was stored


def test_a_value_file_that_cannot_be_read_is_named_with_its_flag(project: Project) -> None:
    """``--value-file missing.json`` said only ``[Errno 2] No such file or directory: 'missing.json'``."""
    _, run = _first_run(project)
    (project.root / "folder").mkdir()
    for path, why in (("missing.json", "No such file or directory"), ("folder", "Is a directory")):
        done = project.cli("fork", run, "--at", "c", "--value-file", path, "--yes")
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"rho-notebook fork: --value-file {path}: cannot read it ({why})" in done.stderr, done.stderr
        assert "[Errno" not in done.stderr


def test_a_value_that_is_not_json_is_a_usage_error_before_anything_is_stored(project: Project) -> None:
    """``--value NaN`` was taken by Python's json and refused later as a fork (exit 3), and a value
    nested too deeply to parse ended in a traceback: both are the flag's mistake (exit 2), said by
    the one parser of edited values the magic and the REST API share."""
    _, run = _first_run(project)
    plans_before = project.stored_plans()
    for text in ("NaN", '{"total": -Infinity}'):
        done = project.cli("fork", run, "--at", "c", "--value", text, "--yes")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "rho-notebook fork: --value is not JSON: " in done.stderr, done.stderr
        assert "is no JSON value (JSON has no NaN or Infinity)" in done.stderr, done.stderr
    project.write("value.json", "[" * 100_000 + "]" * 100_000)
    done = project.cli("fork", run, "--at", "c", "--value-file", "value.json", "--yes")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "rho-notebook fork: --value-file value.json nests too deeply to parse" in done.stderr, done.stderr
    assert project.stored_plans() == plans_before


def test_refusals_name_the_node(project: Project) -> None:
    project.write("nodes/steps.py", STEPS)
    project.write(
        "wf.star",
        star(
            f"""\
            return workflow(name = 'fails', nodes = [
                command(name = "ok", argv = ["true"], {C}),
                command(name = "bad", argv = ["false"], allow_failure = True, {C}),
                command(name = "after", argv = ["true"], needs = ["ok"], {C}),
            ])"""
        ),
    )
    done = project.cli("run", "wf.star", "--yes", "--output", "json", timeout=120)
    run = json.loads(done.stdout)["run_id"]
    refused = project.cli("fork", run, "--at", "after", "--yes")
    assert refused.returncode == 3 and "'bad'" in refused.stderr and "did not succeed" in refused.stderr
    no_schema = project.cli("fork", run, "--at", "bad", "--value", "1", "--yes")
    assert no_schema.returncode == 3 and "no output schema" in no_schema.stderr
    missing = project.cli("fork", run, "--at", "nope", "--yes")
    assert missing.returncode != 0 and "'nope'" in missing.stderr

    planned = project.create_run(project.plan("wf.star"))  # created, never started
    not_done = project.cli("fork", planned, "--at", "after", "--yes")
    assert not_done.returncode == 3 and "not completed" in not_done.stderr, not_done.stderr


def test_a_condition_on_a_taken_node_sees_its_source_exit_code(project: Project) -> None:
    log = project.root.parent / "side.log"
    project.write(
        "wf.star",
        star(
            f"""\
            return workflow(name = 'gate', nodes = [
                command(name = "a", argv = ["sh", "-c", "echo a >> {log}"], {C}),
                command(name = "c", argv = ["sh", "-c", "echo c >> {log}; echo 5"], needs = ["a"],
                        output = schema.stdout_json(schema.integer()), {C}),
                command(name = "x", argv = ["sh", "-c", "echo x >> {log}"], needs = ["a", "c"],
                        when = condition.equals(exit_code("a"), 0), {C}),
            ])"""
        ),
    )
    run = str(_run_json(project, "run", "wf.star")["run_id"])
    assert _launched(log) == ["a", "c", "x"]
    fork = str(_run_json(project, "fork", run, "--at", "c", "--value", "7")["run_id"])
    assert _launched(log) == ["x"]  # exit_code("a") is a's exit code in RUN: 0
    finished = {r["node"]: r for r in _journal(project, fork) if r["kind"] == "node_finished"}
    assert finished["a"]["exit"]["code"] == 0 and finished["x"]["state"] == "success"


def test_fork_from_a_newer_plan(project: Project) -> None:
    log, run = _first_run(project)
    source = (project.root / "wf.star").read_text()
    project.write("new.star", source.replace('"tag": "c"', '"tag": "cc"'))
    plan = json.loads(project.cli("plan", "new.star", "--output", "json", check=True).stdout)["plan_id"]
    _run_json(project, "fork", run, "--at", "c", "--from-plan", plan)
    assert _launched(log) == ["cc:2", "d:4"]  # c as the new plan defines it, then d on its value

    project.write("changed.star", source.replace('"tag": "b"', '"tag": "bb"'))
    changed = json.loads(project.cli("plan", "changed.star", "--output", "json", check=True).stdout)["plan_id"]
    refused = project.cli("fork", run, "--at", "c", "--from-plan", changed, "--yes")
    assert refused.returncode == 3 and "'b'" in refused.stderr and "args" in refused.stderr, refused.stderr
    assert _launched(log) == []


def test_a_plan_of_another_workflow_is_refused_as_from_plan(project: Project) -> None:
    """``--from-plan`` with the plan ID of another workflow (a wrong ID) forked a run of that other
    workflow at a node both happen to name, taking nothing, and called it a fork of RUN."""
    log, run = _first_run(project)
    other = (project.root / "wf.star").read_text().replace("name = 'chain'", "name = 'other'")
    project.write("other.star", other)
    plan = json.loads(project.cli("plan", "other.star", "--output", "json", check=True).stdout)["plan_id"]
    refused = project.cli("fork", run, "--at", "a", "--from-plan", plan, "--yes")
    assert refused.returncode == 3, refused.stdout + refused.stderr
    said = f"plan {plan} is of workflow 'other' and run {run} of 'chain': --from-plan takes a plan of the run's own"
    assert said in refused.stderr, refused.stderr
    assert _launched(log) == []


def test_fork_with_a_changed_input(project: Project) -> None:
    log = project.root.parent / "side.log"
    project.write("nodes/steps.py", STEPS)
    body = (
        f"R = schema.record({{'total': schema.integer()}})\nLOG = {str(log)!r}\n"
        "return workflow(name = 'inputs', nodes = [\n"
        f"    {_py('a')},\n    {_py('b', 'a')},\n"
        f'    python(name = "c", module = "//nodes/steps.py", function = "step", needs = ["b"], '
        f'args = {{"tag": inputs["tag"], "log": LOG, "upstream": output("b")}}, output = R, {C}),\n'
        f"    {_py('d', 'c')},\n])"
    )
    project.write(
        "wf.star", star(body).replace("define(inputs = {}", 'define(inputs = {"tag": input.string(default = "c")}')
    )
    run = str(_run_json(project, "run", "wf.star")["run_id"])
    assert _launched(log) == ["a:-", "b:1", "c:2", "d:3"]
    _run_json(project, "fork", run, "--at", "d", "--input", 'tag="ccc"')
    assert _launched(log) == ["ccc:2", "d:5"]  # c's text changed: not taken; d re-runs on its value
    refused = project.cli("fork", run, "--at", "d", "--input", "nope=1", "--yes")
    # worded as `run --input nope=1` says it (planning's input.unknown), not a wording of its own
    assert refused.returncode == 3, refused.stderr
    assert "[input.unknown] unknown input 'nope'; this workflow declares: tag" in refused.stderr, refused.stderr


ITEMS = """\
name: routes
inputs:
  score: {type: integer}
steps:
  - id: start
    kind: set
    params: {fields: {score: "={{ $json.score }}"}}
  - {id: route, kind: branch}
  - {id: high, kind: set, params: {fields: {level: high}}}
  - {id: low, kind: set, params: {fields: {level: low}}}
  - {id: done, kind: output}
edges:
  - {from: start, to: route}
  - {from: route, to: high, when: {field: score, op: gte, value: 50}}
  - {from: route, to: low}
  - {from: high, to: done}
  - {from: low, to: done}
"""


def test_an_item_graph_forked_at_a_branch_with_an_edited_item_takes_the_other_branch(project: Project) -> None:
    project.write("routes.graph.yaml", ITEMS)
    first = _run_json(project, "run", "routes.graph.yaml", "--input", "score=30")
    run = str(first["run_id"])
    before = json.loads(project.cli("result", run, "--output", "json", check=True).stdout)["nodes"]
    assert before["low"]["state"] == "success" and before["high"]["state"] == "skipped"

    fork = str(_run_json(project, "fork", run, "--at", "route", "--value", '{"score": 90}')["run_id"])
    after = json.loads(project.cli("result", fork, "--output", "json", check=True).stdout)["nodes"]
    assert after["high"]["state"] == "success" and after["low"]["state"] == "skipped"
    assert after["done"]["output"]["level"] == "high"
    launched = [r["node"] for r in _journal(project, fork) if r["kind"] == "node_launched"]
    assert "start" not in launched and "route" not in launched


def test_create_fork_run_copies_the_values_before_it_starts(project: Project) -> None:
    import asyncio

    from rho_notebook.service import Consent, StartRun
    from rho_notebook.service.fork import create_fork_run

    log, run = _first_run(project)
    service = project.service
    forked = asyncio.run(service.fork(run, at="d", value={"total": 7}, edited=True))
    assert forked.taken == ("a", "b", "c", "e") and forked.edited and forked.anew == ()
    again = asyncio.run(service.fork(run, at="d", value={"total": 7}, edited=True))
    assert again.plan.graph_digest == forked.plan.graph_digest  # the same fork, the same digest to confirm
    request = StartRun(plan=forked.plan.plan_id, consent=Consent(digest=forked.plan.graph_digest))
    fork = asyncio.run(create_fork_run(service.layout, forked, request))
    copies = project.home / "workflows" / "runs" / fork / "nodes"
    assert sorted(p.parent.parent.parent.name for p in copies.glob("*/attempts/1/value.json")) == [
        "a",
        "b",
        "c",
        "d",
        "e",
    ]
    assert oct((copies / "a" / "attempts" / "1" / "value.json").stat().st_mode & 0o777) == "0o600"
    assert project.cli("delete", run, "--yes").returncode == 0  # before the fork even starts
    done = project.cli("resume", fork, "--yes", "--output", "json", timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(project.cli("result", fork, "--output", "json", check=True).stdout)["nodes"]
    assert result["d"]["output"] == {"total": 7} and result["c"]["output"] == {"total": 3}
    assert _launched(log) == []


def test_the_fork_node_reruns_even_when_reusable_and_downstream_reuse_still_applies(project: Project) -> None:
    log = project.root.parent / "side.log"
    reusable = ', access = "read_only", reuse = True'
    nodes = [_py(name, up).removesuffix(")") + reusable + ")" for name, up in (("a", None), ("b", "a"), ("c", "b"))]
    body = (
        f"R = schema.record({{'total': schema.integer()}})\nLOG = {str(log)!r}\n"
        "return workflow(name = 'reusable', nodes = [\n    " + ",\n    ".join(nodes) + ",\n])"
    )
    project.write("nodes/steps.py", STEPS)
    project.write("wf.star", star(body))
    run = str(_run_json(project, "run", "wf.star")["run_id"])
    assert _launched(log) == ["a:-", "b:1", "c:2"]
    fork = str(_run_json(project, "fork", run, "--at", "b")["run_id"])
    assert _launched(log) == ["b:1"]  # b re-runs; c has the same inputs and takes its stored success
    reused = {r["node"]: r for r in _journal(project, fork) if r["kind"] == "node_reused"}
    assert reused["c"]["reuse_key"] is not None and "taken_from" in reused["a"]


def test_a_live_run_is_refused_with_the_way_to_wait_for_it(project: Project) -> None:
    """Forking (or recording) a running run said to 'fork a completed run (rho-notebook status X)';
    it now says to wait for it to end, with the command. One wording for fork and record."""
    _, run_id, owner = started_gated_run(project)
    try:
        for verb, code in ((("fork", run_id, "--at", "wait", "--yes"), 3), (("record", run_id, "rec"), 1)):
            refused = project.cli(*verb)
            assert refused.returncode == code, refused.stdout + refused.stderr
            said = f"run {run_id} is running, not completed: wait for it to end (`rho-notebook wait {run_id[:13]}`)"
            assert f"{said}, then {verb[0]} it" in refused.stderr, refused.stderr
    finally:
        (project.root / "go").touch()
        assert wait_gone(owner), f"owner {owner} is still alive"
