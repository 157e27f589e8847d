"""Open frozen files and directories through verified handles.

A plan pins every executable and script interpreter by content digest, and the manifest may also
pin file identity (device, inode, size, modification time). Before a launch the process layer
opens each of them here and keeps the descriptor: the launch then goes through the descriptor, so
renaming or replacing the path after the check cannot select another file.

How a path is opened: starting at ``/``, every directory component is opened relative to the
previous one with ``O_PATH | O_DIRECTORY | O_NOFOLLOW``, so no component may be a symbolic link and
swapping a component for a link between steps cannot redirect the walk (this is the race-free form
of "lstat every parent"). The last component is opened with ``O_NOFOLLOW | O_CLOEXEC`` (and
``O_NONBLOCK``, so a file swapped for a FIFO cannot block the caller), then checked with ``fstat``
and hashed by reading the descriptor itself.

Digests of files that have not changed for a while are cached in-process, keyed by
``(dev, ino, size, mtime_ns, ctime_ns)``: a write changes ``ctime`` and user space cannot set it.
Files changed within the last :data:`SETTLED_SECONDS` are hashed every time, because filesystem
timestamps are coarse (one clock tick) and two writes inside one tick would share a key.

What this does not cover: a writer that already holds the file open for writing can change its
bytes in place between the hash and the ``execve``. The check pins the object and what it held
when verified; protect executables from writers with ordinary permissions.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import threading
import time
from collections import OrderedDict
from pathlib import Path, PurePosixPath

from rho_notebook.errors import VerificationError
from rho_notebook.model.identity import FileIdentity
from rho_notebook.store.files import FileVersion, file_version

__all__ = [
    "SETTLED_SECONDS",
    "FileIdentity",
    "identity_of",
    "is_settled",
    "normalize_sha256",
    "open_verified",
    "open_verified_async",
    "open_verified_dir",
    "resolve_path",
    "verify_file",
    "verify_file_async",
]

SETTLED_SECONDS = 2.0
"""A file whose mtime/ctime is younger than this is re-hashed on every verification."""

_INLINE_HASH_BYTES = 256 * 1024
"""Files up to this size are hashed on the calling thread (well under a millisecond)."""

_CACHE_CAPACITY = 512

_DIR_STEP = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY


def identity_of(path: Path) -> FileIdentity:
    """Return the identity of ``path`` itself (``lstat``: a symbolic link is not followed).

    Parameters
    ----------
    path
        Any path; relative paths are relative to the current directory.

    Raises
    ------
    OSError
        When ``path`` cannot be examined.
    """
    return FileIdentity.from_stat(os.lstat(path))


def normalize_sha256(digest: str) -> str:
    """Return the lowercase hex of a ``sha256:<hex>`` or bare-hex digest, or raise ``ValueError``."""
    hexpart = digest[len("sha256:") :] if digest.startswith("sha256:") else digest
    hexpart = hexpart.lower()
    if len(hexpart) != 64 or any(c not in "0123456789abcdef" for c in hexpart):
        msg = f"not a sha256 digest: {digest!r} (expected 'sha256:' followed by 64 hex digits)"
        raise ValueError(msg)
    return hexpart


def resolve_path(frozen_path: str, workspace: Path) -> Path:
    """Turn a frozen path into an absolute path without touching the filesystem.

    Parameters
    ----------
    frozen_path
        ``//rel/path`` (inside the workspace; ``//`` alone is the workspace) or a canonical
        absolute path.
    workspace
        Absolute, canonical workspace root.

    Raises
    ------
    VerificationError
        ``reason="invalid_path"`` for relative paths, ``..`` or empty components.
    """
    if not workspace.is_absolute():
        msg = f"workspace {str(workspace)!r} must be an absolute path"
        raise VerificationError(msg, path=frozen_path, reason="invalid_path")
    if frozen_path.startswith("//"):
        base, rest = workspace, frozen_path[2:]
    elif frozen_path.startswith("/"):
        base, rest = Path("/"), frozen_path[1:]
    else:
        msg = f"frozen path {frozen_path!r} is neither '//'-relative nor absolute"
        raise VerificationError(msg, path=frozen_path, reason="invalid_path")
    parts = rest.rstrip("/").split("/") if rest.rstrip("/") else []
    for part in parts:
        if part in ("", ".."):
            msg = f"frozen path {frozen_path!r} has an empty or '..' component; plans hold normalised paths"
            raise VerificationError(msg, path=frozen_path, reason="invalid_path")
    return base.joinpath(*(p for p in parts if p != "."))


def is_settled(st: os.stat_result) -> bool:
    """Whether the file was last changed at least :data:`SETTLED_SECONDS` ago, so that any later
    write is sure to give it a different ``file_version`` despite coarse timestamps."""
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) >= int(SETTLED_SECONDS * 1e9)


class _DigestCache:
    """Bounded LRU of file digests keyed by :func:`file_version`; thread-safe."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[FileVersion, str] = OrderedDict()

    key = staticmethod(file_version)

    def get(self, st: os.stat_result) -> str | None:
        key = self.key(st)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, st: os.stat_result, digest: str) -> None:
        if not is_settled(st):
            return
        with self._lock:
            self._entries[self.key(st)] = digest
            self._entries.move_to_end(self.key(st))
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_DIGESTS = _DigestCache(_CACHE_CAPACITY)


