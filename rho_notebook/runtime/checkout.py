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
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from weakref import WeakKeyDictionary, finalize, ref

from rho_notebook.errors import StoreError
from rho_notebook.store.files import ensure_private_dir
from rho_notebook.store.layout import StoreLayout

__all__ = ["FairReadWriteLock", "CheckoutLock"]

_FIRST_DELAY = 0.001
_MAX_DELAY = 0.02
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


# --------------------------------------------------------------------------- in-process lock


class _Waiter:
    __slots__ = ("exclusive", "future")

    def __init__(self, exclusive: bool, future: asyncio.Future[None]) -> None:
        self.exclusive = exclusive
        self.future = future


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

    def read(self) -> AbstractAsyncContextManager[None]:
        """Hold the lock shared with other readers."""
        return _LocalHold(self, False)

    def write(self) -> AbstractAsyncContextManager[None]:
        """Hold the lock alone."""
        return _LocalHold(self, True)

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
        self._readers -= 1
        if self._queue:  # (the common case, nobody waiting, skips the call)
            self._wake()

    def try_write(self) -> bool:
        """Take the lock alone now if that needs no wait (nobody holds it, nobody queues)."""
        if self._queue or self._writing or self._readers:
            return False
        self._writing = True
        return True

    async def acquire_write(self) -> None:
        """Wait for the lock alone (pair with :meth:`release_write`; :meth:`write` does both)."""
        await self._acquire(exclusive=True)

    def release_write(self) -> None:
        """Give back an exclusive hold taken by :meth:`try_write` or :meth:`acquire_write`."""
        self._writing = False
        if self._queue:
            self._wake()

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


class _LocalHold:
    """One hold on a :class:`FairReadWriteLock` (what its ``read``/``write`` return): a plain
    async context manager, since a generator one costs more than the lock itself. Uncontended,
    entering takes the lock without suspending."""

    __slots__ = ("_exclusive", "_held", "_lock")

    def __init__(self, lock: FairReadWriteLock, exclusive: bool) -> None:
        self._lock = lock
        self._exclusive = exclusive
        self._held = False

    async def __aenter__(self) -> None:
        lock, exclusive = self._lock, self._exclusive
        if not (lock.try_write() if exclusive else lock.try_read()):
            await (lock.acquire_write() if exclusive else lock.acquire_read())
        self._held = True

    async def __aexit__(self, *exc_info: object) -> None:
        if self._held:
            self._held = False
            if self._exclusive:
                self._lock.release_write()
            else:
                self._lock.release_read()


# --------------------------------------------------------------------------- cross-process part


@dataclass(eq=False, slots=True, weakref_slot=True)
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


def _gate_for(loop: asyncio.AbstractEventLoop, lock_path: Path) -> _Gate:
    gates = _GATES.get(loop)
    if gates is None:
        gates = _GATES[loop] = {}
    gate = gates.get(lock_path)
    if gate is None:
        gate = gates[lock_path] = _Gate()
    return gate


class _LoopGate(ref[asyncio.AbstractEventLoop]):
    """A weak reference to an event loop that carries the gate of one lock file in that loop:
    a :class:`CheckoutLock` caches the last one it used, so a node finds its gate with one
    identity test instead of two lookups in :data:`_GATES` (a ``WeakKeyDictionary`` lookup makes
    a weak reference per call). One object, so a thread swapping it never pairs the wrong two."""

    __slots__ = ("gate",)
    gate: _Gate


def _forget_gate(cached: _LoopGate) -> None:
    # the loop is gone: drop the gate with it, as _GATES does, so its finalizer closes the file
    del cached.gate


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


