"""Data never becomes code: references only after an interpreter's static program (issue 14 item 3),
and every option form of the wrappers and interpreters (issue 27)."""

from __future__ import annotations

import pytest

from rho_notebook.model.graph import ArgvPart
from rho_notebook.model.reference import OutputRef, Template
from rho_notebook.planning.code_args import (
    CodeArgumentProblem,
    Datum,
    code_argument_problem,
    interpreter_family,
    item_argv,
    step_datum,
)

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


# -- issue 27: every option form of the wrappers, chrt, and holes found on review ---------------------

MISSING = {"nosuch", "sh -c"}


def checked(*argv: ArgvPart | Datum, names_only: bool = False) -> CodeArgumentProblem | None:
    first = str(argv[0])
    return code_argument_problem(
        argv,
        resolved=None if names_only else LINKS.get(first, "/usr/bin/" + first),
        lookup=None if names_only else (lambda name: None if name in MISSING else LINKS.get(name, "/usr/bin/" + name)),
        node="b",
    )


@pytest.mark.parametrize(
    ("argv", "index"),
    [
        (("env", "-", "sh", "-c", T), 4),  # env's lone '-' is -i, not the program
        (("env", "--", "-", "A=1", "sh", "-c", T), 6),  # '-' and NAME=value still count after '--'
        (("env", "-i", "-uX", "-u", "Y", "-C", "/tmp", "-0v", "sh", "-c", T), 10),
        (("env", "--unset=X", "--chdir", "/tmp", "--ignore-environment", "sh", "-c", T), 7),
        (("env", "--un", "X", "--ch=/tmp", "sh", "-c", T), 6),  # getopt_long prefixes
        (("env", "--split", "sh -c", T), 3),
        (("env", "--spl=sh -c", T), 2),
        (("env", "-S", "-i sh -c", T), 3),
        (("env", "-S", "sh\\_-c", T), 3),  # '\_' separates words
        (("env", "-S", "'sh' \"-c\" # comment", T), 3),
        (("env", "-S", "${X} -c", T), 3),  # the words depend on the environment: fail closed
        (("env", "-S", "'sh -c", T), 3),  # not valid: fail closed
        (("env", "--block-signal=INT", "sh", "-c", T), 4),
        (("env", "-C", T, "./x"), 2),  # an option value chooses where ./x is found
        (("nice", "-n", T, "sh"), 2),
        (("nice", "--10", "sh", "-c", T), 4),
        (("nice", "-+5", "--adjustment=3", "sh", "-c", T), 5),
        (("timeout", "--sig", "KILL", "--kill=1", "5", "sh", "-c", T), 7),
        (("timeout", "--foo", "5", "echo", T), 4),  # an option not known: nothing may follow
        (("stdbuf", "--out=L", "-i0", "sh", "-c", T), 5),
        (("xargs", "-i", "-l", "-eEOF", "sh", "-c", T), 6),
        (("ionice", "--class", "3", "--classdata=4", "sh", "-c", T), 6),
        (("setsid", "--fork", "--wait", "sh", "-c", T), 5),
        (("time", "-f", "%e", "--output=/tmp/t", "sh", "-c", T), 6),
        (("taskset", "--cpu-list", "0-3", "sh", "-c", T), 5),
        (("flock", "-c", T, "/tmp/l"), 2),
        (("flock", "--command", T, "/tmp/l"), 2),
        (("flock", "-w", "5", "/tmp/l", "-c", T), 5),
        (("chrt", "10", "sh", "-c", T), 4),
        (("chrt", "-f", "10", "python3", "-c", T), 5),
        (("chrt", "-d", "-T", "5", "-P", "10", "-D", "10", "0", "sh", "-c", T), 11),
        (("chrt", "-dT5", "--sched-period", "10", "--sched-deadline=10", "0", "perl", "-e", T), 8),
        (("chrt", "--other", "-R", "0", "env", "sh", "-c", T), 7),
        (("chrt", T, "sh"), 1),
        (("env", "nosuch", T), 2),  # the program resolves to no file: fail closed
        (("env", "PATH=/elsewhere", "tool", T), 3),  # which file 'tool' is depends on that PATH
        (("env", "-P", "/elsewhere", "tool", T), 4),
        (("env", "-C", "/elsewhere", "./tool", T), 4),  # which file ./tool is depends on that folder
        (("env", "--chdir=sub", "tools/x", T), 3),
        (("zsh", "--emulate", "sh", "-c", T), 4),
        (("sh", "-", T), 2),  # a lone '-' ends a shell's options
        (("bash", "-c", "-", T), 3),
        (("bash", "--rcfile", T), 2),
        (("node", "--run", T), 2),
        (("node", "--title", "x", T), 3),  # --title takes a value: T is the script
        (("node", "--env-file", T, "app.js"), 2),
        (("fish", "--comm", T), 2),
        (("ruby", "--encoding", "UTF-8", T), 3),
        (("perl", "-M", "strict", T), 3),
        (("awk", T), 1),
        (("gawk", "-f", T), 2),
        (("awk", "--source", T), 2),
        (("sed", T), 1),
        (("sed", "-n", "-e", T), 3),
        (("sed", "s/a/b/", T), 2),  # GNU sed reads options anywhere: T could be -e code
    ],
)
def test_every_option_form_is_read(argv: tuple[ArgvPart, ...], index: int) -> None:
    found = checked(*argv)
    assert found is not None and found.argument == index, found


