"""The fast paths a wide fan of read-only nodes takes (issue 31 item 6) behave as the slow ones.

- The checkout's reader hold: an uncontended reader only counts, yet a body that raises still
  gives both layers back (a writer of another process can take ``LOCK_EX`` after it), and a
  reader that arrives while a writer waits queues behind it.
- The snapshot a run starts with (every node untouched) is spliced from one node's text: its bytes
  are exactly those of encoding the whole state, also for names that need escaping.
- ``now_iso`` (formatted once per millisecond) reads as the clock does.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rho_notebook.model.events import now_iso
from rho_notebook.model.run_state import AttemptRecord, NodeRecord, RunState
from rho_notebook.model.state import NodeState
from rho_notebook.runtime.checkout import CheckoutLock
from rho_notebook.runtime.execution import snapshot_bytes
from rho_notebook.store.files import json_bytes
from rho_notebook.store.layout import StoreLayout

KEY = "a" * 64


def _free_for_another_process(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_readers_that_raise_give_the_checkout_back(tmp_path: Path) -> None:
    lock = CheckoutLock.for_layout(StoreLayout(home=tmp_path / "home"), KEY)

    async def reader(fail: bool, inside: asyncio.Event, leave: asyncio.Event) -> None:
        async with lock.read():
            inside.set()
            await leave.wait()
            if fail:
                raise RuntimeError("the node's executor broke")

    async def scenario() -> None:
        leave = asyncio.Event()
        entered = [asyncio.Event() for _ in range(3)]
        tasks = [asyncio.ensure_future(reader(i > 0, entered[i], leave)) for i in range(3)]
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in entered)), 5)
        assert not _free_for_another_process(lock.path)
        leave.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert [type(r).__name__ for r in results] == ["NoneType", "RuntimeError", "RuntimeError"]
        assert _free_for_another_process(lock.path)
        async with lock.write():  # nothing is left counted: a writer of this process gets in at once
            assert not _free_for_another_process(lock.path)
        lock.close_idle()

    asyncio.run(asyncio.wait_for(scenario(), 20))


def test_a_reader_arriving_while_a_writer_waits_queues_behind_it(tmp_path: Path) -> None:
    lock = CheckoutLock.for_layout(StoreLayout(home=tmp_path / "home"), KEY)
    log: list[str] = []

    async def hold(
        name: str, enter: Callable[[], AbstractAsyncContextManager[None]], inside: asyncio.Event, leave: asyncio.Event
    ) -> None:
        async with enter():
            log.append(f"+{name}")
            inside.set()
            await leave.wait()
            log.append(f"-{name}")

    async def scenario() -> None:
        events = {name: (asyncio.Event(), asyncio.Event()) for name in ("r1", "r2", "w", "r3")}
        tasks = {}
        for name in ("r1", "r2", "w", "r3"):
            enter = lock.write if name == "w" else lock.read
            tasks[name] = asyncio.ensure_future(hold(name, enter, *events[name]))
            for _ in range(5):
                await asyncio.sleep(0)
        assert log == ["+r1", "+r2"]  # the writer waits for both; r3 waits behind the writer
        events["r1"][1].set()
        events["r2"][1].set()
        await asyncio.wait_for(events["w"][0].wait(), 5)
        assert "+r3" not in log
        events["w"][1].set()
        events["r3"][1].set()
        await asyncio.wait_for(asyncio.gather(*tasks.values()), 5)
        assert log.index("-w") < log.index("+r3")
        lock.close_idle()

    asyncio.run(asyncio.wait_for(scenario(), 20))


@pytest.mark.parametrize(
    "names",
    [["m00001", "a_source", "z_sink"], ['q"\\u0000"', "é/ü%2F", "tab\there"], []],
    ids=["plain", "escaped", "empty"],
)
def test_the_first_snapshot_is_the_state_encoded(names: list[str]) -> None:
    state = RunState(run_id="r", plan_id="p", graph_digest="g", workflow="fan", nodes={n: NodeRecord() for n in names})
    assert snapshot_bytes(state) == json_bytes(state.to_json(), compact=True)
    state.workflow = "nul\x00in a name"  # the placeholder's character elsewhere: encoded the slow way
    assert snapshot_bytes(state) == json_bytes(state.to_json(), compact=True)
    if names:  # a node that started: every node encoded as it is
        state.nodes[names[0]].state = NodeState.RUNNING
        state.nodes[names[0]].attempts.append(AttemptRecord(number=1, started_at=now_iso()))
        assert snapshot_bytes(state) == json_bytes(state.to_json(), compact=True)


def test_now_iso_reads_as_the_clock() -> None:
    before = datetime.now(UTC) - timedelta(milliseconds=1)  # now_iso truncates to the millisecond
    stamps = [now_iso() for _ in range(2000)]
    after = datetime.now(UTC)
    parsed = [datetime.fromisoformat(s) for s in stamps]
    assert all(len(s) == len("2026-01-01T00:00:00.000+00:00") and s.endswith("+00:00") for s in stamps)
    assert parsed == sorted(parsed)
    assert before <= parsed[0] and parsed[-1] <= after
