"""Verified descriptors kept for the length of one run.

Verifying a frozen file from its path costs a no-follow walk of every directory component, an
open, an ``fstat`` and a digest lookup; a run that launches the same executable a hundred times
paid that a hundred times. :class:`VerifiedHandles` verifies each frozen file and working
directory once with :mod:`rho_notebook.exec.verify` and keeps the descriptor open. Every later
launch gets a duplicate of the kept descriptor after a re-check of three syscalls:

1. ``fstat`` of the kept descriptor: same :func:`~rho_notebook.store.files.file_version` (size,
   mtime, ctime; any write changes ctime) and still linked (``st_nlink > 0``);
2. ``lstat`` of the path: it still names that same inode (dev, ino), so a file renamed away,
   replaced, or swapped for a symbolic link since is noticed;
3. ``dup`` of the kept descriptor for the launch to own and close.

If the re-check fails, the kept descriptor is closed and the path is verified from scratch, which
refuses an edit or replacement exactly as on first use (the error names the file). A file changed
within the last :data:`~rho_notebook.exec.verify.SETTLED_SECONDS` is not kept (it is verified on
every launch, as without this class): timestamps are coarse, and a second write within the same
clock tick as the one verified could otherwise keep its version.

Launches still go through ``/proc/self/fd/N`` of a descriptor that was verified; what changes is
only how often the path is walked. Owned by the run driver, closed when the run's loop ends; what
else lives exactly as long as the run's launches (the Python executor's fork servers) registers
with :meth:`VerifiedHandles.on_close`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rho_notebook.exec.verify import is_settled, open_verified_dir, resolve_path, verify_file_async
from rho_notebook.model.graph import FrozenFile
from rho_notebook.model.identity import FileIdentity
from rho_notebook.store.files import FileVersion, file_version

__all__ = ["VerifiedHandles"]


@dataclass(frozen=True)
class _Kept:
    fd: int
    version: FileVersion | None
    """What a kept file was verified as; None for a directory (its entries change its mtime, so
    only the inode the path names is re-checked)."""
    path: str
    """The absolute path verified (re-checked with ``lstat``)."""


def _names_same_inode(path: str, kept: os.stat_result) -> bool:
    try:
        named = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return named.st_dev == kept.st_dev and named.st_ino == kept.st_ino


class VerifiedHandles:
    """Frozen files and working directories of one workspace, verified once per run; see the
    module docstring. ``//`` paths resolve against ``workspace``."""

    def __init__(self, workspace: Path) -> None:
        self._workspace = workspace
        self._files: dict[tuple[str, str], _Kept] = {}
        self._dirs: dict[Path, _Kept] = {}
        self._closed = False
        self._closers: list[Callable[[], None]] = []

    async def open_file(self, frozen: FrozenFile, *, identity: FileIdentity | None) -> int:
        """A descriptor of the verified frozen file; the caller closes it.

        Raises :class:`~rho_notebook.errors.VerificationError` as
        :func:`~rho_notebook.exec.verify.open_verified` does.
        """
        key = (frozen.path, frozen.sha256)
        kept = self._files.get(key)
        if kept is not None:
            st = os.fstat(kept.fd)
            if st.st_nlink > 0 and file_version(st) == kept.version and _names_same_inode(kept.path, st):
                return os.dup(kept.fd)
            os.close(self._files.pop(key).fd)
        path = resolve_path(frozen.path, self._workspace)
        fd, st = await verify_file_async(path, sha256=frozen.sha256, identity=identity)
        if not self._closed and key not in self._files and is_settled(st):
            self._files[key] = _Kept(os.dup(fd), file_version(st), str(path))
        return fd

    def open_dir(self, path: Path, *, identity: FileIdentity | None) -> int:
        """A descriptor of the verified working directory ``path``; the caller closes it."""
        kept = self._dirs.get(path)
        if kept is not None:
            st = os.fstat(kept.fd)
            if st.st_nlink > 0 and _names_same_inode(kept.path, st):
                return os.dup(kept.fd)
            os.close(self._dirs.pop(path).fd)
        fd = open_verified_dir(path, identity=identity)
        if not self._closed:
            self._dirs[path] = _Kept(os.dup(fd), None, str(path))
        return fd

    def on_close(self, closer: Callable[[], None]) -> bool:
        """Call ``closer()`` when these handles close (the run's end); False, and not registered,
        when they are closed already."""
        if self._closed:
            return False
        self._closers.append(closer)
        return True

    def close(self) -> None:
        """Close every kept descriptor and call the registered closers (each once, in order, all
        of them even if one raises); later calls verify from the path and keep nothing."""
        self._closed = True
        closers, self._closers = self._closers, []
        failures: list[Exception] = []
        for closer in closers:
            try:
                closer()
            except Exception as err:  # the others still run; the first failure is raised below
                failures.append(err)
        for kept in [*self._files.values(), *self._dirs.values()]:
            os.close(kept.fd)
        self._files.clear()
        self._dirs.clear()
        if failures:
            raise failures[0]

    def __len__(self) -> int:
        """How many descriptors are kept (files and directories)."""
        return len(self._files) + len(self._dirs)
