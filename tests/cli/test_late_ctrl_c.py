"""A Ctrl-C that reaches ``rho-notebook`` as it ends changes nothing and prints no traceback.

A shell sends Ctrl-C to a whole pipeline: in ``rho-notebook run wf.star | head -1`` it can reach the
CLI just as the closed pipe ended the verb, while the process exits (handling the closed pipe,
joining a worker thread, running atexit handlers). These run the real ``python -m rho_notebook``
entry with a verb handler that makes the signal come at those moments; a real signal, sent to the
process itself.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO

_DURING_EXIT = """
    def verb(args):
        def late():  # the exit waits for this (non-daemon) thread, as for an executor's workers
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=late).start()
        print("done")
        return 0
"""

_AT_A_CLOSED_PIPE = """
    def verb(args):
        gone = cli._reader_gone
        def reader_gone():  # the signal comes while main() handles the closed pipe
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
            return gone()
        cli._reader_gone = reader_gone
        raise BrokenPipeError
"""


def _entry(verb: str) -> subprocess.CompletedProcess[str]:
    """``python -m rho_notebook runs`` with ``verb`` as the verb's handler."""
    script = (
        "import os, runpy, signal, sys, threading, time\n"
        # As a shell's foreground job has it, whatever this test's runner inherited: a runner
        # started in the background of a non-interactive shell ignores SIGINT, and so would we.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import rho_notebook.cli.main as cli\n"
        + textwrap.dedent(verb)
        + "cli.handler_of = lambda name: verb\n"
        + "sys.argv = ['rho-notebook', 'runs']\n"
        + "runpy.run_module('rho_notebook', run_name='__main__')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_ctrl_c_while_the_command_exits_is_ignored() -> None:
    done = _entry(_DURING_EXIT)
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")


def test_a_ctrl_c_while_main_handles_a_closed_pipe_exits_130_quietly() -> None:
    done = _entry(_AT_A_CLOSED_PIPE)
    assert (done.returncode, done.stderr) == (130, "")
