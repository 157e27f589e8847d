"""The damage matrix (issue 28): every kind of store file x every kind of damage x each workflow
form (Starlark, script, item graph) x a completed and an interrupted run.

Each (form, run state) store is built once per module by real ``rho-notebook`` processes; an
interrupted run is one whose owner was SIGKILLed while a late node's command ran (the nodes before
it journaled as succeeded, their files written). Each cell copies that store (symlinks kept as
symlinks), damages one entry in the copy and calls the run verbs in-process through the CLI's
``main(argv)``, each bounded by a deadline (SIGALRM): ``status``, ``result``, ``logs`` (and
``logs --stream stderr`` for the stderr kind), ``events``, ``record``, ``cancel --wait 0``,
``resume`` (on a second damaged copy, so that the cancel request does not decide what resume
does) and ``delete``. Every verb must exit 0-3 with at most one line on stderr (exactly one when
it refuses with 2 or 3), print no traceback and end within its deadline. ``resume`` must never
run again a node whose ``node_finished`` success was journaled before the damage: every node with
a side effect appends a line to its own file in the workspace (outside the store), and the
resumed journal may not launch such a node again. ``test_resume_in_a_real_process`` does the
same through a real ``rho-notebook resume`` process, one sample per kind of damage, and
``test_an_undamaged_copy_resumes`` is the control: without damage, resume finishes the run.

A symlink planted in the store points outside it, at a file (or folder) holding a secret. The
secret may never appear in a verb's output, in what ``record`` writes or anywhere in the store;
the target may never be changed, nor read (its access time is checked where the filesystem
keeps one): the store refuses symlinked entries (docs/running.md, *Store permissions*).

The kinds of store file (paths under ``workflows/``):

=================  ===================================================================================
``journal``        ``runs/RUN/events.jsonl``
``journal_mark``   ``runs/RUN/journal.mark``
``events``         an attempt's ``exit.json`` (the per-attempt copy of its journaled exit event)
``state``          ``runs/RUN/state.json``
``manifest``       ``runs/RUN/manifest.json``
``plan``           ``plans/PLAN/manifest.json`` (the plan folder for *plain file for a folder*)
``graph``          ``runs/RUN/graph.json``
``value``          an attempt's ``value.json``
``stdout``         an attempt's ``stdout``
``stderr``         an attempt's ``stderr``
``requests``       the folder ``runs/RUN/requests/`` (content damage: a cancel request planted in it)
``reuse``          the reuse index, the folder ``reuse/`` (content damage: its entries)
``script_replay``  a script run's ``runs/RUN/script/`` folder (the request its harness replays from)
``frozen_modules`` ``runs/RUN/python/``: the frozen Python modules and harness a resume runs again
=================  ===================================================================================

The damages: ``truncate`` (first half kept), ``empty``, ``delete``, ``flip`` (two bytes flipped),
``garbage`` (binary junk), ``fifo``, ``symlink`` (to an outside file or folder), ``directory``
(an empty folder in place of a file) and ``file_for_folder`` (a plain file in place of the
entry's folder: the attempt, plan, or the folder itself). For a folder kind, the content damages
apply to every file in it. Combinations that do not apply are skipped with the reason.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.cli import main as cli
from rho_notebook.store.journal import read_journal
from rho_notebook.store.run_locks import OwnerLock
from tests.conftest import REPO

SECRET = f"rho-damage-secret-{uuid.uuid4().hex}"
"""What every planted symlink's target holds; it may never show anywhere."""

VERB_SECONDS = 4.0
"""Deadline of one in-process read verb (they take milliseconds): past it, the cell fails as hung."""
RESUME_SECONDS = 30.0
"""Deadline of one resume (in-process or a real process): it may run the rest of the run."""

SLOW = "if [ -e effects/slow ]; then sleep 60; fi; "
"""Prefix of the command the owner is killed in: slow while the store is built, quick on resume."""

# -- the three forms -------------------------------------------------------------------------------

STARLARK = """\
R = schema.record({"total": schema.integer()})

def sh(name, command, needs):
    return shell(name = name, executable = "sh", arguments = ["-c"], command = command, needs = needs,
                 timeout_seconds = 120, max_output_bytes = 10000)

def py(name, needs):
    return python(name = name, module = "//steps.py", function = "step", needs = needs, args = {"tag": name},
                  output = R, access = "read_only", reuse = True, timeout_seconds = 120, max_output_bytes = 10000)

def build(inputs):
    return workflow(name = "damage", nodes = [
        sh("a", "echo ran >> effects/a.log; echo out-a", []),
        py("p", ["a"]),
        sh("b", "echo ran >> effects/b.log; echo out-b; echo err-b >&2", ["p"]),
        sh("c", "SLOWecho ran >> effects/c.log", ["b"]),
        py("q", ["c"]),
    ])

WORKFLOW = define(inputs = {}, build = build)
""".replace("SLOW", SLOW)

