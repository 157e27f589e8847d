"""File identity facts recorded at plan time and compared before launch (not digest-covered)."""

from __future__ import annotations

import os

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


def identity_of_stat(info: os.stat_result) -> FileIdentity:
    return FileIdentity(
        dev=info.st_dev, ino=info.st_ino, size=info.st_size, mtime_ns=info.st_mtime_ns, mode=info.st_mode
    )
