"""A verified graph is remembered per file version; any change to the file is verified again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rho_notebook.errors import StoreError
from rho_notebook.store import graphs
from rho_notebook.store.graphs import load_graph
from rho_notebook.store.runs import RunStore
from tests.conftest import Project, star

C = "timeout_seconds = 10, max_output_bytes = 1000"


def _graph_file(project: Project) -> tuple[Path, str]:
    project.write("wf.star", star(f'return workflow(name = "g", nodes = [command(name = "a", argv = ["true"], {C})])'))
    plan = project.plan("wf.star")
    return project.home / "workflows" / "plans" / plan.manifest.plan_id / "graph.json", plan.manifest.graph_digest


def _tamper_keeping_size_and_mtime(path: Path) -> None:
    before = os.stat(path)
    text = path.read_text()
    assert '"timeout_seconds":10' in text
    path.write_text(text.replace('"timeout_seconds":10', '"timeout_seconds":11'))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)


def test_second_open_is_served_from_memory(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    path, digest = _graph_file(project)
    first = load_graph(path, below=project.home)
    assert first[1] == digest
    calls = []
    monkeypatch.setattr(graphs, "graph_digest", lambda g: calls.append(g) or "sha256:x")
    assert load_graph(path, below=project.home) is first
    assert calls == []


def test_in_place_edit_with_restored_mtime_is_verified_again(project: Project) -> None:
    path, digest = _graph_file(project)
    assert load_graph(path, below=project.home)[1] == digest
    _tamper_keeping_size_and_mtime(path)
    graph, again = load_graph(path, below=project.home)
    assert again != digest and graph.nodes[0].timeout_seconds == 11


def test_run_created_in_this_process_still_refuses_a_modified_graph(project: Project) -> None:
    path, _ = _graph_file(project)
    service = project.service
    plan = service.plan_store.load(path.parent.name)
    run_id = project.create_run(plan)
    store = RunStore(service.layout)
    digest = store.manifest(run_id).graph_digest
    assert store.graph(run_id, expected_digest=digest).nodes[0].timeout_seconds == 10  # remembered at create
    _tamper_keeping_size_and_mtime(store.folder(run_id).graph)
    with pytest.raises(StoreError, match="modified graph"):
        store.graph(run_id, expected_digest=digest)


def test_symlinked_graph_is_refused(project: Project, tmp_path: Path) -> None:
    path, _ = _graph_file(project)
    real = tmp_path / "elsewhere.json"
    real.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(real)
    with pytest.raises(StoreError, match="symlink"):
        load_graph(path, below=project.home)
