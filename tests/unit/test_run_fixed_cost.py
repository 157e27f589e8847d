"""What a run costs whatever its width (issue 31, the fan's fixed cost) keeps every guarantee.

- Creating a run makes graph.json, the watermark and the journal (``run_created``) durable, and
  their folder entries, before the manifest names the run; with one fsync fewer than before.
- A run folder found on the way (a planted ``requests`` link) is checked, never written through.
- The owner opens a run with the manifest and graph it read (digest checked): the status fold
  does not read them again, and its state is the one status folds.
- state.json is orjson's encoding: the bytes json wrote, but for the spelling of some floats;
  what orjson refuses is encoded by json.
- A graph's graph.json bytes and outline are kept per graph object.
- ``refresh_waiting`` and ``waiting_requests`` never walk the nodes of a run nobody was asked in.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import StoreError
from rho_notebook.model.events import EventKind, event, now_iso
from rho_notebook.model.run_fold import replay
from rho_notebook.model.run_state import AttemptRecord, NodeRecord, RunState
from rho_notebook.model.state import Lifecycle, NodeState
from rho_notebook.runtime import status
from rho_notebook.runtime.execution import snapshot_bytes
from rho_notebook.runtime.owner import create_run, execute_run
from rho_notebook.runtime.status import journal_state
from rho_notebook.store import graphs
from rho_notebook.store.files import json_bytes
from rho_notebook.store.graphs import GraphOutline, graph_file_bytes, load_outline
from rho_notebook.store.ids import new_id
from rho_notebook.store.runs import RunStore
from tests.conftest import Project, star

C = "timeout_seconds = 10, max_output_bytes = 1000"
FAN = f"""
nodes = [command(name = "a", argv = ["true"], {C})]
nodes += [command(name = "m" + str(i), argv = ["true"], needs = ["a"], {C}) for i in range(2)]
return workflow(name = "fan", nodes = nodes + [command(name = "z", argv = ["true"], needs = ["m0", "m1"], {C})])
"""


@pytest.fixture
def fan(project: Project) -> Project:
    project.write("wf.star", star(FAN))
    return project


def _durable_steps(monkeypatch: pytest.MonkeyPatch, run_dir: Path) -> list[tuple[str, str]]:
    """Record (call, name below the runs folder) of every fsync, fdatasync and replace from now on."""
    steps: list[tuple[str, str]] = []
    real = {name: getattr(os, name) for name in ("fsync", "fdatasync", "replace")}

    def named(fd: int) -> str:
        return os.path.relpath(os.readlink(f"/proc/self/fd/{fd}"), run_dir.parent)

    def sync(name: str) -> Any:
        def call(fd: int) -> None:
            steps.append((name, named(fd)))
            real[name](fd)

        return call

    def replace(src: Any, dst: Any) -> None:
        real["replace"](src, dst)
        steps.append(("replace", os.path.relpath(dst, run_dir.parent)))

    monkeypatch.setattr(os, "fsync", sync("fsync"))
    monkeypatch.setattr(os, "fdatasync", sync("fdatasync"))
    monkeypatch.setattr(os, "replace", replace)
    return steps


def test_a_run_is_durable_before_its_manifest_names_it(fan: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = fan.plan("wf.star")
    layout = fan.service.layout
    run_id = new_id()
    steps = _durable_steps(monkeypatch, layout.run_dir(run_id))
    assert create_run(layout, plan, run_id=run_id) == run_id
    made = [(call, name) for call, name in steps if name.split("/")[0] == run_id]
    r = run_id
    assert made == [
        ("replace", f"{r}/graph.json"),
        ("replace", f"{r}/journal.mark"),
        ("fsync", f"{r}/events.jsonl"),  # run_created ...
        ("fdatasync", f"{r}/journal.mark"),  # ... and the watermark that vouches for it
        ("fsync", f"{r}/graph.json"),
        ("fsync", r),  # the three entries, once
        ("fsync", f"{r}/.manifest.json.{os.getpid()}.tmp"),
        ("replace", f"{r}/manifest.json"),
        ("fsync", r),
    ]
    state = journal_state(layout, run_id)
    assert state.damage is None and state.lifecycle is Lifecycle.PLANNED and state.last_seq == 1
    assert (layout.run_dir(run_id) / "graph.json").read_bytes() == graph_file_bytes(plan.graph)


def test_a_planted_run_folder_is_checked_not_written_through(fan: Project, tmp_path: Path) -> None:
    plan = fan.plan("wf.star")
    layout = fan.service.layout
    store = RunStore(layout)
    manifest = store.manifest(create_run(layout, plan))
    planted = layout.run_dir(new_id())
    planted.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (planted / "requests").symlink_to(elsewhere)
    with pytest.raises(StoreError, match="symlink"):
        store.create(manifest.model_copy(update={"run_id": planted.name}), plan.graph, records=[])
    assert sorted(os.listdir(planted)) == ["requests"] and list(elsewhere.iterdir()) == []


def test_the_owner_folds_without_reading_manifest_or_graph_again(fan: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = fan.plan("wf.star")
    layout = fan.service.layout
    run_id = create_run(layout, plan)
    before = journal_state(layout, run_id)

    def read_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("the owner read the manifest or the graph outline again")

    with monkeypatch.context() as patched:
        patched.setattr(status, "run_facts", read_again)
        patched.setattr(status, "graph_outline", read_again)
        state = asyncio.run(execute_run(layout, run_id, resume=False))
    assert state.outcome == "success" and before.lifecycle is Lifecycle.PLANNED
    assert json.loads(snapshot_bytes(state)) == json.loads(snapshot_bytes(journal_state(layout, run_id)))
    assert status.allowed_failures_of(plan.graph_digest) == frozenset()


def _finished(names: list[str]) -> RunState:
    state = RunState(run_id="r", plan_id="p", graph_digest="g", workflow="fan", nodes={})
    for i, name in enumerate(names):
        attempt = AttemptRecord(number=1, started_at=now_iso(), ended_at=now_iso(), state="success")
        attempt.exit = {"kind": "exit", "code": 0}
        if i % 2:
            attempt.usage = {"calls": 1, "input_tokens": 10, "cost_usd": 0.25}
            attempt.reused_from = {"run_id": "q", "node": name, "attempt": 1}
        state.nodes[name] = NodeRecord(state=NodeState.SUCCESS, attempts=[attempt])
    state.lifecycle, state.outcome = Lifecycle.COMPLETED, "success"
    state.budgets = {"": {"max_tokens": 5, "max_cost_usd": 1.5, "source": "cli"}}
    return state


def test_the_snapshot_is_the_state_encoded() -> None:
    state = _finished(["a_source", 'q"\\u0000"', "é/ü%2F", "tab\there", "z_sink"])
    assert snapshot_bytes(state) == json_bytes(state.to_json(), compact=True)


def test_what_orjson_refuses_or_spells_otherwise() -> None:
    state = _finished(["a"])
    state.output = {"big": 2**70, "n": [1, 2]}  # past 64 bits: encoded by json, as before
    assert snapshot_bytes(state) == json_bytes(state.to_json(), compact=True)
    state.output = {"small": 1e-05, "nan": float("nan")}  # valid JSON, the same numbers
    written = snapshot_bytes(state)
    assert b'"small":0.00001' in written and b'"nan":null' in written
    assert json.loads(written)["output"] == {"small": 1e-05, "nan": None}


def test_a_graphs_file_bytes_and_outline_are_kept_per_object(fan: Project) -> None:
    graph = fan.plan("wf.star").graph
    data = graph_file_bytes(graph)
    assert data == graph.model_dump_json().encode() + b"\n"
    assert graph_file_bytes(graph) is data
    outline = GraphOutline.of(graph)
    assert GraphOutline.of(graph) is outline and outline.nodes == ("a", "m0", "m1", "z")
    others = [graph.model_copy(update={"name": f"fan{i}"}) for i in range(graphs.DUMPED_GRAPHS)]
    for other in others:
        assert graph_file_bytes(other) == other.model_dump_json().encode() + b"\n"
    again = graph_file_bytes(graph)  # dumped again once others pushed it out: the same bytes
    assert again == data and again is not data


def test_the_owners_outline_is_the_files(fan: Project) -> None:
    plan = fan.plan("wf.star")
    layout = fan.service.layout
    run_id = create_run(layout, plan)
    path = layout.run_dir(run_id) / "graph.json"
    graphs._outlines.clear()  # noqa: SLF001 -- read from the file, not from the object's
    from_file, digest = load_outline(path, below=layout.home, expected_digest=plan.graph_digest)
    assert digest == plan.graph_digest and from_file == GraphOutline.of(plan.graph)


class _Untouchable(dict[str, NodeRecord]):
    def __iter__(self) -> Iterator[str]:
        raise AssertionError("walked the nodes")

    def values(self) -> Any:
        raise AssertionError("walked the nodes")

    def items(self) -> Any:
        raise AssertionError("walked the nodes")


def test_nobody_asked_means_no_walk_and_asked_still_waits() -> None:
    records = [
        event(EventKind.RUN_STARTED, "r", pid=1, resumed=False),
        event(EventKind.NODE_LAUNCHED, "r", node="a", attempt=1),
    ]
    state = RunState(run_id="r", plan_id="p", graph_digest="g", workflow="w", nodes={"a": NodeRecord()})
    replay(state, [{**record, "seq": seq} for seq, record in enumerate(records, 1)])
    nodes, state.nodes = state.nodes, _Untouchable(state.nodes)
    state.refresh_waiting()
    assert state.waiting_requests() == {} and state.lifecycle is Lifecycle.RUNNING
    state.nodes = nodes
    asked = event(EventKind.APPROVAL_REQUESTED, "r", node="a", attempt=1, request_id="q1", approval="node")
    replay(state, [{**asked, "seq": 3}])
    assert state.waiting_requests() == {"a": "q1"} and state.lifecycle is Lifecycle.WAITING
