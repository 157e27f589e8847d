"""Process layer: verified handles (rho_notebook.exec.verify) and the runner (rho_notebook.exec.process).

Every test starts real processes; nothing is mocked. Tests that need to act between verification
and launch call the runner's private ``_prepare``/``_spawn`` steps directly.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import LaunchError, UnsupportedPlatform, VerificationError
from rho_notebook.exec import process, verify
from rho_notebook.exec.cancel import CancelSignal
from rho_notebook.exec.process import (
    ProcessResult,
    ProcessSpec,
    run_process,
)
from rho_notebook.exec.verify import (
    FileIdentity,
    identity_of,
    open_verified,
    open_verified_dir,
    resolve_path,
)
from rho_notebook.model.graph import FrozenExecutable, FrozenFile
from tests.processes import alive

DASH = os.path.realpath("/bin/sh")
PATH_ENV = {"PATH": "/usr/bin:/bin"}


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def frozen(path: Path | str, workspace: Path | None = None) -> FrozenFile:
    real = Path(path)
    data = real.read_bytes()
    if workspace is not None:
        return FrozenFile(path="//" + real.relative_to(workspace).as_posix(), in_workspace=True, sha256=sha(data))
    return FrozenFile(path=str(real), in_workspace=False, sha256=sha(data))


def make_spec(workspace: Path, argv: tuple[str, ...], executable: FrozenExecutable, **overrides: Any) -> ProcessSpec:
    fields: dict[str, Any] = {
        "argv": argv,
        "executable": executable,
        "cwd": workspace,
        "env": dict(PATH_ENV),
        "timeout_seconds": 10.0,
        "max_output_bytes": 64 * 1024,
        "workspace": workspace,
        "kill_grace_seconds": 1.0,
    }
    fields.update(overrides)
    return ProcessSpec(**fields)


def sh(workspace: Path, script: str, **overrides: Any) -> ProcessSpec:
    return make_spec(workspace, ("sh", "-c", script), FrozenExecutable(file=frozen(DASH)), **overrides)


def binary(workspace: Path, path: str, *args: str, **overrides: Any) -> ProcessSpec:
    real = os.path.realpath(path)
    return make_spec(workspace, (Path(path).name, *args), FrozenExecutable(file=frozen(real)), **overrides)


def write_script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


class Run:
    """One run_process call with collecting sinks."""

    def __init__(self) -> None:
        self.stdout: list[bytes] = []
        self.stderr: list[bytes] = []
        self.pid: int | None = None

    async def _out(self, chunk: bytes) -> None:
        self.stdout.append(chunk)

    async def _err(self, chunk: bytes) -> None:
        self.stderr.append(chunk)

    async def _started(self, pid: int) -> None:
        self.pid = pid

    async def go(self, spec: ProcessSpec, cancel: asyncio.Event | None = None) -> ProcessResult:
        return await run_process(
            spec,
            stdout_sink=self._out,
            stderr_sink=self._err,
            cancel=cancel if cancel is not None else asyncio.Event(),
            on_started=self._started,
        )

    @property
    def out(self) -> str:
        return b"".join(self.stdout).decode()

    @property
    def err(self) -> str:
        return b"".join(self.stderr).decode()


def run(spec: ProcessSpec) -> tuple[ProcessResult, Run]:
    collected = Run()
    result = asyncio.run(collected.go(spec))
    return result, collected


def live_group_members(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path.resolve()


# --- exit status -------------------------------------------------------------------------------


def test_exit_code_and_streams(workspace: Path) -> None:
    result, got = run(sh(workspace, "echo out; echo err >&2; exit 7"))
    assert (result.kind, result.exit_code, result.signal) == ("exit", 7, None)
    assert (got.out, got.err) == ("out\n", "err\n")
    assert (result.stdout_bytes, result.stderr_bytes) == (4, 4)
    assert not result.stdout_truncated and not result.stderr_truncated
    assert result.pid == got.pid
    assert result.started_at <= result.ended_at
    assert 0 < result.duration_ms < 5000
    assert result.detail == ""


def test_exit_zero_binary(workspace: Path) -> None:
    result, got = run(binary(workspace, "/bin/true"))
    assert (result.kind, result.exit_code) == ("exit", 0)
    assert got.stdout == [] and got.stderr == []


def test_signal_exit(workspace: Path) -> None:
    result, _ = run(sh(workspace, "kill -USR1 $$; sleep 5"))
    assert (result.kind, result.exit_code, result.signal) == ("signal", None, signal.SIGUSR1)


# --- timeout, cancellation, process tree ---------------------------------------------------------


def test_timeout_kills_the_whole_group(workspace: Path) -> None:
    spec = sh(workspace, "sleep 100 & echo $!; sleep 100 & echo $!; wait", timeout_seconds=0.5)
    began = time.monotonic()
    result, got = run(spec)
    elapsed = time.monotonic() - began
    assert result.kind == "timeout"
    assert result.signal == signal.SIGTERM
    grandchildren = [int(word) for word in got.out.split()]
    assert len(grandchildren) == 2
    assert result.pid is not None
    assert not alive(result.pid)
    assert not any(alive(pid) for pid in grandchildren)
    assert live_group_members(result.pid) == []
    assert 0.5 <= elapsed < 3.0


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(workspace: Path) -> None:
    spec = sh(
        workspace,
        "trap '' TERM; sleep 100 & echo $!; wait; wait",
        timeout_seconds=0.3,
        kill_grace_seconds=0.3,
    )
    result, got = run(spec)
    assert (result.kind, result.signal) == ("timeout", signal.SIGKILL)
    assert result.pid is not None
    assert not alive(int(got.out)) and live_group_members(result.pid) == []
    assert result.duration_ms < 3000


@pytest.mark.parametrize("signal_type", [asyncio.Event, CancelSignal], ids=["event", "cancel_signal"])
def test_cancellation_stops_the_group(workspace: Path, signal_type: type[asyncio.Event]) -> None:
    """A plain Event is awaited by a task; the driver's CancelSignal is watched by a listener."""
    spec = sh(workspace, "sleep 100 & echo $!; wait")

    async def scenario() -> tuple[ProcessResult, Run]:
        cancel = signal_type()
        collected = Run()
        task = asyncio.create_task(collected.go(spec, cancel))
        while not collected.stdout:
            await asyncio.sleep(0.01)
        cancel.set()
        return await task, collected

    result, got = asyncio.run(scenario())
    assert (result.kind, result.signal) == ("cancelled", signal.SIGTERM)
    assert not alive(int(got.out))
    assert result.duration_ms < 3000


