"""Argument types of the verbs: numbers outside what a flag accepts are usage errors (exit 2),
and names the file system cannot hold name no file.

argparse calls each of these with the text given; a :class:`argparse.ArgumentTypeError` becomes
``rho-notebook VERB: error: argument --FLAG: ...`` on stderr and exit 2, as every other usage error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rho_notebook.service.flags import seconds

__all__ = ["days", "positive_int", "count", "is_file"]


def days(text: str) -> float:
    """A finite number of days, 0 or more (``prune --older-than``): checked as seconds are."""
    return seconds(text)


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        msg = f"{text!r} is not a whole number"
        raise argparse.ArgumentTypeError(msg) from None


def positive_int(text: str) -> int:
    """A whole number, 1 or more (``runs --limit``)."""
    value = _integer(text)
    if value < 1:
        msg = f"{text!r}: give a whole number, 1 or more"
        raise argparse.ArgumentTypeError(msg)
    return value


def count(text: str) -> int:
    """A whole number, 0 or more (``events --after-seq``)."""
    value = _integer(text)
    if value < 0:
        msg = f"{text!r}: give a whole number, 0 or more"
        raise argparse.ArgumentTypeError(msg)
    return value


def is_file(target: str) -> bool:
    """Whether ``target`` names an existing file; a name the file system cannot hold (too long,
    a NUL) names none, where :meth:`pathlib.Path.is_file` would raise."""
    try:
        return Path(target).is_file()
    except (OSError, ValueError):
        return False