STEPS = """\
def step(tag):
    with open("effects/" + tag + ".log", "a") as f:
        f.write("ran\\n")
    return {"total": len(tag)}
"""

SCRIPT = """\
from rho_notebook.script import emit_output, run_command


def sh(command, **options):
    return run_command(argv=["sh", "-c", command], timeout_seconds=120, max_output_bytes=10000, **options)


one = sh("echo ran >> effects/s1.log; echo out-1")
two = sh("echo ran >> effects/s2.log; echo err-2 >&2; echo '{\\"n\\": 2}'", after=[one])
three = sh("SLOWecho ran >> effects/s3.log; echo 3", after=[two], recovery="rerun")
emit_output({"done": True})
""".replace("SLOW", SLOW)

ITEM_GRAPH = """\
name: damage
inputs:
  score: {type: integer}
steps:
  - {id: start, kind: set, params: {fields: {label: "=ticket {{ $json.score }}"}}}
  - id: cmd
    kind: command
    params:
      argv: [sh, -c, "echo ran >> effects/g-cmd.log; echo err-cmd >&2; echo '{\\"n\\": 3}'"]
      into: res
  - id: calc
    kind: code
    params:
      source: |
        def run(item):
            return dict(item, twice = item["score"] * 2)
  - id: slow
    kind: command
    params:
      argv: [sh, -c, "SLOWecho ran >> effects/g-slow.log; echo 5"]
      into: res2
  - {id: done, kind: output}
edges:
  - {from: start, to: cmd}
  - {from: cmd, to: calc}
  - {from: calc, to: slow}
  - {from: slow, to: done}
""".replace("SLOW", SLOW)


@dataclass(frozen=True)
class Form:
    name: str
    files: dict[str, str]
    entry: str
    run_args: tuple[str, ...]
    slow: str
    """The node whose command runs while the owner of the interrupted run is killed."""
    log_node: str
    """A node that finished before the kill with stdout, stderr and exit.json."""
    value_node: str
    """A node that finished before the kill with a value.json."""
    effects: dict[str, str]
    """Node -> the workspace file its command appends a line to each time it runs."""
    resume_flags: tuple[str, ...]


FORMS: dict[str, Form] = {
    "starlark": Form(
        name="starlark",
        files={"wf.star": STARLARK, "steps.py": STEPS},
        entry="wf.star",
        run_args=(),
        slow="c",
        log_node="b",
        value_node="p",
        effects={name: f"effects/{name}.log" for name in ("a", "p", "b", "c", "q")},
        resume_flags=("--recover-uncertain",),
    ),
    "script": Form(
        name="script",
        files={"flow.py": SCRIPT},
        entry="flow.py",
        run_args=(),
        slow="call-3",
        log_node="call-2",
        value_node="call-2",
        effects={f"call-{n}": f"effects/s{n}.log" for n in (1, 2, 3)},
        resume_flags=(),
    ),
    "graph": Form(
        name="graph",
        files={"damage.graph.yaml": ITEM_GRAPH},
        entry="damage.graph.yaml",
        run_args=("--input", "score=4"),
        slow="slow",
        log_node="cmd",
        value_node="cmd",
        effects={"cmd": "effects/g-cmd.log", "slow": "effects/g-slow.log"},
        resume_flags=("--recover-uncertain",),
    ),
}
STATES = ("completed", "interrupted")

# -- the matrix ------------------------------------------------------------------------------------

RUN_FILES = {
    "journal": "events.jsonl",
    "journal_mark": "journal.mark",
    "state": "state.json",
    "manifest": "manifest.json",
    "graph": "graph.json",
}
ATTEMPT_FILES = {"events": "exit.json", "value": "value.json", "stdout": "stdout", "stderr": "stderr"}
FOLDER_KINDS = ("requests", "reuse", "script_replay", "frozen_modules")
KINDS = (
    "journal",
    "journal_mark",
    "events",
    "state",
    "manifest",
    "plan",
    "graph",
    "value",
    "stdout",
    "stderr",
    "requests",
    "reuse",
    "script_replay",
    "frozen_modules",
)
CONTENT_DAMAGES = ("truncate", "empty", "flip", "garbage")
DAMAGES = ("truncate", "empty", "delete", "flip", "garbage", "fifo", "symlink", "directory", "file_for_folder")

