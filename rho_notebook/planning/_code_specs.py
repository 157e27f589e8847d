"""The option tables of the interpreters and wrappers :mod:`rho_notebook.planning.code_args` knows.

An option's *role* says what the argument parser of :mod:`~rho_notebook.planning.code_args` does
with it. Interpreters (a program that runs code it reads from its arguments):

``flag``
    No value.
``value``
    A value, attached (``-W ignore`` / ``-Wignore``, ``--opt=x`` / ``--opt x``); static text only.
``data``
    A value that may be data (awk's ``-v name=value``, the way awk takes values).
``attached``
    A value only in the rest of the cluster (perl ``-i.bak``) or after ``=``.
``digits``
    Optional octal or hex digits in the rest of the cluster (perl ``-l``, ``-0``).
``code``
    The value is program text (``-c``, ``-e``, ``--eval``).
``program``
    The value names the program (python ``-m``, awk ``-f``, node ``--run``).

Wrappers (a program that runs another program named in its arguments) have ``flag``, ``value``,
``attached`` and ``code`` (a value the wrapper hands to ``sh -c``: flock ``-c``), and:

``split``
    env ``-S``: the value is split into arguments that take the option's place.
``path`` / ``chdir``
    A value that changes where the program is looked up (BSD env ``-P``; env ``-C``, which moves
    a relative program path).
``nothing``
    In this mode the wrapper runs no program (chrt/taskset ``-p``, ionice ``-p``/``-P``/``-u``).

Long options of the GNU tools may be abbreviated to any unambiguous prefix (getopt_long); a
prefix is resolved against the whole table, and one that matches several roles takes the most
careful: ``value`` for interpreters (the program must then still come later, as static text) and
*unknown* for wrappers (then no data may follow at all).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["INTERPRETERS", "WRAPPERS", "Interpreter", "Wrapper", "interpreter_of", "long_role", "roles"]


def roles(**letters: str) -> dict[str, str]:
    """``roles(flag="ab", value="c")`` -> ``{"a": "flag", "b": "flag", "c": "value"}``."""
    return {ch: role for role, chars in letters.items() for ch in chars}


def _long(**names: str) -> dict[str, str]:
    """``_long(flag="help version", value="signal")`` -> ``{"--help": "flag", ...}``."""
    return {f"--{name}": role for role, text in names.items() for name in text.split()}


def long_role(table: dict[str, str], name: str) -> str:
    """The role of the long option ``name`` (``--abc``, no ``=``): exact, else by unique prefix
    (getopt_long); ``"ambiguous"`` when prefixes of several roles match, ``""`` when none does."""
    if name in table:
        return table[name]
    found = {role for option, role in table.items() if option.startswith(name) and len(name) > 2}
    if len(found) > 1:
        return "ambiguous"
    return found.pop() if found else ""


@dataclass(frozen=True)
class Interpreter:
    """How one interpreter family reads its arguments."""

    family: str
    short: dict[str, str] = field(default_factory=dict)
    long: dict[str, str] = field(default_factory=dict)
    stops_at_program: bool = False
    """Whether options end at the program, so that every argument after it is data."""
    script_after_code: bool = False
    """Whether the first operand is still a script after code options (lua)."""
    permutes: bool = False
    """Whether options may follow operands (GNU getopt without ``+``: sed), so that data is safe
    only after ``--``."""
    dash_ends_options: bool = False
    """Whether a lone ``-`` ends the options as ``--`` does (shells)."""
    example: str = '["sh", "-c", "echo \\"$1\\"", "sh", {data}]'
    """The fix, with ``{data}`` where the value goes."""


_SHELL = Interpreter(
    family="shell",
    short=roles(value="oOT"),
    long=_long(value="rcfile init-file emulate"),
    stops_at_program=True,
    dash_ends_options=True,
)
_FISH = Interpreter(
    family="fish",
    short=roles(code="cC", value="dopf"),
    long=_long(
        code="command init-command",
        value="debug debug-output profile profile-startup features",
        flag="login interactive no-execute print-rusage-self print-debug-categories private no-config version help",
    ),
    example='["fish", "-c", "echo $argv[1]", "--", {data}]',
)
_PYTHON = Interpreter(
    family="python",
    short=roles(code="c", program="m", value="WX"),
    long=_long(value="check-hash-based-pycs", flag="help help-env help-xoptions help-all version"),
    stops_at_program=True,
    example='["python3", "-c", "import sys; print(sys.argv[1])", {data}]',
)
_PERL = Interpreter(
    family="perl",
    short=roles(code="eE", value="IMm", attached="iCDxFdV", digits="0l"),
    example='["perl", "-e", "print $ARGV[0]", "--", {data}]',
)
_RUBY = Interpreter(
    family="ruby",
    short=roles(code="e", value="IrCE", attached="xFKTW", digits="0"),
    long=_long(
        value="enable disable encoding external-encoding internal-encoding dump backtrace-limit crash-report parser"
    ),
    example='["ruby", "-e", "puts ARGV[0]", "--", {data}]',
)
_NODE_VALUES = (
    "require import loader experimental-loader conditions input-type title env-file env-file-if-exists "
    "watch-path inspect-port debug-port icu-data-dir openssl-config redirect-warnings report-dir report-directory "
    "report-filename report-signal secure-heap secure-heap-min snapshot-blob build-snapshot-config "
    "test-concurrency test-name-pattern test-skip-pattern test-reporter test-reporter-destination test-shard "
    "test-timeout tls-cipher-list tls-keylog unhandled-rejections use-largepages v8-pool-size disable-proto "
    "disable-warning dns-result-order diagnostic-dir heapsnapshot-signal heapsnapshot-near-heap-limit "
    "cpu-prof-dir cpu-prof-name cpu-prof-interval heap-prof-dir heap-prof-name heap-prof-interval "
    "experimental-default-type experimental-policy policy-integrity experimental-sea-config max-http-header-size "
    "network-family-autoselection-attempt-timeout trace-event-categories trace-event-file-pattern "
    "trace-require-module allow-fs-read allow-fs-write inspect-publish-uid localstorage-file "
    "experimental-config-file watch-kill-signal"
)
_NODE = Interpreter(
    family="node",
    short=roles(code="ep", value="rC"),
    long=_long(code="eval print", program="run", value=_NODE_VALUES),
    example='["node", "-e", "console.log(process.argv[1])", "--", {data}]',
)
_PHP = Interpreter(
    family="php",
    short=roles(code="rBRE", program="fF", value="cdzt"),
    example='["php", "-r", "echo $argv[1];", "--", {data}]',
)
_LUA = Interpreter(
    family="lua",
    short=roles(code="e", value="lj"),
    script_after_code=True,
    example='["lua", "-e", "x=1", "script.lua", {data}]',
)
_TCL = Interpreter(
    family="tcl",
    long={"-encoding": "value"},
    example='["tclsh", "script.tcl", {data}]',
)
_AWK = Interpreter(
    family="awk",
    short=roles(code="e", program="fE", value="FWilt", data="v", attached="dDLop"),
    long=_long(
        code="source",
        program="file exec",
        value="field-separator include load",
        data="assign",
        attached="debug dump-variables lint pretty-print profile",
    ),
    example='["awk", "BEGIN { print ARGV[1] }", {data}]',
)
_SED = Interpreter(
    family="sed",
    short=roles(code="e", program="f", value="l", attached="i"),
    long=_long(code="expression", program="file", value="line-length", attached="in-place"),
    permutes=True,
    example='["sed", "s/a/b/", "--", {data}]',
)
_GENERIC_E = Interpreter(family="interpreter", short=roles(code="eE"), example='[..., "-e", "...", "--", {data}]')

_VERSIONED = r"(?:[-_]?[0-9][0-9.]*[a-z]?)?"
INTERPRETERS: tuple[tuple[re.Pattern[str], Interpreter], ...] = (
    (
        re.compile(r"(?:sh|bash|rbash|dash|zsh|ksh|ksh93|mksh|lksh|pdksh|oksh|loksh|ash|yash|posh|hush)" + _VERSIONED),
        _SHELL,
    ),
    (re.compile(r"fish" + _VERSIONED), _FISH),
    (re.compile(r"(?:python|pypy|pythonw|python[0-9.]*-dbg)" + _VERSIONED), _PYTHON),
    (re.compile(r"perl" + _VERSIONED), _PERL),
    (re.compile(r"(?:ruby|jruby|truffleruby)" + _VERSIONED), _RUBY),
    (re.compile(r"(?:node|nodejs)" + _VERSIONED), _NODE),
    (re.compile(r"php(?:-cli)?" + _VERSIONED), _PHP),
    (re.compile(r"(?:lua|luajit)" + _VERSIONED), _LUA),
    (re.compile(r"(?:tclsh|wish|jimsh)" + _VERSIONED), _TCL),
    (re.compile(r"(?:awk|gawk|mawk|nawk|original-awk)" + _VERSIONED), _AWK),
    (re.compile(r"g?sed" + _VERSIONED), _SED),
    (re.compile(r"(?:Rscript|julia|osascript)" + _VERSIONED), _GENERIC_E),
)
"""Interpreters by file name (the name given as argv[0] or the file it resolves to)."""


@lru_cache(maxsize=1024)
def interpreter_of(name: str) -> Interpreter | None:
    """The interpreter family of a program's file name; None for any other program (remembered:
    every node of a plan asks for its program's name, and the answer never changes)."""
    for pattern, spec in INTERPRETERS:
        if pattern.fullmatch(name):
            return spec
    return None