def test_cancel_signal_calls_listeners_once_and_forgets_removed_ones() -> None:
    calls: list[str] = []
    cancel = CancelSignal()
    cancel.add_listener(lambda: calls.append("kept"))
    dropped = lambda: calls.append("dropped")  # noqa: E731
    cancel.add_listener(dropped)
    cancel.remove_listener(dropped)
    cancel.remove_listener(dropped)  # a second removal is harmless
    cancel.set()
    cancel.set()
    assert calls == ["kept"] and cancel.is_set()


def test_a_finished_launch_leaves_no_listener_behind(workspace: Path) -> None:
    cancel = CancelSignal()

    async def scenario() -> ProcessResult:
        return await Run().go(binary(workspace, "/bin/true"), cancel)

    assert asyncio.run(scenario()).kind == "exit"
    assert cancel.listener_count == 0


def test_cancel_already_set_launches_nothing(workspace: Path) -> None:
    marker = workspace / "marker"
    spec = sh(workspace, f"touch {marker}")

    async def scenario() -> ProcessResult:
        cancel = asyncio.Event()
        cancel.set()
        return await Run().go(spec, cancel)

    result = asyncio.run(scenario())
    assert (result.kind, result.pid) == ("cancelled", None)
    assert not marker.exists()


def test_cancelling_the_awaiting_task_kills_and_reaps(workspace: Path) -> None:
    spec = binary(workspace, "/bin/sleep", "100")

    async def scenario() -> int:
        collected = Run()
        task = asyncio.create_task(collected.go(spec))
        while collected.pid is None:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        pid = collected.pid
        for _ in range(200):
            if not Path(f"/proc/{pid}").exists():
                break
            await asyncio.sleep(0.01)
        return pid

    pid = asyncio.run(scenario())
    assert not Path(f"/proc/{pid}").exists(), "the background reaper should have reaped the child"