GARBAGE = b'\x00\xff\xfe{"seq": \x01\x7f\xc3(\n\x1b[31m not json \x9c\x00\n\r\n{"kind": "node_finished"\n' * 3


def not_applicable(form: str, state: str, kind: str, damage: str) -> str | None:
    """Why a cell does not apply (it is skipped with this reason), or None."""
    del state
    if kind == "reuse" and form != "starlark":
        return "only Starlark python nodes declare reuse = True: script and item-graph runs keep no reuse index"
    if kind == "script_replay" and form != "script":
        return "only script runs keep replay data (runs/RUN/script/)"
    if kind == "frozen_modules" and form == "graph":
        return "an item-graph run freezes no Python modules (no runs/RUN/python/)"
    if kind in FOLDER_KINDS and damage == "directory":
        return "the entry already is a directory"
    if kind in ("journal_mark", "state", "manifest", "graph") and damage == "file_for_folder":
        return "its folder is the run folder, replaced by a plain file in the journal cell"
    return None


def _cells() -> Iterator[Any]:
    for form in FORMS:
        for state in STATES:
            for kind in KINDS:
                for damage in DAMAGES:
                    marks: list[Any] = []
                    skip = not_applicable(form, state, kind, damage)
                    if skip is not None:
                        marks.append(pytest.mark.skip(reason=f"{kind} x {damage} ({form}): {skip}"))
                    yield pytest.param(form, state, kind, damage, marks=marks, id=f"{form}-{state}-{kind}-{damage}")


RESUME_SAMPLES = {
    "truncate": ("starlark", "journal"),
    "empty": ("script", "value"),
    "delete": ("graph", "journal_mark"),
    "flip": ("script", "journal"),
    "garbage": ("starlark", "state"),
    "fifo": ("graph", "value"),
    "symlink": ("script", "journal"),
    "directory": ("graph", "state"),
    "file_for_folder": ("starlark", "requests"),
}
"""One real ``rho-notebook resume`` process per damage: damage -> (form, kind), interrupted runs."""


def _resume_samples() -> Iterator[Any]:
    for damage, (form, kind) in RESUME_SAMPLES.items():
        assert not_applicable(form, "interrupted", kind, damage) is None
        yield pytest.param(form, kind, damage, id=f"{damage}-{form}-{kind}")


# -- building the stores ---------------------------------------------------------------------------


@dataclass
class Base:
    """One run, completed or interrupted, in a store no cell touches (cells damage copies)."""

    form: Form
    state: str
    root: Path
    home: Path
    run_id: str
    plan_id: str
    succeeded: frozenset[str]
    """Nodes whose node_finished success is in the journal as built."""
    journaled: int
    """How many records the journal held as built."""

    def run_dir(self, home: Path) -> Path:
        return home / "workflows" / "runs" / self.run_id

    def attempt_dir(self, home: Path, node: str) -> Path:
        return self.run_dir(home) / "nodes" / node / "attempts" / "1"

    def target(self, home: Path, kind: str) -> Path:
        """The entry of ``kind`` in the store at ``home``."""
        run = self.run_dir(home)
        if kind in RUN_FILES:
            return run / RUN_FILES[kind]
        if kind == "plan":
            return home / "workflows" / "plans" / self.plan_id / "manifest.json"
        if kind in ("events", "stdout", "stderr"):
            return self.attempt_dir(home, self.form.log_node) / ATTEMPT_FILES[kind]
        if kind == "value":
            return self.attempt_dir(home, self.form.value_node) / "value.json"
        folders = {
            "requests": run / "requests",
            "reuse": home / "workflows" / "reuse",
            "script_replay": run / "script",
            "frozen_modules": run / "python",
        }
        return folders[kind]

    def effect_counts(self) -> dict[str, int]:
        counts = {}
        for node, relative in self.form.effects.items():
            path = self.root / relative
            counts[node] = len(path.read_text().splitlines()) if path.exists() else 0
        return counts

    def copy_to(self, home: Path) -> None:
        shutil.copytree(self.home, home, symlinks=True, copy_function=_copy_entry)


def _copy_entry(source: str, target: str) -> None:
    """shutil.copy2, except that a socket (the script channel a killed owner left) is copied as a
    socket nobody listens on, as the owner left it."""
    if stat.S_ISSOCK(os.lstat(source).st_mode):
        with tempfile.TemporaryDirectory(prefix="dmx") as short, socket.socket(socket.AF_UNIX) as stale:
            stale.bind(f"{short}/s")  # a short path (AF_UNIX paths hold 107 bytes), then moved
            with contextlib.suppress(OSError):  # another filesystem: the copy goes without it
                os.rename(f"{short}/s", target)
        return
    shutil.copy2(source, target)


