"""The checkout's hold objects: the fast paths of ``CheckoutLock.write``/``read`` behave as the slow ones.

- Uncontended, a writer takes both layers without suspending, and drops ``LOCK_EX`` every time it
  leaves (other processes get their turn between attempts).
- A writer waiting while readers hold the checkout blocks later readers; it gets ``LOCK_EX`` once
  they leave.
- Cancelled while waiting (for the local lock or for ``flock``), a writer or a reader leaves
  nothing held or counted; a body that raises gives both layers back; leaving twice releases once.
- The gate a ``CheckoutLock`` caches follows the running loop: one instance used in two loops (or
  two threads) gets each loop's own gate, and a collected loop's descriptor is closed.
"""

from __future__ import annotations

import asyncio
import fcntl
import gc
import os
import threading
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.runtime.checkout import CheckoutLock, FairReadWriteLock
from rho_notebook.store.layout import StoreLayout
from tests.unit.test_checkout_lock import fds_on as open_fds
from tests.unit.test_checkout_lock import probe as free

KEY = "5eed" * 16


@pytest.fixture
def lock(tmp_path: Path) -> CheckoutLock:
    return CheckoutLock.for_layout(StoreLayout(home=tmp_path / "home"), KEY)


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 20))


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def nothing_left_held(lock: CheckoutLock) -> None:
    """The checkout is free (another process could take it alone), a writer gets in, and once it
    is idle no descriptor stays open on the lock file."""
    assert free(lock.path, fcntl.LOCK_EX)
    async with lock.write():
        pass
    lock.close_idle()
    assert open_fds(lock.path) == 0


class Holder:
    """A task that enters ``enter()`` and stays inside until ``leave`` is set."""

    def __init__(self, name: str, enter: Callable[[], AbstractAsyncContextManager[None]], log: list[str]) -> None:
        self.inside = asyncio.Event()
        self.leave = asyncio.Event()
        self.task = asyncio.ensure_future(self._run(name, enter, log))

    async def _run(self, name: str, enter: Callable[[], AbstractAsyncContextManager[None]], log: list[str]) -> None:
        async with enter():
            log.append(f"+{name}")
            self.inside.set()
            await self.leave.wait()
            log.append(f"-{name}")

    async def release(self) -> None:
        self.leave.set()
        await asyncio.wait_for(self.task, 5)


def test_uncontended_writer_enters_without_suspending_and_drops_lock_ex_each_time(lock: CheckoutLock) -> None:
    async def scenario() -> None:
        async with lock.write():  # opens the descriptor
            pass
        ran: list[int] = []
        for i in range(3):
            asyncio.get_running_loop().call_soon(ran.append, i)
            async with lock.write():
                assert ran == list(range(i)), "entering an uncontended checkout suspended the task"
                assert not free(lock.path, fcntl.LOCK_SH)
            assert free(lock.path, fcntl.LOCK_EX), "LOCK_EX was kept after the hold ended"
            await asyncio.sleep(0)
        lock.close_idle()

    run(scenario)


def test_writer_waiting_for_readers_blocks_later_readers(lock: CheckoutLock) -> None:
    async def scenario() -> None:
        log: list[str] = []
        readers = [Holder(f"r{i}", lock.read, log) for i in range(3)]
        await asyncio.wait_for(asyncio.gather(*(r.inside.wait() for r in readers)), 5)
        writer = Holder("w", lock.write, log)
        await settle()
        late = Holder("late", lock.read, log)
        await settle()
        assert not writer.inside.is_set() and not late.inside.is_set()
        assert free(lock.path, fcntl.LOCK_SH) and not free(lock.path, fcntl.LOCK_EX)
        for r in readers[:2]:
            await r.release()
        await settle()
        assert not writer.inside.is_set()
        await readers[2].release()
        await asyncio.wait_for(writer.inside.wait(), 5)
        assert not free(lock.path, fcntl.LOCK_SH) and not late.inside.is_set()
        await writer.release()
        await asyncio.wait_for(late.inside.wait(), 5)
        assert free(lock.path, fcntl.LOCK_SH) and not free(lock.path, fcntl.LOCK_EX)
        await late.release()
        assert free(lock.path, fcntl.LOCK_EX)
        assert log[3:] == ["-r0", "-r1", "-r2", "+w", "-w", "+late", "-late"]
        lock.close_idle()
        assert open_fds(lock.path) == 0  # close_idle closes only when nothing is held or counted

    run(scenario)


def test_writer_cancelled_while_waiting_for_the_local_lock_leaves_nothing_held(lock: CheckoutLock) -> None:
    async def scenario() -> None:
        log: list[str] = []
        reader = Holder("r", lock.read, log)
        await asyncio.wait_for(reader.inside.wait(), 5)
        writer = Holder("w", lock.write, log)
        await settle()
        late = Holder("late", lock.read, log)
        await settle()
        assert not late.inside.is_set()
        writer.task.cancel()
        await asyncio.wait_for(late.inside.wait(), 5)  # the cancelled writer no longer blocks it
        assert writer.task.cancelled()
        await reader.release()
        await late.release()
        await nothing_left_held(lock)

    run(scenario)


