"""A Ctrl-C while the CLI's event loop is being closed at exit ends the process quietly.

A shell sends Ctrl-C to a whole pipeline (``rho-notebook run ... | head -1``): the CLI may then be
exiting already, its runner waiting at ``atexit`` for a worker thread of its default executor
(service/sync.py). The interrupted close must not print a traceback or a warning about the
shutdown coroutine. A real interpreter, a real signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = """
import asyncio, time
from concurrent.futures import ThreadPoolExecutor
from rho_notebook.service.sync import run_sync

class SlowToShutDown(ThreadPoolExecutor):  # holds the runner's close at exit for a while
    def shutdown(self, wait=True, **kwargs):
        if wait:  # (loop.close() calls it again without waiting)
            time.sleep(5)
        super().shutdown(wait, **kwargs)

async def slow_default_executor():
    asyncio.get_running_loop().set_default_executor(SlowToShutDown())

run_sync(slow_default_executor())
print("exiting", flush=True)
"""


def test_ctrl_c_while_the_runner_closes_at_exit_is_quiet(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "exiting\n"
    time.sleep(0.5)  # inside atexit: the runner's close waits for the executor's shutdown
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err and "RuntimeWarning" not in err, err
    assert time.monotonic() - began < 4.5  # the interrupt ended the wait for the worker