def _env(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "RHO_NOTEBOOK_FAILPOINT"}
    env["RHO_NOTEBOOK_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cli(root: Path, home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rho_notebook", *args],
        cwd=root,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _run_target(form: Form, root: Path, home: Path) -> str:
    if form.entry.endswith(".star"):
        planned = _cli(root, home, "plan", form.entry, "--output", "json")
        assert planned.returncode == 0, planned.stderr
        return str(json.loads(planned.stdout)["plan_id"])
    return form.entry


def _gone(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return fields[0] in ("Z", "X")


def _stop(pid: int) -> None:
    """SIGKILL ``pid``'s process group and ``pid`` itself, then wait (bounded) until it is gone."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _interrupt(form: Form, root: Path, home: Path, target: str, wanted: Callable[[], list[Path]]) -> None:
    """Run ``target`` and SIGKILL its owner (the process ``run`` starts and follows) while
    ``form.slow`` runs, once the ``wanted()`` files exist (computed again each time: the run folder
    appears after the start); the CLI that followed it then exits 1 (the run needs recovery)."""
    (root / "effects" / "slow").touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", "run", target, *form.run_args, "--yes", "--output", "jsonl"],
        cwd=root,
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    children: list[int] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            record = json.loads(line) if line.startswith("{") else {}
            if record.get("kind") == "script_launched":
                children.append(int(record["pid"]))
            if record.get("kind") == "process_started" and record.get("node") == form.slow:
                children.append(int(record["pid"]))
                run_id = str(record["run_id"])
                break
        else:
            raise AssertionError(f"{form.name}: {form.slow} never started: {proc.communicate()[1]}")
        deadline = time.monotonic() + 30
        while missing := [str(path) for path in wanted() if not path.exists()]:
            assert time.monotonic() < deadline, f"never written: {missing}"
            time.sleep(0.01)
        owner = OwnerLock.holder(home / "workflows" / "runs" / run_id / "mutation.lock")
        assert owner, f"{form.name}: the run has no live owner"
        os.kill(owner, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        watchdog.cancel()
        for pid in children:
            _stop(pid)
        (root / "effects" / "slow").unlink()
    assert proc.returncode == 1


def build(form: Form, state: str, folder: Path) -> Base:
    root = folder / "ws"
    home = folder / "home"
    (root / ".rho").mkdir(parents=True)
    (root / "effects").mkdir()
    for name, text in form.files.items():
        (root / name).write_text(text)
    target = _run_target(form, root, home)
    if state == "completed":
        ran = _cli(root, home, "run", target, *form.run_args, "--yes")
        assert ran.returncode == 0, ran.stdout + ran.stderr
    runs = sorted((home / "workflows" / "runs").iterdir()) if state == "completed" else []
    if state == "interrupted":

        def wanted() -> list[Path]:
            """The files the cells damage, written by the owner (its writer thread) before the kill."""
            runs_dir = home / "workflows" / "runs"
            found = sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []
            if not found:
                return [runs_dir / "(the run)"]
            started = Base(form, state, root, home, found[0].name, "", frozenset(), 0)
            paths = [started.target(home, kind) for kind in ("value", "stdout", "stderr", "events")]
            if form.name == "starlark":
                reuse = home / "workflows" / "reuse"
                paths.append(next(reuse.rglob("*.json"), reuse / "(an entry)") if reuse.is_dir() else reuse)
            return paths

        _interrupt(form, root, home, target, wanted)
        runs = sorted((home / "workflows" / "runs").iterdir())
    assert len(runs) == 1, runs
    run_id = runs[0].name
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    read = read_journal(runs[0] / "events.jsonl")
    assert read.damage is None and not read.torn
    succeeded = frozenset(
        record["node"]
        for record in read.events
        if record.get("kind") == "node_finished" and record.get("state") == "success"
    )
    base = Base(form, state, root, home, run_id, manifest["plan_id"], succeeded, len(read.events))
    expected = {form.log_node, form.value_node}
    assert expected <= succeeded, (succeeded, read.events[-3:])
    if state == "interrupted":
        assert form.slow not in succeeded
    for kind in KINDS:
        if any(not_applicable(form.name, state, kind, damage) is None for damage in DAMAGES):
            assert base.target(home, kind).exists(), f"{form.name}/{state}: no {kind} at {base.target(home, kind)}"
    if form.name == "starlark":
        assert list((home / "workflows" / "reuse").rglob("*.json")), "no reuse entry"
    return base


class Stores:
    """The six built stores, each built on first use."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.built: dict[tuple[str, str], Base] = {}

    def get(self, form: str, state: str) -> Base:
        key = (form, state)
        if key not in self.built:
            self.built[key] = build(FORMS[form], state, self.folder / f"{form}-{state}")
        return self.built[key]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    return Stores(tmp_path_factory.mktemp("damage-stores"))


# -- damaging a copy -------------------------------------------------------------------------------


def _atime_is_kept(folder: Path) -> bool:
    """Whether this filesystem updates a file's access time on read (relatime, strictatime)."""
    probe = folder / "atime-probe"
    probe.write_text("x")
    info = probe.stat()
    os.utime(probe, ns=(info.st_mtime_ns - 10**12, info.st_mtime_ns))
    before = probe.stat().st_atime_ns
    probe.read_text()
    kept = probe.stat().st_atime_ns != before
    probe.unlink()
    return kept


def _with_secret(data: bytes, name: str) -> bytes:
    """What a planted link's target holds: ``data`` with the secret where a reader would show it."""
    if name.endswith(".jsonl"):
        return data  # an exact copy: reading it through the link shows in its access time
    try:
        value = json.loads(data)
    except ValueError:
        return SECRET.encode() + b"\n" + data
    if isinstance(value, dict):
        return json.dumps({**value, "leak": SECRET}, indent=2).encode() + b"\n"
    return json.dumps({"leak": SECRET}).encode() + b"\n"


@dataclass
class Outside:
    """Targets of planted links, outside the store: never read, never changed."""

    folder: Path
    made: dict[str, Path] = field(default_factory=dict)
    keeps_atime: bool = False
    contents: dict[str, Any] = field(default_factory=dict)
    atimes: dict[str, int] = field(default_factory=dict)

    def like(self, original: Path) -> Path:
        """A file or folder standing for ``original``, holding the secret (made once per cell)."""
        if original.name in self.made:
            return self.made[original.name]
        self.folder.mkdir(exist_ok=True)
        target = self.folder / original.name
        if original.is_dir():
            shutil.copytree(original, target, symlinks=True, copy_function=_copy_entry)
            for path in sorted(target.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    path.write_bytes(_with_secret(path.read_bytes(), path.name))
        else:
            target.write_bytes(_with_secret(original.read_bytes(), original.name))
        self.made[original.name] = target
        return target

    def _entries(self) -> Iterator[Path]:
        for parent, folders, names in os.walk(self.folder, followlinks=False):
            yield from (Path(parent) / name for name in sorted(folders + names))

    def seal(self, keeps_atime: bool) -> None:
        """Note what the targets hold, then age their access times (to see a later read)."""
        self.keeps_atime = keeps_atime
        self.contents = self._snapshot()
        self.atimes = {}
        if not keeps_atime:
            return
        for path in sorted(self._entries(), key=lambda p: -len(p.parts)):
            info = path.lstat()
            os.utime(path, ns=(info.st_mtime_ns - 10**12, info.st_mtime_ns), follow_symlinks=False)
            self.atimes[str(path)] = path.lstat().st_atime_ns

    def check(self) -> list[str]:
        """What was done to the targets since :meth:`seal`; then seal again (for the next verb)."""
        if not self.made:
            return []
        found = self.problems()
        self.seal(self.keeps_atime)  # reading the contents in problems() touched the access times
        return found

    def _snapshot(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for path in self._entries():
            relative = str(path.relative_to(self.folder))
            info = path.lstat()
            found[relative] = path.read_bytes() if stat.S_ISREG(info.st_mode) else stat.S_IFMT(info.st_mode)
        return found

    def problems(self) -> list[str]:
        found = []
        for name, atime in self.atimes.items():
            if not os.path.lexists(name):
                found.append(f"the outside target {name} was removed")
            elif os.lstat(name).st_atime_ns != atime:
                found.append(f"the outside target {name} was read through a planted symlink")
        now = self._snapshot()
        if now != self.contents:
            changed = sorted(set(now) ^ set(self.contents)) or sorted(
                name for name in now if now[name] != self.contents.get(name)
            )
            found.append(f"the outside target {self.folder} was changed through a planted symlink: {changed}")
        return found


def _files_in(folder: Path) -> list[Path]:
    """The regular files under ``folder``, never following a link."""
    found = []
    for parent, _, names in os.walk(folder, followlinks=False):
        found += [path for name in names if stat.S_ISREG((path := Path(parent) / name).lstat().st_mode)]
    return sorted(found)


def _replace(path: Path) -> None:
    """Remove whatever is at ``path`` (a file, a folder, a link, a FIFO)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _damage_bytes(path: Path, damage: str) -> None:
    data = path.read_bytes()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = b""
    elif damage == "flip":
        flipped = bytearray(data)
        if flipped:
            flipped[len(flipped) // 2] ^= 0x01
            flipped[len(flipped) // 3] ^= 0x80
        data = bytes(flipped)
    elif damage == "garbage":
        data = GARBAGE
    path.write_bytes(data)


CANCEL_ID = "01a20000-0000-7000-8000-00000000dead"


def damage_store(base: Base, home: Path, kind: str, damage: str, outside: Outside) -> list[Path]:
    """Damage the entry of ``kind`` in the copy at ``home``; returns the FIFOs planted."""
    target = base.target(home, kind)
    folder_kind = kind in FOLDER_KINDS
    if kind == "requests" and damage in CONTENT_DAMAGES:
        request = {"request_id": CANCEL_ID, "by": "damage-matrix", "at": 1.0}
        (target / f"cancel-{CANCEL_ID}.json").write_text(json.dumps(request) + "\n")
    if damage in CONTENT_DAMAGES:
        files = _files_in(target) if folder_kind else [target]
        if not files:
            pytest.skip(f"{kind} holds no file to damage")
        for path in files:
            _damage_bytes(path, damage)
        return []
    if damage == "file_for_folder" and not folder_kind:
        target = target.parent if kind != "journal" else base.run_dir(home)
    if damage == "symlink":
        link_to = outside.like(target)
        _replace(target)
        target.symlink_to(link_to)
        return []
    _replace(target)
    if damage == "fifo":
        os.mkfifo(target, 0o600)
        return [target]
    if damage == "directory":
        target.mkdir(mode=0o700)
    elif damage == "file_for_folder":
        target.write_bytes(b"not a folder\n")
    return []


def unblock(fifos: list[Path]) -> None:
    """Release anything blocked opening one of ``fifos`` (a thread stuck there outlives the test)."""
    for fifo in fifos:
        for flags in (os.O_WRONLY, os.O_RDONLY):
            for _ in range(4):
                try:
                    fd = os.open(fifo, flags | os.O_NONBLOCK)
                except OSError as err:
                    if err.errno in (errno.ENXIO, errno.ENOENT, errno.ENOTDIR):
                        break
                    raise
                os.close(fd)


# -- calling verbs ---------------------------------------------------------------------------------


class Hung(BaseException):
    """Raised by SIGALRM in a verb that overran its deadline (BaseException: nothing swallows it)."""


_PLANTED_FIFOS: list[Path] = []
"""The FIFOs of the cell being run: the deadline releases whatever blocks on them, so that the
verb (and its event loop's shutdown, which joins its threads) can end."""


def _on_alarm(signum: int, frame: Any) -> None:
    unblock(_PLANTED_FIFOS)
    stacks = []
    for ident, top in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        frames = traceback.extract_stack(top)
        where = [frames[-1], *[f for f in frames if "rho_notebook" in f.filename][-2:]]
        stacks.append(" <- ".join(f"{_short(f.filename)}:{f.lineno} {f.name}" for f in where))
    raise Hung("; other threads: " + " | ".join(stacks) if stacks else "")


@dataclass
class Call:
    argv: list[str]
    code: int | None
    out: str
    err: str
    problem: str | None
    seconds: float


def _frames(exc: BaseException, count: int = 3) -> str:
    """The exception and its innermost ``count`` frames in the package (else in any file)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "rho_notebook" in f.filename] or frames
    where = " <- ".join(f"{_short(f.filename)}:{f.lineno} {f.name}" for f in reversed(ours[-count:]))
    return f"{type(exc).__name__}: {str(exc)[:200]} at {where}"


def _short(filename: str) -> str:
    parts = Path(filename).parts
    return "/".join(parts[parts.index("rho_notebook") :]) if "rho_notebook" in parts else parts[-1]


def invoke(
    argv: list[str], capfd: pytest.CaptureFixture[str], *, limit: float, fifos: list[Path] | None = None
) -> Call:
    """``main(argv)`` in this process, bounded by ``limit`` seconds (SIGALRM, re-armed every second
    in case the first one is swallowed); its exit code, stdout, stderr and any escape."""
    capfd.readouterr()
    _PLANTED_FIFOS[:] = fifos or []
    code: int | None = None
    problem: str | None = None
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    start = time.monotonic()
    try:
        signal.setitimer(signal.ITIMER_REAL, limit, 1.0)
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            gc.unfreeze()  # main() freezes what exists for the life of a process; this one goes on
    except Hung as exc:
        problem = f"hung past {limit:.0f} s: {_frames(exc)}"
    except BaseException as exc:  # a traceback the CLI would print
        problem = f"traceback: {_frames(exc)}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capfd.readouterr()
    return Call(argv, code, out, err, problem, time.monotonic() - start)


def judge(call: Call, *, streams_stderr: bool = False) -> list[str]:
    """What is wrong with one verb's answer: an escape, an exit code outside 0-3, more than one
    line on stderr (unless the verb prints a node's stderr there), a refusal without a message, a
    traceback printed, the secret shown."""
    label = " ".join(a if len(a) < 20 else a[:13] for a in call.argv)
    if call.problem is not None:
        return [f"{label}: {call.problem}"]
    found = []
    lines = [line for line in call.err.splitlines() if line.strip()]
    if call.code not in (0, 1, 2, 3):
        found.append(f"{label}: exit {call.code}")
    if len(lines) > 1 and not streams_stderr:
        found.append(f"{label}: {len(lines)} lines on stderr: {' | '.join(line[:160] for line in lines[:3])}")
    if call.code in (2, 3) and not lines:
        found.append(f"{label}: exit {call.code} without a message on stderr")
    if "Traceback" in call.err:
        found.append(f"{label}: prints a traceback")
    if SECRET in call.out or SECRET in call.err:
        found.append(f"{label}: shows the content of a planted symlink's target")
    return found


def leaked_into(folders: list[Path]) -> list[str]:
    """Files under ``folders`` (never following links) that hold the secret."""
    found = []
    for folder in folders:
        if not folder.exists():
            continue
        for path in _files_in(folder):
            with contextlib.suppress(OSError):
                if SECRET.encode() in path.read_bytes():
                    found.append(f"the secret was copied into {path}")
    return found


def now() -> str:
    """The time as journal records write their ``at`` (so that the two compare as text)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def launched_again(base: Base, home: Path, since: str) -> list[str]:
    """Nodes journaled as succeeded before the damage that the journal launches again at or after
    ``since`` (:func:`now`)."""
    path = base.run_dir(home) / "events.jsonl"
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return []
        records = read_journal(path).events
    except Exception:  # an unreadable journal launched nothing new
        return []
    return sorted(
        {
            f"{record['node']} (seq {record.get('seq')})"
            for record in records
            if record.get("kind") == "node_launched"
            and record.get("node") in base.succeeded
            and str(record.get("at", "")) >= since
        }
    )


def reran(base: Base, before: dict[str, int], after: dict[str, int]) -> list[str]:
    return [
        f"{node} ran again (its success was journaled): {before[node]} -> {after[node]} runs"
        for node in sorted(base.succeeded & set(base.form.effects))
        if after[node] != before[node]
    ]


# -- the matrix ------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def one_parser() -> Iterator[None]:
    """main() builds its argument parser once, as a process does (building it took half the time
    of an in-process verb)."""
    parser = cli.build_parser()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "build_parser", lambda: parser)
        yield


@pytest.fixture(scope="module")
def keeps_atime(tmp_path_factory: pytest.TempPathFactory) -> bool:
    return _atime_is_kept(tmp_path_factory.mktemp("atime"))


@pytest.mark.parametrize(("form", "state", "kind", "damage"), list(_cells()))
def test_damaged_store(
    form: str,
    state: str,
    kind: str,
    damage: str,
    stores: Stores,
    keeps_atime: bool,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = stores.get(form, state)
    outside = Outside(tmp_path / "outside")
    reading, resuming = tmp_path / "home-read", tmp_path / "home-resume"
    fifos: list[Path] = []
    for home in (reading, resuming):
        base.copy_to(home)
        fifos += damage_store(base, home, kind, damage, outside)
    outside.seal(keeps_atime)
    monkeypatch.chdir(base.root)
    monkeypatch.delenv("RHO_NOTEBOOK_FAILPOINT", raising=False)
    run = base.run_id
    record_dir = tmp_path / "record"
    problems: list[str] = []
    leaks: set[str] = set()

    def verb(home: Path, *argv: str, limit: float = VERB_SECONDS, streams_stderr: bool = False) -> None:
        monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(home))
        call = invoke(list(argv), capfd, limit=limit, fifos=fifos)
        unblock(fifos)
        problems.extend(judge(call, streams_stderr=streams_stderr))
        if outside.made:  # a symlink was planted: its target's secret may show nowhere
            problems.extend(f"{argv[0]}: {found}" for found in outside.check())
            for found in leaked_into([record_dir, home]):
                if found not in leaks:
                    leaks.add(found)
                    problems.append(f"{argv[0]}: {found}")

    verb(reading, "status", run)
    verb(reading, "result", run)
    verb(reading, "logs", run, base.form.log_node, "--stream", "stdout")
    if kind == "stderr":  # the node's stderr is printed on stderr: no line count, the rest holds
        verb(reading, "logs", run, base.form.log_node, "--stream", "stderr", streams_stderr=True)
    verb(reading, "events", run)
    verb(reading, "record", run, str(record_dir))
    verb(reading, "cancel", run, "--wait", "0")
    before, since = base.effect_counts(), now()
    verb(resuming, "resume", run, "--yes", *base.form.resume_flags, limit=RESUME_SECONDS)
    problems.extend(reran(base, before, base.effect_counts()))
    problems.extend(f"resume launched again: {node}" for node in launched_again(base, resuming, since))
    verb(reading, "delete", run, "--yes")
    assert not problems, "\n".join(dict.fromkeys(problems))
    for copy in (reading, resuming, record_dir, outside.folder):  # ~700 cells: keep only failures
        shutil.rmtree(copy, ignore_errors=True)


@pytest.mark.parametrize(("form", "kind", "damage"), list(_resume_samples()))
def test_resume_in_a_real_process(
    form: str, kind: str, damage: str, stores: Stores, keeps_atime: bool, tmp_path: Path
) -> None:
    base = stores.get(form, "interrupted")
    outside = Outside(tmp_path / "outside")
    home = tmp_path / "home"
    base.copy_to(home)
    fifos = damage_store(base, home, kind, damage, outside)
    outside.seal(keeps_atime)
    before, since = base.effect_counts(), now()
    try:
        resumed = _cli(base.root, home, "resume", base.run_id, "--yes", *base.form.resume_flags, timeout=RESUME_SECONDS)
    except subprocess.TimeoutExpired:
        unblock(fifos)
        pytest.fail(f"resume hung past {RESUME_SECONDS} s")
    problem = None
    if "Traceback" in resumed.stderr:
        lines = [line.strip() for line in resumed.stderr.splitlines() if line.strip()]
        where = [line for line in lines if line.startswith("File ")][-2:]
        problem = f"traceback: {lines[-1][:200]} at {' <- '.join(reversed(where))}"
    call = Call(["resume", base.run_id], resumed.returncode, resumed.stdout, resumed.stderr, problem, 0.0)
    problems = judge(call)
    problems += reran(base, before, base.effect_counts())
    problems += [f"resume launched again: {node}" for node in launched_again(base, home, since)]
    problems += outside.check()
    problems += leaked_into([home])
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("form", FORMS)
def test_an_undamaged_copy_resumes(
    form: str,
    state: str,
    stores: Stores,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control cell: on a copy without damage every verb answers, and resume finishes an
    interrupted run (so the matrix's resumes do run the rest of the run) without a rerun."""
    base = stores.get(form, state)
    home = tmp_path / "home"
    base.copy_to(home)
    monkeypatch.chdir(base.root)
    monkeypatch.setenv("RHO_NOTEBOOK_HOME", str(home))
    before, since = base.effect_counts(), now()
    resumed = invoke(["resume", base.run_id, "--yes", *base.form.resume_flags], capfd, limit=RESUME_SECONDS)
    assert judge(resumed) == []
    assert resumed.code == (3 if state == "completed" else 0), resumed.out + resumed.err
    assert reran(base, before, base.effect_counts()) == []
    assert launched_again(base, home, since) == []
    after = base.effect_counts()
    if state == "interrupted":
        assert after[base.form.slow] == before[base.form.slow] + 1, "the interrupted node ran on resume"
        records = read_journal(base.run_dir(home) / "events.jsonl").events
        launched = [r["node"] for r in records if r["kind"] == "node_launched" and r["at"] >= since]
        assert base.form.slow in launched, "the journal's times compare with now()"
    shown = invoke(["status", base.run_id, "--output", "json"], capfd, limit=VERB_SECONDS)
    assert judge(shown) == [] and shown.code == 0
    assert json.loads(shown.out)["outcome"] == "success"
    for argv in (["result", base.run_id], ["events", base.run_id], ["record", base.run_id, str(tmp_path / "rec")]):
        answered = invoke(argv, capfd, limit=VERB_SECONDS)
        assert judge(answered) == [] and answered.code == 0, answered
