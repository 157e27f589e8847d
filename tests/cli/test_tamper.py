"""Frozen files are verified before launch: an edited or replaced script never runs, and symlinks
planted in the store are rejected."""

from __future__ import annotations

import json
import os
import shutil

from tests.cli.runhelp import create_run, plan_id, status
from tests.conftest import Project, star

SCRIPT = "#!/bin/sh\necho original >> ran.log\n"


def wf(argv0: str) -> str:
    return star(
        f'return workflow(name = "t", nodes = [command(name = "s", argv = ["{argv0}"], timeout_seconds = 10, max_output_bytes = 100)])'
    )


def run_plan(project: Project, pid: str) -> dict:
    out = project.cli("run", pid, "--yes", "--output", "jsonl")
    run_id = json.loads(out.stdout.splitlines()[0])["run_id"]
    return status(project, run_id)


def test_untouched_script_runs(project: Project) -> None:
    project.write("tool.sh", SCRIPT, mode=0o755)
    project.write("wf.star", wf("./tool.sh"))
    data = run_plan(project, plan_id(project))
    assert data["outcome"] == "success"
    assert (project.root / "ran.log").read_text() == "original\n"


def test_edited_script_never_runs(project: Project) -> None:
    project.write("tool.sh", SCRIPT, mode=0o755)
    project.write("wf.star", wf("./tool.sh"))
    pid = plan_id(project)
    project.write("tool.sh", "#!/bin/sh\necho evil >> ran.log\n", mode=0o755)
    data = run_plan(project, pid)
    assert data["nodes"]["s"]["state"] == "failure"
    assert "tool.sh" in data["nodes"]["s"]["reason"]
    assert not (project.root / "ran.log").exists()


def test_replaced_script_same_content_new_file_never_runs(project: Project) -> None:
    project.write("tool.sh", SCRIPT, mode=0o755)
    project.write("wf.star", wf("./tool.sh"))
    pid = plan_id(project)
    os.rename(project.root / "tool.sh", project.root / "old.sh")
    shutil.copy2(project.root / "old.sh", project.root / "tool.sh")  # same bytes, different file
    data = run_plan(project, pid)
    assert data["nodes"]["s"]["state"] == "failure"
    assert "tool.sh" in data["nodes"]["s"]["reason"]
    assert not (project.root / "ran.log").exists()


def test_script_swapped_for_symlink_never_runs(project: Project) -> None:
    project.write("tool.sh", SCRIPT, mode=0o755)
    project.write("evil.sh", "#!/bin/sh\necho evil >> ran.log\n", mode=0o755)
    project.write("wf.star", wf("./tool.sh"))
    pid = plan_id(project)
    os.remove(project.root / "tool.sh")
    os.symlink(project.root / "evil.sh", project.root / "tool.sh")
    data = run_plan(project, pid)
    assert data["nodes"]["s"]["state"] == "failure"
    assert not (project.root / "ran.log").exists()


def test_interpreter_is_frozen_too(project: Project, tmp_path) -> None:
    fake_sh = tmp_path / "bin" / "mysh"
    fake_sh.parent.mkdir()
    shutil.copy2("/bin/sh", fake_sh)
    project.write("tool.sh", f"#!{fake_sh}\necho original >> ran.log\n", mode=0o755)
    project.write("wf.star", wf("./tool.sh"))
    pid = plan_id(project)
    fake_sh.write_bytes(fake_sh.read_bytes() + b"\0")
    data = run_plan(project, pid)
    assert data["nodes"]["s"]["state"] == "failure"
    assert "mysh" in data["nodes"]["s"]["reason"]
    assert not (project.root / "ran.log").exists()


def test_symlinked_plan_entry_is_rejected(project: Project, tmp_path) -> None:
    project.write("wf.star", wf("true"))
    pid = plan_id(project)
    manifest = project.home / "workflows" / "plans" / pid / "graph.json"
    elsewhere = tmp_path / "graph.json"
    shutil.move(manifest, elsewhere)
    os.symlink(elsewhere, manifest)
    result = project.cli("run", pid, "--yes")
    assert result.returncode == 1
    assert "symlink" in result.stderr
    assert not (project.home / "workflows" / "runs").exists() or not os.listdir(project.home / "workflows" / "runs")


def test_symlinked_run_folder_is_rejected(project: Project, tmp_path) -> None:
    project.write("wf.star", wf("true"))
    out = project.cli("run", plan_id(project), "--yes", "--output", "jsonl")
    run_id = json.loads(out.stdout.splitlines()[0])["run_id"]
    runs = project.home / "workflows" / "runs"
    shutil.move(runs / run_id, tmp_path / run_id)
    os.symlink(tmp_path / run_id, runs / run_id)
    result = project.cli("status", run_id)
    assert result.returncode == 1 and "symlink" in result.stderr


def test_modified_plan_graph_is_rejected(project: Project) -> None:
    project.write("wf.star", wf("true"))
    pid = plan_id(project)
    graph = project.home / "workflows" / "plans" / pid / "graph.json"
    graph.write_text(graph.read_text().replace('"timeout_seconds":10', '"timeout_seconds":11'))
    result = project.cli("run", pid, "--yes")
    assert result.returncode == 1 and "modified" in result.stderr


def test_store_is_private(project: Project) -> None:
    project.write("wf.star", wf("true"))
    pid = plan_id(project)
    for path in [
        project.home,
        project.home / "workflows",
        project.home / "workflows" / "plans",
        project.home / "workflows" / "plans" / pid,
    ]:
        assert os.stat(path).st_mode & 0o777 == 0o700, path
    assert os.stat(project.home / "workflows" / "plans" / pid / "manifest.json").st_mode & 0o077 == 0


def test_script_edited_during_the_run_never_runs_again(project: Project, monkeypatch) -> None:
    """The run keeps verified descriptors (rho_notebook.exec.handles); a node that rewrites a script
    between two launches of it makes the second launch fail closed, naming the script."""
    import asyncio

    from rho_notebook.exec import verify
    from rho_notebook.runtime.owner import execute_run

    monkeypatch.setattr(verify, "SETTLED_SECONDS", 0.0)  # files written by the test may be kept
    project.write("tool.sh", SCRIPT, mode=0o755)
    project.write("edit.sh", "#!/bin/sh\nprintf '#!/bin/sh\\necho evil >> ran.log\\n' > tool.sh\n", mode=0o755)
    c = "timeout_seconds = 10, max_output_bytes = 100"
    project.write(
        "wf.star",
        star(
            'return workflow(name = "t", nodes = ['
            f'command(name = "a", argv = ["./tool.sh"], {c}), '
            f'command(name = "b", argv = ["./edit.sh"], needs = ["a"], {c}), '
            f'command(name = "c", argv = ["./tool.sh"], needs = ["b"], {c})])'
        ),
    )
    service = project.service
    run_id = asyncio.run(create_run(service, project.plan("wf.star")))
    state = asyncio.run(execute_run(service.layout, run_id, resume=False))
    assert [state.nodes[n].state.value for n in "abc"] == ["success", "success", "failure"]
    assert "tool.sh" in state.nodes["c"].reason and "differs from the plan" in state.nodes["c"].reason
    assert (project.root / "ran.log").read_text() == "original\n"
