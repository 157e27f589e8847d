"""The live DAG of a script run on a real anywidget with recorded comms: steps become nodes as
their node_launched events arrive (the layout grows and travels in the patch), the pane of a step
shows its facts, and a run stopped at a step names the decision to make.

The run is a real run of a stored script plan; its step events are handed to the controller by a
run handle the test drives, as the script driver journals them.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rho_notebook import widgets
from rho_notebook.model.run_fold import apply
from rho_notebook.model.run_state import RunState
from rho_notebook.service import Service
from rho_notebook.store.journal import JournalWriter
from rho_notebook.widgets._run import RunController
from rho_notebook.widgets._testing import RecordingComm
from tests.conftest import Project
from tests.widgets.helpers import comm_of

AT = "2026-12-03T10:00:00.000+00:00"

SCRIPT = """\
from rho_notebook.script import run_command

first = run_command(argv=["true"])
run_command(argv=["echo", first.output])
"""


class _ManualTimer:
    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        self.pending.append(callback)

    def run_pending(self) -> None:
        while self.pending:
            self.pending.pop(0)()


class _HandDriven:
    """A run handle whose events the test hands over (numbered after the journal's last seq)."""

    def __init__(self, state: RunState) -> None:
        self.run_id = state.run_id
        self._state = state
        self._listeners: list[Callable[[dict[str, Any]], None]] = []
        self._lock = threading.Lock()
        self.cancelled = 0

    def add_listener(self, callback: Callable[[dict[str, Any]], None]) -> None:
        self._listeners.append(callback)

    def state(self) -> RunState:
        with self._lock:
            return copy.deepcopy(self._state)

    def done(self) -> bool:
        return False

    def cancel(self) -> None:
        self.cancelled += 1

    def emit(self, kind: str, **fields: Any) -> None:
        with self._lock:
            event = {"seq": self._state.last_seq + 1, "kind": kind, "at": AT, **fields}
            apply(self._state, event)
        for listener in self._listeners:
            listener(event)


@dataclass
class _Session:
    service: Service
    workflows: Sequence[tuple[str, Callable[[], Any]]] = ()
    handles: dict[str, Any] = field(default_factory=dict)

    def handle_for(self, run_id: str) -> Any:
        return self.handles.get(run_id)


def _step(after: list[str]) -> dict[str, Any]:
    return {"kind": "command", "digest": "sha256:ab", "facts": {"argv": ["true"]}, "after": after, "recovery": None}


def test_steps_arrive_as_nodes_and_a_halt_asks_for_a_decision(project: Project, comms: list[RecordingComm]) -> None:
    project.write("review.py", SCRIPT)
    plan = project.plan("review.py")
    run_id = project.create_run(plan)
    handle = _HandDriven(project.status(run_id))
    timer = _ManualTimer()
    controller = RunController(handle, service=project.service, timer=timer)
    widget = controller.widget
    comm = comm_of(comms, widget)
    assert comm.open_data["state"]["graph_layout"]["nodes"] == []  # type: ignore[index]
    assert widget.growing

    handle.emit("run_started", pid=1)
    handle.emit("node_launched", node="call-1", attempt=1, step=_step([]))
    handle.emit("node_finished", node="call-1", attempt=1, state="success", exit={"kind": "exit", "code": 0})
    timer.run_pending()
    handle.emit("node_launched", node="call-2", attempt=1, step=_step(["call-1"]))
    timer.run_pending()

    patches = [m for m in comm.custom() if m["kind"] == "patch"]
    grown = [m["layout"] for m in patches if "layout" in m]
    assert [[n["name"] for n in layout["nodes"]] for layout in grown] == [["call-1"], ["call-1", "call-2"]]
    assert [(e["source"], e["target"]) for e in grown[-1]["edges"]] == [("call-1", "call-2")]
    assert [n["name"] for n in widget.graph_layout["nodes"]] == ["call-1", "call-2"]
    assert widget.states() == {"call-1": "success", "call-2": "running"}
    assert widget.run["script"] is True
    assert "call-2" in widget.snapshot_svg()

    widget.select("call-2")
    assert widget.detail["kind"] == "command" and widget.detail["step"]["after"] == ["call-1"]
    comm.messages.clear()
    widget._handle_front_end(widget, {"kind": "hello"}, None)
    snapshot = comm.custom()[-1]
    assert [n["name"] for n in snapshot["layout"]["nodes"]] == ["call-1", "call-2"]

    handle.emit("step_halted", node="call-2", why="started and never settled")
    handle.emit("run_halted", steps=[{"step": "call-2", "why": "started and never settled"}])
    timer.run_pending()
    assert widget.run["lifecycle"] == "needs_decision" and widget.run["can_resume"]
    assert widget.nodes["call-2"]["halted"] == "started and never settled"
    assert widget.detail["halted"] == "started and never settled"  # the selected pane was reloaded
    svg = widget.snapshot_svg()
    assert "? needs decision 1" in svg and 'stroke="#a16207"' in svg
    controller._action("resume")
    timer.run_pending()
    assert widget.run["message"] == (
        f"needs a decision: call-2 (started and never settled): `rho-notebook resume {run_id} --decide call-2=rerun|skip`"
    )
    controller.close()


def halted_script_run(project: Project) -> str:
    """A real run of a stored script plan whose journal says it stopped at step call-2 (written
    as the script driver journals it), after emitting an output: the run ID."""
    project.write("review.py", SCRIPT)
    run_id = project.create_run(project.plan("review.py"))
    folder = project.service.run_store.folder(run_id)
    mark = folder.mark if folder.mark.exists() else None
    with JournalWriter.open(folder.events, mark=mark) as writer:
        writer.append(
            [
                {"kind": "run_started", "at": AT, "pid": 1},
                {"kind": "node_launched", "at": AT, "node": "call-1", "attempt": 1, "step": _step([])},
                {"kind": "node_finished", "at": AT, "node": "call-1", "attempt": 1, "state": "success", "exit": None},
                {"kind": "node_launched", "at": AT, "node": "call-2", "attempt": 1, "step": _step(["call-1"])},
                {"kind": "script_output", "at": AT, "value": {"findings": 3}},
                {"kind": "step_halted", "at": AT, "node": "call-2", "why": "started and never settled"},
                {"kind": "run_halted", "at": AT, "steps": [{"step": "call-2", "why": "started and never settled"}]},
            ]
        )
        writer.sync()
    return run_id


def test_the_hub_names_the_decision_a_script_run_waits_for(project: Project, comms: list[RecordingComm]) -> None:
    run_id = halted_script_run(project)
    assert project.status(run_id).lifecycle.value == "needs_decision"
    hub = widgets.hub_view(_Session(service=project.service))
    texts = [child.value for row in hub.runs_box.children for child in row.children if hasattr(child, "value")]
    found = [text for text in texts if run_id[:13] in str(text)]
    assert found and "<b>needs a decision</b>: call-2: started and never settled" in found[0]
    assert f"rho-notebook resume {run_id} --decide call-2=rerun|skip" in found[0]
