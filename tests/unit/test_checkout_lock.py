"""The checkout lock: fair in-process readers-writer lock, cancellation, cross-process flock."""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import StoreError
from rho_notebook.runtime.checkout import CheckoutLock, FairReadWriteLock
from rho_notebook.store.layout import StoreLayout

KEY = "0123abcd" * 8


async def settle() -> None:
    """Let every ready task run until the loop is quiet (no sleeps involved)."""
    for _ in range(20):
        await asyncio.sleep(0)


class Holder:
    """A task that takes a lock through ``enter`` and holds it until ``release()``."""

    def __init__(self, name: str, enter: Callable[[], AbstractAsyncContextManager[None]], log: list[str]) -> None:
        self.name = name
        self.inside = asyncio.Event()
        self.leave = asyncio.Event()
        self.task = asyncio.ensure_future(self._run(enter, log))

    async def _run(self, enter: Callable[[], AbstractAsyncContextManager[None]], log: list[str]) -> None:
        async with enter():
            log.append(f"+{self.name}")
            self.inside.set()
            await self.leave.wait()
            log.append(f"-{self.name}")

    async def release(self) -> None:
        self.leave.set()
        await asyncio.wait_for(self.task, 5)

    @property
    def entered(self) -> bool:
        return self.inside.is_set()


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 20))


# --------------------------------------------------------------------------- FairReadWriteLock


def test_readers_share() -> None:
    async def scenario() -> None:
        lock = FairReadWriteLock()
        log: list[str] = []
        readers = [Holder(f"r{i}", lock.read, log) for i in range(3)]
        await settle()
        assert all(r.entered for r in readers)
        assert lock.readers == 3
        for r in readers:
            await r.release()
        assert lock.readers == 0

    run(scenario)


def test_writer_excludes_readers_and_writers() -> None:
    async def scenario() -> None:
        lock = FairReadWriteLock()
        log: list[str] = []
        w1 = Holder("w1", lock.write, log)
        await settle()
        w2 = Holder("w2", lock.write, log)
        r = Holder("r", lock.read, log)
        await settle()
        assert lock.writing and not w2.entered and not r.entered
        assert lock.waiting == 2
        await w1.release()
        await settle()
        assert w2.entered and not r.entered
        await w2.release()
        await settle()
        assert r.entered
        await r.release()
        assert log == ["+w1", "-w1", "+w2", "-w2", "+r", "-r"]

    run(scenario)


def test_waiting_writer_is_not_starved_by_new_readers() -> None:
    async def scenario() -> None:
        lock = FairReadWriteLock()
        log: list[str] = []
        r1 = Holder("r1", lock.read, log)
        await settle()
        w = Holder("w", lock.write, log)
        await settle()
        r2 = Holder("r2", lock.read, log)  # only readers hold the lock, but a writer waits
        await settle()
        assert r1.entered and not w.entered and not r2.entered
        await r1.release()
        await settle()
        assert w.entered and not r2.entered
        await w.release()
        await settle()
        assert r2.entered
        await r2.release()
        assert log == ["+r1", "-r1", "+w", "-w", "+r2", "-r2"]

    run(scenario)


def test_readers_queued_together_after_a_writer_enter_together() -> None:
    async def scenario() -> None:
        lock = FairReadWriteLock()
        log: list[str] = []
        w1 = Holder("w1", lock.write, log)
        await settle()
        readers = [Holder(f"r{i}", lock.read, log) for i in range(3)]
        w2 = Holder("w2", lock.write, log)
        late = Holder("late", lock.read, log)
        await settle()
        await w1.release()
        await settle()
        assert all(r.entered for r in readers) and lock.readers == 3
        assert not w2.entered and not late.entered
        for r in readers:
            await r.release()
        await settle()
        assert w2.entered and not late.entered
        await w2.release()
        await late.release()

    run(scenario)


def test_cancelled_queued_writer_lets_readers_behind_it_in() -> None:
    async def scenario() -> None:
        lock = FairReadWriteLock()
        log: list[str] = []
        r1 = Holder("r1", lock.read, log)
        await settle()
        w = Holder("w", lock.write, log)
        await settle()
        r2 = Holder("r2", lock.read, log)
        await settle()
        assert not r2.entered
        w.task.cancel()
        await settle()
        assert w.task.cancelled()
        assert r2.entered and lock.readers == 2 and lock.waiting == 0
        await r1.release()
        await r2.release()
        assert not lock.writing and lock.readers == 0

    run(scenario)


