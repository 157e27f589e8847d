"""Data never becomes code: references only after an interpreter's static program (issue 14 item 3)."""

from __future__ import annotations

import pytest

from rho_notebook.model.graph import ArgvPart
from rho_notebook.model.reference import OutputRef, Template
from rho_notebook.planning.code_args import code_argument_problem, interpreter_family

T = Template(parts=("echo ", OutputRef(node="a", path=("v",))))
LINKS = {"sh": "/usr/bin/dash", "python3": "/usr/bin/python3.12", "mysh": "/usr/bin/bash"}


def problem(*argv: ArgvPart, resolved: str | None = None) -> int | None:
    first = str(argv[0])
    found = code_argument_problem(
        argv,
        resolved=resolved or LINKS.get(first, "/usr/bin/" + first),
        lookup=lambda name: LINKS.get(name, "/usr/bin/" + name),
        node="b",
    )
    return None if found is None else found[0]


@pytest.mark.parametrize(
    ("argv", "index"),
    [
        (("sh", "-c", T), 2),
        (("bash", "-ec", T), 2),
        (("bash", "-lc", T), 2),
        (("bash", "-o", "pipefail", "-c", T), 4),
        (("bash", "-c", "-e", T), 3),
        (("dash", "-c", T), 2),
        (("zsh", "-c", T), 2),
        (("ksh", "-c", T), 2),
        (("mksh", "-c", T), 2),
        (("fish", "-c", T), 2),
        (("fish", "--command", T), 2),
        (("sh", T), 1),
        (("sh", "-s", T), 2),
        (("python3", "-c", T), 2),
        (("python3", "-Ic", T), 2),
        (("python3.12", "-W", "ignore", "-c", T), 4),
        (("pypy3", "-c", T), 2),
        (("python3", T), 1),
        (("python3", "-m", T), 2),
        (("perl", "-e", T), 2),
        (("perl", "-E", T), 2),
        (("perl", "-lne", T), 2),
        (("perl", "-e", "print 1", T), 3),
        (("ruby", "-e", T), 2),
        (("node", "-e", T), 2),
        (("node", "-p", T), 2),
        (("node", "-pe", T), 2),
        (("node", "--eval", T), 2),
        (("node", "--eval=1", T), 2),
        (("php", "-r", T), 2),
        (("lua", "-e", T), 2),
        (("lua", "-e", "x=1", T), 3),
        (("tclsh", T), 1),
    ],
)
def test_a_reference_in_the_program_position_is_refused(argv: tuple[ArgvPart, ...], index: int) -> None:
    assert problem(*argv) == index


@pytest.mark.parametrize(
    ("argv", "index"),
    [
        (("env", "sh", "-c", T), 3),
        (("env", "-i", "FOO=1", "bash", "-c", T), 5),
        (("env", "-u", "X", "python3", "-c", T), 5),
        (("env", "-S", "sh -c", T), 3),
        (("env", "--split-string=sh -ec", T), 2),
        (("timeout", "-s", "KILL", "5", "sh", "-c", T), 6),
        (("timeout", "5", "env", "sh", "-c", T), 5),
        (("nice", "-n", "5", "python3", "-c", T), 5),
        (("nice", "-10", "sh", "-c", T), 4),
        (("nohup", "perl", "-e", T), 3),
        (("setsid", "-w", "sh", "-c", T), 4),
        (("stdbuf", "-oL", "sh", "-c", T), 4),
        (("stdbuf", "-o", "L", "sh", "-c", T), 5),
        (("xargs", "-0", "-n", "1", "sh", "-c", T), 6),
        (("busybox", "sh", "-c", T), 3),
        (("flock", "/tmp/lock", "-c", T), 3),
        (("env", T), 1),
        (("timeout", "5", T), 2),
        (("timeout", T, "sh"), 1),
        (("busybox", T), 1),
    ],
)
def test_wrappers_are_looked_through(argv: tuple[ArgvPart, ...], index: int) -> None:
    assert problem(*argv) == index


def test_the_interpreter_is_known_by_its_resolved_file_too() -> None:
    assert problem("mysh", "-c", T) == 2
    assert problem("./tools/run-it", "-c", T, resolved="/usr/bin/dash") == 2
    assert problem("env", "mysh", "-c", T) == 3
    assert problem("./tools/run-it", "-c", T, resolved="//tools/run-it") is None
    assert interpreter_family("dash") == "shell" and interpreter_family("python3.13t") == "python"
    assert interpreter_family("ssh") is None and interpreter_family("grep") is None


@pytest.mark.parametrize(
    "argv",
    [
        ("sh", "-c", 'echo "$1"', "sh", T),
        ("bash", "-ec", 'echo "$1"', "bash", T, T),
        ("sh", "script.sh", T),
        ("sh", "-c", "echo static"),
        ("python3", "-c", "import sys; print(sys.argv[1])", T),
        ("python3", "-Ic", "import sys", T),
        ("python3", "tool.py", "--flag", T),
        ("python3", "-m", "json.tool", T),
        ("perl", "-e", "print @ARGV", "--", T),
        ("perl", "script.pl", T),
        ("node", "-e", "1", "--", T),
        ("ruby", "-e", "p ARGV", "static", T),
        ("lua", "-e", "x=1", "script.lua", T),
        ("env", "X=1", "sh", "-c", 'echo "$1"', "sh", T),
        ("timeout", "5", "sh", "-c", 'echo "$1"', "sh", T),
        ("busybox", "sh", "-c", 'echo "$1"', "sh", T),
        ("echo", T),
        ("grep", "-e", T, "file"),
        ("env", "grep", "-e", T),
        ("env", "X=1"),
    ],
)
def test_values_after_a_static_program_are_data(argv: tuple[ArgvPart, ...]) -> None:
    assert problem(*argv) is None


def test_the_message_names_node_index_and_fix() -> None:
    found = code_argument_problem(("sh", "-c", T), resolved="/usr/bin/dash", lookup=lambda _: None, node="b")
    assert found is not None
    index, message = found
    assert index == 2 and "node 'b'" in message and "argv[2]" in message
    assert '["sh", "-c", "echo \\"$1\\"", "sh", output(...)]' in message


def test_wrappers_nested_too_deep_fail_closed() -> None:
    assert problem(*(["nohup"] * 20), "sh", "-c", T) == 22
    assert problem(*(["nohup"] * 20), "true") is None


def test_a_value_in_env_assignments_is_refused() -> None:
    assert problem("env", Template(parts=("X=", OutputRef(node="a"))), "sh", "-c", 'echo "$X"') == 1
