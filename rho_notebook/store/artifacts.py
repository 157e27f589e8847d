"""Attempt directories and their non-durable files, created off the run loop.

An attempt's directory (``nodes/<NODE>/attempts/<N>/``) exists only once something is written
into it: a silent command that exits 0 leaves its exit record in the journal and no folder.
Creating a directory is the slowest filesystem call on a launch (three new inodes for a node's
first attempt; 25-400 µs each on the ext4 volumes we measured), so every directory creation and
every write the journal can rebuild runs on one writer thread per run, in submission order, while
the loop goes on scheduling. Durable artifacts (an output value that
downstream nodes read) are written by their executor after awaiting ``AttemptFiles.ready()``.

``ArtifactWriter.drain()`` is awaited before a run is marked completed, so whoever sees a completed
run also sees all of its files. A failure in the writer (a symlink planted in the store, a full
disk) is raised to whoever awaits ``ready()`` and reported by ``drain()`` (the driver journals it as
``artifact_failed``); it is never lost.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from rho_notebook.store.files import atomic_write, ensure_private_dir

__all__ = ["ArtifactWriter", "AttemptFiles"]

_Job = tuple[Callable[[], Any], "Future[Any]"]


class ArtifactWriter:
    """One background thread doing a run's filesystem writes in the order they were submitted."""

    def __init__(self, below: Path) -> None:
        self.below = below
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._errors: list[BaseException] = []

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="rho-artifacts", daemon=True)
            self._thread.start()
        done: Future[Any] = Future()
        self._jobs.put((functools.partial(fn, *args, **kwargs), done))
        return done

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            call, done = job
            try:
                done.set_result(call())
            except BaseException as err:  # handed to whoever waits; also kept for drain()
                self._errors.append(err)
                done.set_exception(err)

    async def drain(self) -> list[str]:
        """Wait until every submitted job has run; return (and forget) the errors they met."""
        if self._thread is not None:
            await asyncio.wrap_future(self.submit(_nothing))
        errors, self._errors = self._errors, []
        return [f"{type(err).__name__}: {err}" for err in errors]

    def close(self) -> None:
        """Finish the queued jobs and stop the thread (blocking; call once the loop is done)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None

    async def aclose(self) -> None:
        """:meth:`close` without blocking the loop; free when no job ever started the thread."""
        if self._thread is not None:
            await asyncio.to_thread(self.close)

    def files(self, path: Path) -> AttemptFiles:
        """The attempt directory ``path``, created by this writer on first use."""
        return AttemptFiles(self, path=path)

    def attempt_files(self, locate: Callable[[], Path]) -> AttemptFiles:
        """The attempt directory ``locate()`` names, worked out on first use (a launch whose
        attempt writes nothing never builds its path) and created by this writer on first write."""
        return AttemptFiles(self, locate=locate)


def _nothing() -> None:
    return None


class AttemptFiles:
    """An attempt's directory: where it is (worked out on first use when given as ``locate``) and,
    with a ``writer``, created on first use by the run's writer thread; without one (:meth:`made`)
    the caller made it and copies are written at once."""

    __slots__ = ("_locate", "_made", "_path", "_writer")

    def __init__(
        self, writer: ArtifactWriter | None, *, path: Path | None = None, locate: Callable[[], Path] | None = None
    ) -> None:
        if (path is None) == (locate is None):
            msg = "AttemptFiles needs either a path or a way to locate it"
            raise TypeError(msg)
        self._path = path
        self._locate = locate
        self._writer = writer
        self._made: Future[Any] | None = None

    @classmethod
    def made(cls, path: Path) -> AttemptFiles:
        """The directory ``path``, which the caller has made already."""
        return cls(None, path=path)

    @property
    def path(self) -> Path:
        """Where the directory is (located on the first look, then kept)."""
        path = self._path
        if path is None:
            assert self._locate is not None
            path = self._path = self._locate()
        return path

    @property
    def prepared(self) -> bool:
        """Whether the directory exists or is being created (something was written there)."""
        return self._writer is None or self._made is not None

    def prepare(self) -> None:
        """Start creating the directory now (idempotent); nothing waits for it."""
        if self._made is None and self._writer is not None:
            self._made = self._writer.submit(ensure_private_dir, self.path, below=self._writer.below)

    async def ready(self) -> Path:
        """The directory, once it exists (raises StoreError if it cannot be created)."""
        self.prepare()
        if self._made is not None:
            await asyncio.wrap_future(self._made)
        return self.path

    def write_later(self, name: str, data: bytes) -> None:
        """Write ``name`` atomically but not durably, after the directory exists; returns at once
        (a directory the caller made: written now). Nothing is written when the directory could
        not be made (say, a symlink was planted)."""
        writer = self._writer
        if writer is None:
            atomic_write(self.path / name, data, durable=False)
            return
        self.prepare()
        made = self._made
        assert made is not None
        path = self.path / name

        def write() -> None:
            made.result()  # done already (the writer runs jobs in order); re-raises its failure
            atomic_write(path, data, durable=False)

        writer.submit(write)