def test_cancelled_queued_reader_does_not_block_or_skip_others() -> None:
    async def scenario() -> None:
        lock = FairReadWriteLock()
        log: list[str] = []
        w1 = Holder("w1", lock.write, log)
        await settle()
        r = Holder("r", lock.read, log)
        w2 = Holder("w2", lock.write, log)
        await settle()
        r.task.cancel()
        await settle()
        await w1.release()
        await settle()
        assert w2.entered
        await w2.release()
        assert log == ["+w1", "-w1", "+w2", "-w2"]
        assert lock.waiting == 0 and not lock.writing

    run(scenario)


def test_waiter_cancelled_right_after_being_granted_hands_the_lock_on() -> None:
    async def scenario() -> None:
        lock = FairReadWriteLock()
        log: list[str] = []
        held = lock.read()
        await held.__aenter__()
        w = Holder("w", lock.write, log)
        await settle()
        r = Holder("r", lock.read, log)
        await settle()
        await held.__aexit__(None, None, None)  # grants the lock to w ...
        assert lock.writing
        w.task.cancel()  # ... which is cancelled before it runs
        await settle()
        assert w.task.cancelled() and log == ["+r"]
        assert r.entered and not lock.writing
        await r.release()
        assert lock.readers == 0

    run(scenario)


def test_cancelling_a_holder_releases() -> None:
    async def scenario() -> None:
        lock = FairReadWriteLock()
        log: list[str] = []
        w = Holder("w", lock.write, log)
        await settle()
        r = Holder("r", lock.read, log)
        await settle()
        w.task.cancel()
        await settle()
        assert r.entered
        await r.release()

    run(scenario)


def test_exception_in_body_releases() -> None:
    async def scenario() -> None:
        lock = FairReadWriteLock()
        with pytest.raises(RuntimeError):
            async with lock.write():
                raise RuntimeError("boom")
        async with lock.write():
            pass
        assert not lock.writing

    run(scenario)


# --------------------------------------------------------------------------- CheckoutLock


@pytest.fixture
def layout(tmp_path: Path) -> StoreLayout:
    return StoreLayout(home=tmp_path / "home")


def probe(path: Path, operation: int) -> bool:
    """Whether an independent open file description could take ``operation`` right now."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def fds_on(path: Path) -> int:
    """How many of this process's descriptors are open on ``path``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:  # closed while we looked
            continue
    return count


def lock_fds(layout: StoreLayout) -> int:
    """How many of this process's descriptors are open on the test's lock file."""
    return fds_on(CheckoutLock.for_layout(layout, KEY).path)


def test_lock_file_and_directory_are_private(layout: StoreLayout) -> None:
    lock = CheckoutLock.for_layout(layout, KEY)

    async def scenario() -> None:
        async with lock.write():
            pass

    run(scenario)
    assert lock.path == layout.checkout_locks / f"{KEY}.lock"
    assert stat.S_IMODE(layout.checkout_locks.stat().st_mode) == 0o700
    assert stat.S_IMODE(lock.path.stat().st_mode) == 0o600


def test_symlinked_lock_file_is_refused(layout: StoreLayout, tmp_path: Path) -> None:
    lock = CheckoutLock.for_layout(layout, KEY)
    layout.checkout_locks.mkdir(parents=True)
    lock.path.symlink_to(tmp_path / "elsewhere")

    async def scenario() -> None:
        async with lock.read():
            pass

    with pytest.raises(StoreError, match="symlink"):
        run(scenario)
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("key", ["", "../x", "a/b", ".hidden", "a\x00"])
def test_unsafe_workspace_key_is_refused(layout: StoreLayout, key: str) -> None:
    with pytest.raises(ValueError, match="workspace key"):
        CheckoutLock.for_layout(layout, key)


