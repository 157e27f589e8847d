"""Module labels (``//path/to/module.star``) and reading their sources without following links.

Rules, as Rho's: a label ends in ``.star``, starts at the module root with ``//``, has non-empty
``/``-separated parts, no absolute path, no ``.`` or ``..`` part, no other separator or platform
prefix, and no symlink anywhere on the way from the root to the file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from rho_notebook.errors import LimitError, NotRegularFile, SourceError
from rho_notebook.model.source import SourceText
from rho_notebook.oshelpers import lstat_components, open_regular_nofollow, read_fd

__all__ = [
    "SourceText",
    "SourceReader",
    "FileSourceReader",
    "check_label",
    "label_for_path",
    "read_regular_file_nofollow",
]


class SourceReader(Protocol):
    def read(self, label: str) -> SourceText: ...


def check_label(label: str, *, suffix: str = ".star") -> str | None:
    """The problem with ``label``, or None when it follows every rule; ``suffix`` is ``.py`` for
    Python modules."""
    example = f"//lib/common{suffix}"
    if not isinstance(label, str) or not label:
        return "a module label must be a non-empty string"
    if "\\" in label:
        return f"label {label!r} uses a backslash; labels use '/' only"
    if "\x00" in label:
        return f"label {label!r} contains a NUL byte"
    if not label.startswith("//"):
        return _not_a_root_label(label, example)
    if not label.endswith(suffix):
        return f"label {label!r} must name a {suffix} file"
    return _path_part_problem(label)


def _not_a_root_label(label: str, example: str) -> str:
    """Why ``label`` (which does not start with //) is no root label."""
    if label.startswith("/"):
        return f"label {label!r} is an absolute path; use a root label such as {example}"
    if len(label) > 1 and label[1] == ":":
        return f"label {label!r} has a platform prefix; use a root label such as {example}"
    return f"label {label!r} must start with // (the module root), e.g. {example}"


def _path_part_problem(label: str) -> str | None:
    """The first path part of root label ``label`` that leaves the root or names no file."""
    for part in label[2:].split("/"):
        if part == "":
            return f"label {label!r} has an empty path part"
        if part in (".", ".."):
            return f"label {label!r} uses {part!r}; labels stay under the module root"
        if ":" in part:
            return f"label {label!r} has a platform prefix or ':' in a path part"
    return None


def label_for_path(path: Path, root: Path) -> str:
    """The root label of a file under ``root``; raises SourceError when it is outside."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(root)
    except ValueError:
        msg = f"{path} is outside the workspace {root}; workflow sources must stay under the module root"
        raise SourceError(msg, rule="load.outside_root", file=str(path)) from None
    return "//" + relative.as_posix()


def read_regular_file_nofollow(
    root: Path, relative_parts: list[str], *, shown: str, suffix: str = ".star", max_bytes: int | None = None
) -> bytes:
    """Read ``root/parts...`` refusing symlinks at every step and anything but a regular file.

    With ``max_bytes`` (the ``source_bytes`` planning limit), a larger file is refused with
    :class:`~rho_notebook.errors.LimitError` before it is read whole. A path the file system cannot
    look at (a name too long, a NUL, no permission) is a :class:`SourceError` like a missing file.
    """
    current = root
    try:
        for index, (current, info) in enumerate(lstat_components(root, relative_parts)):
            if stat.S_ISLNK(info.st_mode):
                msg = f"{shown}: {current} is a symlink; workflow sources may not pass through symlinks"
                raise SourceError(msg, rule="load.symlink", file=shown)
            last = index == len(relative_parts) - 1
            if not last and not stat.S_ISDIR(info.st_mode):
                msg = f"{shown}: {current} is not a directory"
                raise SourceError(msg, rule="load.missing", file=shown)
    except FileNotFoundError:
        msg = f"{shown}: no such file"
        raise SourceError(msg, rule="load.missing", file=shown) from None
    except (OSError, ValueError) as err:  # a name too long, a NUL byte, no permission
        msg = f"{shown}: cannot look at {current}: {getattr(err, 'strerror', None) or err}"
        raise SourceError(msg, rule="load.missing", file=shown) from None
    try:
        return _read_capped(current, max_bytes=max_bytes, shown=shown)
    except NotRegularFile as err:
        msg = f"{shown}: {err}; workflow sources must be regular {suffix} files"
        raise SourceError(msg, rule="load.missing", file=shown) from None
    except FileNotFoundError:
        msg = f"{shown}: no such file"
        raise SourceError(msg, rule="load.missing", file=shown) from None
    except (OSError, ValueError) as err:
        if isinstance(err, OSError) and err.errno == errno.ELOOP:  # became a symlink after the walk above
            msg = f"{shown}: {current} is a symlink; workflow sources may not pass through symlinks"
            raise SourceError(msg, rule="load.symlink", file=shown) from None
        msg = f"{shown}: cannot read {current}: {getattr(err, 'strerror', None) or err}"
        raise SourceError(msg, rule="load.missing", file=shown) from None


def _read_capped(path: Path, *, max_bytes: int | None, shown: str) -> bytes:
    """The bytes of the regular file ``path`` (no final symlink), refused past ``max_bytes``."""
    fd, info = open_regular_nofollow(path)
    try:
        if max_bytes is None:
            return read_fd(fd)
        if info.st_size > max_bytes:
            raise _too_large(max_bytes, info.st_size, shown)
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 20):  # the file may grow while it is read
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(max_bytes, total, shown)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _too_large(limit: int, measured: int, shown: str) -> LimitError:
    detail = f"{shown} is larger than a workflow source may be; it was not read"
    return LimitError(budget="source_bytes", limit=limit, measured=measured, file=shown, detail=detail)


class FileSourceReader:
    """Reads modules from the workspace, with an optional overlay of in-memory modules (cells)."""

    def __init__(self, root: Path, overlay: Mapping[str, SourceText] | None = None) -> None:
        self.root = root
        self.overlay = dict(overlay or {})

    def has(self, label: str) -> bool:
        """Whether a module is at ``label``: in the overlay, or any file (even a link) in the workspace."""
        return label in self.overlay or os.path.lexists(self.root / label[2:])

    def read(self, label: str, *, suffix: str = ".star", max_bytes: int | None = None) -> SourceText:
        """The module at ``label`` (``max_bytes``: refuse a larger file, see
        :func:`read_regular_file_nofollow`)."""
        problem = check_label(label, suffix=suffix)
        if problem is not None:
            raise SourceError(problem, rule="load.label")
        if label in self.overlay:
            return self.overlay[label]
        relative = label[2:]
        data = read_regular_file_nofollow(
            self.root, relative.split("/"), shown=relative, suffix=suffix, max_bytes=max_bytes
        )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            msg = f"{relative}: not UTF-8 text ({err.reason} at byte {err.start})"
            raise SourceError(msg, rule="load.encoding", file=relative) from None
        return SourceText(label=label, text=text, display=relative)
