"""Private directories, atomic writes and no-follow reads for everything under the store.

Every store directory is created 0700; any store entry that is a symlink is rejected; files are
written to a temporary sibling, fsynced, renamed into place, and the directory fsynced. The
no-follow primitives themselves are in :mod:`rho_notebook.oshelpers`; this module gives their
failures the store's messages (:class:`~rho_notebook.errors.StoreError`).

One rule decides whether a store path may be used (:func:`check_entry`): every component from
the store folder it is checked against down to the path itself is looked at without following
links; a symlink anywhere, a component above that is not a directory, the path itself of another
kind than expected, or a directory that another user could write
(:class:`~rho_notebook.errors.StoreUnsafe`, exit 3, naming the ``chmod`` that fixes it) is refused.
Readers then open the last component with ``O_NOFOLLOW | O_NONBLOCK`` (:func:`read_nofollow`), so
a link swapped in after the check is refused too.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Literal

from rho_notebook.errors import NotRegularFile, StoreError, StoreUnsafe
from rho_notebook.oshelpers import kind_of, lstat_components, open_regular_nofollow, read_fd
from rho_notebook.store._plain_json import plain

__all__ = [
    "fsync_dir",
    "check_store_root",
    "refused_dir_entry",
    "ensure_private_dir",
    "atomic_write",
    "atomic_write_json",
    "json_bytes",
    "file_version",
    "open_regular",
    "read_nofollow",
    "read_json",
    "check_no_symlink",
    "check_entry",
    "check_private_mode",
    "list_dir",
    "EntryKind",
]

EntryKind = Literal["file", "dir", "any"]
"""What a store entry must be: a regular file, a directory, or either."""


def _symlink(path: Path) -> StoreError:
    return StoreError(f"store entry {path} is a symlink; the store rejects symlinked entries (remove it)")


def check_private_mode(path: Path, info: os.stat_result, *, what: str = "the store folder") -> None:
    """Refuse a store directory that its group or everyone may write (:class:`StoreUnsafe`).

    Whoever can write it can plant or swap what it holds (plans, runs, settings); the message
    names ``path``, its mode and the fix (``chmod 700 PATH``). Readable by others is allowed.
    """
    if not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return
    group, world = info.st_mode & stat.S_IWGRP, info.st_mode & stat.S_IWOTH
    who = "group- and world-" if group and world else ("group-" if group else "world-")
    mode = stat.S_IMODE(info.st_mode)
    msg = (
        f"{what} {path} is {who}writable (mode {mode:04o}), so other users could plant or replace "
        f"plans and runs; refusing to use it. Fix: chmod 700 {path}"
    )
    raise StoreUnsafe(msg, path=str(path), mode=mode)


def check_entry(path: Path, *, below: Path, kind: EntryKind = "any") -> os.stat_result | None:
    """The ``lstat`` of store entry ``path``, after checking every component from ``below`` down
    to it (``below`` itself was checked by whoever gave it); None when it, or a folder above it,
    does not exist. The one place that decides whether a path in the store may be read or written.

    Raises
    ------
    StoreError
        ``path`` is outside ``below``; a component is a symlink, or above ``path`` and not a
        directory; ``path`` is not of ``kind`` (``file``: a regular file, ``dir``: a directory).
    StoreUnsafe
        A directory on the way (or ``path``, a directory) is group- or world-writable.
    """
    try:
        relative = path.relative_to(below)
    except ValueError:
        msg = f"{path} is outside the store folder {below}"
        raise StoreError(msg) from None
    info = None
    try:
        for current, info in lstat_components(below, relative.parts):
            if stat.S_ISLNK(info.st_mode):
                raise _symlink(current)
            if stat.S_ISDIR(info.st_mode):
                check_private_mode(current, info)
            elif current != path:
                msg = f"store entry {current} should be a directory (remove it)"
                raise StoreError(msg)
    except FileNotFoundError:
        return None
    if info is None:
        return None
    if kind == "file" and not stat.S_ISREG(info.st_mode):
        msg = f"store entry {path} is not a regular file ({kind_of(info.st_mode)}); the store expects one there (remove it)"
        raise StoreError(msg)
    if kind == "dir" and not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"store entry {path} should be a directory (remove it)")
    return info


def list_dir(path: Path, *, below: Path) -> list[str]:
    """The names in store folder ``path`` ([] when it does not exist), checked by
    :func:`check_entry` and listed through a descriptor opened without following a link."""
    if check_entry(path, below=below, kind="dir") is None:
        return []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    except OSError as err:  # swapped for a link or a file since the check
        msg = f"store entry {path} cannot be listed ({err.strerror}); it should be a directory (remove it)"
        raise StoreError(msg) from None
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def check_no_symlink(path: Path, *, below: Path) -> None:
    """Raise StoreError if ``path`` or any component between ``below`` and it is a symlink, a
    component above it is not a directory, or a directory on the way others can write
    (:func:`check_entry` with any kind)."""
    check_entry(path, below=below)


def check_store_root(root: Path) -> None:
    """Refuse a store root that is a symlink, not a directory, or writable by group or others.

    Whoever can write the root can plant or swap plans and runs (and the settings that choose
    providers and hooks), so a root another user can write is refused, never used: the message
    names the path and the fix (``chmod 700 PATH``). A root that does not exist yet is fine (it
    is created 0700). Group- or world-*readable* is allowed: that exposes, it does not subvert.
    """
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        msg = f"the store root {root} is a symlink; point RHO_NOTEBOOK_HOME at a real directory"
        raise StoreError(msg)
    if not stat.S_ISDIR(info.st_mode):
        msg = f"the store root {root} is not a directory; point RHO_NOTEBOOK_HOME at a directory"
        raise StoreError(msg)
    check_private_mode(root, info, what="the store root")


def refused_dir_entry(path: Path) -> str | None:
    """Why the store refuses the directory entry ``path`` itself (a symlink, not a directory, or
    writable by others), or None when it is a private directory (or gone). For listings that must
    report such an entry rather than leave it out silently."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return f"store entry {path} is a symlink; the store rejects symlinked entries (remove it)"
    if not stat.S_ISDIR(info.st_mode):
        return f"store entry {path} should be a directory (remove it)"
    try:
        check_private_mode(path, info)
    except StoreUnsafe as err:
        return err.message
    return None


