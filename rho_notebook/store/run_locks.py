"""The two advisory locks of a run folder: who owns the run, and who follows it.

:class:`OwnerLock` (an exclusive ``flock`` on ``mutation.lock``) is held by the one process that
executes the run; it writes its pid into the file, so ``runs`` can say which process owns a live
run. The kernel releases a ``flock`` when its holder dies, so a held lock always means a live owner.

:class:`FollowLock` (a shared ``flock`` on ``follow.lock``) is held by every follower that can
answer a person's requests (a terminal with a prompt, a notebook widget, the JupyterLab sidebar).
The owner asks :meth:`FollowLock.attended` before a supervised launch waits for a person: with a
follower there, it waits as long as the node allows; with none, the run's ``--approval-timeout``
applies. A follower that dies or detaches releases its share with it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from rho_notebook.errors import StoreError
from rho_notebook.oshelpers import open_regular_nofollow

__all__ = ["OwnerLock", "FollowLock", "FOLLOW_LOCK"]

FOLLOW_LOCK = "follow.lock"
"""The followers' shared lock, in the run's folder."""


class _HeldFlock:
    """A ``flock`` this process may hold on one file, released once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


class OwnerLock(_HeldFlock):
    """The exclusive, non-blocking owner lock of one run (flock on mutation.lock)."""

    def try_acquire(self) -> bool:
        """Take the lock without waiting (False: another process owns the run); the holder's pid
        is written into the file for :meth:`holder`."""
        fd = _lock_fd(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid is a courtesy for `runs`; the lock is what counts
        return True

    @staticmethod
    def is_held(path: Path) -> bool:
        """Whether some process owns the run now (probes without taking ownership)."""
        return OwnerLock.holder(path) is not None

    @staticmethod
    def holder(path: Path) -> int | None:
        """The pid of the process that owns the run now: 0 when the lock is held by an owner that
        did not write its pid (one older than the pid), None when nobody owns the run."""
        try:
            fd = _lock_fd(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                return int(text) if text.isdigit() else 0
            return None
        finally:
            os.close(fd)


class FollowLock(_HeldFlock):
    """A follower's shared lock on ``follow.lock``: held while it can answer requests."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder / FOLLOW_LOCK)

    def hold(self) -> None:
        """Say "a person can answer here" until :meth:`release` (or this process ends)."""
        if self.fd is not None:
            return
        fd = _lock_fd(self.path, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_SH)  # shared locks never wait on each other; the owner only probes
        self.fd = fd

    @staticmethod
    def attended(folder: Path) -> bool:
        """Whether at least one follower holds its share now (the owner's probe)."""
        try:
            fd = _lock_fd(folder / FOLLOW_LOCK, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


def _lock_fd(path: Path, flags: int) -> int:
    """Open a run's lock file: a regular file, never through a link, never blocking on a FIFO."""
    try:
        fd, _ = open_regular_nofollow(path, flags)
    except FileNotFoundError:
        raise
    except OSError as err:
        msg = f"run lock {path} cannot be used: {err}; the store expects a regular file there (remove it)"
        raise StoreError(msg) from None
    return fd
