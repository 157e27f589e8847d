"""Low-level operating-system helpers every layer shares: no-follow file reads and process groups.

No-follow reads. A path is opened with ``O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC``, so a symbolic link
as its last component fails with ``ELOOP`` instead of being followed, a FIFO or a device cannot
block the open (a FIFO with no writer would hang it forever), and the open descriptor is checked
with ``fstat`` to be a regular file (:class:`NotRegularFile` naming the path otherwise). Only
then is ``O_NONBLOCK`` cleared again, so the caller gets an ordinary descriptor. Callers that
must also refuse links in the directories above walk the path with :func:`lstat_components`.
Each caller turns the ``OSError`` it gets into its own error (``StoreError``, ``SourceError``,
...) with its own advice.

Process groups. Commands, agents and hooks start their children as leaders of a new session and
process group, so stopping one stops everything it started: :func:`signal_group`,
:func:`group_exists` and :func:`live_group_members` act on such a group, :func:`kill_group_of` on
the group of a process found later (an orphan of a dead owner, :func:`processes_with_env`), and
:func:`ancestors` reads a process's parent chain. Process listing reads ``/proc`` (Linux).

This module imports only the standard library.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from rho_notebook.errors import NotRegularFile

__all__ = [
    "kind_of",
    "open_regular_nofollow",
    "read_fd",
    "read_regular_nofollow",
    "lstat_components",
    "signal_group",
    "group_exists",
    "live_group_members",
    "kill_group_of",
    "processes_with_env",
    "ancestors",
]

PathLike = str | os.PathLike[str]


# -- no-follow reads ---------------------------------------------------------------------------------


def open_regular_nofollow(
    path: PathLike, flags: int = os.O_RDONLY, mode: int = 0o600, *, dir_fd: int | None = None
) -> tuple[int, os.stat_result]:
    """Open ``path`` without following a final symbolic link and check it is a regular file.

    Parameters
    ----------
    path
        The file; relative to ``dir_fd`` when that is given.
    flags
        ``os.open`` flags; ``O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`` are added (``O_NONBLOCK`` is
        cleared again once the file is known to be regular).
    mode
        Permissions when ``flags`` create the file.
    dir_fd
        A directory descriptor ``path`` is relative to.

    Returns
    -------
    tuple
        The descriptor (the caller closes it) and its ``fstat``.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist (and ``flags`` do not create it).
    NotRegularFile
        ``path`` is not a regular file (the descriptor is closed). A FIFO opened for writing with
        no reader fails the same way (``ENXIO`` from the non-blocking open).
    OSError
        Any other failure to open, e.g. ``ELOOP`` when ``path`` is a symbolic link.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ENXIO:  # a FIFO without a reader, or a device that is absent
            msg = f"{os.fspath(path)} is not a regular file (a FIFO without a reader, or a device)"
            raise NotRegularFile(msg) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            msg = f"{os.fspath(path)} is not a regular file ({kind_of(info.st_mode)})"
            raise NotRegularFile(msg)
        if not flags & os.O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def kind_of(mode: int) -> str:
    """What kind of entry a non-regular ``st_mode`` names, for messages ("a FIFO", ...)."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "not a file"


def read_fd(fd: int, *, limit: int | None = None) -> bytes:
    """Everything from ``fd``'s position to its end, or its first ``limit`` bytes."""
    chunks = []
    left = -1 if limit is None else limit
    while left and (chunk := os.read(fd, 1 << 20 if left < 0 else min(left, 1 << 20))):
        chunks.append(chunk)
        left = left - len(chunk) if left > 0 else left
    return b"".join(chunks)


def read_regular_nofollow(path: PathLike, *, nonblock: bool = False, dir_fd: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, refusing a final symbolic link.

    Every open is non-blocking (see :func:`open_regular_nofollow`), so a path swapped for a FIFO
    cannot block the caller; ``nonblock`` is kept for existing callers and changes nothing.
    Raises as :func:`open_regular_nofollow` does.
    """
    del nonblock
    fd, _ = open_regular_nofollow(path, os.O_RDONLY, dir_fd=dir_fd)
    try:
        return read_fd(fd)
    finally:
        os.close(fd)


def lstat_components(root: Path, parts: Iterable[str]) -> Iterator[tuple[Path, os.stat_result]]:
    """``(path, lstat)`` of ``root/part1``, ``root/part1/part2``, ... in turn, following no link.

    Raises
    ------
    FileNotFoundError
        At the first component that does not exist.
    """
    current = root
    for part in parts:
        current = current / part
        yield current, os.lstat(current)


# -- process groups ----------------------------------------------------------------------------------


def kill_pidfd(pidfd: int) -> None:
    """SIGKILL the process behind ``pidfd`` (which cannot be a recycled pid); one gone already is skipped."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid``; a group that is gone or not ours is skipped."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_exists(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a member (zombies count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group_of(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group of ``pid``, or to ``pid`` alone when that fails; a process
    that is gone or not ours is skipped."""
    try:
        os.killpg(os.getpgid(pid), sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, ...); None when
    the process is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()


def live_group_members(pgid: int) -> tuple[int, ...]:
    """Pids in process group ``pgid`` that are not zombies (an init that never reaps keeps zombies)."""
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(name)
        if fields is not None and len(fields) > 2 and fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid:
            found.append(int(name))
    return tuple(found)


def processes_with_env(name: str, value: str) -> list[int]:
    """Processes (other than this one) whose environment holds ``name=value``."""
    marker = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def ancestors(pid: int) -> list[int]:
    """The parent, grandparent, ... of ``pid`` up to (not including) pid 0; at most 256."""
    chain = []
    current = pid
    for _ in range(256):
        fields = _stat_fields(current)
        if fields is None:
            break
        parent = int(fields[1])
        if parent <= 0:
            break
        chain.append(parent)
        current = parent
    return chain