def test_local_readers_share_one_flock(layout: StoreLayout) -> None:
    async def scenario() -> None:
        log: list[str] = []
        before = lock_fds(layout)
        readers = [Holder(f"r{i}", CheckoutLock.for_layout(layout, KEY).read, log) for i in range(4)]
        await asyncio.wait_for(asyncio.gather(*(r.inside.wait() for r in readers)), 5)
        path = CheckoutLock.for_layout(layout, KEY).path
        assert lock_fds(layout) == before + 1  # one LOCK_SH descriptor for all four readers
        assert probe(path, fcntl.LOCK_SH) and not probe(path, fcntl.LOCK_EX)
        for r in readers[:-1]:
            await r.release()
        assert not probe(path, fcntl.LOCK_EX)
        await readers[-1].release()
        assert probe(path, fcntl.LOCK_EX)  # the last reader dropped the shared lock
        assert lock_fds(layout) == before + 1  # the gate keeps its (unlocked) descriptor for later nodes
        CheckoutLock.for_layout(layout, KEY).close_idle()
        assert lock_fds(layout) == before

    run(scenario)


def test_one_descriptor_per_loop_serves_every_node_until_the_run_closes_it(layout: StoreLayout) -> None:
    lock = CheckoutLock.for_layout(layout, KEY)

    async def scenario() -> None:
        before = lock_fds(layout)
        for _ in range(5):
            async with lock.write():
                assert not probe(lock.path, fcntl.LOCK_SH)
            async with lock.read():
                assert probe(lock.path, fcntl.LOCK_SH) and not probe(lock.path, fcntl.LOCK_EX)
            assert probe(lock.path, fcntl.LOCK_EX)
            assert lock_fds(layout) == before + 1
        holder = Holder("w", lock.write, [])
        await asyncio.wait_for(holder.inside.wait(), 5)
        lock.close_idle()  # someone holds it: the descriptor stays
        assert lock_fds(layout) == before + 1 and not probe(lock.path, fcntl.LOCK_SH)
        await holder.release()
        lock.close_idle()
        assert lock_fds(layout) == before
        async with lock.write():  # the next node opens it again
            assert not probe(lock.path, fcntl.LOCK_SH)
        lock.close_idle()

    run(scenario)


def test_writer_holds_flock_exclusively(layout: StoreLayout) -> None:
    async def scenario() -> None:
        lock = CheckoutLock.for_layout(layout, KEY)
        async with lock.write():
            assert not probe(lock.path, fcntl.LOCK_SH)
        assert probe(lock.path, fcntl.LOCK_EX)

    run(scenario)


def test_instances_in_one_loop_share_the_fair_lock(layout: StoreLayout) -> None:
    async def scenario() -> None:
        log: list[str] = []
        r1 = Holder("r1", CheckoutLock.for_layout(layout, KEY).read, log)
        await r1.inside.wait()
        w = Holder("w", CheckoutLock.for_layout(layout, KEY).write, log)
        await settle()
        r2 = Holder("r2", CheckoutLock.for_layout(layout, KEY).read, log)
        await settle()
        assert not w.entered and not r2.entered
        await r1.release()
        await asyncio.wait_for(w.inside.wait(), 5)
        assert not r2.entered
        await w.release()
        await asyncio.wait_for(r2.inside.wait(), 5)
        await r2.release()
        assert log == ["+r1", "-r1", "+w", "-w", "+r2", "-r2"]

    run(scenario)


def test_other_workspaces_are_independent(layout: StoreLayout) -> None:
    async def scenario() -> None:
        log: list[str] = []
        mine, other = CheckoutLock.for_layout(layout, KEY), CheckoutLock.for_layout(layout, "f" * 64)
        held = Holder("mine", mine.write, log)
        await asyncio.wait_for(held.inside.wait(), 5)
        same = Holder("same", CheckoutLock.for_layout(layout, KEY).write, log)  # control: this workspace waits
        elsewhere = Holder("other", other.write, log)
        await settle()
        assert elsewhere.entered, "a writer of another workspace waited for this workspace's writer"
        assert held.entered and not same.entered
        assert other.path != mine.path
        assert not probe(mine.path, fcntl.LOCK_SH) and not probe(other.path, fcntl.LOCK_SH)  # both held at once
        await elsewhere.release()
        assert probe(other.path, fcntl.LOCK_EX) and not probe(mine.path, fcntl.LOCK_SH)
        await held.release()
        await asyncio.wait_for(same.inside.wait(), 5)
        await same.release()
        assert log == ["+mine", "+other", "-other", "-mine", "+same", "-same"]

    run(scenario)


