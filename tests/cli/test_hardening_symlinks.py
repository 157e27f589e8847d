"""A symlink planted anywhere in a run folder is never followed (issue 28, finding 1).

Every store path the reading and writing verbs touch (``status``, ``result``, ``events``, ``logs``,
``record`` on a completed run; ``cancel`` on a run that has not started) is replaced in turn by a
symlink to a copy outside the store, and every verb is called in-process through the CLI's
``main(argv)``. Nothing outside may be opened, listed or written: the outside folders are
watched with inotify (an ``open``, a listing, a create, a write or a rename there is seen, an
``lstat`` is not), and the streams and the value outside hold a marker no output may show. Each
verb ends with an exit code 0-3 and at most one ``rho-notebook`` line on stderr.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rho_notebook.cli.main import main
from tests.conftest import REPO, star

SECRET = "SECRET-9f3c"
"""What the planted copies of streams and values hold: seen in an output, it was read."""

NODE = star(
    'return workflow(name = "sym", nodes = [shell(name = "a", executable = "sh", arguments = ["-c"], '
    'command = "echo \'\\"val-4242\\"\'; echo err-8311 >&2", output = schema.stdout_json(schema.string()), '
    "timeout_seconds = 30, max_output_bytes = 1000)])"
)
ATTEMPT = "nodes/a/attempts/1"
COMPLETED = [
    "manifest.json",
    "graph.json",
    "state.json",
    "events.jsonl",
    "journal.mark",
    "mutation.lock",
    "requests",
    "nodes",
    "nodes/a",
    "nodes/a/attempts",
    ATTEMPT,
    f"{ATTEMPT}/stdout",
    f"{ATTEMPT}/stderr",
    f"{ATTEMPT}/value.json",
    f"{ATTEMPT}/exit.json",
]
"""Entries of the completed run that a verb reads."""
PLANNED = ["manifest.json", "graph.json", "events.jsonl", "journal.mark", "requests", "nodes"]
"""Entries of the run that has not started, that ``cancel`` reads or writes."""
MARKED = {"stdout": SECRET + "\n", "stderr": SECRET + "\n", "value.json": json.dumps(SECRET)}
"""Planted copies whose content is replaced by the marker (the others keep what they held)."""


# -- inotify: was anything outside opened, listed or written? -----------------------------------

_IN_ACCESS, _IN_MODIFY, _IN_ATTRIB, _IN_OPEN = 0x1, 0x2, 0x4, 0x20
_IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x80, 0x100, 0x200
_MASK = _IN_ACCESS | _IN_MODIFY | _IN_ATTRIB | _IN_OPEN | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
_HEADER = struct.Struct("iIII")


class Watch:
    """inotify watches on a folder and every folder below it (links are not followed)."""

    def __init__(self, root: Path) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        self.folders: dict[int, str] = {}
        for folder in [folder for folder, _, _ in os.walk(root)]:  # walked first: the walk opens them
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(folder), _MASK)
            assert wd >= 0, os.strerror(ctypes.get_errno())
            self.folders[wd] = folder
        assert not self.seen()

    def seen(self) -> list[str]:
        """What happened in the watched folders since the last call."""
        found = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return found
            offset = 0
            while offset < len(data):
                wd, mask, _, size = _HEADER.unpack_from(data, offset)
                name = data[offset + _HEADER.size : offset + _HEADER.size + size].rstrip(b"\0").decode()
                found.append(f"{self.folders.get(wd, '?')}/{name} (mask {mask:#x})")
                offset += _HEADER.size + size

    def close(self) -> None:
        os.close(self.fd)


# -- the runs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Base:
    home: Path
    completed: str
    planned: str


def _cli(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "rho_notebook", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    """A store with a completed run of NODE and a run of it that was created, never started."""
    root = tmp_path_factory.mktemp("symlinks")
    workspace = root / "ws"
    (workspace / ".rho").mkdir(parents=True)
    (workspace / "wf.star").write_text(NODE)
    home = root / "home"
    planned = _cli(home, workspace, "plan", "wf.star", "--output", "json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)["plan_id"]
    ran = _cli(home, workspace, "run", plan, "--yes", "--output", "jsonl")
    assert ran.returncode == 0, ran.stderr
    completed = json.loads(ran.stdout.splitlines()[0])["run_id"]
    assert json.loads((home / "workflows/runs" / completed / ATTEMPT / "value.json").read_text()) == "val-4242"
    code = "\n".join(
        [
            "import sys; from pathlib import Path",
            "from rho_notebook.runtime.owner import create_run",
            "from rho_notebook.store.layout import StoreLayout",
            "from rho_notebook.store.plans import PlanStore",
            "layout = StoreLayout(home=Path(sys.argv[1]))",
            "print(create_run(layout, PlanStore(layout).load(sys.argv[2])))",
        ]
    )
    made = subprocess.run(
        [sys.executable, "-c", code, str(home), plan],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    return Base(home=home, completed=completed, planned=made.stdout.strip())


def _plant(run_dir: Path, entry: str, outside: Path) -> None:
    """Move ``run_dir/entry`` to ``outside/entry`` (a marker in streams and values) and put a
    symlink to it in its place."""
    inside = run_dir / entry
    target = outside / entry.replace("/", "_")
    shutil.move(inside, target)
    for path in [target, *(target.rglob("*") if target.is_dir() else [])]:
        if path.name in MARKED and path.is_file():
            path.write_text(MARKED[path.name])
    os.symlink(target, inside)


@contextlib.contextmanager
def _planted(base: Base, tmp_path: Path, run_id: str, entry: str) -> Iterator[tuple[Path, Watch]]:
    home = tmp_path / "home"
    shutil.copytree(base.home, home, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    _plant(home / "workflows" / "runs" / run_id, entry, outside)
    watch = Watch(outside)
    try:
        yield home, watch
    finally:
        watch.close()


def _call(monkeypatch: pytest.MonkeyPatch, home: Path, argv: list[str]) -> tuple[int, str, str]:
    """``rho-notebook ARGV`` in this process: (exit code, stdout, stderr)."""
    monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(home))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def _check(argv: list[str], code: int, out: str, err: str, watch: Watch) -> None:
    shown = f"rho-notebook {' '.join(argv)} -> {code}\nstdout: {out[-1500:]}\nstderr: {err[-1500:]}"
    assert code in (0, 1, 2, 3), shown
    assert "Traceback" not in err, shown
    assert len([line for line in err.splitlines() if line.startswith("rho-notebook")]) <= 1, shown
    assert SECRET not in out and SECRET not in err, shown
    touched = watch.seen()
    assert not touched, f"{shown}\nread or written outside the store: {touched}"


def _verbs(run_id: str, record_dir: Path) -> list[list[str]]:
    return [
        ["status", run_id],
        ["status", run_id, "--output", "json"],
        ["result", run_id],
        ["result", run_id, "--output", "json"],
        ["events", run_id],
        ["logs", run_id, "a", "--stream", "stdout"],
        ["logs", run_id, "a", "--stream", "stderr"],
        ["record", run_id, str(record_dir)],
    ]


@pytest.mark.parametrize("entry", COMPLETED)
def test_reading_verbs_never_follow_a_planted_symlink(
    base: Base, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    record_dir = tmp_path / "recorded"
    with _planted(base, tmp_path, base.completed, entry) as (home, watch):
        for argv in _verbs(base.completed, record_dir):
            code, out, err = _call(monkeypatch, home, argv)
            _check(argv, code, out, err, watch)
    recording = record_dir / "recording.json"
    assert not recording.exists() or SECRET not in recording.read_text()


@pytest.mark.parametrize("entry", PLANNED)
def test_cancel_never_follows_a_planted_symlink(
    base: Base, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    with _planted(base, tmp_path, base.planned, entry) as (home, watch):
        argv = ["cancel", base.planned, "--wait", "0"]
        code, out, err = _call(monkeypatch, home, argv)
        _check(argv, code, out, err, watch)
        assert code != 0, out  # a run folder with a link in it is refused, not cancelled


def test_without_a_planted_symlink_the_verbs_read_the_run(
    base: Base, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same calls on the untouched store succeed: the refusals above are the links'."""
    home = tmp_path / "home"
    shutil.copytree(base.home, home, symlinks=True)
    for argv in _verbs(base.completed, tmp_path / "recorded"):
        code, out, err = _call(monkeypatch, home, argv)
        assert code == 0, (argv, out, err)
    assert "val-4242" in _call(monkeypatch, home, ["result", base.completed])[1]
    code, out, _ = _call(monkeypatch, home, ["cancel", base.planned, "--wait", "0", "--output", "json"])
    assert code == 0 and json.loads(out)["cancellation_state"] == "pending"
    assert [p.name for p in (home / "workflows/runs" / base.planned / "requests").iterdir()][0].startswith("cancel-")
