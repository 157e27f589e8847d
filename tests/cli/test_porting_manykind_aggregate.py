"""Issue 33 point 10: Manykind's ``aggregate`` ("Adds every per-item result under one field") and
``transform`` ("Edit fields": replaces the item with what its expression returns) steps, run
through real ``rho-notebook`` processes with real command inner steps (docs/graphs.md).

The workflows are the seed's own shapes (manykind-workflows.txt, "The graph" and "The carried
item"): a ticket-triage graph whose classify step runs once per ticket of the carried item and
whose results land, in element order, under one field, then an Edit fields step that replaces the
item. Adapted, as docs/graphs.md's "Differences from Manykind" says with the reasons: ``classify``
is a local command (``classify.py``, the triage example's offline stand-in for a model), the list
comes from a ``set`` step (graph inputs are scalars), the aggregate names its list (``over``), its
inner step (``step``) and a required ``max_items``, and ``transform`` takes ``fields`` mappings.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from rho_notebook.runtime.status import load_state
from rho_notebook.store.layout import StoreLayout
from rho_notebook.views.picture import run_bundle
from rho_notebook.views.state import node_views
from tests.cli.runhelp import kill_owner, status, wait_for_event
from tests.cli.test_item_graph_cli import result, start
from tests.conftest import REPO, Project

CLASSIFY = (REPO / "examples" / "graphs" / "classify.py").read_text()

SLOW_CLASSIFY = """\
import json, pathlib, sys, time

text = sys.argv[1]
with open("ran.log", "a") as log:
    log.write(text + "\\n")
if text == "slow disk" and not pathlib.Path("go").exists():
    time.sleep(600)  # killed with its owner; the resumed run finds go/ and goes on
print(json.dumps("hardware" if any(w in text for w in ("printer", "disk", "screen")) else "software"))
"""

TRIAGE_ALL = """\
name: triage_all
inputs:
  max: {type: integer, default: 10}
steps:
  - id: trigger
    kind: set
    params:
      fields:
        tickets: [{text: printer on fire}, {text: no wifi}, {text: slow disk}, {text: blank screen}]
  - id: classify
    kind: aggregate
    params:
      over: tickets
      max_items: MAX_ITEMS
      into: categories
      step: {kind: command, params: {argv: [python3, PROGRAM, "={{ $json.text }}"]}}
  - id: edit
    kind: transform
    params:
      fields:
        categories: "={{ $json.categories }}"
        first: "={{ $json.tickets[0].text }}"
        count: "={{ $json.max }}"
  - {id: result, kind: output}
edges:
  - {from: trigger, to: classify}
  - {from: classify, to: edit}
  - {from: edit, to: result}