@pytest.mark.parametrize("mode", ["write", "read"])
def test_cancelled_while_polling_flock_leaves_nothing_held_or_counted(lock: CheckoutLock, mode: str) -> None:
    lock.path.parent.mkdir(parents=True)
    blocker = os.open(lock.path, os.O_RDWR | os.O_CREAT, 0o600)  # another open file: flock conflicts
    fcntl.flock(blocker, fcntl.LOCK_EX)

    async def scenario() -> None:
        log: list[str] = []
        waiting = Holder("x", getattr(lock, mode), log)
        behind = Holder("behind", getattr(lock, mode), log)  # queued locally, or on the shared mutex
        await asyncio.sleep(0.02)
        assert log == []
        waiting.task.cancel()
        await asyncio.gather(waiting.task, return_exceptions=True)
        assert waiting.task.cancelled()
        fcntl.flock(blocker, fcntl.LOCK_UN)
        await asyncio.wait_for(behind.inside.wait(), 5)
        await behind.release()
        assert log == ["+behind", "-behind"]
        assert free(lock.path, fcntl.LOCK_EX)
        lock.close_idle()
        assert open_fds(lock.path) == 1  # only the blocker: nothing was left held or counted

    try:
        run(scenario)
    finally:
        os.close(blocker)


@pytest.mark.parametrize("mode", ["write", "read"])
def test_a_body_that_raises_gives_both_layers_back(lock: CheckoutLock, mode: str) -> None:
    async def scenario() -> None:
        for _ in range(2):
            with pytest.raises(RuntimeError, match="boom"):
                async with getattr(lock, mode)():
                    raise RuntimeError("boom")
            assert free(lock.path, fcntl.LOCK_EX)
        async with lock.write():
            assert not free(lock.path, fcntl.LOCK_SH)
        lock.close_idle()
        assert open_fds(lock.path) == 0

    run(scenario)


def test_leaving_a_writer_hold_twice_does_not_release_the_next_writer(lock: CheckoutLock) -> None:
    async def scenario() -> None:
        log: list[str] = []
        held = lock.write()
        await held.__aenter__()
        nxt = Holder("next", lock.write, log)
        await settle()
        await held.__aexit__(None, None, None)
        await asyncio.wait_for(nxt.inside.wait(), 5)
        await held.__aexit__(None, None, None)  # must neither unlock the file nor free the local lock
        assert not free(lock.path, fcntl.LOCK_SH)
        reader = Holder("r", lock.read, log)
        await settle()
        assert log == ["+next"]
        await nxt.release()
        await reader.release()
        lock.close_idle()
        assert open_fds(lock.path) == 0

    run(scenario)


@pytest.mark.parametrize("mode", ["write", "read"])
def test_leaving_a_hold_twice_releases_once(lock: CheckoutLock, mode: str) -> None:
    async def scenario() -> None:
        log: list[str] = []
        other = Holder("r", lock.read, log)
        await asyncio.wait_for(other.inside.wait(), 5)
        if mode == "write":
            await other.release()
        held = getattr(lock, mode)()
        await held.__aenter__()
        await held.__aexit__(None, None, None)
        await held.__aexit__(None, None, None)
        if mode == "read":  # the other reader still holds LOCK_SH: the second exit did not drop it
            assert not free(lock.path, fcntl.LOCK_EX)
            await other.release()
        await nothing_left_held(lock)

    run(scenario)


def test_fair_lock_holds_release_once_and_on_error() -> None:
    async def scenario() -> None:
        lock = FairReadWriteLock()
        held = lock.read()
        await held.__aenter__()
        await held.__aexit__(None, None, None)
        await held.__aexit__(None, None, None)
        assert lock.readers == 0 and lock.idle
        assert lock.try_write() and not lock.try_write() and not lock.try_read()
        lock.release_write()
        with pytest.raises(KeyError):
            async with lock.write():
                raise KeyError("x")
        assert lock.idle and lock.try_read() and not lock.try_write()
        lock.release_read()
        assert lock.idle

    run(scenario)


def test_one_instance_in_two_loops_uses_each_loops_gate_and_the_old_one_closes(lock: CheckoutLock) -> None:
    async def use() -> None:
        async with lock.write():
            pass
        async with lock.read():
            pass

    run(use)
    gc.collect()  # the first loop is gone: its gate's descriptor is closed, though `lock` lives
    assert open_fds(lock.path) == 0
    run(use)
    gc.collect()
    assert open_fds(lock.path) == 0


def test_threads_sharing_one_instance_exclude_each_other(lock: CheckoutLock) -> None:
    inside: list[int] = []
    overlap: list[int] = []
    errors: list[BaseException] = []

    async def worker(me: int) -> None:
        for _ in range(20):
            async with lock.write():
                inside.append(me)
                if len(inside) > 1:
                    overlap.append(me)
                await asyncio.sleep(0)
                inside.remove(me)
            await asyncio.sleep(0.001)
        lock.close_idle()

    def thread(me: int) -> None:
        try:
            asyncio.run(asyncio.wait_for(worker(me), 30))
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=thread, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and overlap == []
    assert open_fds(lock.path) == 0
