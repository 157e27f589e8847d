"""File identity facts recorded at plan time and compared before launch (not digest-covered)."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict

__all__ = ["FileIdentity", "identity_of_stat"]


class FileIdentity(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

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