"""


def triage(project: Project, *, program: str = "classify.py", max_items: int = 10) -> None:
    project.write("classify.py", CLASSIFY)
    project.write("slow_classify.py", SLOW_CLASSIFY)
    text = TRIAGE_ALL.replace("PROGRAM", program).replace("MAX_ITEMS", str(max_items))
    project.write("triage_all.graph.yaml", text)


def journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    path = project.home / "workflows" / "runs" / run_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_results_land_under_into_in_element_order_and_transform_replaces_the_item(project: Project) -> None:
    triage(project)
    ran = project.cli("run", "triage_all.graph.yaml", "--yes", "--output", "jsonl")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    found = result(project, run_id)
    # Edit fields replaced the item: only its three fields are left (tickets and max are gone)
    assert found["output"] == {
        "categories": ["hardware", "software", "hardware", "hardware"],
        "first": "printer on fire",
        "count": 10,
    }
    nodes = status(project, run_id)["nodes"]
    assert nodes["classify"]["instances"] == {
        "counts": {"success": 4},
        "states": {f"classify[{i}]": "success" for i in range(4)},
    }
    records = journal(project, run_id)
    launched = [r["instance"] for r in records if r["kind"] == "instance_launched"]
    finished = [(r["instance"], r["value"]) for r in records if r["kind"] == "instance_finished"]
    assert launched == [0, 1, 2, 3]
    assert finished == [(0, "hardware"), (1, "software"), (2, "hardware"), (3, "hardware")]
    shown = project.cli("status", run_id)
    assert "classify" in shown.stdout and "4 instances succeeded" in shown.stdout, shown.stdout


def test_more_elements_than_max_items_fail_the_step_naming_both_numbers(project: Project) -> None:
    triage(project, max_items=3)
    ran = project.cli("run", "triage_all.graph.yaml", "--yes", "--output", "jsonl")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    found = status(project, run_id)
    assert found["outcome"] == "failure"
    reason = found["nodes"]["classify"]["reason"]
    assert "has 4 elements, more than max_items 3" in reason, reason
    assert found["nodes"]["edit"]["state"] == "blocked"
    assert not any(r["kind"] == "instance_launched" for r in journal(project, run_id))  # nothing ran


def test_validate_refuses_a_bad_aggregate_with_line_and_column(project: Project) -> None:
    triage(project, max_items=1001)
    text = (project.root / "triage_all.graph.yaml").read_text()
    project.write("over.graph.yaml", text)
    project.write("nomax.graph.yaml", text.replace("      max_items: 1001\n", ""))
    project.write(
        "inner.graph.yaml", text.replace("max_items: 1001", "max_items: 5").replace("kind: command", "kind: human")
    )
    project.write(
        "clash.graph.yaml", text.replace("max_items: 1001", "max_items: 5").replace("into: categories", "into: tickets")
    )
    expected = {
        "over.graph.yaml": ":14:18: error[graph.field]: step 'classify', field 'params.max_items': Input should be less than or equal to 1000",
        "nomax.graph.yaml": "error[graph.field]: step 'classify', field 'params.max_items': an aggregate step needs max_items",
        "inner.graph.yaml": ":16:20: error[graph.kind]: step 'classify', field 'params.step': unknown inner step kind 'human'",
        "clash.graph.yaml": ":15:13: error[graph.into]: step 'classify': into 'tickets' holds the list the step iterates over",
    }
    for name, message in expected.items():
        checked = project.cli("validate", name)
        assert checked.returncode == 1, checked.stdout
        assert message in checked.stdout + checked.stderr, checked.stdout + checked.stderr


def test_a_killed_owner_resumes_without_rerunning_finished_instances(project: Project) -> None:
    triage(project, program="slow_classify.py")
    proc = start(project, "run", "triage_all.graph.yaml")
    try:
        run_id, _ = wait_for_event(
            proc, lambda e: e.get("kind") == "instance_launched" and e.get("instance") == 2, timeout=120
        )
        log = project.root / "ran.log"
        deadline = time.monotonic() + 60
        while "slow disk" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, "the third instance never started"
            time.sleep(0.05)
        kill_owner(project, run_id)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    middle = status(project, run_id)["nodes"]["classify"]["instances"]
    assert middle["states"] == {"classify[0]": "success", "classify[1]": "success", "classify[2]": "running"}
    (project.root / "go").write_text("")
    resumed = project.cli("resume", run_id, "--yes", "--recover-uncertain", "--output", "jsonl", timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # the two finished instances were taken from the journal; the interrupted one ran again
    assert (project.root / "ran.log").read_text().splitlines() == [
        "printer on fire",
        "no wifi",
        "slow disk",
        "slow disk",
        "blank screen",
    ]
    found = result(project, run_id)
    assert found["output"]["categories"] == ["hardware", "software", "hardware", "hardware"]
    classify = status(project, run_id)["nodes"]["classify"]
    assert classify["attempt"] == 2 and classify["reason"] == "4 instances succeeded (2 taken from the journal)"
    assert classify["instances"]["counts"] == {"success": 4}
    relaunched = [
        r["instance"] for r in journal(project, run_id) if r["kind"] == "instance_launched" and r["attempt"] == 2
    ]
    assert relaunched == [2, 3]


def test_cancel_then_resume_does_not_rerun_finished_instances(project: Project) -> None:
    triage(project, program="slow_classify.py")
    proc = start(project, "run", "triage_all.graph.yaml")
    try:
        run_id, _ = wait_for_event(
            proc, lambda e: e.get("kind") == "instance_launched" and e.get("instance") == 2, timeout=120
        )
        cancelled = project.cli("cancel", run_id)
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert status(project, run_id)["nodes"]["classify"]["state"] == "cancellation"
    (project.root / "go").write_text("")
    resumed = project.cli("resume", run_id, "--yes", "--output", "jsonl", timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    lines = (project.root / "ran.log").read_text().splitlines()
    assert lines.count("printer on fire") == 1 and lines.count("no wifi") == 1 and lines.count("blank screen") == 1
    assert result(project, run_id)["output"]["categories"] == ["hardware", "software", "hardware", "hardware"]


def test_the_node_view_is_one_node_with_its_instances(project: Project) -> None:
    """The view the DAG widget and the sidebar draw: one node for the step, carrying its
    instances' counts and states."""
    triage(project)
    ran = project.cli("run", "triage_all.graph.yaml", "--yes", "--output", "jsonl")
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    views = node_views(load_state(StoreLayout(home=project.home), run_id))
    assert views["classify"]["instances"]["counts"] == {"success": 4}
    assert list(views["classify"]["instances"]["states"]) == [f"classify[{i}]" for i in range(4)]
    assert not any("[" in name for name in views)  # one node, not one per instance
    # the final DAG picture (saved notebooks, `notebook run --output-notebook`) draws that one
    # node with its instances' mark, as the live view does
    graph = asyncio.run(project.service.run_graph(run_id))
    svg = run_bundle(graph, load_state(StoreLayout(home=project.home), run_id))["image/svg+xml"]
    node = re.search(r'<g class="node" data-name="classify"[^>]*>.*?</g>', svg)
    assert node is not None and ">4 \u00d7</text>" in node.group(0), svg
