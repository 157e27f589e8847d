"""Run views on a real anywidget with recorded comms, driven by real runs on a thread."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from rho_notebook import widgets
from rho_notebook.errors import ConfirmationRequired
from rho_notebook.model.plan import Plan
from rho_notebook.widgets._run import JournalWatch, RunController
from rho_notebook.widgets._testing import RecordingComm
from tests.conftest import Project, star, wait_journaled
from tests.widgets.helpers import comm_of, merge_front_end, start_run, wait_for


def _raw_states(widget: Any) -> dict[str, str]:
    """Node -> its state as the journal has it (``states()`` gives the shown state)."""
    with widget.lock:
        return {name: view["state"] for name, view in widget.nodes.items()}


def _settled(widget: Any, handle: Any) -> bool:
    return handle.done() and widget.run.get("lifecycle") == "completed"


def _front_end_run(comm: RecordingComm) -> dict[str, Any]:
    """The run view the front end holds: the opening state, then the newest run view sent."""
    run: dict[str, Any] = dict(comm.open_data["state"]["run"])  # type: ignore[index]
    for message in comm.custom():
        sent = message.get("run")
        if message["kind"] in ("patch", "snapshot") and sent and sent.get("v", 0) >= run.get("v", 0):
            run = dict(sent)
    return run


def _front_end_saw_completion(project: Project, comm: RecordingComm, run_id: str) -> None:
    """Wait until the journal's run_completed has reached the front end (the patch carrying it
    was sent, after every node view and pane detail it depends on)."""
    completed = wait_journaled(project.home, run_id, "run_completed")

    def seen() -> bool:
        run = _front_end_run(comm)
        return run.get("lifecycle") == "completed" and run.get("outcome") == completed["outcome"]

    what = f"the front end to be sent run_completed (seq {completed['seq']}, outcome {completed['outcome']})"
    wait_for(seen, what=what)


class _ManualTimer:
    """A throttle timer that runs scheduled flushes only when the test says so."""

    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        self.pending.append(callback)

    def run_pending(self) -> None:
        while self.pending:
            self.pending.pop(0)()


def test_run_view_follows_a_run_to_its_final_states(
    project: Project, small_plan: Plan, comms: list[RecordingComm]
) -> None:
    handle = start_run(project, small_plan)
    view = widgets.run_view(handle)
    comm = comm_of(comms, view)
    initial = comm.open_data["state"]["nodes"]  # type: ignore[index]
    assert set(initial) == {"a", "b", "c", "d", "e", "f"}
    assert {v["state"] for v in initial.values()} == {"pending"}
    handle.start()
    final = handle.wait()
    wait_for(lambda: _settled(view, handle), what="the final flush")
    _front_end_saw_completion(project, comm, handle.run_id)
    expected = {name: record.state.value for name, record in final.nodes.items()}
    assert expected == {"a": "success", "b": "success", "c": "success", "d": "success", "e": "failure", "f": "blocked"}
    assert _raw_states(view) == expected
    assert view.run["outcome"] == final.outcome == "blocked"
    patches = [m for m in comm.custom() if m["kind"] == "patch"]
    assert patches, "no patch was sent"
    merged = merge_front_end(patches, initial)
    assert {name: v["state"] for name, v in merged.items()} == expected
    # only changed nodes travel: a node appears in a patch only if its view changed since the last one
    last: dict[str, Any] = {}
    for patch in patches:
        for name, node in (patch.get("nodes") or {}).items():
            assert {k: v for k, v in node.items() if k != "v"} != {
                k: v for k, v in last.get(name, {}).items() if k != "v"
            }
            last[name] = node
    # traits were never re-sent for live changes
    assert not any("nodes" in update for update in comm.updates())


def test_patches_are_rate_limited(project: Project, comms: list[RecordingComm]) -> None:
    # each node holds the checkout ~5 ms, so the run lasts several patch intervals (0.1 s) however
    # fast the machine launches: a run of `true` nodes could end within one (one patch, no gap)
    nodes = ", ".join(
        f'command(name = "n{i:03d}", argv = ["sleep", "0.005"], timeout_seconds = 10, max_output_bytes = 100)'
        for i in range(120)
    )
    project.write(
        "wide.star",
        star(f'return workflow(name = "wide", nodes = [{nodes}], concurrency = {{"total": 4, "command": 4}})'),
    )
    handle = start_run(project, project.plan("wide.star"))
    view = widgets.run_view(handle)
    comm = comm_of(comms, view)
    handle.start()
    handle.wait()
    wait_for(lambda: _settled(view, handle), what="the final flush")
    _front_end_saw_completion(project, comm, handle.run_id)
    times = [t for t, m in comm.custom_timed() if m["kind"] == "patch"]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps and min(gaps) >= 0.095, gaps
    assert handle.events > 4 * len(times), "patches should batch many events"
    assert set(view.states().values()) == {"success"}


def test_selecting_a_node_loads_its_output_pane(project: Project, small_plan: Plan, comms: list[RecordingComm]) -> None:
    handle = start_run(project, small_plan)
    view = widgets.run_view(handle)
    comm = comm_of(comms, view)
    handle.start()
    handle.wait()
    wait_for(lambda: _settled(view, handle), what="the final flush")
    comm.from_front_end({"kind": "select", "node": "a"})
    assert view.selected == "a"
    assert view.detail["stdout"]["text"] == "hello from a\n"
    assert view.detail["stderr"]["text"] == "warn\n"
    assert view.detail["attempts"][0]["state"] == "success"
    assert view.detail["definition"]["argv"][0] == "sh"
    comm.from_front_end({"kind": "select", "node": "d"})
    assert view.detail["stdout"]["truncated"] is True
    assert view.detail["stdout"]["bytes"] == 100 and view.detail["stdout"]["limit"] == 100
    comm.from_front_end({"kind": "select", "node": "b"})
    assert view.detail["has_value"] is True and view.detail["value"] == {"n": 3, "tags": ["x"]}
    comm.from_front_end({"kind": "select", "node": "c"})
    assert view.detail["definition"]["when"] == 'condition.equals(exit_code("b"), 0)'
    comm.from_front_end({"kind": "select", "node": "f"})
    assert view.detail["state"] == "blocked" and view.detail["reason"]
    comm.from_front_end({"kind": "select", "node": ""})
    assert view.selected == "" and view.detail == {}
    comm.from_front_end({"kind": "hello"})
    snapshot = comm.custom()[-1]
    assert snapshot["kind"] == "snapshot" and snapshot["nodes"]["e"]["state"] == "failure"


def test_running_node_output_streams_live(project: Project, comms: list[RecordingComm]) -> None:
    project.write(
        "slow.star",
        star(
            """
            slow = command(name = "slow", argv = ["sh", "-c", "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.15; done"],
                timeout_seconds = 20, max_output_bytes = 10000)
            return workflow(name = "slow", nodes = [slow])
            """
        ),
    )
    handle = start_run(project, project.plan("slow.star"))
    view = widgets.run_view(handle)
    comm = comm_of(comms, view)
    handle.start()
    wait_for(lambda: view.states().get("slow") == "running", what="the node to run")
    comm.from_front_end({"kind": "select", "node": "slow"})
    assert view.detail["live"] is True
    handle.wait()
    wait_for(lambda: _settled(view, handle), what="the final flush")
    _front_end_saw_completion(project, comm, handle.run_id)
    chunks = [chunk for m in comm.custom() if m["kind"] == "patch" for chunk in m.get("output", [])]
    assert chunks, "no live output was sent"
    assert all(c["node"] == "slow" and c["stream"] == "stdout" for c in chunks)
    # the final detail (sent when the node finished) has all the output and the exit record
    assert view.detail["stdout"]["text"] == "".join(f"line {i}\n" for i in range(1, 7))
    assert view.detail["live"] is False and view.detail["exit"]["code"] == 0


def test_cancel_and_resume_buttons(
    project: Project, comms: list[RecordingComm], monkeypatch: pytest.MonkeyPatch
) -> None:
    project.write(
        "long.star",
        star(
            """
            first = command(name = "first", argv = ["sleep", "30"], timeout_seconds = 60, max_output_bytes = 100)
            second = command(name = "second", argv = ["true"], needs = ["first"], timeout_seconds = 60, max_output_bytes = 100)
            return workflow(name = "long", nodes = [first, second])
            """
        ),
    )
    handle = start_run(project, project.plan("long.star"))
    resumed: list[Any] = []

    def resume(run_id: str, digest: str) -> Any:
        """What the button calls; a refusal (here: a digest other than the run's) is said in the view."""
        from rho_notebook.widgets._testing import ThreadRunHandle

        if digest != view.run["graph_digest"]:
            raise ConfirmationRequired(f"you confirmed digest {digest}")
        found = ThreadRunHandle(project.service, run_id, resume=True)
        resumed.append(found)
        return found.start()

    controller = RunController(handle, resume=resume)
    view = controller.widget
    comm = comm_of(comms, view)
    handle.start()
    wait_for(lambda: view.states().get("first") == "running" and view.run.get("can_cancel"), what="the node to run")
    comm.from_front_end({"kind": "action", "action": "cancel"})
    handle.wait()
    wait_for(lambda: _settled(view, handle), what="the cancelled run")
    wait_for(
        lambda: "cancel" in view.run.get("message", "") and "…" not in view.run.get("message", ""),
        what="the cancel result",
    )
    assert view.run["outcome"] == "cancellation" and view.run["can_resume"] is True
    assert view.states()["first"] == "cancellation"

    # a refused resume is said in the view and follows nothing
    controller.graph_digest = "sha256:" + "0" * 64
    comm.from_front_end({"kind": "action", "action": "resume"})
    wait_for(lambda: "resume refused" in view.run.get("message", ""), what="the refusal message")
    assert resumed == []
    controller.graph_digest = view.run["graph_digest"]

    # the view follows the resumed run on the new handle
    project.write("long.star", "")  # resume never reads the source again
    # make the resumed attempt quick: the frozen argv is sleep 30, so cancel it again at once
    comm.from_front_end({"kind": "action", "action": "resume"})
    assert resumed, "resume was not called"
    wait_for(lambda: view.run.get("lifecycle") in ("running", "cancelling"), what="the resumed run")
    comm.from_front_end({"kind": "action", "action": "cancel"})
    resumed[0].wait()
    wait_for(lambda: view.run.get("lifecycle") == "completed", what="the second cancellation")
    assert view.nodes["first"]["attempt"] == 2


def test_watch_a_run_through_its_journal(project: Project, small_plan: Plan, comms: list[RecordingComm]) -> None:
    handle = start_run(project, small_plan)
    handle.start()
    watcher = JournalWatch(project.service, handle.run_id[:13], interval=0.05)
    view = widgets.run_view(watcher, service=project.service)
    handle.wait()
    wait_for(lambda: view.run.get("lifecycle") == "completed", what="the watched run to complete")
    _front_end_saw_completion(project, comm_of(comms, view), handle.run_id)
    assert _raw_states(view) == {name: r.state.value for name, r in handle.state().nodes.items()}
    finished = widgets.watch_run(handle.run_id, service=project.service)
    assert finished.states() == view.states() and finished.run["outcome"] == "blocked"


def test_mimebundle_carries_an_svg_snapshot(
    project: Project, small_plan: Plan, comms: list[RecordingComm], monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = start_run(project, small_plan)
    view = widgets.run_view(handle)
    shown: list[tuple[dict[str, Any], str]] = []
    updated: list[tuple[dict[str, Any], str]] = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda data, **kw: shown.append((data, kw["display_id"])))
    monkeypatch.setattr(IPython.display, "update_display", lambda data, **kw: updated.append((data, kw["display_id"])))
    view._ipython_display_()
    data, display_id = shown[0]
    assert {"application/vnd.jupyter.widget-view+json", "image/png", "image/svg+xml", "text/plain"} <= set(data)
    assert "text/html" not in data  # untrusted JupyterLab would show it sanitized instead of the PNG
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == view.model_id
    assert data["image/svg+xml"].count('data-state="pending"') == 6
    handle.start()
    handle.wait()
    wait_for(lambda: bool(updated), what="the static snapshot to be refreshed at completion")
    final, final_id = updated[-1]
    assert final_id == display_id
    assert 'data-name="e" data-state="failure_allowed"' in final["image/svg+xml"]  # e allows failure
    assert "outcome blocked" in final["image/svg+xml"]


def test_awaiting_the_run_returns_once_its_view_shows_the_final_picture(
    project: Project, small_plan: Plan, comms: list[RecordingComm], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cell that awaits a run ends with the run's final picture: the await waits for the
    view's last flush, and that flush replaces the picture before it sends the patch that says the
    run stopped (nbclient saves what arrives before the cell ends; a front end never sees the run
    stop under the running picture)."""
    import asyncio
    import threading

    import IPython.display

    from rho_notebook.service.background import BackgroundRunner

    handle = BackgroundRunner().start_run(project.service, project.create_run(small_plan), wait_started=False)
    timer = _ManualTimer()  # flushes run only when this test says so
    controller = RunController(handle, timer=timer)
    comm = comm_of(comms, controller.widget)
    updated: list[tuple[dict[str, Any], Any]] = []

    def update_display(data: dict[str, Any], **kwargs: Any) -> None:
        updated.append((data, _front_end_run(comm).get("lifecycle")))  # what the front end knew then

    monkeypatch.setattr(IPython.display, "display", lambda data, **kw: None)
    monkeypatch.setattr(IPython.display, "update_display", update_display)
    controller.widget._ipython_display_()
    finished: list[str | None] = []

    async def awaiting() -> None:
        finished.append((await handle).outcome)

    waiter = threading.Thread(target=lambda: asyncio.run(awaiting()))
    waiter.start()
    wait_for(handle.done, what="the run to stop")
    waiter.join(0.5)
    assert waiter.is_alive() and not finished and not updated, "the await ended before the final picture"
    timer.run_pending()
    waiter.join(10)
    assert finished == ["blocked"]
    [(final, lifecycle_then)] = updated
    assert "outcome blocked" in final["image/svg+xml"] and lifecycle_then != "completed"
    assert _front_end_run(comm)["lifecycle"] == "completed"
    controller.widget.close()  # a closed view no longer holds the handle
    assert handle._views == []


def test_a_run_that_stops_while_its_view_is_displayed_updates_it_after_the_display(
    project: Project, small_plan: Plan, comms: list[RecordingComm], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run stops while the cell draws its view's picture: the final picture's update follows
    the display (a front end drops an update of a display id it has not seen yet, and the saved
    cell would keep the running picture: a browser test caught this on a loaded machine)."""
    import threading

    import IPython.display

    from rho_notebook.service.background import BackgroundRunner

    handle = BackgroundRunner().start_run(project.service, project.create_run(small_plan), wait_started=False)
    timer = _ManualTimer()
    controller = RunController(handle, timer=timer)
    timer.run_pending()  # the view as the run started
    wait_for(handle.done, what="the run to stop")  # its last flush is still pending
    sent: list[tuple[str, str, str]] = []
    flushing: list[threading.Thread] = []

    def display(data: dict[str, Any], **kwargs: Any) -> None:
        # the pump flushes the run's end while this display is under way
        flushing.append(threading.Thread(target=timer.run_pending))
        flushing[0].start()
        flushing[0].join(1.0)
        sent.append(("display", kwargs["display_id"], kwargs["metadata"]["rho_notebook"]["picture"]))

    def update_display(data: dict[str, Any], **kwargs: Any) -> None:
        sent.append(("update", kwargs["display_id"], kwargs["metadata"]["rho_notebook"]["picture"]))

    monkeypatch.setattr(IPython.display, "display", display)
    monkeypatch.setattr(IPython.display, "update_display", update_display)
    controller.widget._ipython_display_()
    flushing[0].join(10)
    [(first, shown_id, _)] = sent[:1]
    assert first == "display", sent
    assert sent[-1][:2] == ("update", shown_id) and sent[-1][2] == "completed", sent
    controller.widget.close()


def test_graph_view_of_a_plan(small_plan: Plan, comms: list[RecordingComm]) -> None:
    view = widgets.graph_view(small_plan)
    assert view.mode == "plan" and view.run == {}
    comm = comm_of(comms, view)
    comm.from_front_end({"kind": "select", "node": "b"})
    assert view.detail["definition"]["output"].startswith("stdout_json(record(")
    assert view.detail["state"] == "pending"
    comm.from_front_end({"kind": "select", "node": "nope"})
    assert view.selected == "b"
    data, _ = view._repr_mimebundle_()
    assert data["image/svg+xml"].count('class="node"') == 6


def test_listener_cost_is_small(project: Project, small_plan: Plan, comms: list[RecordingComm]) -> None:
    """Folding one event on the runner thread is microseconds, not milliseconds (no I/O)."""
    handle = start_run(project, small_plan)
    controller = RunController(handle)
    record = {"kind": "node_ready", "node": "a", "run_id": handle.run_id, "at": "2026-01-01T00:00:00+00:00"}
    started = time.perf_counter()
    for seq in range(1000, 3000):
        controller._listen({**record, "seq": seq, "kind": "node_ready" if seq % 2 else "node_reset"})
    per_event = (time.perf_counter() - started) / 2000
    assert per_event < 0.002, f"{per_event * 1e6:.0f} µs per event"


def test_closing_the_view_stops_following_the_run(
    project: Project, small_plan: Plan, comms: list[RecordingComm]
) -> None:
    watcher_handle = start_run(project, small_plan)
    timer = _ManualTimer()
    controller = RunController(watcher_handle, timer=timer)
    feed = controller.feed  # the run's one follower in this process, shared by its views
    assert feed._event in watcher_handle._listeners and controller._listen in feed._listeners
    timer.run_pending()
    assert controller.throttle.flushes == 1  # the opening poke: this timer does run flushes
    controller.throttle.poke()  # scheduled while open, due after the close below
    controller.widget.close()
    assert controller._listen not in feed._listeners
    assert feed._event not in watcher_handle._listeners  # no view is left: the feed stops following
    before = controller.throttle.flushes
    controller.throttle.poke()
    timer.run_pending()  # everything that was or could still be scheduled runs now
    assert controller.throttle.flushes == before


def test_condition_text_is_what_a_workflow_author_can_write() -> None:
    """The pane shows conditions in the DSL's own spelling (`not_`: `not` is a Starlark keyword)."""
    from rho_notebook.model.condition import AnyOf, Equals, IsOneOf, Not
    from rho_notebook.model.reference import ExitCodeRef, OutputRef, StatusRef
    from rho_notebook.views.text import condition_text

    cond = AnyOf(
        items=(
            Not(item=Equals(left=ExitCodeRef(node="b"), right=0)),
            IsOneOf(left=StatusRef(node="a"), values=("success",)),
            Equals(left=OutputRef(node="s", path=("n",)), right=3),
        )
    )
    assert condition_text(cond) == (
        'condition.any([condition.not_(condition.equals(exit_code("b"), 0)), '
        'condition.is_one_of(status("a"), ["success"]), condition.equals(output("s", ["n"]), 3)])'
    )


def test_resume_button_goes_through_the_services_consent_rule(project: Project, comms: list[RecordingComm]) -> None:
    """Without an injected resume the button resumes through the service: the digest on the
    button is the consent, checked against the run's frozen graph digest."""
    project.write(
        "quick.star",
        star(
            'return workflow(name = "quick", nodes = [command(name = "a", argv = ["true"], timeout_seconds = 10, max_output_bytes = 100)])'
        ),
    )
    plan = project.plan("quick.star")
    handle = start_run(project, plan).start()
    handle.wait()
    controller = RunController(handle)
    view = controller.widget
    comm = comm_of(comms, view)
    controller.graph_digest = "sha256:" + "1" * 64
    comm.from_front_end({"kind": "action", "action": "resume"})
    wait_for(lambda: "resume refused" in view.run.get("message", ""), what="the refusal message")
    assert "but the graph digest is " + plan.graph_digest in view.run["message"]
