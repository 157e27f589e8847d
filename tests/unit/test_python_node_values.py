"""A Python node's small value is journaled with its end (``node_finished``'s ``step_value``) and
its ``value.json`` written as a copy without an fsync (issue 31); every reader of values takes the
journaled value when a machine crash left the copy missing or torn: the owner's and ``result``'s
``output_values_at``, ``result --output json``, ``record`` and a ``try`` run's seeds.

Real runs of real interpreters; the "crash" is the copy removed or cut short afterwards, which is
what a machine crash can leave of a file that was never fsynced.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rho_notebook.exec.python import JOURNALED_VALUE_BYTES
from rho_notebook.model.reference import OutputRef
from rho_notebook.runtime.reuse import Seed, seeds
from rho_notebook.service import Service
from rho_notebook.service.reading import read_result
from rho_notebook.store.journal import read_journal
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import RunStore
from rho_notebook.views.detail import read_node_detail
from tests.conftest import Project
from tests.unit.test_python_exec import _attempt, _module, _node, _run

VALUES = """\
def small(i):
    return {"i": i, "text": "é"}

def big():
    return "x" * 5000

def nothing():
    return None

def add(a, b):
    return a["i"] + len(b)
"""


def _finished(run: Path) -> dict[str, dict]:
    return {r["node"]: r for r in read_journal(run / "events.jsonl").events if r["kind"] == "node_finished"}


def _graph(project: Project) -> tuple[object, Path]:
    nodes = [
        _node("a", "//nodes/values.py", "small", i=3),
        _node("big", "//nodes/values.py", "big"),
        _node("none", "//nodes/values.py", "nothing"),
        _node("sum", "//nodes/values.py", "add", a=OutputRef(node="a", path=()), b=OutputRef(node="big", path=())),
    ]
    state, run = _run(project, nodes, [_module("//nodes/values.py", VALUES)])
    for name in ("a", "big", "none", "sum"):
        assert state.nodes[name].state.value == "success", state.nodes[name].reason
    return state, run


def test_small_values_are_journaled_and_their_copy_written(project: Project) -> None:
    _, run = _graph(project)
    finished = _finished(run)
    assert finished["a"]["step_value"] == {"i": 3, "text": "é"}
    assert finished["sum"]["step_value"] == 5003
    assert "step_value" not in finished["big"], f"over {JOURNALED_VALUE_BYTES} bytes: value.json is durable"
    assert "step_value" not in finished["none"], "a null value is not journaled (None means none there)"
    for name, value in (("a", {"i": 3, "text": "é"}), ("big", "x" * 5000), ("none", None), ("sum", 5003)):
        copy = _attempt(run, name) / "value.json"
        assert json.loads(copy.read_text()) == value
        assert copy.stat().st_mode & 0o777 == 0o600


def test_readers_take_the_journaled_value_when_the_copy_was_lost(project: Project) -> None:
    _, run = _graph(project)
    (_attempt(run, "a") / "value.json").unlink()
    (_attempt(run, "sum") / "value.json").write_bytes(b'{"trunc')
    layout = StoreLayout(home=project.home)
    run_id = run.name

    folder = RunStore(layout).folder(run_id)
    values = folder.output_values({"a": 1, "big": 1, "sum": 1})
    assert values == {"a": {"i": 3, "text": "é"}, "big": "x" * 5000, "sum": 5003}

    outputs = {name: entry.get("output") for name, entry in read_result(layout, run_id)["nodes"].items()}
    assert outputs["a"] == {"i": 3, "text": "é"} and outputs["sum"] == 5003 and outputs["big"] == "x" * 5000

    service = Service(layout=layout)
    for name, value in (("a", {"i": 3, "text": "é"}), ("sum", 5003)):  # the notebook's node pane
        pane = asyncio.run(read_node_detail(service, run_id, name))
        assert pane["has_value"] and pane["value"] == value, pane

    found = seeds(layout, run_id, ("a", "sum"))
    assert isinstance(found["a"], Seed) and json.loads(found["a"].value_bytes or b"null") == {"i": 3, "text": "é"}
    assert isinstance(found["sum"], Seed) and json.loads(found["sum"].value_bytes or b"null") == 5003


def test_a_lost_copy_of_a_value_that_was_not_journaled_is_still_missing(project: Project) -> None:
    _, run = _graph(project)
    (_attempt(run, "big") / "value.json").unlink()
    folder = RunStore(StoreLayout(home=project.home)).folder(run.name)
    assert folder.output_values({"big": 1, "a": 1}) == {"a": {"i": 3, "text": "é"}}
