"""``rho-notebook`` entry point: argument parsing and dispatch to the verb modules.

Exit codes: 0 valid / success, 1 invalid workflow or unsuccessful outcome, 2 usage error,
3 refused (e.g. no confirmation; ``wait --timeout``: still going), 141 the reader of standard
output went away (``rho-notebook events RUN | head -2``: quietly, as a process killed by SIGPIPE),
130, 143 and 129: ``run``, ``resume`` or ``wait`` stopped following on SIGINT, SIGTERM or SIGHUP
(the run goes on: :mod:`rho_notebook.cli.follow_verbs`). An error's code
is its class's ``exit_code`` (:mod:`rho_notebook.errors`); every verb goes through
:class:`rho_notebook.service.Service`. The verbs' arguments are declared in :mod:`.verbs`, and a
verb's handler module is imported only when that verb runs (:func:`handler_of`). Warnings the package logs are printed to stderr as
``rho-notebook: warning: ...``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence

from rho_notebook.cli.verbs import declare
from rho_notebook.errors import InvalidWorkflow, RhoError
from rho_notebook.service.flags import VerbParser

__all__ = [
    "main",
    "build_parser",
    "handler_of",
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_REFUSED",
    "EXIT_BROKEN_PIPE",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a writer whose pipe's reader went away."""


class _Parser(VerbParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """A usage error: one line on stderr naming where the whole usage is, exit 2."""
        print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rho-notebook",
        description="Plan and run Rho workflows (frozen Starlark DAGs of agent and command nodes).",
    )
    declare(parser.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=_Parser))
    return parser


def handler_of(name: str) -> Callable[[argparse.Namespace], int]:
    """The handler a verb names (``"read_verbs:run_status"``: a function of a module of
    :mod:`rho_notebook.cli`), imported now: only the verb that runs pays for its imports."""
    module, function = name.split(":")
    found: Callable[[argparse.Namespace], int] = getattr(
        importlib.import_module(f"rho_notebook.cli.{module}"), function
    )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = handler_of(args.handler)
    # Everything imported so far lives for the whole process: move it out of the collector's
    # way, which also makes interpreter exit (the last step of a cancelled run) ~60 ms faster.
    gc.freeze()
    _warnings_to_stderr()
    try:
        code: int = handler(args)
        sys.stdout.flush()  # inside the try: a reader that went away is noticed here, not at exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except InvalidWorkflow as err:
        for found in err.diagnostics():
            print(found.render(), file=sys.stderr)
        return err.exit_code
    except RhoError as err:
        print(f"rho-notebook: error[{err.rule}]: {err.message}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130


class _StderrWarnings(logging.Handler):
    """The package's logged warnings (e.g. a run ``runs`` refuses to list) on stderr, as
    ``rho-notebook: warning: ...``."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"rho-notebook: {record.levelname.lower()}: {record.getMessage()}", file=sys.stderr)


def _warnings_to_stderr() -> None:
    """Install :class:`_StderrWarnings` on the package's logger, once per process."""
    log = logging.getLogger("rho_notebook")
    if not any(isinstance(handler, _StderrWarnings) for handler in log.handlers):
        log.addHandler(_StderrWarnings(logging.WARNING))


def _reader_gone() -> int:
    """Standard output's reader went away: exit quietly. As the Python docs recommend
    (``signal`` module, "Note on SIGPIPE"), point standard output at devnull so the interpreter's
    final flush of what is still buffered cannot fail again and print a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE
