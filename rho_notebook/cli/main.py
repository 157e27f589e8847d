"""``rho-notebook`` entry point: argument parsing and dispatch to the verb modules.

Exit codes: 0 valid / success, 1 invalid workflow or unsuccessful outcome, 2 usage error,
3 refused (e.g. no confirmation; ``wait --timeout``: still going), 141 the reader of standard
output went away (``rho-notebook events RUN | head -2``: quietly, as a process killed by SIGPIPE),
130, 143 and 129: ``run``, ``resume`` or ``wait`` stopped following on SIGINT, SIGTERM or SIGHUP
(the run goes on: :mod:`rho_notebook.cli.follow_verbs`). An error's code
is its class's ``exit_code`` (:mod:`rho_notebook.errors`); every verb goes through
:class:`rho_notebook.service.Service`. The verbs' arguments are declared in :mod:`.verbs`, and a
verb's handler module is imported only when that verb runs (:func:`handler_of`). Warnings the
package logs while a verb runs are printed to stderr as ``rho-notebook: warning: ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from rho_notebook.cli._args import EXIT_USAGE, JSON_HELP, JsonOutput, OutputChoice
from rho_notebook.cli.fork_verbs import declare_fork
from rho_notebook.cli.timeline_verbs import declare_timeline
from rho_notebook.cli.verbs import declare
from rho_notebook.errors import InvalidWorkflow, RhoError
from rho_notebook.service.flags import VerbParser, with_suggestion

__all__ = [
    "command",
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
EXIT_REFUSED = 3
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a writer whose pipe's reader went away."""


class _Parser(VerbParser):
    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """Every ``--output`` that offers ``json`` brings ``--json``, its CAO spelling, right after
        it: one place for every verb (:class:`~rho_notebook.cli._args.JsonOutput`)."""
        if "--output" not in args or "json" not in kwargs.get("choices", ()) or "action" in kwargs:
            return super().add_argument(*args, **kwargs)
        action = super().add_argument(*args, action=OutputChoice, **kwargs)
        super().add_argument("--json", action=JsonOutput, help=JSON_HELP)
        return action

    def error(self, message: str) -> None:  # type: ignore[override]
        """A usage error: one line on stderr naming where the whole usage is, exit 2."""
        print(f"{self.prog}: error: {with_suggestion(message)} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The command line of every verb."""
    return _declared(None)


def _declared(only: str | None) -> argparse.ArgumentParser:
    """The command line of every verb; with ``only``, of that verb alone (what ``main`` parses
    when the first argument names a verb: declaring all 25 verbs' arguments costs ~10 ms, a tenth
    of ``status``). A parser of one verb parses, helps and refuses that verb's arguments exactly as
    the whole one does: each verb has a sub-parser of its own. A verb that does not exist gets the
    whole parser, which says which there are."""
    parser = _Parser(
        prog="rho-notebook",
        description="Plan and run Rho workflows (frozen Starlark DAGs of agent and command nodes).",
    )
    parser.add_argument("--version", action=_Version, help="print the installed version and exit")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=_Parser)
    one = None if only is None else _OneVerb(verbs, only)
    declare(verbs if one is None else one)
    declare_timeline(verbs if one is None else one)
    declare_fork(verbs if one is None else one)
    if one is not None and not one.found:
        return build_parser()
    return parser


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, read only when asked (importing
    ``importlib.metadata`` would cost every verb's start)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **options: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **options)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_options: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            shown = version("rho-notebook")
        except PackageNotFoundError:  # run from a source tree that was never installed
            shown = "(not installed)"
        print(f"rho-notebook {shown}")
        parser.exit()


class _OneVerb:
    """Sub-parsers that keep verb ``name`` only: every other verb's declaration is ignored."""

    def __init__(self, verbs: Any, name: str) -> None:
        self.verbs, self.name, self.found = verbs, name, False

    def add_parser(self, name: str, **options: Any) -> Any:
        if name != self.name:
            return _Ignored()
        self.found = True
        return self.verbs.add_parser(name, **options)


class _Ignored:
    """A verb parser whose arguments nobody parses: every call is accepted and does nothing."""

    def __getattr__(self, _name: str) -> Callable[..., _Ignored]:
        return lambda *_args, **_options: self


def _parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the verb ``argv`` starts with, or the whole one (``--help``, no verb, a
    verb that does not exist: the whole parser lists the verbs)."""
    first = argv[0] if argv else ""
    return _declared(first) if first and not first.startswith("-") else build_parser()


def handler_of(name: str) -> Callable[[argparse.Namespace], int]:
    """The handler a verb names (``"read_verbs:run_status"``: a function of a module of
    :mod:`rho_notebook.cli`), imported now: only the verb that runs pays for its imports."""
    module, function = name.split(":")
    found: Callable[[argparse.Namespace], int] = getattr(
        importlib.import_module(f"rho_notebook.cli.{module}"), function
    )
    return found


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, except that arguments the verb does not take are refused by the
    verb's own parser, which names its own ``--help`` (``rho-notebook result --help``)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
        verbs.choices.get(args.verb, parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser_for(sys.argv[1:] if argv is None else argv)
    args = _parse(parser, argv)
    handler = handler_of(args.handler)
    # Everything imported so far lives for the whole process: move it out of the collector's
    # way, which also makes interpreter exit (the last step of a cancelled run) ~60 ms faster.
    gc.freeze()
    with _warnings_to_stderr():
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


def command() -> NoReturn:
    """The ``rho-notebook`` command (and ``python -m rho_notebook``): :func:`main`, then exit with
    its code. Once the verb is done the process is only ending, and a Ctrl-C then (a shell sends it
    to a whole pipeline, ``run ... | head -1``, perhaps just as a closed pipe ended the verb) has
    nothing left to stop: it is ignored, where Python would print a traceback from wherever the
    exit was (joining a worker thread, an atexit handler). One that ends :func:`main` on its way out
    (after a verb's own handlers are off) exits 130, quietly. :func:`main` itself, called in a
    process that goes on, leaves the signal's handler alone."""
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


class _StderrWarnings(logging.Handler):
    """The package's logged warnings (e.g. a run ``runs`` refuses to list) on stderr, as
    ``rho-notebook: warning: ...``."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"rho-notebook: {record.levelname.lower()}: {record.getMessage()}", file=sys.stderr)


@contextlib.contextmanager
def _warnings_to_stderr() -> Iterator[None]:
    """:class:`_StderrWarnings` on the package's logger while a verb runs, taken off when it
    returns: ``main()`` called in a process that goes on (a test, a script) leaves logging as it
    found it, and what the process logs later (a widget of a test that runs after) is not printed
    as the CLI's."""
    log = logging.getLogger("rho_notebook")
    if any(isinstance(handler, _StderrWarnings) for handler in log.handlers):  # main() inside main()
        yield
        return
    handler = _StderrWarnings(logging.WARNING)
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)


def _reader_gone() -> int:
    """Standard output's reader went away: exit quietly. As the Python docs recommend
    (``signal`` module, "Note on SIGPIPE"), point standard output at devnull so the interpreter's
    final flush of what is still buffered cannot fail again and print a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE
