"""Launch approvals that carry over (policy/carried.py): real supervised runs with real processes,
decided by a person through the service, in one store shared by two checkouts."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any, Literal

import pytest

from rho_notebook.model.run_state import RunState
from rho_notebook.policy.approvals import ApprovalRequest, who_am_i
from rho_notebook.policy.carried import CarriedApprovals
from rho_notebook.service import Consent, StartRun
from rho_notebook.store.layout import StoreLayout
from tests.conftest import Project, journal_of, star

C = "timeout_seconds = 30, max_output_bytes = 1000"


def touch(name: str) -> str:
    return star(f'return workflow(name = "carry", nodes = [command(name = "write", argv = ["touch", "{name}"], {C})])')


GATE = star(
    'return workflow(name = "gate", nodes = [approval(name = "ok", prompt = "go?", timeout_seconds = 30, max_output_bytes = 1000)])'
)


@pytest.fixture
def checkouts(tmp_path: Path) -> tuple[Project, Project]:
    """Two checkouts (different workspace keys) sharing one store."""
    home = (tmp_path / "home").resolve()
    made = []
    for name in ("one", "two"):
        root = tmp_path / name
        (root / ".rho").mkdir(parents=True)
        made.append(Project(root=root.resolve(), home=home))
    return made[0], made[1]


def run_supervised(
    project: Project, *, approve: bool = True, origin: Literal["cli", "mcp"] = "cli"
) -> tuple[RunState, list[ApprovalRequest]]:
    """Plan wf.star and run it in supervised mode; a person answers every request ``approve``
    from another thread. Returns the final state and the requests they were asked."""
    service = project.service
    plan = project.plan("wf.star")
    asked: list[ApprovalRequest] = []
    deciders: list[threading.Thread] = []

    def decide(request: ApprovalRequest) -> None:
        asyncio.run(service.decide(request, approve=approve, comment=None, via="cli"))

    def responder(request: ApprovalRequest) -> None:
        asked.append(request)
        thread = threading.Thread(target=decide, args=(request,), daemon=True)
        deciders.append(thread)
        thread.start()

    request = StartRun(plan=plan.plan_id, consent=Consent(yes=True), mode="supervised", origin=origin)
    state = asyncio.run(service.run(request, responder=responder))
    for thread in deciders:
        thread.join(timeout=30)
    return state, asked


def journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in journal_of(project.home, run_id).read_text().splitlines()]


def kinds(project: Project, run_id: str) -> list[str]:
    return [record["kind"] for record in journal(project, run_id)]


def test_an_approved_launch_carries_to_a_later_run_with_the_same_facts(checkouts: tuple[Project, Project]) -> None:
    project, _ = checkouts
    project.write("wf.star", touch("written.txt"))
    first, asked = run_supervised(project)
    assert first.outcome == "success" and len(asked) == 1 and asked[0].kind == "launch"
    (project.root / "written.txt").unlink()

    second, asked_again = run_supervised(project)
    assert asked_again == []  # nobody was asked
    assert second.outcome == "success" and (project.root / "written.txt").exists()  # and it launched
    assert "approval_requested" not in kinds(project, second.run_id)
    carried = next(e for e in journal(project, second.run_id) if e["kind"] == "approval_carried")
    assert carried["node"] == "write" and carried["attempt"] == 1
    assert carried["from_run"] == first.run_id and carried["by"] == who_am_i()
    assert carried["facts_sha256"] == asked[0].facts_sha256 and carried["decided_at"]
    approval = second.nodes["write"].attempts[-1].approval
    assert approval is not None and approval["via"] == "carried" and approval["by"] == who_am_i()

    # the index entry is private, like the rest of the store
    folder = StoreLayout(home=project.home).carried_approvals / project.workspace.key
    (entry,) = folder.iterdir()
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600 and stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_changed_facts_ask_again(checkouts: tuple[Project, Project]) -> None:
    project, _ = checkouts
    project.write("wf.star", touch("written.txt"))
    run_supervised(project)
    project.write("wf.star", touch("other.txt"))  # another argv: another facts digest
    state, asked = run_supervised(project)
    assert len(asked) == 1 and asked[0].facts["argv"] == ["touch", "other.txt"]
    assert "approval_carried" not in kinds(project, state.run_id)


def test_another_workspace_asks_again(checkouts: tuple[Project, Project]) -> None:
    one, two = checkouts
    one.write("wf.star", touch("written.txt"))
    two.write("wf.star", touch("written.txt"))  # the same files in another checkout
    _, asked_first = run_supervised(one)
    second, asked = run_supervised(two)
    assert one.workspace.key != two.workspace.key
    assert len(asked) == 1 and asked[0].facts_sha256 == asked_first[0].facts_sha256  # same facts, asked again
    assert "approval_carried" not in kinds(two, second.run_id)


def test_a_denial_is_not_carried(checkouts: tuple[Project, Project]) -> None:
    project, _ = checkouts
    project.write("wf.star", touch("written.txt"))
    denied, _ = run_supervised(project, approve=False)
    assert denied.nodes["write"].state.value == "denial" and not (project.root / "written.txt").exists()
    state, asked = run_supervised(project)
    assert len(asked) == 1 and state.outcome == "success"


def test_runs_started_through_mcp_always_ask_and_leave_nothing(checkouts: tuple[Project, Project]) -> None:
    project, _ = checkouts
    project.write("wf.star", touch("written.txt"))
    # an approval given in an MCP run is not carried to a later run
    run_supervised(project, origin="mcp")
    _, asked = run_supervised(project)
    assert len(asked) == 1
    # and a carried approval does not apply to an MCP run
    state, asked_mcp = run_supervised(project, origin="mcp")
    assert len(asked_mcp) == 1 and "approval_carried" not in kinds(project, state.run_id)
    assert "approval_carried" in kinds(project, run_supervised(project)[0].run_id)  # a CLI run still carries


def test_approval_nodes_ask_every_run(checkouts: tuple[Project, Project]) -> None:
    project, _ = checkouts
    project.write("wf.star", GATE)
    run_supervised(project)
    state, asked = run_supervised(project)
    assert len(asked) == 1 and asked[0].kind == "node" and state.outcome == "success"


def test_a_damaged_or_foreign_entry_carries_nothing(tmp_path: Path) -> None:
    layout = StoreLayout(home=tmp_path / "home")
    index = CarriedApprovals(layout, "a" * 64)
    digest = "sha256:" + "b" * 64
    assert index.find(digest) is None
    layout.ensure(index.folder)
    path = index.folder / ("b" * 64 + ".json")
    path.write_text("{not json")
    assert index.find(digest) is None
    entry = {
        "workspace_key": "c" * 64,  # copied from another workspace's folder
        "facts_sha256": digest,
        "run_id": "r",
        "node": "n",
        "by": "mallory",
        "decided_at": "2026-01-01T00:00:00Z",
        "via": "cli",
    }
    path.write_text(json.dumps(entry))
    assert index.find(digest) is None
    path.write_text(json.dumps({**entry, "workspace_key": "a" * 64}))
    found = index.find(digest)
    assert found is not None and found.by == "mallory"
    os.unlink(path)
    os.symlink(tmp_path / "elsewhere.json", path)
    assert index.find(digest) is None
    assert index.find("not-a-digest") is None
