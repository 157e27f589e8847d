"""The checkout lock: read-only nodes share the workspace checkout, a mutating node holds it alone.

Owns two layers, always taken in this order (and released in reverse):

1. In-process, :class:`FairReadWriteLock`: one per workspace per event loop, shared by every run
   in the process. It is FIFO-fair: once a writer waits, readers arriving later queue behind it,
   so a stream of read-only nodes cannot starve a mutating node.
2. Cross-process, ``flock(2)`` on ``<locks_dir>/<workspace_key>.lock`` (the file is 0600, the
   directory 0700, symlinks are refused). Each event loop opens the lock file once and keeps the
   descriptor until a run ends with the lock idle (:meth:`CheckoutLock.close_idle`), so a node
   launch costs two ``flock`` calls, not an open and a close as well. The readers of one process
   share ``LOCK_SH`` on it, taken when the first local reader enters and dropped when the last one
   leaves; a writer takes ``LOCK_EX`` on it (the local lock never admits both at once). Locks are
   polled with ``LOCK_NB`` and a short ``asyncio.sleep`` backoff (1 ms doubling to 20 ms), so the
   event loop never blocks.

As in Rho, the cross-process order is safe but not fair: ``flock`` keeps no queue, so a mutating
node can wait behind readers of other processes for as long as they keep the shared lock. Lock
files are never deleted (deleting a lock file another process has open would split the lock).
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import re
import stat
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from weakref import WeakKeyDictionary, finalize

from rho_notebook.errors import StoreError
from rho_notebook.store.files import ensure_private_dir
from rho_notebook.store.layout import StoreLayout

__all__ = ["FairReadWriteLock", "CheckoutLock"]

_FIRST_DELAY = 0.001
_MAX_DELAY = 0.02
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


# --------------------------------------------------------------------------- in-process lock


@dataclass(eq=False)
class _Waiter:
    exclusive: bool
    future: asyncio.Future[None]


class FairReadWriteLock:
    """A FIFO-fair asyncio readers-writer lock for one event loop.

    Waiters are served strictly in arrival order; consecutive readers at the head of the queue
    are admitted together. A waiter cancelled while queued is removed without blocking or
    skipping the others; one cancelled just after being granted the lock hands it on.

    Examples
    --------
    >>> async def node(lock: FairReadWriteLock) -> None:
    ...     async with lock.write():
    ...         ...
    """

    def __init__(self) -> None:
        self._readers = 0
        self._writing = False
        self._queue: deque[_Waiter] = deque()

    @property
    def readers(self) -> int:
        """How many readers hold the lock now."""
        return self._readers

    @property
    def writing(self) -> bool:
        """Whether a writer holds the lock now."""
        return self._writing

    @property
    def waiting(self) -> int:
        """How many tasks are queued for the lock."""
        return sum(1 for w in self._queue if not w.future.done())

    @property
    def idle(self) -> bool:
        """Nobody holds the lock and nobody waits for it."""
        return not self._writing and self._readers == 0 and not self._queue

    @asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        """Hold the lock shared with other readers."""
        await self._acquire(exclusive=False)
        try:
            yield
        finally:
            self._release(exclusive=False)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        """Hold the lock alone."""
        await self._acquire(exclusive=True)
        try:
            yield
        finally:
            self._release(exclusive=True)

    def try_read(self) -> bool:
        """Take the lock shared now if that needs no wait (no writer holds it, nobody queues)."""
        if self._queue or self._writing:
            return False
        self._readers += 1
        return True

    async def acquire_read(self) -> None:
        """Wait for the lock shared (pair with :meth:`release_read`; :meth:`read` does both)."""
        await self._acquire(exclusive=False)

    def release_read(self) -> None:
        """Give back a shared hold taken by :meth:`try_read` or :meth:`acquire_read`."""
        self._release(exclusive=False)

    def _can_grant(self, exclusive: bool) -> bool:
        if exclusive:
            return not self._writing and self._readers == 0
        return not self._writing

    def _grant(self, exclusive: bool) -> None:
        if exclusive:
            self._writing = True
        else:
            self._readers += 1

    def _release(self, exclusive: bool) -> None:
        if exclusive:
            self._writing = False
        else:
            self._readers -= 1
        self._wake()

    async def _acquire(self, *, exclusive: bool) -> None:
        if not self._queue and self._can_grant(exclusive):
            self._grant(exclusive)
            return
        waiter = _Waiter(exclusive=exclusive, future=asyncio.get_running_loop().create_future())
        self._queue.append(waiter)
        try:
            await waiter.future
        except BaseException:
            self._abandon(waiter)
            raise

    def _abandon(self, waiter: _Waiter) -> None:
        """Undo a wait that ended in cancellation (or any other exception)."""
        if waiter.future.done() and not waiter.future.cancelled():
            self._release(waiter.exclusive)  # granted, but the task was cancelled before resuming
            return
        waiter.future.cancel()
        if waiter in self._queue:
            self._queue.remove(waiter)
        self._wake()

    def _wake(self) -> None:
        """Grant the lock to waiters at the head of the queue for as long as they fit."""
        queue = self._queue
        while queue:
            head = queue[0]
            if head.future.done():  # cancelled; its task has not run its cleanup yet
                queue.popleft()
                continue
            if not self._can_grant(head.exclusive):
                return
            queue.popleft()
            self._grant(head.exclusive)
            head.future.set_result(None)


# --------------------------------------------------------------------------- cross-process part


@dataclass(eq=False)
class _Gate:
    """Everything one event loop shares about one lock file."""

    local: FairReadWriteLock = field(default_factory=FairReadWriteLock)
    shared_mutex: FairReadWriteLock = field(default_factory=FairReadWriteLock)
    """Serializes taking the shared lock, so concurrent first readers take it once."""
    fd: int | None = None
    """The lock file, opened on first use; closed by :meth:`CheckoutLock.close_idle` (a run owner
    calls it when its run ends) or, failing that, when the gate is collected with its loop. One
    descriptor serves both modes: the local lock never lets a writer and readers in at once."""
    closer: finalize[[int], _Gate] | None = None
    shared_users: int = 0
    dir_ready: bool = False


# Filled on first use only. Weak on the loop: gates hold no reference to it, so a closed loop's
# gates go away with it.
_GATES: WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Path, _Gate]] = WeakKeyDictionary()


def _gate_for(lock_path: Path) -> _Gate:
    loop = asyncio.get_running_loop()
    gates = _GATES.get(loop)
    if gates is None:
        gates = _GATES[loop] = {}
    gate = gates.get(lock_path)
    if gate is None:
        gate = gates[lock_path] = _Gate()
    return gate


def _open_lock_file(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        if err.errno == errno.ELOOP or os.path.islink(path):
            msg = f"checkout lock {path} is a symlink; the store rejects symlinked entries (remove it)"
            raise StoreError(msg) from None
        msg = f"cannot open checkout lock {path}: {err.strerror}"
        raise StoreError(msg) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        msg = f"checkout lock {path} is not a regular file (remove it)"
        raise StoreError(msg)
    return fd


async def _flock(fd: int, operation: int) -> None:
    """Take ``flock(fd, operation)`` without blocking the loop: poll with a capped backoff."""
    delay = _FIRST_DELAY
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_DELAY)
        else:
            return


class CheckoutLock:
    """Shared (read-only nodes) or exclusive (mutating nodes) access to one workspace checkout.

    Cheap to create; every instance for the same lock file in the same event loop shares one
    in-process fair lock and one shared ``flock`` descriptor.

    Parameters
    ----------
    workspace_key
        The workspace's key (a hex digest); names the lock file.
    locks_dir
        The ``checkout-locks`` directory, created 0700 on first use.
    store_root
        The store home ``locks_dir`` lies below (symlinks between them are refused); defaults
        to ``locks_dir.parent``.
    """

    def __init__(self, workspace_key: str, *, locks_dir: Path, store_root: Path | None = None) -> None:
        if not _KEY.fullmatch(workspace_key):
            msg = f"workspace key {workspace_key!r} cannot name a lock file (use letters, digits, '.', '_', '-')"
            raise ValueError(msg)
        self._locks_dir = Path(os.path.abspath(locks_dir))
        self._store_root = Path(os.path.abspath(store_root)) if store_root else self._locks_dir.parent
        self._path = self._locks_dir / f"{workspace_key}.lock"

    @classmethod
    def for_layout(cls, layout: StoreLayout, workspace_key: str) -> CheckoutLock:
        """The checkout lock of ``workspace_key`` in the store ``layout``."""
        return cls(workspace_key, locks_dir=layout.checkout_locks, store_root=layout.home)

    @property
    def path(self) -> Path:
        """The lock file."""
        return self._path

    def read(self) -> AbstractAsyncContextManager[None]:
        """Hold the checkout shared with other readers (in this and other processes)."""
        return _SharedHold(self._path, self._enter_shared)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        """Hold the checkout alone (in this and other processes)."""
        gate = _gate_for(self._path)
        async with gate.local.write():
            fd = self._lock_file(gate)
            await _flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    async def _enter_shared(self, gate: _Gate) -> None:
        async with gate.shared_mutex.write():
            if gate.shared_users == 0:
                await _flock(self._lock_file(gate), fcntl.LOCK_SH)
            gate.shared_users += 1

    def _lock_file(self, gate: _Gate) -> int:
        """The gate's descriptor on the lock file, opened on first use."""
        if gate.fd is None:
            if not gate.dir_ready:
                ensure_private_dir(self._locks_dir, below=self._store_root)
                gate.dir_ready = True
            gate.fd = _open_lock_file(self._path)
            gate.closer = finalize(gate, os.close, gate.fd)
        return gate.fd

    def close_idle(self) -> None:
        """Close this event loop's descriptor on the lock file unless someone holds or waits for
        the lock (the next node opens it again). Run owners call this when a run ends."""
        gate = _GATES.get(asyncio.get_running_loop(), {}).get(self._path)
        if gate is None or gate.closer is None or not gate.local.idle or gate.shared_users:
            return
        gate.closer()
        gate.fd = gate.closer = None