@pytest.mark.parametrize(
    "argv",
    [
        ("env", "-i", "A=1", "grep", "-e", T),
        ("env", "-S", "grep -e", T),
        ("env", "-C", "/elsewhere", "sh", "-c", 'echo "$1"', "sh", T),
        ("env", "-C", "/elsewhere", "/usr/bin/grep", "-e", T),
        ("chrt", "-p", "10", T),  # pid mode runs no program
        ("chrt", "-m"),
        ("ionice", "-c", "3", "-p", T),
        ("taskset", "-p", "0x3", T),
        ("flock", "/tmp/l", "-c", "make"),
        ("xargs", "-0", "grep", "-e", T),
        ("awk", "-v", Template(parts=("x=", OutputRef(node="a"))), "BEGIN { print x }"),
        ("awk", "{ print }", T),
        ("sed", "s/a/b/", "--", T),
        ("node", "script.js", T),
        ("zsh", "--emulate", "sh", "-c", 'echo "$1"', "zsh", T),
        ("bash", "--norc", "script.sh", T),
    ],
)
def test_data_in_a_data_position_is_accepted(argv: tuple[ArgvPart, ...]) -> None:
    assert checked(*argv) is None


def test_without_a_lookup_only_names_count() -> None:
    assert checked("env", "nosuch", T, names_only=True) is None
    by_name = checked("env", "-", "sh", "-c", T, names_only=True)
    assert by_name is not None and by_name == checked("env", "-", "sh", "-c", T)
    assert checked("./tools/run-it", "-c", T, names_only=True) is None


def test_item_fields_and_step_values_are_data_named_in_the_message() -> None:
    argv = item_argv(["bash", "-c", "=echo {{ $json.c }}", "={{ $runId }}", "==literal", "plain"])
    assert argv[0] == "bash" and argv[5] == "plain"
    assert argv[2] == Datum(shown="{{ $json.c }}", source="an item field", example='"=echo {{ $json.c }}"')
    assert isinstance(argv[3], Datum) and argv[3].source == "a run field"
    assert isinstance(argv[4], Datum)  # every mapping is data, even one without a place
    found = code_argument_problem(argv, resolved=None, lookup=None, node="run", subject="step")
    assert found is not None and found.argument == 2
    assert found.message.startswith("step 'run': argv[2] is {{ $json.c }} (an item field), in the place where 'bash'")
    assert found.message.endswith('e.g. ["sh", "-c", "echo \\"$1\\"", "sh", "=echo {{ $json.c }}"]')
    step = code_argument_problem(
        ("env", step_datum("find")), resolved=None, lookup=None, node="use", subject="step", where="//f.py:3"
    )
    assert step is not None
    assert step.message.startswith(
        "step 'use' (called at //f.py:3): argv[1] is step 'find' (a step value), where 'env'"
    )
    assert "data must not choose the program" in step.message


def test_a_template_is_shown_as_written() -> None:
    mixed = Template(parts=("echo ", OutputRef(node="a", path=("v", 0))))
    found = code_argument_problem(("sh", "-c", mixed), resolved=None, lookup=None, node="b")
    assert found is not None
    assert 'argv[2] is template(["echo ", output("a", ["v", 0])]) (an output of an earlier node)' in found.message