def _split_absolute(path: Path) -> tuple[str, ...]:
    """Components of an absolute, normalised path after ``/``; raise on anything else."""
    shown = str(path)
    if not path.is_absolute():
        msg = f"{shown}: expected an absolute path"
        raise VerificationError(msg, path=shown, reason="invalid_path")
    parts = PurePosixPath(shown).parts[1:]
    if any(part in ("..", ".") for part in parts):
        msg = f"{shown}: path has a '..' component; expected a canonical path"
        raise VerificationError(msg, path=shown, reason="invalid_path")
    return parts


def _classify(
    path: Path, parent_fd: int, name: str, shown_prefix: str, err: OSError, *, expect_dir: bool
) -> VerificationError:
    """Explain why opening ``name`` under ``parent_fd`` failed."""
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return VerificationError(f"{path}: {shown_prefix} does not exist", path=str(path), reason="missing")
    except OSError as again:
        detail = again.strerror or str(again)
        return VerificationError(
            f"{path}: cannot examine {shown_prefix}: {detail}", path=str(path), reason="unreadable"
        )
    if stat.S_ISLNK(st.st_mode):
        msg = f"{path}: {shown_prefix} is a symbolic link; frozen paths must not pass through links"
        return VerificationError(msg, path=str(path), reason="symlink")
    if expect_dir and not stat.S_ISDIR(st.st_mode):
        return VerificationError(f"{path}: {shown_prefix} is not a directory", path=str(path), reason="not_directory")
    detail = err.strerror or str(err)
    return VerificationError(f"{path}: cannot open {shown_prefix}: {detail}", path=str(path), reason="unreadable")


def _open_parent(path: Path, parts: tuple[str, ...]) -> int:
    """Open the directory holding the last component of ``parts`` one no-follow step at a time."""
    fd = os.open("/", _DIR_STEP)
    walked = ""
    try:
        for name in parts[:-1]:
            walked = f"{walked}/{name}"
            try:
                nxt = os.open(name, _DIR_STEP, dir_fd=fd)
            except OSError as err:
                raise _classify(path, fd, name, f"component {walked}", err, expect_dir=True) from err
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lstat_leaf(path: Path, parent_fd: int, name: str) -> os.stat_result:
    try:
        return os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError as err:
        raise VerificationError(f"{path}: does not exist", path=str(path), reason="missing") from err
    except OSError as err:
        msg = f"{path}: cannot examine: {err.strerror or err}"
        raise VerificationError(msg, path=str(path), reason="unreadable") from err


