"""The throttle with a fake clock and timer, and the real pump thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rho_notebook.widgets._throttle import Pump, Throttle


class FakeTimer:
    """A manual clock and timer: callbacks run when the test advances time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pending: list[tuple[float, Callable[[], None]]] = []

    def clock(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        self.pending.append((when, callback))

    def advance(self, seconds: float) -> None:
        target = self.now + seconds
        while True:
            due = sorted((w, i) for i, (w, _) in enumerate(self.pending) if w <= target)
            if not due:
                break
            when, index = due[0]
            _, callback = self.pending.pop(index)
            self.now = max(self.now, when)
            callback()
        self.now = target


def test_first_poke_flushes_at_once_then_coalesces() -> None:
    timer = FakeTimer()
    flushes: list[float] = []
    throttle = Throttle(lambda: flushes.append(timer.now), interval=0.1, clock=timer.clock, timer=timer)
    throttle.poke()
    timer.advance(0)
    assert flushes == [0.0]
    for _ in range(50):
        throttle.poke()
        timer.advance(0.001)
    assert len(timer.pending) <= 1
    timer.advance(0.2)
    assert flushes == [0.0, 0.1]


def test_at_most_ten_flushes_a_second_under_a_flood() -> None:
    timer = FakeTimer()
    flushes: list[float] = []
    throttle = Throttle(lambda: flushes.append(timer.now), interval=0.1, clock=timer.clock, timer=timer)
    for _ in range(3000):  # a poke every millisecond for three seconds
        throttle.poke()
        timer.advance(0.001)
    timer.advance(0.2)
    assert 29 <= len(flushes) <= 31
    assert all(b - a >= 0.1 - 1e-9 for a, b in zip(flushes, flushes[1:]))


def test_quiet_periods_flush_immediately_again() -> None:
    timer = FakeTimer()
    flushes: list[float] = []
    throttle = Throttle(lambda: flushes.append(timer.now), interval=0.1, clock=timer.clock, timer=timer)
    throttle.poke()
    timer.advance(1.0)
    throttle.poke()
    timer.advance(0)
    assert flushes == [0.0, 1.0]


def test_poke_during_a_flush_schedules_another() -> None:
    timer = FakeTimer()
    flushes: list[float] = []

    def flush() -> None:
        flushes.append(timer.now)
        if len(flushes) == 1:
            throttle.poke()  # a change that arrives while the flush is sending

    throttle = Throttle(flush, interval=0.1, clock=timer.clock, timer=timer)
    throttle.poke()
    timer.advance(0.5)
    assert flushes == [0.0, 0.1]


def test_flushes_are_spaced_from_the_end_of_the_one_before() -> None:
    """A flush that takes time to build and send its message (20 ms, then none: a big patch, then
    small ones): the next one starts an interval after it *ended*, so the messages the front end
    receives are never closer than the interval (the second came 80 ms after the first when the
    interval was counted from the flush's start); a poke made while a flush is sending waits as long."""
    timer = FakeTimer()
    sent: list[float] = []

    def flush() -> None:
        timer.now += 0.02 if not sent else 0.0  # building the patch
        sent.append(timer.now)  # the message goes
        throttle.poke()  # a change that arrives while it was being built

    throttle = Throttle(flush, interval=0.1, clock=timer.clock, timer=timer)
    throttle.poke()
    for _ in range(60):
        timer.advance(0.005)
    gaps = [round(b - a, 9) for a, b in zip(sent, sent[1:])]
    assert len(sent) >= 2 and min(gaps) >= 0.1, gaps


def test_closed_throttle_never_flushes() -> None:
    timer = FakeTimer()
    flushes: list[float] = []
    throttle = Throttle(lambda: flushes.append(timer.now), interval=0.1, clock=timer.clock, timer=timer)
    throttle.poke()
    throttle.close()
    timer.advance(1)
    throttle.poke()
    timer.advance(1)
    assert flushes == []


def test_pump_runs_callbacks_in_due_order_on_its_thread() -> None:
    pump = Pump()
    seen: list[tuple[str, str]] = []
    done = threading.Event()
    now = time.monotonic()
    pump.call_at(now + 0.05, lambda: seen.append(("late", threading.current_thread().name)))
    pump.call_at(now, lambda: seen.append(("early", threading.current_thread().name)))

    def boom() -> None:
        raise RuntimeError("a failing callback must not stop the pump")

    pump.call_at(now + 0.01, boom)
    pump.call_at(now + 0.06, done.set)
    assert done.wait(5)
    assert [name for name, _ in seen] == ["early", "late"]
    assert {thread for _, thread in seen} == {"rho-widget-pump"}
