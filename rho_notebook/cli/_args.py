"""Argument types of the verbs: numbers outside what a flag accepts are usage errors (exit 2),
and names the file system cannot hold name no file.

argparse calls each of these with the text given; a :class:`argparse.ArgumentTypeError` becomes
``rho-notebook VERB: error: argument --FLAG: ...`` on stderr and exit 2, as every other usage error.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rho_notebook.service.flags import count, positive_int, seconds

__all__ = ["EXIT_USAGE", "days", "positive_int", "count", "is_file", "OutputChoice", "JsonOutput", "JSON_HELP"]

EXIT_USAGE = 2
"""The exit status of a usage error: arguments that do not fit the verb (before anything is done)."""


def days(text: str) -> float:
    """A finite number of days, 0 or more (``prune --older-than``): checked as seconds are."""
    return seconds(text)


def is_file(target: str) -> bool:
    """Whether ``target`` names an existing file; a name the file system cannot hold (too long,
    a NUL) names none, where :meth:`pathlib.Path.is_file` would raise."""
    try:
        return Path(target).is_file()
    except (OSError, ValueError):
        return False


JSON_HELP = "the same as --output json (CAO's spelling)"

_GIVEN = "output_given"
"""The namespace attribute where :class:`OutputChoice` notes the ``--output`` given on the line."""


def _clash(given: str) -> str:
    return f"--json is --output json; it cannot be given with --output {given}"


class OutputChoice(argparse.Action):
    """``--output FORMAT`` of a verb that also takes ``--json``: the format given is noted, so that
    ``--json`` with another format is a usage error whichever of the two comes first."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, "json", False) and values != "json":
            raise argparse.ArgumentError(self, _clash(str(values)))
        setattr(namespace, self.dest, values)
        setattr(namespace, _GIVEN, values)


class JsonOutput(argparse.Action):
    """``--json``: CAO's spelling of ``--output json`` (docs/running.md): it sets ``output`` to
    ``json``, so every verb's handler reads one field; with ``--output text`` it is a usage error."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        given = getattr(namespace, _GIVEN, None)
        if given not in (None, "json"):
            raise argparse.ArgumentError(self, _clash(str(given)))
        setattr(namespace, self.dest, True)
        namespace.output = "json"
