"""The owner's side of one forked Python attempt and of one spare a fork server offered.

A fork server (:mod:`rho_notebook.exec.python_forks`) forks each attempt's process ahead of it
and offers it to the run's owner: :class:`Offered` is such a spare while no attempt has taken
it, :class:`Forked` the attempt running in it as
:func:`~rho_notebook.exec.process.run_process` supervises it (a
:class:`~rho_notebook.exec.process.Child`). Only the server, the spare's parent, can reap it: the
exit arrives as the server's report of its ``waitid`` status.
"""

from __future__ import annotations

import array
import asyncio
import os
import signal
import socket
from dataclasses import dataclass

from rho_notebook.exec.process import ProcessKind, waited
from rho_notebook.oshelpers import kill_pidfd, signal_group

__all__ = ["Forked", "Offered", "received_fds", "rights"]


class Forked:
    """One forked attempt as :func:`~rho_notebook.exec.process.run_process` supervises it (a
    :class:`~rho_notebook.exec.process.Child`): its exit arrives from the server."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pid: int, pidfd: int) -> None:
        self.pid = pid
        """The child's pid, also its process-group and session id."""
        self._pidfd = pidfd
        self._released = False
        self.exited: asyncio.Future[None] = loop.create_future()
        self.kind: ProcessKind = "abnormal"
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.detail = ""

    def finish(self, si_code: int, si_status: int) -> None:
        """The server reaped the child with this ``waitid`` status."""
        self.kind, self.exit_code, self.signal, self.detail = waited(si_code, si_status)
        self._done()

    def lost(self, detail: str) -> None:
        """The server is gone before it reported the exit: stop the group, status unknown."""
        if self.exited.done():
            return
        self.kill()
        signal_group(self.pid, signal.SIGKILL)
        self.detail = detail
        self._done()

    def _done(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)
        if self._released:
            self._close()

    def kill(self) -> None:
        if not self.exited.done() and self._pidfd >= 0:
            kill_pidfd(self._pidfd)

    def release(self) -> None:
        """Close the pidfd once the exit is known (at once, or when it arrives)."""
        self._released = True
        if self.exited.done():
            self._close()

    def _close(self) -> None:
        fd, self._pidfd = self._pidfd, -1
        if fd >= 0:
            os.close(fd)


@dataclass
class Offered:
    """A spare the server offered: a forked child that leads its own session and waits for one
    request on its socket (closing that socket unused makes it exit)."""

    ident: int
    pid: int
    pidfd: int
    sock: socket.socket

    def close(self) -> None:
        self.sock.close()
        os.close(self.pidfd)


def received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors ``SCM_RIGHTS`` brought in a message's ancillary data. The server has its
    own copy: it runs from its file in the node's interpreter, with the standard library only."""
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            numbers = array.array("i")
            numbers.frombytes(payload[: len(payload) - len(payload) % numbers.itemsize])
            fds.extend(numbers)
    return fds


def rights(fds: tuple[int, ...]) -> list[tuple[int, int, array.array[int]]]:
    return [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
