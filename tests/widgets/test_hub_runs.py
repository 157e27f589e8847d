"""The hub's run rows (issue 32): runs named by start time and the shortest unique ID prefix;
a run that needs a person (its owner died: ``needs_recovery``) listed with the live runs, with the
command that moves it on and no Delete button; finished runs below, with Delete."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.service import Service
from rho_notebook.widgets._hub import Hub, unique_prefixes
from tests.cli.runhelp import kill_owner
from tests.conftest import Project, star, wait_journaled

IDS = [
    "01a2409c-5f10-7000-8000-000000000001",
    "01a2409c-5f2a-7000-8000-000000000002",
    "01a2409c-77aa-7000-8000-000000000003",
    "01a2419d-0000-7000-8000-000000000004",
    "02000000-0000-7000-8000-000000000005",
]


def test_unique_prefixes_are_the_shortest_no_other_listed_id_shares() -> None:
    found = unique_prefixes(IDS)
    assert found == {
        IDS[0]: "01a2409c-5f1",
        IDS[1]: "01a2409c-5f2",
        IDS[2]: "01a2409c-7",  # never cut at the hyphen: "01a2409c-" would read as a whole part
        IDS[3]: "01a241",
        IDS[4]: "0200",  # unique after one character, but never shorter than 4
    }
    for run_id, prefix in found.items():
        assert [other for other in IDS if other.startswith(prefix)] == [run_id]
    assert unique_prefixes([IDS[0]]) == {IDS[0]: "01a2"}
    assert unique_prefixes([IDS[0]], shortest=8) == {IDS[0]: "01a2409c"}
    assert unique_prefixes([]) == {}


@dataclass
class _Session:
    """The least a hub needs: no workflow cells, the project's store."""

    service: Service
    workflows: list[Any] = field(default_factory=list)


def _texts(rows_of: list[Any]) -> list[tuple[str, list[str]]]:
    """(label text, button descriptions) of each row of a hub section."""
    rows = []
    for row in rows_of:
        children = getattr(row, "children", [row])
        labels = " ".join(c.value for c in children if hasattr(c, "value") and isinstance(c.value, str))
        buttons = [c.description for c in children if hasattr(c, "on_click")]
        rows.append((labels, buttons))
    return rows


def test_a_run_that_needs_recovery_is_listed_with_the_live_runs_and_its_command(project: Project) -> None:
    project.write(
        "long.star",
        star(
            'return workflow(name = "long", nodes = [command(name = "slow", argv = ["sleep", "60"], '
            "timeout_seconds = 90, max_output_bytes = 100)])"
        ),
    )
    project.write(
        "quick.star",
        star(
            'return workflow(name = "quick", nodes = [command(name = "a", argv = ["true"], '
            "timeout_seconds = 10, max_output_bytes = 100)])"
        ),
    )
    done = project.cli("run", "quick.star", "--yes", "--wait")
    assert done.returncode == 0, done.stderr
    started = project.cli("run", "long.star", "--yes", "--detach", "--output", "json")
    assert started.returncode == 0, started.stderr
    lost = json.loads(started.stdout)["run_id"]
    process = wait_journaled(project.home, lost, "process_started")
    kill_owner(project, lost)  # the owner dies without a word: the run needs recovery
    os.killpg(process["pid"], signal.SIGKILL)  # its orphaned `sleep 60`

    hub = Hub(_Session(service=project.service))
    live, finished = _texts(hub.live_rows), _texts(hub.finished_rows)
    assert len(live) == 1 and len(finished) == 1, (live, finished)
    text, buttons = live[0]
    assert "needs_recovery" in text and f"rho-notebook resume {lost}" in text, text
    assert "Delete" not in buttons and "Cancel" not in buttons, buttons
    names = unique_prefixes(p.name for p in (project.home / "workflows" / "runs").iterdir())
    assert buttons[0].startswith("Watch needs_recovery · 20") and buttons[0].endswith(f" · {names[lost]}"), buttons
    text, buttons = finished[0]
    assert "completed" in text and "success" in text and "Delete" in buttons, (text, buttons)