@dataclass(frozen=True)
class Wrapper:
    """How one wrapper reads its options before the program it runs (GNU getopt with ``+``:
    options end at the first operand)."""

    short: dict[str, str] = field(default_factory=dict)
    long: dict[str, str] = field(default_factory=dict)
    positional: int = 0
    """Operands before the program (timeout's DURATION, taskset's MASK, flock's FILE, chrt's
    PRIORITY)."""
    assignments: bool = False
    """``NAME=VALUE`` operands before the program (env)."""
    dash_is_option: bool = False
    """A lone ``-`` is an option (env: the same as ``-i``)."""
    digit_options: bool = False
    """``-N``, ``--N`` and ``-+N`` are options (nice's adjustment)."""


_HELP = "help version"
WRAPPERS: dict[str, Wrapper] = {
    "env": Wrapper(
        short=roles(flag="i0v", value="ua", split="S", path="P", chdir="C"),
        long=_long(
            flag=f"ignore-environment null debug list-signal-handling {_HELP}",
            value="unset argv0",
            chdir="chdir",
            split="split-string",
            attached="block-signal default-signal ignore-signal",
        ),
        assignments=True,
        dash_is_option=True,
    ),
    "timeout": Wrapper(
        short=roles(flag="v", value="sk"),
        long=_long(flag=f"foreground preserve-status verbose {_HELP}", value="signal kill-after"),
        positional=1,
    ),
    "nice": Wrapper(short=roles(value="n"), long=_long(flag=_HELP, value="adjustment"), digit_options=True),
    "nohup": Wrapper(long=_long(flag=_HELP)),
    "setsid": Wrapper(short=roles(flag="cfwhV"), long=_long(flag=f"ctty fork wait {_HELP}")),
    "stdbuf": Wrapper(short=roles(value="ioe"), long=_long(flag=_HELP, value="input output error")),
    "xargs": Wrapper(
        short=roles(flag="0oprtx", value="adEILnPs", attached="eil"),
        long=_long(
            flag=f"null open-tty interactive no-run-if-empty show-limits verbose exit {_HELP}",
            value="arg-file delimiter max-lines max-args max-procs max-chars process-slot-var",
            attached="eof replace",
        ),
    ),
    "ionice": Wrapper(
        short=roles(flag="thV", value="cn", nothing="pPu"),
        long=_long(flag=f"ignore {_HELP}", value="class classdata", nothing="pid pgid uid"),
    ),
    "time": Wrapper(
        short=roles(flag="apqvV", value="fo"),
        long=_long(flag=f"append portability quiet verbose {_HELP}", value="format output"),
    ),
    "taskset": Wrapper(
        short=roles(flag="achV", nothing="p"),
        long=_long(flag=f"all-tasks cpu-list {_HELP}", nothing="pid"),
        positional=1,
    ),
    "flock": Wrapper(
        short=roles(flag="sxeunoFhV", value="wE", code="c"),
        long=_long(
            flag=f"shared exclusive unlock nonblock nb close no-fork verbose {_HELP}",
            value="timeout wait conflict-exit-code",
            code="command",
        ),
        positional=1,
    ),
    "chrt": Wrapper(
        short=roles(flag="abdefioRrvhV", value="TPD", nothing="pm"),
        long=_long(
            flag=f"all-tasks batch deadline ext fifo idle other rr reset-on-fork verbose {_HELP}",
            value="sched-runtime sched-period sched-deadline",
            nothing="pid max",
        ),
        positional=1,
    ),
}
"""Wrappers by file name; ``busybox`` (whose first operand names the applet) is handled apart."""