def _compare_identity(path: Path, st: os.stat_result, identity: FileIdentity, *, with_content: bool) -> None:
    fields: list[tuple[str, int, int]] = [("dev", identity.dev, st.st_dev), ("ino", identity.ino, st.st_ino)]
    if with_content:
        fields += [("size", identity.size, st.st_size), ("mtime_ns", identity.mtime_ns, st.st_mtime_ns)]
    differ = [f"{name} {want} != {got}" for name, want, got in fields if want != got]
    if differ:
        msg = (
            f"{path}: file identity differs from the plan ({', '.join(differ)}); "
            "it was replaced or modified after planning; create a new plan"
        )
        raise VerificationError(msg, path=str(path), reason="identity")


def _digest_fd(fd: int) -> str:
    with open(fd, "rb", buffering=0, closefd=False) as reader:
        return hashlib.file_digest(reader, "sha256").hexdigest()


def _expected_hex(path: Path, sha256: str) -> str:
    try:
        return normalize_sha256(sha256)
    except ValueError as err:
        raise VerificationError(f"{path}: {err}", path=str(path), reason="invalid_digest") from err


def open_verified(path: Path, *, sha256: str, identity: FileIdentity | None) -> int:
    """Open a frozen regular file read-only and check it against the plan.

    Parameters
    ----------
    path
        Absolute, canonical path (see :func:`resolve_path`). No component may be a symbolic link.
    sha256
        Expected content digest, ``sha256:<hex>`` or bare hex.
    identity
        When given, ``dev``, ``ino``, ``size`` and ``mtime_ns`` must match the open file.

    Returns
    -------
    int
        An ``O_RDONLY | O_CLOEXEC`` descriptor positioned at offset 0. The caller closes it.

    Raises
    ------
    VerificationError
        With ``reason`` one of ``missing``, ``symlink``, ``not_directory``, ``not_regular``,
        ``unreadable``, ``identity``, ``content``, ``changed``, ``invalid_path``,
        ``invalid_digest``; the message names the file and what differed.
    """
    return verify_file(path, sha256=sha256, identity=identity)[0]


def verify_file(path: Path, *, sha256: str, identity: FileIdentity | None) -> tuple[int, os.stat_result]:
    """:func:`open_verified`, also returning the ``fstat`` the digest was checked against."""
    want = _expected_hex(path, sha256)
    fd = _open_regular_nofollow(path)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise VerificationError(f"{path}: is not a regular file", path=str(path), reason="not_regular")
        os.set_blocking(fd, True)
        if identity is not None:
            _compare_identity(path, st, identity, with_content=True)
        got = _content_digest(path, fd, st)
        if got != want:
            msg = (
                f"{path}: content digest differs from the plan (planned sha256:{want}, "
                f"found sha256:{got}); the file was edited after planning; create a new plan"
            )
            raise VerificationError(msg, path=str(path), reason="content")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _open_regular_nofollow(path: Path) -> int:
    """``path`` opened read-only without following a link anywhere on it (VerificationError when
    it is missing, a link, or not a regular file)."""
    parts = _split_absolute(path)
    if not parts:
        raise VerificationError(f"{path}: is a directory, not a file", path=str(path), reason="not_regular")
    parent = _open_parent(path, parts)
    try:
        leaf = parts[-1]
        before = _lstat_leaf(path, parent, leaf)
        if stat.S_ISLNK(before.st_mode):
            msg = f"{path}: is a symbolic link; frozen files are opened without following links"
            raise VerificationError(msg, path=str(path), reason="symlink")
        if not stat.S_ISREG(before.st_mode):
            raise VerificationError(f"{path}: is not a regular file", path=str(path), reason="not_regular")
        try:
            return os.open(leaf, _FILE_OPEN, dir_fd=parent)
        except OSError as err:
            raise _classify(path, parent, leaf, "the file", err, expect_dir=False) from err
    finally:
        os.close(parent)