def test_members_left_after_exit_are_stopped(workspace: Path) -> None:
    result, got = run(sh(workspace, "sleep 100 & echo $!"))
    assert (result.kind, result.exit_code) == ("exit", 0)
    assert not alive(int(got.out))
    assert result.duration_ms < 3000


def test_process_that_left_the_group_and_holds_the_pipe(workspace: Path) -> None:
    spec = sh(workspace, "setsid sleep 30 & echo $!; sleep 0.3", kill_grace_seconds=0.2)
    result, got = run(spec)
    escaped = int(got.out)
    try:
        assert (result.kind, result.exit_code) == ("exit", 0)
        assert "stopped reading stdout and stderr" in result.detail
        assert result.duration_ms < 3000
    finally:
        os.kill(escaped, signal.SIGKILL)


def test_sink_failure_kills_the_process_and_propagates(workspace: Path) -> None:
    spec = sh(workspace, "echo boom; exec sleep 100")
    pids: list[int] = []

    async def bad_sink(chunk: bytes) -> None:
        msg = f"disk full while writing {chunk!r}"
        raise OSError(msg)

    async def noop(chunk: bytes) -> None:
        return None

    async def started(pid: int) -> None:
        pids.append(pid)

    async def scenario() -> None:
        await run_process(spec, stdout_sink=bad_sink, stderr_sink=noop, cancel=asyncio.Event(), on_started=started)

    with pytest.raises(OSError, match="disk full"):
        asyncio.run(scenario())
    for _ in range(100):
        if not alive(pids[0]):
            break
        time.sleep(0.01)
    assert not alive(pids[0])


def test_output_reaches_the_sink_while_the_process_runs(workspace: Path) -> None:
    spec = sh(workspace, "echo first; sleep 0.3; echo second")
    seen_alive: list[bool] = []
    collected = Run()

    async def sink(chunk: bytes) -> None:
        if collected.pid is not None:
            seen_alive.append(alive(collected.pid))
        collected.stdout.append(chunk)

    async def scenario() -> ProcessResult:
        return await run_process(
            spec, stdout_sink=sink, stderr_sink=sink, cancel=asyncio.Event(), on_started=collected._started
        )

    result = asyncio.run(scenario())
    assert result.kind == "exit"
    assert collected.out == "first\nsecond\n"
    assert seen_alive[0] is True


# --- output bounds, stdin, environment -----------------------------------------------------------


@pytest.mark.parametrize("limit", [0, 1000, 70000])
def test_output_truncation_keeps_exactly_the_bound(workspace: Path, limit: int) -> None:
    spec = sh(
        workspace,
        "head -c 100000 /dev/zero; head -c 300 /dev/zero >&2",
        max_output_bytes=limit,
    )
    result, got = run(spec)
    assert result.kind == "exit"
    assert len(b"".join(got.stdout)) == limit
    assert (result.stdout_bytes, result.stdout_truncated) == (100000, True)
    assert len(b"".join(got.stderr)) == min(300, limit)
    assert (result.stderr_bytes, result.stderr_truncated) == (300, limit < 300)


def test_stdin_is_closed(workspace: Path) -> None:
    result, got = run(binary(workspace, "/bin/cat"))
    assert (result.kind, result.exit_code, result.stdout_bytes) == ("exit", 0, 0)
    assert result.duration_ms < 2000
    result, got = run(binary(workspace, "/bin/readlink", "/proc/self/fd/0"))
    assert got.out == "/dev/null\n"


def test_environment_is_exactly_the_given_one(workspace: Path) -> None:
    env = {"A": "1", "B": "two words", "EMPTY": ""}
    result, got = run(binary(workspace, "/usr/bin/env", env=env))
    assert result.exit_code == 0
    assert sorted(got.out.splitlines()) == ["A=1", "B=two words", "EMPTY="]
    result, got = run(binary(workspace, "/usr/bin/env", env={}))
    assert got.out == ""