class _LockFile:
    """One :class:`CheckoutLock`'s lock file: where it lies, and the gate it last used for it."""

    __slots__ = ("cached", "locks_dir", "path", "store_root")

    def __init__(self, locks_dir: Path, store_root: Path, path: Path) -> None:
        self.locks_dir = locks_dir
        self.store_root = store_root
        self.path = path
        self.cached: _LoopGate | None = None

    def gate(self) -> _Gate:
        """This event loop's gate on the file (shared by every :class:`CheckoutLock` of it)."""
        loop = asyncio.get_running_loop()
        cached = self.cached
        if cached is not None and cached() is loop:
            return cached.gate
        gate = _gate_for(loop, self.path)
        cached = _LoopGate(loop, _forget_gate)
        cached.gate = gate
        self.cached = cached
        return gate

    def fd(self, gate: _Gate) -> int:
        """The gate's descriptor on the lock file, opened on first use."""
        if gate.fd is None:
            if not gate.dir_ready:
                ensure_private_dir(self.locks_dir, below=self.store_root)
                gate.dir_ready = True
            gate.fd = _open_lock_file(self.path)
            gate.closer = finalize(gate, os.close, gate.fd)
        return gate.fd

    async def enter_shared(self, gate: _Gate) -> None:
        """Count one more reader of this process, taking ``LOCK_SH`` for the first."""
        mutex = gate.shared_mutex
        if not mutex.try_write():
            await mutex.acquire_write()
        try:
            if gate.shared_users == 0:
                fd = self.fd(gate)
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:  # a writer of another process: poll without blocking the loop
                    await _flock(fd, fcntl.LOCK_SH)
            gate.shared_users += 1
        finally:
            mutex.release_write()


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
        locks_dir = Path(os.path.abspath(locks_dir))
        root = Path(os.path.abspath(store_root)) if store_root else locks_dir.parent
        self._file = _LockFile(locks_dir, root, locks_dir / f"{workspace_key}.lock")

    @classmethod
    def for_layout(cls, layout: StoreLayout, workspace_key: str) -> CheckoutLock:
        """The checkout lock of ``workspace_key`` in the store ``layout``."""
        return cls(workspace_key, locks_dir=layout.checkout_locks, store_root=layout.home)

    @property
    def path(self) -> Path:
        """The lock file."""
        return self._file.path

    def read(self) -> AbstractAsyncContextManager[None]:
        """Hold the checkout shared with other readers (in this and other processes)."""
        return _SharedHold(self._file)

    def write(self) -> AbstractAsyncContextManager[None]:
        """Hold the checkout alone (in this and other processes): ``LOCK_EX`` on the lock file is
        taken on entering and dropped on leaving, every time, so other processes get their turn."""
        return _ExclusiveHold(self._file)

    def close_idle(self) -> None:
        """Close this event loop's descriptor on the lock file unless someone holds or waits for
        the lock (the next node opens it again). Run owners call this when a run ends."""
        gate = _GATES.get(asyncio.get_running_loop(), {}).get(self._file.path)
        if gate is None or gate.closer is None or not gate.local.idle or gate.shared_users:
            return
        gate.closer()
        gate.fd = gate.closer = None


class _SharedHold:
    """One reader's hold on the checkout (what :meth:`CheckoutLock.read` returns). A plain async
    context manager, not a generator: a wide fan of read-only nodes takes it once per node, and
    three nested generator context managers were a tenth of such a node's cost. Uncontended
    (nobody writes or waits, this process already holds ``LOCK_SH``) entering only counts."""

    __slots__ = ("_file", "_gate")

    def __init__(self, file: _LockFile) -> None:
        self._file = file
        self._gate: _Gate | None = None

    async def __aenter__(self) -> None:
        gate = self._file.gate()
        local = gate.local
        if local.try_read():
            if gate.shared_users and gate.shared_mutex.idle:
                gate.shared_users += 1  # this process holds LOCK_SH already
                self._gate = gate
                return
        else:
            await local.acquire_read()
        try:
            await self._file.enter_shared(gate)
        except BaseException:
            local.release_read()
            raise
        self._gate = gate

    async def __aexit__(self, *exc_info: object) -> None:
        gate = self._gate
        if gate is not None:
            self._gate = None
            gate.shared_users -= 1
            try:
                if gate.shared_users == 0 and gate.fd is not None:
                    fcntl.flock(gate.fd, fcntl.LOCK_UN)
            finally:
                gate.local.release_read()


class _ExclusiveHold:
    """One writer's hold on the checkout (what :meth:`CheckoutLock.write` returns), a plain async
    context manager for the reason :class:`_SharedHold` is one. Uncontended (nobody in this
    process holds or waits for the checkout, no other process holds the lock file) entering takes
    the local lock and one non-blocking ``flock`` without suspending; only a contended ``flock``
    polls with backoff."""

    __slots__ = ("_fd", "_file", "_local")

    def __init__(self, file: _LockFile) -> None:
        self._file = file
        self._local: FairReadWriteLock | None = None
        self._fd = -1

    async def __aenter__(self) -> None:
        file = self._file
        gate = file.gate()
        local = gate.local
        if not local.try_write():
            await local.acquire_write()
        try:
            fd = gate.fd
            if fd is None:
                fd = file.fd(gate)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another process holds it: poll without blocking the loop
                await _flock(fd, fcntl.LOCK_EX)
        except BaseException:  # cancelled while polling, or the file cannot be opened
            local.release_write()
            raise
        self._fd = fd
        self._local = local

    async def __aexit__(self, *exc_info: object) -> None:
        local = self._local
        if local is not None:
            self._local = None
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                local.release_write()
