"""Whether a process the test started or stopped still runs.

Read from ``/proc/PID/stat``: a zombie (exited, not yet reaped; this VM's init does not reap
orphans, and a detached run owner is one) counts as gone, which ``os.kill(pid, 0)`` would not
see. A process reaped between opening its ``stat`` and reading it raises ``ProcessLookupError``
(ESRCH) rather than ``FileNotFoundError``; both mean gone.
"""

from __future__ import annotations

import time
from pathlib import Path


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """Poll until ``pid`` is gone, ``timeout`` seconds at most; whether it went."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