def test_cancelled_while_polling_flock_leaks_no_descriptor(layout: StoreLayout) -> None:
    lock = CheckoutLock.for_layout(layout, KEY)
    layout.checkout_locks.mkdir(parents=True)
    blocker = os.open(lock.path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(blocker, fcntl.LOCK_EX)

    async def scenario() -> None:
        before = lock_fds(layout)
        for enter in (lock.write, lock.read):
            holder = Holder("x", enter, [])
            await asyncio.sleep(0.01)
            assert not holder.entered
            holder.task.cancel()
            await asyncio.gather(holder.task, return_exceptions=True)
            assert lock_fds(layout) == before + 1  # the gate's own descriptor, unlocked
            assert probe(lock.path, fcntl.LOCK_SH) is False  # still the blocker's, not ours
            lock.close_idle()
            assert lock_fds(layout) == before
        fcntl.flock(blocker, fcntl.LOCK_UN)
        async with lock.write():
            pass

    try:
        run(scenario)
    finally:
        os.close(blocker)


HOLD_SCRIPT = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, getattr(fcntl, sys.argv[2]))
    print("locked", flush=True)
    sys.stdin.readline()
    fcntl.flock(fd, fcntl.LOCK_UN)
    print("released", flush=True)
    """
)

PROBE_SCRIPT = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    try:
        fcntl.flock(fd, getattr(fcntl, sys.argv[2]) | fcntl.LOCK_NB)
    except BlockingIOError:
        print("busy")
    else:
        print("free")
    """
)


class OtherProcess:
    """A second process holding ``flock(operation)`` on the lock file until ``release()``."""

    def __init__(self, path: Path, operation: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLD_SCRIPT, str(path), operation],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self.proc.stdout is None or self.proc.stdin is None:
            raise RuntimeError("pipes missing")
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        assert self.stdout.readline().strip() == "locked"

    def release(self) -> None:
        self.stdin.write("go\n")
        self.stdin.flush()
        assert self.stdout.readline().strip() == "released"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.stdin.close()
        self.stdout.close()


def probe_from_other_process(path: Path, operation: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE_SCRIPT, str(path), operation],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def lock_path(layout: StoreLayout) -> Path:
    path = CheckoutLock.for_layout(layout, KEY).path
    path.parent.mkdir(parents=True)
    path.touch(mode=0o600)
    return path


def test_writer_waits_for_another_process_holding_the_lock(layout: StoreLayout, lock_path: Path) -> None:
    other = OtherProcess(lock_path, "LOCK_EX")

    async def scenario() -> None:
        log: list[str] = []
        w = Holder("w", CheckoutLock.for_layout(layout, KEY).write, log)
        await asyncio.sleep(0.2)  # many backoff rounds: the other process still holds LOCK_EX
        assert not w.entered
        other.release()
        await asyncio.wait_for(w.inside.wait(), 5)
        assert probe_from_other_process(lock_path, "LOCK_SH") == "busy"
        await w.release()
        assert probe_from_other_process(lock_path, "LOCK_SH") == "free"

    try:
        run(scenario)
    finally:
        other.close()


def test_readers_wait_for_another_process_writer_and_share_with_its_readers(
    layout: StoreLayout, lock_path: Path
) -> None:
    writer = OtherProcess(lock_path, "LOCK_EX")

    async def scenario() -> None:
        log: list[str] = []
        r = Holder("r", CheckoutLock.for_layout(layout, KEY).read, log)
        await asyncio.sleep(0.1)
        assert not r.entered
        writer.release()
        await asyncio.wait_for(r.inside.wait(), 5)
        assert probe_from_other_process(lock_path, "LOCK_SH") == "free"
        assert probe_from_other_process(lock_path, "LOCK_EX") == "busy"
        await r.release()

    try:
        run(scenario)
    finally:
        writer.close()


def test_other_process_sees_our_writer(layout: StoreLayout) -> None:
    lock = CheckoutLock.for_layout(layout, KEY)

    async def scenario() -> None:
        async with lock.write():
            assert probe_from_other_process(lock.path, "LOCK_EX") == "busy"
        assert probe_from_other_process(lock.path, "LOCK_EX") == "free"

    run(scenario)