def test_working_directory(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    result, got = run(binary(workspace, "/bin/pwd", "-P", cwd=workspace / "sub"))
    assert got.out == f"{workspace / 'sub'}\n"


# --- scripts -----------------------------------------------------------------------------------


def test_sh_script(workspace: Path) -> None:
    script = write_script(
        workspace / "bin" / "hello.sh",
        "#!/bin/sh\n"
        "printf 'args:%s|\\n' \"$@\"\n"
        "printf 'argv0:'; tr '\\0' '\\n' < /proc/$$/cmdline | head -n 1\n"
        "pwd -P\n",
    )
    (workspace / "sub").mkdir()
    exe = FrozenExecutable(file=frozen(script, workspace), interpreters=(frozen(DASH),))
    spec = make_spec(workspace, ("hello.sh", "a", "b c"), exe, cwd=workspace / "sub")
    result, got = run(spec)
    assert (result.kind, result.exit_code) == ("exit", 0), got.err
    assert got.out == f"args:a|\nargs:b c|\nargv0:/bin/sh\n{workspace / 'sub'}\n"


def test_sh_script_interpreter_arguments_are_passed(workspace: Path) -> None:
    script = write_script(workspace / "strict.sh", "#!/bin/sh -e\nfalse\necho unreachable\n")
    exe = FrozenExecutable(file=frozen(script, workspace), interpreters=(frozen(DASH),), interpreter_args=("-e",))
    result, got = run(make_spec(workspace, ("strict.sh",), exe))
    assert (result.kind, result.exit_code, got.out) == ("exit", 1, "")


def test_env_python_script_runs_the_verified_interpreter_without_path_lookup(workspace: Path) -> None:
    script = write_script(
        workspace / "tool.py",
        "#!/usr/bin/env python3\n"
        "import os, sys\n"
        "argv0 = open('/proc/self/cmdline', 'rb').read().split(b'\\0')[0].decode()\n"
        "print(argv0, sys.argv[1:], sys.argv[0].startswith('/proc/self/fd/'), os.getcwd())\n",
    )
    python = os.path.realpath(sys.executable)
    exe = FrozenExecutable(
        file=frozen(script, workspace),
        interpreters=(frozen("/usr/bin/env"), frozen(python)),
        interpreter_args=("python3",),
    )
    # PATH leads nowhere: env would fail; the verified python3 handle is launched directly.
    spec = make_spec(workspace, ("tool.py", "x", "y"), exe, env={"PATH": "/nonexistent"})
    result, got = run(spec)
    assert (result.kind, result.exit_code) == ("exit", 0), got.err
    assert got.out == f"python3 ['x', 'y'] True {workspace}\n"


def test_env_with_options_is_refused(workspace: Path) -> None:
    script = write_script(workspace / "tool.py", "#!/usr/bin/env -S python3 -u\nprint(1)\n")
    exe = FrozenExecutable(
        file=frozen(script, workspace),
        interpreters=(frozen("/usr/bin/env"), frozen(os.path.realpath(sys.executable))),
        interpreter_args=("-S", "python3 -u"),
    )
    with pytest.raises(LaunchError, match="env options"):
        run(make_spec(workspace, ("tool.py",), exe))


def test_not_executable_is_a_launch_error(workspace: Path) -> None:
    tool = workspace / "tool"
    shutil.copyfile("/usr/bin/true", tool)
    tool.chmod(0o644)
    exe = FrozenExecutable(file=frozen(tool, workspace))
    with pytest.raises(LaunchError, match="could not start 'tool'"):
        run(make_spec(workspace, ("tool",), exe))


# --- verification refusals ---------------------------------------------------------------------


def test_executable_edited_after_freezing_is_refused(workspace: Path) -> None:
    marker = workspace / "marker"
    script = write_script(workspace / "tool.sh", f"#!/bin/sh\ntouch {marker}\n")
    exe = FrozenExecutable(file=frozen(script, workspace), interpreters=(frozen(DASH),))
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho edited\n")
    with pytest.raises(VerificationError) as caught:
        run(make_spec(workspace, ("tool.sh",), exe))
    assert caught.value.reason == "content"
    assert str(script) in caught.value.message and "content digest differs" in caught.value.message
    assert not marker.exists()


def test_edit_keeping_size_and_mtime_is_refused(workspace: Path) -> None:
    script = write_script(workspace / "tool.sh", "#!/bin/sh\necho aaaa\n")
    exe = FrozenExecutable(file=frozen(script, workspace), interpreters=(frozen(DASH),))
    identity = identity_of(script)
    run(make_spec(workspace, ("tool.sh",), exe))
    time.sleep(0.05)
    script.write_text("#!/bin/sh\necho bbbb\n")
    os.utime(script, ns=(identity.mtime_ns, identity.mtime_ns))
    with pytest.raises(VerificationError) as caught:
        run(make_spec(workspace, ("tool.sh",), exe, executable_identities={"//tool.sh": identity}))
    assert caught.value.reason == "content"


def test_same_content_new_inode_refused_when_identity_pinned(workspace: Path) -> None:
    script = write_script(workspace / "tool.sh", "#!/bin/sh\necho ok\n")
    exe = FrozenExecutable(file=frozen(script, workspace), interpreters=(frozen(DASH),))
    pinned = {"//tool.sh": identity_of(script)}
    replacement = write_script(workspace / "tool.sh.new", "#!/bin/sh\necho ok\n")
    os.utime(replacement, ns=(pinned["//tool.sh"].mtime_ns, pinned["//tool.sh"].mtime_ns))
    os.replace(replacement, script)
    with pytest.raises(VerificationError) as caught:
        run(make_spec(workspace, ("tool.sh",), exe, executable_identities=pinned))
    assert caught.value.reason == "identity"
    assert "ino" in caught.value.message and str(script) in caught.value.message
    result, got = run(make_spec(workspace, ("tool.sh",), exe))  # content alone still matches
    assert got.out == "ok\n"


def test_symlink_in_the_path_is_refused(workspace: Path) -> None:
    write_script(workspace / "real" / "tool.sh", "#!/bin/sh\necho ok\n")
    (workspace / "link").symlink_to(workspace / "real")
    (workspace / "alias.sh").symlink_to(workspace / "real" / "tool.sh")
    digest = frozen(workspace / "real" / "tool.sh", workspace).sha256
    for frozen_path, shown in (("//link/tool.sh", f"{workspace}/link"), ("//alias.sh", f"{workspace}/alias.sh")):
        exe = FrozenExecutable(
            file=FrozenFile(path=frozen_path, in_workspace=True, sha256=digest), interpreters=(frozen(DASH),)
        )
        with pytest.raises(VerificationError) as caught:
            run(make_spec(workspace, ("tool.sh",), exe))
        assert caught.value.reason == "symlink"
        assert shown in caught.value.message
    exe = FrozenExecutable(file=frozen(workspace / "real" / "tool.sh", workspace), interpreters=(frozen(DASH),))
    with pytest.raises(VerificationError) as caught:
        run(make_spec(workspace, ("tool.sh",), exe, cwd=workspace / "link"))
    assert caught.value.reason == "symlink"


def test_interpreter_mismatch_is_refused(workspace: Path) -> None:
    script = write_script(workspace / "tool.sh", "#!/bin/sh\necho ok\n")
    wrong = FrozenFile(path=DASH, in_workspace=False, sha256=sha(b"not dash"))
    exe = FrozenExecutable(file=frozen(script, workspace), interpreters=(wrong,))
    with pytest.raises(VerificationError) as caught:
        run(make_spec(workspace, ("tool.sh",), exe))
    assert caught.value.reason == "content" and DASH in caught.value.message


def test_working_directory_identity(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    pinned = identity_of(workspace / "sub")
    (workspace / "sub" / "new-file").write_text("x")  # changes the directory's mtime: still accepted
    result, _ = run(binary(workspace, "/bin/true", cwd=workspace / "sub", cwd_identity=pinned))
    assert result.exit_code == 0
    (workspace / "sub").rename(workspace / "old")
    (workspace / "sub").mkdir()
    with pytest.raises(VerificationError) as caught:
        run(binary(workspace, "/bin/true", cwd=workspace / "sub", cwd_identity=pinned))
    assert caught.value.reason == "identity"


# --- launching through the verified handles ------------------------------------------------------


def test_paths_replaced_after_verification_cannot_select_other_objects(workspace: Path) -> None:
    (workspace / "dir").mkdir()
    script = write_script(
        workspace / "tool.sh",
        '#!/bin/sh\necho original\npwd -P\nfor f in /proc/$$/fd/*; do readlink "$f"; done\n',
    )
    exe = FrozenExecutable(file=frozen(script, workspace), interpreters=(frozen(DASH),))
    spec = make_spec(workspace, ("tool.sh",), exe, cwd=workspace / "dir")

    async def scenario() -> str:
        launch = await process._prepare(spec)
        (workspace / "dir").rename(workspace / "verified-dir")
        (workspace / "dir").mkdir()
        write_script(workspace / "tool.sh.new", "#!/bin/sh\necho replaced\n")
        os.replace(workspace / "tool.sh.new", script)
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        try:
            proc = process._spawn(spec, launch, stdout_fd=write_end, stderr_fd=write_end)
        finally:
            os.close(write_end)
            launch.close()
        with os.fdopen(read_end, "rb") as reader:
            output = reader.read().decode()
        proc.wait()
        return output

    output = asyncio.run(scenario())
    lines = output.splitlines()
    assert lines[:2] == ["original", f"{workspace / 'verified-dir'}"]
    # the working-directory handle is used by chdir and not inherited by the child
    assert f"{workspace / 'verified-dir'}" not in lines[2:]


def test_unsupported_platform_fails_closed(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = workspace / "marker"
    monkeypatch.setattr(sys, "platform", "darwin")
    process._platform_problem.cache_clear()
    try:
        with pytest.raises(UnsupportedPlatform, match="needs Linux"):
            run(sh(workspace, f"touch {marker}"))
    finally:
        monkeypatch.undo()
        process._platform_problem.cache_clear()
    assert not marker.exists()


# --- verify module -----------------------------------------------------------------------------


def test_digest_formats(workspace: Path) -> None:
    tool = workspace / "tool"
    tool.write_bytes(b"data")
    hexdigest = hashlib.sha256(b"data").hexdigest()
    for form in (f"sha256:{hexdigest}", hexdigest, hexdigest.upper()):
        os.close(open_verified(tool, sha256=form, identity=None))
    with pytest.raises(VerificationError) as caught:
        open_verified(tool, sha256="md5:abc", identity=None)
    assert caught.value.reason == "invalid_digest"


def test_returned_descriptor_is_at_offset_zero_and_cloexec(workspace: Path) -> None:
    tool = workspace / "tool"
    tool.write_bytes(b"payload")
    fd = open_verified(tool, sha256=sha(b"payload"), identity=identity_of(tool))
    try:
        assert os.read(fd, 100) == b"payload"
        assert not os.get_inheritable(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: None, "missing"),
        (lambda p: p.mkdir(), "not_regular"),
        (lambda p: os.mkfifo(p), "not_regular"),
    ],
)
def test_open_verified_refusals(workspace: Path, make: Callable[[Path], object], reason: str) -> None:
    target = workspace / "target"
    make(target)
    with pytest.raises(VerificationError) as caught:
        open_verified(target, sha256=sha(b""), identity=None)
    assert caught.value.reason == reason
    assert str(target) in caught.value.message


def test_missing_parent_and_file_as_parent(workspace: Path) -> None:
    with pytest.raises(VerificationError) as caught:
        open_verified(workspace / "nope" / "tool", sha256=sha(b""), identity=None)
    assert caught.value.reason == "missing" and "/nope" in caught.value.message
    (workspace / "file").write_text("")
    with pytest.raises(VerificationError) as caught:
        open_verified(workspace / "file" / "tool", sha256=sha(b""), identity=None)
    assert caught.value.reason == "not_directory"


def test_identity_size_and_mtime_compared(workspace: Path) -> None:
    tool = workspace / "tool"
    tool.write_bytes(b"data")
    pinned = identity_of(tool)
    os.utime(tool, ns=(pinned.mtime_ns, pinned.mtime_ns + 1_000_000_000))
    with pytest.raises(VerificationError) as caught:
        open_verified(tool, sha256=sha(b"data"), identity=pinned)
    assert caught.value.reason == "identity" and "mtime_ns" in caught.value.message
    assert isinstance(pinned, FileIdentity) and pinned.mode & 0o170000 == 0o100000


def test_verification_error_pickles() -> None:
    import pickle

    err = VerificationError("x: differs", path="/x", reason="content")
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), back.message, back.path, back.reason) == (VerificationError, "x: differs", "/x", "content")


