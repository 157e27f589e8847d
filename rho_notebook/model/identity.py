"""File identity facts recorded at plan time and compared before launch (not digest-covered)."""

from __future__ import annotations

import os
import stat

from rho_notebook.model.base import FrozenModel

__all__ = ["FileIdentity", "identity_of_stat"]


class FileIdentity(FrozenModel):
    dev: int
    ino: int
    size: int
    mtime_ns: int
    mode: int
    """Full ``st_mode`` (type and permission bits); recorded, not compared."""

    @classmethod
    def from_stat(cls, st: os.stat_result) -> FileIdentity:
        return identity_of_stat(st)

    def launch_facts(self) -> tuple[int, ...]:
        """What a launch holds this path to: a file's whole identity; a directory's device and
        inode only, since its size and mtime move whenever an entry is added or removed
        (:func:`~rho_notebook.exec.verify.open_verified_dir`). Two plans whose paths agree on
        these launch alike (one plan per graph: :mod:`~rho_notebook.store.plans`)."""
        if stat.S_ISDIR(self.mode):
            return (self.dev, self.ino)
        return (self.dev, self.ino, self.size, self.mtime_ns, self.mode)


def identity_of_stat(info: os.stat_result) -> FileIdentity:
    return FileIdentity(
        dev=info.st_dev, ino=info.st_ino, size=info.st_size, mtime_ns=info.st_mtime_ns, mode=info.st_mode
    )
