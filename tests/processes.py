"""Whether a process the test started or stopped still runs.

Asked through a pidfd (``pidfd_open``), which turns readable once *every* thread of the process
has exited: a multi-threaded run owner killed with SIGKILL shows its main thread as a zombie in
``/proc/PID/stat`` while its other threads still exit and hold its descriptors (and so its
``flock`` on the run), which is why a ``/proc`` state check is not used here. A zombie (exited,
not yet reaped; this VM's init does not reap orphans, and a detached run owner is one) counts as
gone, which ``os.kill(pid, 0)`` would not see; a reaped process is gone (``ProcessLookupError``).
"""

from __future__ import annotations

import os
import select


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """Wait until every thread of ``pid`` has exited, ``timeout`` seconds at most; whether it did."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([pidfd], [], [], timeout)[0])
    finally:
        os.close(pidfd)


def alive(pid: int) -> bool:
    """True while some thread of ``pid`` has not exited."""
    return not wait_gone(pid, 0)
