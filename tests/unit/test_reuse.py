"""Reuse keys, the reuse index and the reuse prediction, on graphs built by hand (nothing runs).

The key must change with everything that decides a node's effect (module text, arguments, upstream
values, the interpreter, the workspace, declared input files) and stay the same otherwise; the
index must turn every damaged, foreign or stale entry into a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import NoReuseKey
from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.events import EventKind, event
from rho_notebook.model.graph import (
    AgentNode,
    CommandNode,
    FrozenExecutable,
    FrozenFile,
    Graph,
    Node,
    PythonArg,
    PythonModule,
    PythonNode,
    PythonRuntime,
)
from rho_notebook.model.reference import OutputRef, Template
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import NodeState
from rho_notebook.runtime.recovery import recovery_events
from rho_notebook.runtime.reuse import ReuseKeys, may_reuse, predict_reuse, reusable, reuse_key
from rho_notebook.store.files import json_bytes
from rho_notebook.store.journal import JournalWriter
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.reuse import ReuseEntry, ReuseIndex, value_file_sha256

LIMITS: dict[str, Any] = {"timeout_seconds": 60, "max_output_bytes": 1000}
WORKSPACE_KEY = "a" * 64


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _module(label: str, text: str) -> PythonModule:
    name = label.removeprefix("//").removesuffix(".py").replace("/", ".")
    return PythonModule(label=label, name=name, sha256=_sha256(text.encode()), text=text)


def _runtime(*, interpreter: str = "interp-1", distributions: tuple[tuple[str, str], ...] = ()) -> PythonRuntime:
    return PythonRuntime(
        interpreter=FrozenExecutable(
            file=FrozenFile(path="/usr/bin/python3", in_workspace=False, sha256=_sha256(interpreter.encode()))
        ),
        version="3.11.7",
        sys_path=("/usr/lib/python3.11",),
        distributions=distributions,
        harness_sha256=_sha256(b"harness"),
    )


def _py(name: str, *, module: str = "//nodes/steps.py", reuse: bool = True, **args: Any) -> PythonNode:
    frozen = tuple(
        PythonArg(name=key, ref=value) if isinstance(value, OutputRef) else PythonArg(name=key, value=value)
        for key, value in sorted(args.items())
    )
    needs = tuple(sorted({a.ref.node for a in frozen if a.ref is not None}))
    return PythonNode(
        name=name, module=module, function="step", args=frozen, cwd="//", modules=(module,), needs=needs,
        access="read_only", reuse=reuse, **LIMITS,
    )  # fmt: skip


def _graph(*nodes: Node, text: str = "def step(**kw):\n    return 1\n", runtime: PythonRuntime | None = None) -> Graph:
    return Graph(
        name="wf",
        inputs=(),
        nodes=tuple(sorted(nodes, key=lambda n: n.name)),
        python=runtime or _runtime(),
        python_modules=(_module("//nodes/steps.py", text),),
    )


def _key(graph: Graph, name: str, outputs: dict[str, Any] | None = None, *, workspace: Path = Path("/nonexistent"), workspace_key: str = WORKSPACE_KEY) -> str:  # fmt: skip
    values = outputs or {}
    return reuse_key(
        graph.node(name),
        graph,
        workspace_key=workspace_key,
        outputs=lambda n: values.get(n, UNAVAILABLE),
        workspace=workspace,
    )


CHAIN = (_py("a", x=1), _py("b", up=OutputRef(node="a")))


# -- the key -------------------------------------------------------------------------------------------


def test_the_same_node_and_inputs_give_the_same_key_in_a_fresh_computation() -> None:
    graph = _graph(*CHAIN)
    first = _key(graph, "b", {"a": {"total": 3}})
    assert first.startswith("sha256:") and len(first) == 71
    assert _key(_graph(*CHAIN), "b", {"a": {"total": 3}}) == first


def test_module_text_changes_the_key_of_every_node_that_imports_it() -> None:
    before = _key(_graph(*CHAIN), "a")
    after = _key(_graph(*CHAIN, text="def step(**kw):\n    return 2\n"), "a")
    assert before != after


def test_a_literal_argument_changes_the_key() -> None:
    assert _key(_graph(_py("a", x=1)), "a") != _key(_graph(_py("a", x=2)), "a")


def test_an_upstream_value_changes_the_key_of_the_node_reading_it() -> None:
    graph = _graph(*CHAIN)
    assert _key(graph, "b", {"a": {"total": 3}}) != _key(graph, "b", {"a": {"total": 4}})


def test_an_upstream_value_is_read_whole_not_just_at_the_path_the_argument_takes() -> None:
    graph = _graph(_py("a"), _py("b", up=OutputRef(node="a", path=("total",))))
    assert _key(graph, "b", {"a": {"total": 3, "other": 1}}) != _key(graph, "b", {"a": {"total": 3, "other": 2}})


def test_the_interpreter_digest_and_its_distributions_change_the_key() -> None:
    base = _key(_graph(*CHAIN), "a")
    assert _key(_graph(*CHAIN, runtime=_runtime(interpreter="interp-2")), "a") != base
    assert _key(_graph(*CHAIN, runtime=_runtime(distributions=(("numpy", "2.0"),))), "a") != base


def test_the_workspace_key_changes_the_key() -> None:
    graph = _graph(*CHAIN)
    assert _key(graph, "a") != _key(graph, "a", workspace_key="b" * 64)


def test_name_and_scheduling_fields_do_not_change_the_key() -> None:
    plain = _key(_graph(_py("a", x=1)), "a")
    renamed = _key(_graph(_py("zzz", x=1)), "zzz")
    conditioned = _graph(_py("a", x=1).model_copy(update={"allow_failure": True}))
    assert plain == renamed == _key(conditioned, "a")


def test_a_reuse_input_file_joins_the_key_with_its_current_content(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    data = tmp_path / "data" / "x.csv"
    data.write_text("1,2\n")
    declared = (FrozenFile(path="//data/x.csv", in_workspace=True, sha256=_sha256(b"1,2\n")),)
    graph = _graph(_py("a").model_copy(update={"reuse_inputs": declared}))
    first = _key(graph, "a", workspace=tmp_path)
    assert _key(graph, "a", workspace=tmp_path) == first
    data.write_text("1,3\n")  # changed after planning: the key follows the content now
    assert _key(graph, "a", workspace=tmp_path) != first


@pytest.mark.parametrize("how", ["missing", "symlink"])
def test_a_reuse_input_that_is_missing_or_a_symlink_gives_no_key(tmp_path: Path, how: str) -> None:
    declared = (FrozenFile(path="//x.csv", in_workspace=True, sha256=_sha256(b"")),)
    graph = _graph(_py("a").model_copy(update={"reuse_inputs": declared}))
    if how == "symlink":
        (tmp_path / "real.csv").write_text("1\n")
        (tmp_path / "x.csv").symlink_to(tmp_path / "real.csv")
    with pytest.raises(NoReuseKey, match="x.csv"):
        _key(graph, "a", workspace=tmp_path)


def test_an_unavailable_upstream_value_gives_no_key() -> None:
    with pytest.raises(NoReuseKey, match="'a'"):
        _key(_graph(*CHAIN), "b", {})


def _agent_graph(*, body: str = "be brief", prompt: tuple[Any, ...] = ("sum ", OutputRef(node="a"))) -> Graph:
    agent = AgentNode(
        name="ask", agent="helper", prompt=Template(parts=prompt), access="read_only", reuse=True, needs=("a",),
        **LIMITS,
    )  # fmt: skip
    return Graph(
        name="wf",
        inputs=(),
        nodes=(_py("a"), agent),
        agents=(AgentDefinition(id="helper", description="d", body=body),),
        python=_runtime(),
        python_modules=(_module("//nodes/steps.py", "def step(**kw):\n    return 1\n"),),
    )


def test_an_agent_key_follows_its_rendered_prompt_and_its_definition() -> None:
    base = _key(_agent_graph(), "ask", {"a": 1})
    assert _key(_agent_graph(), "ask", {"a": 1}) == base
    assert _key(_agent_graph(), "ask", {"a": 2}) != base
    assert _key(_agent_graph(body="be long"), "ask", {"a": 1}) != base
    assert _key(_agent_graph(prompt=("add ", OutputRef(node="a"))), "ask", {"a": 1}) != base


# -- which nodes may be reused ----------------------------------------------------------------------


def test_only_read_only_python_and_agent_nodes_with_reuse_may_be_reused() -> None:
    command = CommandNode(
        name="c", argv=("true",), cwd="//",
        executable=FrozenExecutable(file=FrozenFile(path="/bin/true", in_workspace=False, sha256=_sha256(b""))),
        **LIMITS,
    )  # fmt: skip
    assert may_reuse(_py("a"))
    assert not may_reuse(_py("a", reuse=False))
    assert not may_reuse(_py("a").model_copy(update={"access": "mutating"}))
    assert not may_reuse(command)
    assert may_reuse(_agent_graph().node("ask"))


@pytest.mark.parametrize(
    ("need_state", "expected"),
    [
        (NodeState.SUCCESS, True),
        (NodeState.FAILURE, False),  # also when the need allows failure: its value is not a success
        (NodeState.SKIPPED, False),
        (NodeState.BLOCKED, False),
        (NodeState.DENIAL, False),
    ],
)
def test_a_node_is_reusable_only_when_every_need_succeeded(need_state: NodeState, expected: bool) -> None:
    assert reusable(CHAIN[1], {"a": need_state, "b": NodeState.READY}) is expected


# -- the index --------------------------------------------------------------------------------------


def _stored_value(layout: StoreLayout, run_id: str, node: str, value: Any, *, attempt: int = 1) -> str:
    """A run folder with one attempt's value.json; returns the value file's sha256."""
    folder = layout.ensure(layout.run_dir(run_id) / "nodes" / node / "attempts" / str(attempt))
    (layout.run_dir(run_id) / "manifest.json").write_text("{}\n")
    data = json_bytes(value)
    (folder / "value.json").write_bytes(data)
    return value_file_sha256(data)


KEY = "sha256:" + "ab" * 32


def test_an_entry_written_is_found_with_its_value(tmp_path: Path) -> None:
    layout = StoreLayout(home=tmp_path / "home")
    index = ReuseIndex(layout)
    index.record_attempt(KEY, run_id="r1", node="a", attempt=1, workspace_key=WORKSPACE_KEY)  # no value yet
    digest = _stored_value(layout, "r1", "a", {"total": 3})
    index.record_attempt(KEY, run_id="r1", node="a", attempt=1, workspace_key=WORKSPACE_KEY)
    hit = index.lookup(KEY, workspace_key=WORKSPACE_KEY)
    assert hit is not None
    assert hit.entry == ReuseEntry("r1", "a", 1, digest, WORKSPACE_KEY)
    assert json.loads(hit.value_bytes or b"") == {"total": 3}
    path = index.path(KEY)
    assert path == layout.reuse_index / "ab" / (KEY.removeprefix("sha256:") + ".json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_an_entry_for_a_node_without_a_value_holds_while_its_run_exists(tmp_path: Path) -> None:
    layout = StoreLayout(home=tmp_path / "home")
    index = ReuseIndex(layout)
    layout.ensure(layout.run_dir("r1"))
    (layout.run_dir("r1") / "manifest.json").write_text("{}\n")
    index.record_attempt(KEY, run_id="r1", node="a", attempt=1, workspace_key=WORKSPACE_KEY)
    hit = index.lookup(KEY, workspace_key=WORKSPACE_KEY)
    assert hit is not None and hit.value_bytes is None
    (layout.run_dir("r1") / "manifest.json").unlink()
    assert index.lookup(KEY, workspace_key=WORKSPACE_KEY) is None


@pytest.mark.parametrize("damage", ["absent", "not json", "wrong shape", "symlink", "directory", "empty"])
def test_a_damaged_entry_is_a_miss_never_an_error(tmp_path: Path, damage: str) -> None:
    layout = StoreLayout(home=tmp_path / "home")
    index = ReuseIndex(layout)
    _stored_value(layout, "r1", "a", 1)
    path = index.path(KEY)
    layout.ensure(path.parent)
    if damage == "not json":
        path.write_text("{not json")
    elif damage == "wrong shape":
        path.write_text(json.dumps({"run_id": "../x", "node": "a", "attempt": "1", "workspace_key": WORKSPACE_KEY}))
    elif damage == "symlink":
        real = tmp_path / "real.json"
        real.write_text(json.dumps(ReuseEntry("r1", "a", 1, None, WORKSPACE_KEY).to_json()))
        path.symlink_to(real)
    elif damage == "directory":
        path.mkdir()
    elif damage == "empty":
        path.write_text("")
    assert index.lookup(KEY, workspace_key=WORKSPACE_KEY) is None


@pytest.mark.parametrize("change", ["value edited", "value deleted", "run deleted", "other workspace"])
def test_an_entry_whose_source_changed_is_a_miss(tmp_path: Path, change: str) -> None:
    layout = StoreLayout(home=tmp_path / "home")
    index = ReuseIndex(layout)
    _stored_value(layout, "r1", "a", {"total": 3})
    index.record_attempt(KEY, run_id="r1", node="a", attempt=1, workspace_key=WORKSPACE_KEY)
    value = layout.run_dir("r1") / "nodes" / "a" / "attempts" / "1" / "value.json"
    workspace_key = WORKSPACE_KEY
    if change == "value edited":
        value.write_bytes(json_bytes({"total": 4}))
    elif change == "value deleted":
        value.unlink()
    elif change == "run deleted":
        shutil.rmtree(layout.run_dir("r1"))
    else:
        workspace_key = "c" * 64
    assert index.lookup(KEY, workspace_key=workspace_key) is None


def test_a_key_that_is_not_a_digest_is_refused_before_any_path_is_built(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a sha256"):
        ReuseIndex(StoreLayout(home=tmp_path)).path("sha256:../../etc")


# -- the prediction ---------------------------------------------------------------------------------


def _record(layout: StoreLayout, graph: Graph, name: str, value: Any, outputs: dict[str, Any], run_id: str) -> None:
    key = ReuseKeys(graph, workspace_key=WORKSPACE_KEY, workspace=Path("/nonexistent")).key(
        graph.node(name), lambda n: outputs.get(n, UNAVAILABLE)
    )
    _stored_value(layout, run_id, name, value)
    ReuseIndex(layout).record_attempt(key, run_id=run_id, node=name, attempt=1, workspace_key=WORKSPACE_KEY)


def test_predict_reuse_follows_stored_values_down_the_graph(tmp_path: Path) -> None:
    layout = StoreLayout(home=tmp_path / "home")
    c = _py("c", up=OutputRef(node="b"))
    graph = _graph(*CHAIN, c, _py("d", reuse=False), _py("e", up=OutputRef(node="d")))

    def predicted() -> dict[str, str]:
        return predict_reuse(graph, layout=layout, workspace_key=WORKSPACE_KEY, workspace=Path("/nonexistent"))

    assert predicted() == dict.fromkeys("abcde", "launch")
    _record(layout, graph, "a", 5, {}, "r1")
    _record(layout, graph, "b", 6, {"a": 5}, "r1")
    _record(layout, graph, "c", 7, {"b": 999}, "r1")  # stored for another value of b: not this run's key
    assert predicted() == {"a": "reuse", "b": "reuse", "c": "launch", "d": "launch", "e": "launch"}
    _record(layout, graph, "c", 7, {"b": 6}, "r2")
    assert predicted()["c"] == "reuse"
    assert predicted()["e"] == "launch"  # its need is never reused (reuse = False)
    os.unlink(layout.run_dir("r1") / "nodes" / "a" / "attempts" / "1" / "value.json")
    assert predicted() == dict.fromkeys("abcde", "launch")


# -- recovery -------------------------------------------------------------------------------------


def test_a_reused_attempt_without_its_finish_is_taken_again_not_uncertain(tmp_path: Path) -> None:
    graph = _graph(*CHAIN)
    state = RunState.fresh(run_id="r2", plan_id="p", graph=graph, graph_digest="sha256:x")
    reused = event(
        EventKind.NODE_REUSED, "r2", node="a", attempt=1, source_run="r1", source_node="a", source_attempt=1,
        reuse_key=KEY,
    )  # fmt: skip
    apply(state, reused)  # the torn journal ends here: its node_finished was cut off
    journal = JournalWriter.open(tmp_path / "events.jsonl")
    try:
        records = recovery_events(state, journal, graph=graph, pending=[], resume=True, recover_uncertain=False)
    finally:
        journal.close()
    assert [(r["kind"], r["node"]) for r in records] == [("node_reset", "a")]