def test_open_verified_dir(workspace: Path) -> None:
    fd = open_verified_dir(workspace, identity=identity_of(workspace))
    os.close(fd)
    os.close(open_verified_dir(Path("/"), identity=None))
    (workspace / "f").write_text("")
    with pytest.raises(VerificationError) as caught:
        open_verified_dir(workspace / "f", identity=None)
    assert caught.value.reason == "not_directory"


def test_resolve_path(workspace: Path) -> None:
    assert resolve_path("//", workspace) == workspace
    assert resolve_path("//.", workspace) == workspace
    assert resolve_path("//bin/tool", workspace) == workspace / "bin" / "tool"
    assert resolve_path("/usr/bin/env", workspace) == Path("/usr/bin/env")
    for bad in ("//../etc/passwd", "//a//b", "relative/path", "/usr/../bin"):
        with pytest.raises(VerificationError) as caught:
            resolve_path(bad, workspace)
        assert caught.value.reason == "invalid_path"


def test_fresh_files_are_not_cached_and_cache_keys_include_ctime(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = workspace / "tool"
    tool.write_bytes(b"aaaa")
    os.close(open_verified(tool, sha256=sha(b"aaaa"), identity=None))
    assert verify._DIGESTS.get(os.stat(tool)) is None  # changed within SETTLED_SECONDS
    monkeypatch.setattr(verify, "SETTLED_SECONDS", 0.0)
    os.close(open_verified(tool, sha256=sha(b"aaaa"), identity=None))
    assert verify._DIGESTS.get(os.stat(tool)) is not None
    pinned = identity_of(tool)
    time.sleep(0.05)  # step past one coarse timestamp tick
    tool.write_bytes(b"bbbb")
    os.utime(tool, ns=(pinned.mtime_ns, pinned.mtime_ns))
    with pytest.raises(VerificationError) as caught:
        open_verified(tool, sha256=sha(b"aaaa"), identity=pinned)
    assert caught.value.reason == "content"


def test_large_files_are_hashed_off_the_loop(workspace: Path) -> None:
    big = workspace / "big"
    big.write_bytes(b"x" * (1024 * 1024))

    async def scenario() -> int:
        fd = await verify.open_verified_async(big, sha256=sha(b"x" * (1024 * 1024)), identity=None)
        os.close(fd)
        return fd

    assert asyncio.run(scenario()) >= 0


def test_spec_validation(workspace: Path) -> None:
    with pytest.raises(ValueError, match="argv"):
        ProcessSpec.model_validate({**sh(workspace, "x").model_dump(), "argv": ()})
    with pytest.raises(ValueError, match="environment variable"):
        sh(workspace, "true", env={"A=B": "1"})
    with pytest.raises(ValueError, match="absolute"):
        sh(workspace, "true", cwd=Path("relative"))


@pytest.mark.parametrize(
    ("si_code", "si_status", "expected"),
    [
        (os.CLD_EXITED, 0, ("exit", 0, None, "")),
        (os.CLD_EXITED, 3, ("exit", 3, None, "")),
        (os.CLD_KILLED, signal.SIGKILL, ("signal", None, signal.SIGKILL, "")),
        (os.CLD_DUMPED, signal.SIGSEGV, ("signal", None, signal.SIGSEGV, "")),
        (os.CLD_STOPPED, signal.SIGSTOP, ("abnormal", None, None, f"unexpected wait status code {os.CLD_STOPPED}")),
    ],
)
def test_one_decoding_of_a_wait_status_for_every_child(si_code: int, si_status: int, expected: tuple[Any, ...]) -> None:
    # the launcher's children and the Python fork server's share process.waited
    assert process.waited(si_code, si_status) == expected
