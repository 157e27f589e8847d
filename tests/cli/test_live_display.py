"""The live display of a followed run on a terminal (issue 30, item 4): a real pty (the standard
library's ``pty``/``os.openpty``), a real owner process and follower, the CLI's Printer with
``live=True``.

On a TTY each running node has one line (name, elapsed time, the last line its attempt wrote),
redrawn in place with cursor movements; a finished node's line is printed above the live area,
and a failed node's stderr tail below it, with the node's own escape sequences removed.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time

from tests.cli.followhelp import driver_command
from tests.cli.runhelp import plan_id
from tests.conftest import REPO, Project, star

C = "timeout_seconds = 60, max_output_bytes = 100000"

TALK = """\
import sys
import time


def talk(tag, count):
    for i in range(1, count + 1):
        print(f"{tag}-{i}", flush=True)
        time.sleep(0.3)
    return {"n": count}
"""

TWO_AT_ONCE = star(
    f"""
    R = schema.record({{"n": schema.integer()}})
    alpha = python(name = "alpha", module = "//nodes/talk.py", function = "talk", args = {{"tag": "tick", "count": 8}}, output = R, access = "read_only", {C})
    beta = python(name = "beta", module = "//nodes/talk.py", function = "talk", args = {{"tag": "tock", "count": 5}}, output = R, access = "read_only", {C})
    boom = command(name = "boom", argv = ["sh", "-c", "printf 'went \\\\033[2Jwrong\\\\n' >&2; exit 2"], needs = ["beta"], {C})
    return workflow(name = "live", nodes = [alpha, beta, boom])
    """
)


def _on_a_pty(argv: list[str], env: dict[str, str], cwd: str, *, timeout: float = 60) -> tuple[int, str]:
    """Run ``argv`` with a pty (120 columns) as its terminal; (exit code, everything it wrote)."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=follower, env=env, cwd=cwd)
    os.close(follower)
    written = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # EIO: every writer closed the pty
                    break
                if not data:
                    break
                written += data
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    return code, written.decode("utf-8", "replace")


def test_running_nodes_are_redrawn_in_place_with_elapsed_time_and_their_last_line(project: Project) -> None:
    project.write("nodes/talk.py", TALK)
    project.write("wf.star", TWO_AT_ONCE)
    argv, env = driver_command(project, plan_id(project), live=True)
    code, shown = _on_a_pty(argv, env, str(project.root))
    assert code == 0, shown
    assert "outcome failure" in shown
    # one redrawn line per running node: its name, the time it has run, the last line it wrote
    rows = re.findall(r"  (alpha|beta)\s+(\d+\.\d)s  (tick|tock)-(\d)", shown)
    assert {name for name, *_ in rows} == {"alpha", "beta"}, shown
    alpha = [(float(elapsed), int(n)) for name, elapsed, _, n in rows if name == "alpha"]
    assert len({n for _, n in alpha}) >= 3  # the line changed as the node wrote more
    assert max(elapsed for elapsed, _ in alpha) > min(elapsed for elapsed, _ in alpha)  # the clock moves
    # redrawn in place: erase the line, and go up over the area of two running nodes
    assert "\x1b[2K" in shown and "\x1b[1A" in shown
    # no `running` line: the live area shows that; the finished nodes' lines are printed
    assert "running (attempt" not in shown
    assert re.search(r"\[\s*\d+\.\d+s\] alpha\s+success", shown)
    assert re.search(r"\[\s*\d+\.\d+s\] boom\s+failure  exited with code 2", shown)
    assert "last lines of its stderr" in shown and "went wrong" in shown
    assert "\x1b[2J" not in shown  # the node's own escape sequence never reaches the terminal


def test_the_plain_display_never_needs_rich() -> None:
    """Only the live display imports ``rich`` (inside it): with ``rich`` unimportable, the CLI's
    modules load and the plain lines print. (``httpx`` imports ``rich`` when it can, for its own
    command line; a blocked import is what it expects when ``rich`` is not installed.)"""
    code = (
        "import sys\n"
        "sys.modules['rich'] = None  # `import rich` raises ImportError from here on\n"
        "import rho_notebook.cli.main\n"
        "from rho_notebook.cli._terminal import Printer\n"
        "printer = Printer('text')\n"
        "printer({'kind': 'run_completed', 'run_id': 'r', 'outcome': 'success'})\n"
        "printer.close()\n"
        "live = Printer('text', live=True)\n"
        "try:\n"
        "    live({'kind': 'run_completed', 'run_id': 'r', 'outcome': 'success'})\n"
        "except ImportError:\n"
        "    print('the live display needs rich')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith("run completed: success")
    assert done.stdout.splitlines()[1] == "the live display needs rich"  # imported there, and only there
