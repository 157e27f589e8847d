"""Status read while an owner ends its run: never ``needs_recovery`` for a run that completed.

An owner journals ``run_completed`` and then frees its lock. A reader folds the journal, then
probes the lock; an owner that finished in between used to be reported as lost (the run's status
said ``needs_recovery`` for a moment, and ``workflow_wait`` returned it as the run's end). Here
the owner's last records land exactly between the fold and the probe.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rho_notebook.model.state import Lifecycle
from rho_notebook.runtime import status as status_module
from rho_notebook.store.journal_integrity import Watermark, write_watermark
from rho_notebook.store.layout import StoreLayout
from tests.cli.runhelp import only_run_id, run_folder
from tests.conftest import Project, star

WORKFLOW = star(
    """
    return workflow(name = "quick", nodes = [
        command(name = "a", argv = ["true"], timeout_seconds = 30, max_output_bytes = 1000),
    ])
    """
)


def _cut_before_completion(folder: Path) -> bytes:
    """Take the run's ending records off its journal (the watermark moved back to match) and
    return them, as the journal was while its owner was still finishing."""
    journal = folder / "events.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    ending = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "run_completed")
    kept, tail = lines[:ending], lines[ending:]
    journal.write_bytes(b"".join(kept))
    last = json.loads(kept[-1])
    write_watermark(folder / "journal.mark", Watermark(seq=last["seq"], h=last["h"]))
    return b"".join(tail)


def test_a_run_that_ends_between_the_read_and_the_lock_probe_reads_as_completed(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.write("wf.star", WORKFLOW)
    ran = project.cli("run", "wf.star", "--yes", "--output", "jsonl")
    assert ran.returncode == 0, ran.stderr
    run_id = only_run_id(project)
    folder = run_folder(project, run_id)
    full = (folder / "events.jsonl").read_bytes()
    full_mark = (folder / "journal.mark").read_bytes()
    tail = _cut_before_completion(folder)
    layout = StoreLayout(home=project.home)
    assert status_module.journal_state(layout, run_id).lifecycle is Lifecycle.RUNNING

    probes: list[Path] = []

    def owner_finishes_then_unlocks(path: Path) -> bool:
        """The owner appends its last records and frees the lock just as the reader probes it."""
        probes.append(path)
        with open(folder / "events.jsonl", "ab") as journal:
            journal.write(tail)
        (folder / "journal.mark").write_bytes(full_mark)
        return False

    monkeypatch.setattr(status_module.OwnerLock, "is_held", staticmethod(owner_finishes_then_unlocks))
    state = status_module.load_state(layout, run_id)

    assert probes, "the reader probed the owner lock of a run its journal says is running"
    assert (folder / "events.jsonl").read_bytes() == full
    assert state.lifecycle is Lifecycle.COMPLETED
    assert state.outcome == "success"


def test_a_live_run_whose_lock_is_free_still_needs_recovery(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    project.write("wf.star", WORKFLOW)
    assert project.cli("run", "wf.star", "--yes", "--output", "jsonl").returncode == 0
    run_id = only_run_id(project)
    _cut_before_completion(run_folder(project, run_id))  # the owner died before it could end the run

    state = status_module.load_state(StoreLayout(home=project.home), run_id)

    assert state.lifecycle is Lifecycle.NEEDS_RECOVERY
