"""The read-side and housekeeping verbs: events (--after-seq, --follow), logs (--follow), result,
delete and prune."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.cli.runhelp import plan_id, run, start_run, wait_for_event
from tests.conftest import REPO, Project, star

C = "timeout_seconds = 30, max_output_bytes = 100000"


def test_events_after_seq_and_contract(project: Project) -> None:
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "e", nodes = [command(name = "a", argv = ["true"], {C}), command(name = "b", argv = ["true"], needs = ["a"], {C})])'
        ),
    )
    _, data = run(project)
    lines = [json.loads(line) for line in project.cli("events", data["run_id"]).stdout.splitlines()]
    seqs = [e["seq"] for e in lines]
    assert seqs == list(range(1, len(seqs) + 1))
    assert all({"seq", "run_id", "kind", "at"} <= set(e) for e in lines)
    assert all("node" in e for e in lines if e["kind"].startswith("node_"))
    tail = [json.loads(line) for line in project.cli("events", data["run_id"], "--after-seq", "5").stdout.splitlines()]
    assert [e["seq"] for e in tail] == seqs[5:]


def test_events_follow_streams_a_live_run_until_it_completes(project: Project) -> None:
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "f", nodes = [shell(name = "s", executable = "sh", arguments = ["-c"], command = "sleep 1", {C}), command(name = "t", argv = ["true"], needs = ["s"], {C})])'
        ),
    )
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "process_started")
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    follower = subprocess.run(
        [sys.executable, "-m", "rho_notebook", "events", run_id, "--follow"],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    proc.wait(timeout=30)
    kinds = [json.loads(line)["kind"] for line in follower.stdout.splitlines()]
    assert kinds[0] == "run_created" and kinds[-1] == "run_completed"
    assert kinds.count("node_finished") == 2


def test_logs_follow_prints_output_as_it_is_produced(project: Project) -> None:
    # the node cannot finish before the test creates `go`, so "first" arriving proves live following
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "l", nodes = [shell(name = "s", executable = "sh", arguments = ["-c"], command = "echo first; while [ ! -e go ]; do sleep 0.05; done; echo second >&2; echo third", {C})])'
        ),
    )
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "process_started")
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    follower = subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "logs", run_id, "s", "--follow"],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert follower.stdout is not None and follower.stderr is not None
    assert follower.stdout.readline() == "first\n"
    (project.root / "go").touch()
    # read through the same buffered file objects (communicate() would bypass their buffers)
    assert follower.stdout.read() == "third\n"
    assert follower.stderr.read() == "second\n"
    assert follower.wait(timeout=30) == 0
    proc.wait(timeout=30)


def test_logs_follow_keeps_a_character_whole_when_a_read_ends_inside_it(project: Project) -> None:
    """The node writes the first two bytes of a three-byte character, waits, then the last: a
    follower that read the first two prints the character once it is whole, not two U+FFFD."""
    project.write(
        "wf.star",
        star(
            'return workflow(name = "l", nodes = [shell(name = "s", executable = "sh", arguments = ["-c"],'
            " command = \"printf 'done \\\\342\\\\234'; while [ ! -e go ]; do sleep 0.05; done; printf '\\\\223!\\\\n'\","
            f" {C})])"
        ),
    )
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "process_started")
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    follower = subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "logs", run_id, "s", "--stream", "stdout", "--follow"],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert follower.stdout is not None
    assert follower.stdout.read(5) == b"done "  # the follower has read the split character's first bytes
    time.sleep(0.3)  # a few of its polls, so a follower that decodes each read has printed them
    (project.root / "go").touch()
    assert follower.stdout.read().decode() == "\u2713!\n"
    assert follower.wait(timeout=30) == 0
    proc.wait(timeout=30)


def test_delete_refuses_live_run_and_removes_finished_ones(project: Project) -> None:
    project.write(
        "wf.star", star(f'return workflow(name = "d", nodes = [command(name = "s", argv = ["sleep", "30"], {C})])')
    )
    proc = start_run(project)
    run_id, _ = wait_for_event(proc, lambda e: e["kind"] == "process_started")
    refused = project.cli("delete", run_id, "--yes")
    assert refused.returncode == 3 and "live" in refused.stderr
    project.cli("cancel", run_id)
    proc.wait(timeout=30)
    no_tty = project.cli("delete", run_id)
    assert no_tty.returncode == 3
    assert project.cli("delete", run_id, "--yes").returncode == 0
    assert project.cli("status", run_id).returncode == 1


def test_delete_plan_and_prune(project: Project) -> None:
    project.write("wf.star", star(f'return workflow(name = "p", nodes = [command(name = "a", argv = ["true"], {C})])'))
    pid = plan_id(project)
    _, data = run(project)
    assert project.cli("prune", "--older-than", "1", "--yes").stdout.strip() == "nothing to prune"
    pruned = project.cli("prune", "--older-than", "0", "--yes")
    assert data["run_id"] in pruned.stdout
    assert json.loads(project.cli("runs", "--output", "json").stdout) == []
    assert project.cli("delete", pid, "--yes").returncode == 0
    assert pid not in project.cli("plans").stdout


def test_ambiguous_and_unknown_prefixes(project: Project) -> None:
    project.write("wf.star", star(f'return workflow(name = "x", nodes = [command(name = "a", argv = ["true"], {C})])'))
    run(project)
    run(project)
    ambiguous = project.cli("status", "0")
    assert ambiguous.returncode == 1 and "ambiguous" in ambiguous.stderr
    unknown = project.cli("status", "ffff")
    assert unknown.returncode == 1 and "no run matches 'ffff'; list them with `rho-notebook runs`" in unknown.stderr


def test_usage_error_exit_code(project: Project) -> None:
    assert project.cli("run").returncode == 2
    assert project.cli("nonsense").returncode == 2
    # an argument the verb does not take is refused pointing at that verb's own help
    extra = project.cli("result", "0190", "stray", "--stray")
    assert extra.returncode == 2
    assert extra.stderr.strip() == (
        "rho-notebook result: error: unrecognized arguments: stray --stray (see `rho-notebook result --help`)"
    )
    misspelled = project.cli("stauts", "0190")
    assert misspelled.returncode == 2
    assert misspelled.stderr.strip().endswith("'fork'); did you mean 'status'? (see `rho-notebook --help`)")
    mode = project.cli("run", "x.star", "--mode", "superviesd")
    assert "(choose from 'auto', 'plan', 'supervised'); did you mean 'supervised'?" in mode.stderr
    assert "did you mean" not in project.cli("nonsense").stderr


def test_delete_right_after_completion_waits_for_the_owner_to_let_go(project: Project, monkeypatch: Any) -> None:
    """A run whose journal says completed while its owner is still closing (it holds the owner lock
    for a moment after ``run_completed``) is deleted once the owner lets go, not refused as live;
    one whose owner keeps holding it past the wait is still refused."""
    import threading

    from rho_notebook.errors import RunRefused
    from rho_notebook.service import maintenance
    from rho_notebook.store.layout import StoreLayout
    from rho_notebook.store.run_locks import OwnerLock
    from rho_notebook.store.runs import RunStore

    project.write("wf.star", star(f'return workflow(name = "d", nodes = [command(name = "s", argv = ["true"], {C})])'))
    first, second = (run(project)[1]["run_id"] for _ in range(2))
    layout = StoreLayout(home=project.home)
    store = RunStore(layout)

    closing = OwnerLock(store.folder(first).lock)  # an owner closing after run_completed
    assert closing.try_acquire()
    threading.Timer(0.5, closing.release).start()
    assert maintenance.delete(layout, first, include_plans=False).id == first
    assert not store.folder(first).path.exists()

    stuck = OwnerLock(store.folder(second).lock)
    assert stuck.try_acquire()
    monkeypatch.setattr(maintenance, "OWNER_EXIT_SECONDS", 0.2)
    try:
        with pytest.raises(RunRefused, match="live"):
            maintenance.delete(layout, second, include_plans=False)
    finally:
        stuck.release()
    assert store.folder(second).path.exists()


def test_a_folder_is_named_as_a_folder_with_the_files_run_would_take(project: Project) -> None:
    """`run out` after `export NOTEBOOK out` said "no plan matches 'out'", and `validate out` "a
    workflow entry must be a .star file": each says the argument is a folder, `run` naming the
    workflow files at its top."""
    project.write(
        "out/hello.star", star(f'return workflow(name = "h", nodes = [command(name = "a", argv = ["true"], {C})])')
    )
    project.write("out/notes.txt", "not a workflow\n")
    (project.root / "empty").mkdir()
    ran = project.cli("run", "out", "--yes")
    assert ran.returncode == 2, ran.stderr
    assert "out is a folder, and run takes a plan ID or a workflow file" in ran.stderr
    assert "in it, out/hello.star" in ran.stderr and "notes.txt" not in ran.stderr
    assert "it holds none" in project.cli("run", "empty").stderr
    for verb in ("validate", "plan"):
        checked = project.cli(verb, "out")
        assert checked.returncode == 1 and "out is a folder: give a workflow entry (FILE.star)" in checked.stderr
    other = project.cli("validate", "out/notes.txt")
    assert "out/notes.txt is not a workflow file: give a workflow entry" in other.stderr


def test_logs_of_a_reused_node_are_its_source_attempts(project: Project) -> None:
    """A second run takes `a` (``reuse = True``) from the first without launching it: `logs RUN a`
    shows the output of the attempt it reused (as `result` names that attempt's files), not nothing."""
    project.write("nodes/say.py", "def say():\n    print('from the source')\n    return 1\n")
    project.write(
        "wf.star",
        star(
            'return workflow(name = "t", nodes = [python(name = "a", module = "//nodes/say.py", function = "say", '
            f'access = "read_only", reuse = True, {C})])'
        ),
    )
    _, first = run(project)
    _, second = run(project)
    assert second["run_id"] != first["run_id"] and second["nodes"]["a"]["reused_from"]["run_id"] == first["run_id"]
    assert project.cli("logs", second["run_id"], "a").stdout == "from the source\n"
    assert project.cli("logs", first["run_id"], "a").stdout == "from the source\n"


def test_version_prints_the_installed_version(project: Project) -> None:
    from importlib.metadata import version

    shown = project.cli("--version")
    assert shown.returncode == 0 and shown.stdout == f"rho-notebook {version('rho-notebook')}\n", shown
    assert "--version" in project.cli("--help").stdout


def test_logs_of_a_node_a_fork_took_are_its_source_attempts(project: Project) -> None:
    """A fork copies only the value of a node it takes into its own run: `logs FORK a` shows the
    output of the source run's attempt it took (named in the fork's frozen record)."""
    project.write(
        "wf.star",
        star(
            'return workflow(name = "t", nodes = [command(name = "a", argv = ["echo", "from the source"], '
            f'{C}), command(name = "b", argv = ["false"], needs = ["a"], {C})])'
        ),
    )
    _, data = run(project)
    forked = project.cli("fork", data["run_id"], "--at", "b", "--yes", "--output", "json")
    fork = json.loads(forked.stdout)["run_id"]
    assert fork != data["run_id"]
    assert project.cli("logs", fork, "a").stdout == "from the source\n"
    assert project.cli("logs", fork, "b", "--stream", "stdout").stdout == ""  # b ran anew in the fork: its own


def test_logs_that_print_nothing_say_why_on_stderr(project: Project) -> None:
    """A node that never ran, or ran silently, printed nothing and exited 0 as if its output had
    been lost: one line on stderr says which (stdout stays the node's output, empty)."""
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "q", nodes = [command(name = "a", argv = ["false"], {C}), '
            f'command(name = "b", argv = ["echo", "b"], needs = ["a"], {C})])'
        ),
    )
    _, data = run(project)
    silent = project.cli("logs", data["run_id"], "a")
    assert silent.returncode == 0 and silent.stdout == ""
    assert silent.stderr == "rho-notebook: node a wrote nothing (attempt 1; failure)\n"
    never = project.cli("logs", data["run_id"], "b", "--stream", "stdout")
    assert never.returncode == 0 and never.stdout == ""
    assert never.stderr == "rho-notebook: node b wrote nothing to stdout (it has not run; blocked)\n"
