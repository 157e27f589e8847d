"""The plan card (Run confirms the exact digest) and the hub (START, RUNS, SAVED PLANS)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets
import pytest

from rho_notebook import widgets
from rho_notebook.errors import RhoError
from rho_notebook.model.plan import Plan
from rho_notebook.service import Consent, Service, StartRun, default_runner
from rho_notebook.widgets._dag import DagWidget
from rho_notebook.widgets._hub import Hub, HubSession
from rho_notebook.widgets._testing import RecordingComm, ThreadRunHandle
from tests.conftest import Project
from tests.widgets.helpers import start_run, wait_for


def _walk(widget: Any) -> list[Any]:
    found = [widget]
    for child in getattr(widget, "children", ()):
        found.extend(_walk(child))
    return found


def _buttons(widget: Any, prefix: str) -> list[ipywidgets.Button]:
    return [w for w in _walk(widget) if isinstance(w, ipywidgets.Button) and w.description.startswith(prefix)]


def test_plan_card_run_button_confirms_the_digest_once(small_plan: Plan, comms: list[RecordingComm]) -> None:
    calls: list[int] = []
    card = widgets.plan_card(small_plan, on_run=lambda: calls.append(1) or "0190-run")
    digest = small_plan.graph_digest
    assert digest[:23] in card.run_button.description
    assert digest in card.run_button.tooltip and digest in card.digest_label.value
    assert small_plan.plan_id in card.facts.value and digest in card.facts.value
    card.run_button.click()
    card.run_button.click()
    assert calls == [1]
    assert card.confirmed and card.run_button.disabled
    assert "0190-run" in card.status.value and digest in card.status.value
    data, _ = card._repr_mimebundle_()
    assert digest in data["text/html"] and '<img src="data:image/png;base64,' in data["text/html"]
    assert data["image/svg+xml"].count('class="node"') == 6
    assert "application/vnd.jupyter.widget-view+json" in data


def test_plan_card_shows_inputs_and_authority(project: Project, comms: list[RecordingComm]) -> None:
    project.write(
        "in.star",
        """
        def build(inputs):
            return workflow(name = "inputs", nodes = [command(name = "echo", argv = ["echo", inputs["who"]], timeout_seconds = 5, max_output_bytes = 100)])

        WORKFLOW = define(inputs = {"who": input.string(default = "world")}, build = build)
        """,
    )
    plan = project.plan("in.star", {"who": "notebook"})
    card = widgets.plan_card(plan, on_run=lambda: None, show_graph=False)
    assert "&quot;notebook&quot;" in card.facts.value
    echo = next(a for a in plan.manifest.authority if a.kind == "executable")
    assert echo.value in card.facts.value
    assert card.graph is None


def test_plan_card_reports_a_refusal(small_plan: Plan, comms: list[RecordingComm]) -> None:
    def refuse() -> None:
        raise RhoError("the workspace moved")

    card = widgets.plan_card(small_plan, on_run=refuse)
    card._clicked()
    assert "run refused" in card.status.value and "the workspace moved" in card.status.value


@dataclass
class FakeSession:
    service: Service
    workflows: Sequence[tuple[str, Callable[[], Any]]] = ()
    handles: dict[str, Any] = field(default_factory=dict)
    started_plans: list[str] = field(default_factory=list)

    def handle_for(self, run_id: str) -> Any:
        return self.handles.get(run_id)

    def start_plan(self, plan: Plan) -> Any:
        self.started_plans.append(plan.plan_id)
        request = StartRun(plan=plan.plan_id, consent=Consent(yes=True))
        run_id = default_runner().call(self.service.create_run_of(plan, request))
        handle = ThreadRunHandle(self.service, run_id).start()
        self.handles[run_id] = handle
        return handle


def test_hub_lists_starts_watches_and_deletes(project: Project, small_plan: Plan, comms: list[RecordingComm]) -> None:
    service = project.service
    session = FakeSession(service=service)

    def start() -> Any:
        handle = start_run(project, small_plan).start()
        session.handles[handle.run_id] = handle
        return handle

    session.workflows = [("small", start)]
    assert isinstance(session, HubSession)
    hub = widgets.hub_view(session)
    assert isinstance(hub, Hub)
    assert _buttons(hub.start_box, "Start small")
    assert "no runs yet" in hub.runs_box.children[0].value
    plan_rows = _buttons(hub.plans_box, "Run plan")
    assert len(plan_rows) == 1

    # START: a new run, shown live below
    _buttons(hub.start_box, "Start small")[0].click()
    view = hub.detail.children[0]
    assert isinstance(view, DagWidget) and view.mode == "run"
    handle = next(iter(session.handles.values()))
    handle.wait()
    hub.refresh()
    assert len(_buttons(hub.runs_box, "Watch")) == 1

    # RUNS: watch opens the DAG; delete asks first
    _buttons(hub.runs_box, "Watch")[0].click()
    assert isinstance(hub.detail.children[0], DagWidget)
    _buttons(hub.runs_box, "Delete")[0].click()
    assert service.run_store.ids() == [handle.run_id], "deleted without confirmation"
    keep = _buttons(hub.runs_box, "Keep")
    assert keep
    keep[0].click()
    assert service.run_store.ids() == [handle.run_id]
    _buttons(hub.runs_box, "Delete")[0].click()
    _buttons(hub.runs_box, "Delete")[-1].click()  # the confirmation button
    assert service.run_store.ids() == []

    # SAVED PLANS: run again through the plan card (its Run button confirms the digest)
    _buttons(hub.plans_box, "Run plan")[0].click()
    card = hub.detail.children[0]
    assert small_plan.graph_digest in card.digest_label.value
    card.run_button.click()
    assert session.started_plans == [small_plan.plan_id]
    assert hub.detail.children[0] is card
    assert card.run is not None and card.run.mode == "run" and card.graph not in card.children
    for h in session.handles.values():
        h.wait()

    # delete the plan after confirmation; the run of it stays
    _buttons(hub.plans_box, "Delete")[0].click()
    assert service.plan_store.ids() == [small_plan.plan_id]
    _buttons(hub.plans_box, "Delete")[-1].click()
    assert service.plan_store.ids() == []
    assert len(service.run_store.ids()) == 1
    data, _ = hub._repr_mimebundle_()
    assert "SAVED PLANS" in data["text/html"] and "RUNS" in data["text/html"]


def test_hub_refuses_to_delete_a_live_run_and_cancels_it(project: Project, comms: list[RecordingComm]) -> None:
    project.write(
        "long.star",
        """
        def build(inputs):
            return workflow(name = "long", nodes = [command(name = "wait", argv = ["sleep", "30"], timeout_seconds = 60, max_output_bytes = 100)])

        WORKFLOW = define(inputs = {}, build = build)
        """,
    )
    plan = project.plan("long.star")
    handle = start_run(project, plan).start()
    wait_for(lambda: handle.state().nodes["wait"].state.value == "running", what="the node to run")
    hub = widgets.hub_view(FakeSession(service=project.service))
    assert _buttons(hub.runs_box, "Watch running")
    hub._delete_run(handle.run_id)
    assert "live" in hub.message.value and project.service.run_store.ids() == [handle.run_id]
    _buttons(hub.runs_box, "Cancel")[0].click()
    final = handle.wait()
    assert final.outcome == "cancellation"
    assert "cancel of" in hub.message.value


def test_hub_without_start_plan_explains(
    project: Project, small_plan: Plan, comms: list[RecordingComm], monkeypatch: pytest.MonkeyPatch
) -> None:
    @dataclass
    class Minimal:
        workflows: Sequence[tuple[str, Callable[[], Any]]] = ()

    monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(project.home))
    hub = Hub(Minimal())
    assert hub.service.layout.home == project.home
    hub.open_plan(small_plan.plan_id)
    card = hub.detail.children[0]
    card.run_button.click()
    assert "cannot start saved plans" in card.status.value
    assert "start" in hub.start_box.children[0].value.lower() or "no validated" in hub.start_box.children[0].value


@pytest.mark.parametrize("name", ["HubSession", "RunHandleLike"])
def test_protocols_are_exported(name: str) -> None:
    assert getattr(widgets, name).__name__ == name
