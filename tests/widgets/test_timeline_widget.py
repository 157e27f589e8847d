"""The widget's Timeline: the kernel answers the tab's "timeline" action with the fold of the run's
journal, and a stopped run's saved picture shows the timeline under the DAG (views/timeline_svg.py)."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from rho_notebook import widgets
from rho_notebook.model.plan import Plan
from rho_notebook.views.picture import png_size
from rho_notebook.widgets._testing import RecordingComm
from tests.conftest import Project
from tests.widgets.helpers import comm_of, start_run, wait_for


def test_timeline_action_answers_the_rows(project: Project, small_plan: Plan, comms: list[RecordingComm]) -> None:
    handle = start_run(project, small_plan)
    view = widgets.run_view(handle)
    handle.start()
    handle.wait()
    wait_for(lambda: view.run.get("lifecycle") == "completed", what="the run view to complete")
    comm = comm_of(comms, view)
    comm.from_front_end({"kind": "action", "action": "timeline"})
    answers = [m for m in comm.custom() if m.get("kind") == "timeline"]
    assert len(answers) == 1
    timeline = answers[0]["timeline"]
    rows = {row["name"]: row for row in timeline["rows"]}
    assert set(rows) == {"a", "b", "c", "d", "e", "f"}
    assert rows["a"]["bars"][0]["state"] == "success" and rows["e"]["bars"][0]["state"] == "failure"
    assert rows["f"]["state"] == "blocked" and rows["f"]["bars"] == []
    assert timeline["critical_path"][0] == "a" and timeline["critical_path"][-1] == "e"
    assert not timeline["running"]


def test_saved_picture_of_a_stopped_run_has_the_timeline(
    project: Project, small_plan: Plan, comms: list[RecordingComm], monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = start_run(project, small_plan)
    view = widgets.run_view(handle)
    shown: list[dict[str, Any]] = []
    updated: list[dict[str, Any]] = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda data, **kw: shown.append(data))
    monkeypatch.setattr(IPython.display, "update_display", lambda data, **kw: updated.append(data))
    view._ipython_display_()
    assert "rho-timeline-snapshot" not in shown[0]["image/svg+xml"]  # nothing ran yet: the DAG alone
    handle.start()
    handle.wait()
    wait_for(lambda: bool(updated), what="the static snapshot to be refreshed at completion")
    final = updated[-1]
    root = ET.fromstring(final["image/svg+xml"])
    assert root.get("class") == "rho-run-snapshot"
    names = [g.get("data-row") for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("data-row")]
    assert sorted(names) == ["a", "b", "c", "d", "e", "f"]
    assert final["image/svg+xml"].count('data-state="pending"') == 0  # the DAG's marks are the DAG's only
    assert 'data-name="e" data-state="failure_allowed"' in final["image/svg+xml"]
    width, height = png_size(base64.b64decode(final["image/png"]))
    dag_only = png_size(base64.b64decode(shown[0]["image/png"]))
    assert height > dag_only[1] and width >= dag_only[0]  # the PNG is drawn from the combined SVG
