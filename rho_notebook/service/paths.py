"""Paths a person or a model gives a verb (an entry file, a notebook, an export or record folder,
a workspace folder), checked before the file system sees them.

A name the file system cannot hold makes ``os`` raise from deep inside a verb (``ValueError:
embedded null byte``, ``OSError: File name too long``), and a file where a folder must be makes
``mkdir`` raise ``FileExistsError`` or ``NotADirectoryError``. Every verb of
:class:`~rho_notebook.service.Service` that takes a path passes it through :func:`check_path` (a
file to read) or :func:`make_folder` (a folder to write) first, so each front end answers such a
path with one :class:`~rho_notebook.errors.BadPath` (exit 2) naming the argument and the path.

The rules, measured on the absolute path the verb will use:

- no NUL byte, and no lone surrogate that cannot become a file name's bytes;
- no name (a part between ``/``) longer than :data:`NAME_MAX` bytes, and the whole shorter than
  :data:`PATH_MAX` bytes (Linux's limits; a file system with smaller ones still answers with
  ``ENAMETOOLONG``, which :func:`path_refused` words the same way);
- for a folder: neither it nor a folder above it is a file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from rho_notebook.errors import BadPath
from rho_notebook.oshelpers import kind_of

__all__ = ["NAME_MAX", "PATH_MAX", "check_path", "check_folder", "make_folder", "path_refused", "shown_path"]

NAME_MAX = 255
"""Bytes a file name (one part of a path) may have."""
PATH_MAX = 4096
"""Bytes a whole path may have, its terminating NUL included."""

_SHOWN = 80
"""Characters of a path a message shows; the rest is counted."""


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` for a one-line message: quoted, control characters escaped, a long one cut short."""
    text = os.fspath(path)
    if len(text) <= _SHOWN:
        return repr(text)
    return f"{text[:60]!r}... ({len(text)} characters)"


def check_path(path: str | os.PathLike[str], *, argument: str) -> Path:
    """``path`` as a :class:`Path`, once the file system can hold its name.

    Parameters
    ----------
    path
        The path as given (relative to the current folder, or absolute).
    argument
        The argument that gave it, for the message (``file``, ``notebook``, ``dir``, ``path``).

    Raises
    ------
    BadPath
        ``path`` holds a NUL byte or a character no file name's bytes can stand for, a name in it
        is longer than :data:`NAME_MAX` bytes, or the whole is :data:`PATH_MAX` bytes or more.
    """
    text = os.fspath(path)
    shown = shown_path(text)
    if "\x00" in text:
        msg = f"{argument} {shown} holds a NUL byte, which no file name can hold; give the path without it"
        raise BadPath(msg, argument=argument, path=text)
    try:
        encoded = os.fsencode(os.path.abspath(text))
    except UnicodeEncodeError:
        msg = f"{argument} {shown} holds a character no file name can hold (a lone surrogate); give another path"
        raise BadPath(msg, argument=argument, path=text) from None
    longest = max(len(part) for part in encoded.split(b"/"))
    if longest > NAME_MAX:
        msg = (
            f"{argument} {shown} has a name of {longest} bytes, longer than the {NAME_MAX} a file name may have; "
            "give a shorter name"
        )
        raise BadPath(msg, argument=argument, path=text)
    if len(encoded) >= PATH_MAX:
        msg = (
            f"{argument} {shown} is {len(encoded)} bytes as an absolute path, longer than the {PATH_MAX - 1} a path "
            "may have; give a shorter path"
        )
        raise BadPath(msg, argument=argument, path=text)
    return Path(text)


def check_folder(path: str | os.PathLike[str], *, argument: str) -> Path:
    """The absolute form of ``path``, a folder to write into: :func:`check_path`'s rules, and no
    file where it or a folder above it must be. Nothing is made.

    Raises
    ------
    BadPath
        As :func:`check_path`; or ``path``, or a folder above it, is a file (or cannot be looked at).
    """
    absolute = Path(os.path.abspath(check_path(path, argument=argument)))
    for candidate in (absolute, *absolute.parents):
        try:
            info = os.stat(candidate)
        except (FileNotFoundError, NotADirectoryError):  # not there yet, or under a file: look above
            continue
        except OSError as err:
            raise path_refused(err, path, argument=argument) from None
        if not stat.S_ISDIR(info.st_mode):
            kind = "a file" if stat.S_ISREG(info.st_mode) else kind_of(info.st_mode)
            where = f"is {kind}" if candidate == absolute else f"lies under {shown_path(candidate)}, which is {kind}"
            msg = (
                f"{argument} {shown_path(path)} {where}, not a folder; give a folder (one that does not exist is made)"
            )
            raise BadPath(msg, argument=argument, path=os.fspath(path))
        break
    return absolute


def make_folder(path: str | os.PathLike[str], *, argument: str) -> Path:
    """Make the folder ``path`` (and the folders above it) unless it exists; its absolute form.

    Raises
    ------
    BadPath
        As :func:`check_folder`, or the folder cannot be made (a link in the way, no permission).
    """
    absolute = check_folder(path, argument=argument)
    try:
        absolute.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise path_refused(err, path, argument=argument) from None
    return absolute


def path_refused(err: OSError, path: str | os.PathLike[str], *, argument: str) -> BadPath:
    """The :class:`BadPath` for ``err``, met using ``path``: what went wrong and what to give instead."""
    why = {
        errno.ENAMETOOLONG: "is longer than the file system allows; give a shorter path",
        errno.ENOTDIR: "passes through a file where a folder must be; give another path",
        errno.EEXIST: "is taken by a file or a link, not a folder; give another folder",
        errno.ELOOP: "passes through too many symbolic links; give the real path",
        errno.EACCES: "cannot be used: permission denied; give a path you may use",
        errno.EPERM: "cannot be used: operation not permitted; give a path you may use",
        errno.EROFS: "is on a read-only file system; give a writable folder",
    }.get(err.errno or 0, f"cannot be used ({err.strerror or err}); give another path")
    return BadPath(f"{argument} {shown_path(path)} {why}", argument=argument, path=os.fspath(path))
