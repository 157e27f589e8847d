"""The pump at interpreter exit: queued calls dropped, a call under way finished, stderr clean.

A process that showed a run view keeps looking at the run's journal from the pump thread. When
the interpreter exits, ``concurrent.futures`` ends its thread pools before ``atexit`` handlers
run; a look after that failed and was logged as "rho_notebook widget update failed" (twice at
the end of a full test run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

from rho_notebook.model.plan import Plan
from rho_notebook.widgets._throttle import Pump
from tests.conftest import REPO, Project
from tests.widgets.helpers import start_run

_PRELUDE = """
import atexit, logging, sys, threading, time
from pathlib import Path
logging.basicConfig(format="%(threadName)s %(name)s: %(message)s")
"""


def _python(script: str, *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_run_view_left_open_does_not_fail_at_exit(project: Project, small_plan: Plan) -> None:
    handle = start_run(project, small_plan)
    handle.start()
    handle.wait()
    script = f"""
    from rho_notebook import widgets
    from rho_notebook.service import Service, StoreLayout
    from rho_notebook.widgets._testing import recording_comms

    with recording_comms():
        view = widgets.watch_run({handle.run_id!r}, service=Service(layout=StoreLayout(home=Path({str(project.home)!r}))))
    # slow exit work (a test run's temporary folders being removed): the view's look at the
    # journal, every second, used to run meanwhile and fail
    atexit.register(time.sleep, 2.5)
    print("shown", view.run["lifecycle"], flush=True)
    """
    done = _python(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "shown completed\n"
    assert done.stderr == ""


def test_exit_lets_the_call_under_way_finish_and_drops_the_queued_ones(project: Project) -> None:
    script = f"""
    from rho_notebook.service import Service, StoreLayout
    from rho_notebook.widgets._call import call
    from rho_notebook.widgets._throttle import pump

    service = Service(layout=StoreLayout(home=Path({str(project.home)!r})))
    started = threading.Event()

    def under_way():
        started.set()
        time.sleep(0.3)  # the interpreter starts to exit meanwhile
        print("under way: plans", call(service.plans()), flush=True)  # a verb in a worker thread

    pump().call_later(0, under_way)
    pump().call_later(0.1, lambda: print("queued: ran", flush=True))  # due while exiting
    assert started.wait(10)
    """
    began = time.monotonic()
    done = _python(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "under way: plans []\n"
    assert done.stderr == ""
    assert time.monotonic() - began < 30


def test_a_stopped_pump_drops_queued_calls_and_refuses_new_ones() -> None:
    pump = Pump()
    ran: list[str] = []
    first = threading.Event()
    pump.call_later(0, first.set)
    assert first.wait(5)
    pump.call_later(0.05, lambda: ran.append("queued"))
    pump.stop()
    assert pump._thread is not None and not pump._thread.is_alive()
    pump.call_later(0, lambda: ran.append("after stop"))
    assert pump._thread is not None and not pump._thread.is_alive()
    assert pump._heap == []
    assert ran == []


def test_stop_waits_for_the_call_under_way() -> None:
    pump = Pump()
    started, finished = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        time.sleep(0.2)
        finished.set()

    pump.call_later(0, slow)
    assert started.wait(5)
    pump.stop()
    assert finished.is_set()


def test_a_pump_first_used_while_the_interpreter_exits_runs_nothing() -> None:
    script = """
    from rho_notebook.widgets._throttle import pump

    atexit.register(time.sleep, 0.3)  # runs after the handler below: time for a call to run
    atexit.register(lambda: pump().call_later(0, lambda: print("ran", flush=True)))
    """
    done = _python(script)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_stop_waits_no_longer_than_its_patience() -> None:
    pump = Pump()
    started, release = threading.Event(), threading.Event()

    def stuck() -> None:
        started.set()
        release.wait(10)

    pump.call_later(0, stuck)
    assert started.wait(5)
    began = time.monotonic()
    pump.stop(patience=0.2)
    assert 0.15 < time.monotonic() - began < 2
    release.set()