def ensure_private_dir(path: Path, *, below: Path) -> Path:
    """Create ``path`` (and parents up from ``below``) as 0700 directories, refusing symlinks and
    a store root (``below``) others can write (:func:`check_store_root`)."""
    check_store_root(below)
    below.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_store_root(below)
    current = below
    for part in path.relative_to(below).parts:
        current = current / part
        try:
            os.mkdir(current, 0o700)
        except FileExistsError:
            info = os.lstat(current)
            if stat.S_ISLNK(info.st_mode):
                raise _symlink(current) from None
            if not stat.S_ISDIR(info.st_mode):
                msg = f"store entry {current} should be a directory"
                raise StoreError(msg) from None
            check_private_mode(current, info)
        except NotADirectoryError:
            msg = f"store entry {current.parent} should be a directory (remove it)"
            raise StoreError(msg) from None
    return path


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (temp file, rename); with ``durable`` also fsync the
    file before the rename and the directory after it. Non-durable writes are for files the
    journal can rebuild (snapshots, per-attempt copies of journaled facts)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (creates, renames, links) durable."""
    dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def json_bytes(value: Any, *, compact: bool = False) -> bytes:
    """``value`` as the store writes JSON: sorted keys, UTF-8, one trailing newline; indented by
    two spaces unless ``compact``. A value :func:`~rho_notebook.store._plain_json.plain` enough
    (what requests, results and records hold) is encoded by orjson, which writes the same bytes
    (json's indented encoder is pure Python: 21 µs for a Python node's request, orjson 1.2 µs);
    any other, or one orjson refuses (an integer past 64 bits), by json."""
    if plain(value):
        import orjson  # here, not at the top: it imports uuid and platform, which read verbs never need

        options = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
        try:
            return orjson.dumps(value, option=options if compact else options | orjson.OPT_INDENT_2)
        except orjson.JSONEncodeError:
            pass
    if compact:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    else:
        text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return (text + "\n").encode()


def atomic_write_json(path: Path, value: Any, *, durable: bool = True, compact: bool = False) -> None:
    atomic_write(path, json_bytes(value, compact=compact), durable=durable)


FileVersion = tuple[int, int, int, int, int]


def file_version(info: os.stat_result) -> FileVersion:
    """(dev, ino, size, mtime_ns, ctime_ns): any write to or replacement of a file changes it
    (ctime cannot be set back by an unprivileged writer). Keys caches of what a file was verified to hold."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def open_regular(path: Path) -> tuple[int, os.stat_result]:
    """Open a regular store file read-only without following a symlink; returns (fd, its fstat).

    Raises FileNotFoundError when it is absent, StoreError when it is a symlink, not a regular
    file or unreadable. The caller closes the descriptor.
    """
    try:
        return open_regular_nofollow(path)
    except FileNotFoundError:
        raise
    except NotRegularFile as err:
        msg = f"store entry {err}; the store expects a regular file there (remove it)"
        raise StoreError(msg) from None
    except OSError as err:
        if os.path.islink(path):
            msg = f"store entry {path} is a symlink; the store rejects symlinked entries (remove it)"
            raise StoreError(msg) from None
        raise StoreError(f"cannot read {path}: {err.strerror}") from None


def read_nofollow(path: Path) -> bytes:
    """Read a regular store file, refusing a symlink."""
    fd, _ = open_regular(path)
    try:
        return read_fd(fd)
    finally:
        os.close(fd)


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_nofollow(path))
    except json.JSONDecodeError as err:
        msg = f"{path} is not valid JSON ({err.msg} at line {err.lineno}); the store entry is damaged"
        raise StoreError(msg) from None
    except UnicodeDecodeError as err:
        msg = f"{path} is not UTF-8 text (byte {err.start}: {err.reason}); the store entry is damaged"
        raise StoreError(msg) from None
    except RecursionError:
        msg = f"{path} nests too deeply to be read; the store entry is damaged"
        raise StoreError(msg) from None