class _SharedHold:
    """One reader's hold on the checkout (what :meth:`CheckoutLock.read` returns). A plain async
    context manager, not a generator: a wide fan of read-only nodes takes it once per node, and
    three nested generator context managers were a tenth of such a node's cost. Uncontended
    (nobody writes or waits, this process already holds ``LOCK_SH``) entering only counts."""

    __slots__ = ("_enter_shared", "_gate", "_path")

    def __init__(self, path: Path, enter_shared: Callable[[_Gate], Awaitable[None]]) -> None:
        self._path = path
        self._enter_shared = enter_shared
        self._gate: _Gate | None = None

    async def __aenter__(self) -> None:
        gate = self._gate = _gate_for(self._path)
        local = gate.local
        if local.try_read():
            if gate.shared_users and gate.shared_mutex.idle:
                gate.shared_users += 1  # this process holds LOCK_SH already
                return
        else:
            await local.acquire_read()
        try:
            await self._enter_shared(gate)
        except BaseException:
            local.release_read()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        gate = self._gate
        if gate is not None:
            self._gate = None
            _leave_shared(gate)
            gate.local.release_read()


def _leave_shared(gate: _Gate) -> None:
    gate.shared_users -= 1
    if gate.shared_users == 0 and gate.fd is not None:
        fcntl.flock(gate.fd, fcntl.LOCK_UN)
