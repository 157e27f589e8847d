"""``rho-notebook`` entry point: argument parsing and dispatch to the verb modules.

Exit codes: 0 valid / success, 1 invalid workflow or unsuccessful outcome, 2 usage error,
3 refused (e.g. no confirmation). An error's code is its class's ``exit_code``
(:mod:`rho_notebook.errors`); every verb goes through :class:`rho_notebook.service.Service`.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence

from rho_notebook.cli import notebook_verbs, plan_verbs, policy_verbs, run_verbs
from rho_notebook.errors import InvalidWorkflow, RhoError

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_REFUSED"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rho-notebook",
        description="Plan and run Rho workflows (frozen Starlark DAGs of agent and command nodes).",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=_Parser)
    plan_verbs.register(verbs)
    run_verbs.register(verbs)
    notebook_verbs.register(verbs)
    policy_verbs.register(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Everything imported so far lives for the whole process: move it out of the collector's
    # way, which also makes interpreter exit (the last step of a cancelled run) ~60 ms faster.
    gc.freeze()
    try:
        code: int = args.handler(args)
        return code
    except InvalidWorkflow as err:
        for found in err.diagnostics():
            print(found.render(), file=sys.stderr)
        return err.exit_code
    except RhoError as err:
        print(f"rho-notebook: error[{err.rule}]: {err.message}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