def _content_digest(path: Path, fd: int, st: os.stat_result) -> str:
    """The hex sha256 of ``fd``'s content: cached by ``st`` when it settled, else hashed (and the
    descriptor rewound); VerificationError when the file changed while it was hashed."""
    got = _DIGESTS.get(st)
    if got is None:
        got = _digest_fd(fd)
        after = os.fstat(fd)
        if _DigestCache.key(after) != _DigestCache.key(st):
            msg = f"{path}: changed while it was being verified; try again when it is stable"
            raise VerificationError(msg, path=str(path), reason="changed")
        _DIGESTS.put(st, got)
        os.lseek(fd, 0, os.SEEK_SET)
    return got


def _needs_thread(path: Path) -> bool:
    """True when verifying ``path`` would hash more than a fraction of a millisecond of data."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return st.st_size > _INLINE_HASH_BYTES and _DIGESTS.get(st) is None


async def open_verified_async(path: Path, *, sha256: str, identity: FileIdentity | None) -> int:
    """:func:`open_verified` that hashes large, uncached files on a worker thread.

    Small files and files with a cached digest are verified inline (a handful of syscalls). If the
    awaiting task is cancelled while a worker is hashing, the descriptor it returns is closed.
    """
    return (await verify_file_async(path, sha256=sha256, identity=identity))[0]


async def verify_file_async(path: Path, *, sha256: str, identity: FileIdentity | None) -> tuple[int, os.stat_result]:
    """:func:`verify_file` that hashes large, uncached files on a worker thread (see
    :func:`open_verified_async`)."""
    if not _needs_thread(path):
        return verify_file(path, sha256=sha256, identity=identity)
    loop = asyncio.get_running_loop()
    work = loop.run_in_executor(None, lambda: verify_file(path, sha256=sha256, identity=identity))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        work.add_done_callback(_close_orphan)
        raise


def _close_orphan(work: asyncio.Future[tuple[int, os.stat_result]]) -> None:
    if not work.cancelled() and work.exception() is None:
        os.close(work.result()[0])


def open_verified_dir(path: Path, *, identity: FileIdentity | None) -> int:
    """Open a frozen working directory with no-follow checks.

    Parameters
    ----------
    path
        Absolute, canonical directory path; no component may be a symbolic link.
    identity
        When given, ``dev`` and ``ino`` must match. Size and mtime of a directory change whenever
        an entry is added or removed, so they are not compared.

    Returns
    -------
    int
        An ``O_PATH | O_DIRECTORY | O_CLOEXEC`` descriptor (enough to ``chdir`` through
        ``/proc/self/fd``; a search-only directory qualifies). The caller closes it.

    Raises
    ------
    VerificationError
        ``missing``, ``symlink``, ``not_directory``, ``unreadable``, ``identity`` or
        ``invalid_path``.
    """
    parts = _split_absolute(path)
    if not parts:
        fd = os.open("/", _DIR_STEP)
    else:
        parent = _open_parent(path, parts)
        try:
            leaf = parts[-1]
            before = _lstat_leaf(path, parent, leaf)
            if stat.S_ISLNK(before.st_mode):
                msg = f"{path}: working directory is a symbolic link; frozen paths must not pass through links"
                raise VerificationError(msg, path=str(path), reason="symlink")
            if not stat.S_ISDIR(before.st_mode):
                msg = f"{path}: working directory is not a directory"
                raise VerificationError(msg, path=str(path), reason="not_directory")
            try:
                fd = os.open(leaf, _DIR_STEP, dir_fd=parent)
            except OSError as err:
                raise _classify(path, parent, leaf, "the working directory", err, expect_dir=True) from err
        finally:
            os.close(parent)
    try:
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode):
            msg = f"{path}: working directory is not a directory"
            raise VerificationError(msg, path=str(path), reason="not_directory")
        if identity is not None:
            _compare_identity(path, st, identity, with_content=False)
    except BaseException:
        os.close(fd)
        raise
    return fd
