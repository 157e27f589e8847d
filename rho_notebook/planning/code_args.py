"""Data never becomes code: no reference where an interpreter reads its program.

A command node's argv may carry ``output()`` values of earlier nodes. When argv[0] is a shell or
script interpreter (sh, bash, dash, zsh, ksh, mksh, fish, python, pypy, perl, ruby, node, php,
lua, tclsh, ...) such a value must not be, or be part of, the program the interpreter runs: the
``-c`` / ``-e`` text, the script path, or an option before them. The rule, checked at plan time:

* The interpreter is recognised by the name given as argv[0] and by the file it resolved to (so a
  ``sh`` that is a symlink to ``dash``, a ``python3`` that is ``python3.12``, or any name linked
  to ``bash`` counts). Wrappers (``env``, ``timeout``, ``nice``, ``nohup``, ``setsid``,
  ``stdbuf``, ``xargs``, ``ionice``, ``time``, ``taskset``, ``flock``, ``busybox``) are looked
  through, with their own options; the program a wrapper runs must itself be static text.
* Every argument up to and including the program operand must be static text: the code after
  ``-c``/``-e``/``-E``/``-p``/``-r``/``--command``/``--eval``/``--print`` (also in combined flags
  such as ``-ec``, ``-lc``, ``-Ic``, ``-ne``), a ``-m`` module, the script path, and every option
  before them. Shells and Python stop reading options at their program, so every argument after
  it is data. Perl, Ruby, Node, PHP and fish go on reading options after ``-e`` code, so there a
  reference is data only after ``--`` or after a static operand.
* Workflow inputs are static: they are substituted at plan time and shown with the plan.

:func:`code_argument_problem` answers the first offending argv index with a message naming the
fix (pass values as positional arguments).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rho_notebook.model.graph import ArgvPart

__all__ = ["code_argument_problem", "interpreter_family"]


@dataclass(frozen=True)
class _Interpreter:
    family: str
    code: str = ""
    """Short letters whose value is program text (python ``-c``, perl ``-e``)."""
    program: str = ""
    """Short letters whose value names the program (python ``-m``, php ``-f``)."""
    value: str = ""
    """Short letters taking a value (attached, or else the next argument)."""
    attached: str = ""
    """Short letters whose value is only the rest of the cluster (perl ``-i.bak``)."""
    digits: str = ""
    """Short letters followed by optional octal digits (perl ``-l``, ``-0``)."""
    long_code: frozenset[str] = frozenset()
    long_program: frozenset[str] = frozenset()
    long_value: frozenset[str] = frozenset()
    stops_at_program: bool = False
    """Whether options end at the program, so that every argument after it is data."""
    script_after_code: bool = False
    """Whether the first operand is still a script after code options (lua)."""
    example: str = '["sh", "-c", "echo \\"$1\\"", "sh", output(...)]'


_SHELL = _Interpreter(
    family="shell",
    code="",
    value="oO",
    long_value=frozenset({"--rcfile", "--init-file"}),
    stops_at_program=True,
)
_FISH = _Interpreter(
    family="fish",
    code="cC",
    value="dop",
    long_code=frozenset({"--command", "--init-command"}),
    long_value=frozenset({"--debug", "--debug-output", "--profile", "--profile-startup", "--features"}),
    example='["fish", "-c", "echo $argv[1]", "--", output(...)]',
)
_PYTHON = _Interpreter(
    family="python",
    code="c",
    program="m",
    value="WX",
    long_value=frozenset({"--check-hash-based-pycs"}),
    stops_at_program=True,
    example='["python3", "-c", "import sys; print(sys.argv[1])", output(...)]',
)
_PERL = _Interpreter(
    family="perl",
    code="eE",
    value="I",
    attached="iCDxFMmdV",
    digits="0l",
    example='["perl", "-e", "print $ARGV[0]", "--", output(...)]',
)
_RUBY = _Interpreter(
    family="ruby",
    code="e",
    value="IrCE",
    attached="xFKTW",
    digits="0",
    example='["ruby", "-e", "puts ARGV[0]", "--", output(...)]',
)
_NODE = _Interpreter(
    family="node",
    code="ep",
    value="rC",
    long_code=frozenset({"--eval", "--print"}),
    long_value=frozenset(
        {"--require", "--import", "--loader", "--experimental-loader", "--conditions", "--input-type", "--title"}
    ),
    example='["node", "-e", "console.log(process.argv[1])", "--", output(...)]',
)
_PHP = _Interpreter(
    family="php",
    code="rBRE",
    program="fF",
    value="cdzt",
    example='["php", "-r", "echo $argv[1];", "--", output(...)]',
)
_LUA = _Interpreter(
    family="lua",
    code="e",
    value="lj",
    script_after_code=True,
    example='["lua", "-e", "x=1", "script.lua", output(...)]',
)
_TCL = _Interpreter(family="tcl", long_value=frozenset({"-encoding"}), example='["tclsh", "script.tcl", output(...)]')
_GENERIC_E = _Interpreter(family="interpreter", code="eE", example='[..., "-e", "...", "--", output(...)]')

_VERSIONED = r"(?:[-_]?[0-9][0-9.]*[a-z]?)?"
_INTERPRETERS: tuple[tuple[re.Pattern[str], _Interpreter], ...] = (
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
    (re.compile(r"(?:Rscript|julia|osascript)" + _VERSIONED), _GENERIC_E),
)


@dataclass(frozen=True)
class _Wrapper:
    flags: str = ""
    value: str = ""
    code: str = ""
    """Letters whose value a wrapper hands to ``sh -c`` (flock ``-c``)."""
    long_value: frozenset[str] = frozenset()
    long_code: frozenset[str] = frozenset()
    positional: int = 0
    """Operands before the program (timeout's DURATION, taskset's mask, flock's file)."""
    assignments: bool = False
    """``NAME=VALUE`` operands before the program (env)."""


_WRAPPERS: dict[str, _Wrapper] = {
    "env": _Wrapper(
        flags="i0v",
        value="uCSP",
        long_value=frozenset({"--unset", "--chdir", "--split-string"}),
        assignments=True,
    ),
    "timeout": _Wrapper(flags="v", value="sk", long_value=frozenset({"--signal", "--kill-after"}), positional=1),
    "nice": _Wrapper(value="n", long_value=frozenset({"--adjustment"})),
    "nohup": _Wrapper(),
    "setsid": _Wrapper(flags="cfw"),
    "stdbuf": _Wrapper(value="ioe", long_value=frozenset({"--input", "--output", "--error"})),
    "xargs": _Wrapper(
        flags="0oprtx",
        value="adEILnPs",
        long_value=frozenset(
            {"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}
        ),
    ),
    "ionice": _Wrapper(flags="t", value="cnpPu"),
    "time": _Wrapper(flags="apvq", value="fo", long_value=frozenset({"--format", "--output"})),
    "taskset": _Wrapper(flags="acp", positional=1),
    "flock": _Wrapper(
        flags="sxunoFe",
        value="wE",
        code="c",
        long_value=frozenset({"--timeout", "--conflict-exit-code"}),
        long_code=frozenset({"--command"}),
        positional=1,
    ),
}

Lookup = Callable[[str], str | None]
"""The canonical file name a program name resolves to (through symlinks), or None."""


def interpreter_family(name: str) -> str | None:
    """``"shell"``, ``"python"``, ... for an interpreter's file name; None for any other program."""
    found = _interpreter(name)
    return found.family if found is not None else None


def _interpreter(name: str) -> _Interpreter | None:
    for pattern, spec in _INTERPRETERS:
        if pattern.fullmatch(name):
            return spec
    return None


def _names(given: str, resolved: str | None) -> list[str]:
    names = [os.path.basename(given)]
    if resolved is not None and os.path.basename(resolved) not in names:
        names.append(os.path.basename(resolved))
    return names


def code_argument_problem(
    argv: Sequence[ArgvPart], *, resolved: str, lookup: Lookup, node: str
) -> tuple[int, str] | None:
    """The first argv index where a reference could become code, with the message; None if none.

    ``resolved`` is the canonical path argv[0] was frozen to; ``lookup`` finds what a name that a
    wrapper runs resolves to.
    """
    items: list[tuple[int, ArgvPart]] = list(enumerate(argv))
    position = 0
    given = argv[0]
    if not isinstance(given, str):
        return None
    target: str | None = resolved
    for _ in range(16):  # wrappers nest (env timeout nice sh ...); a bound keeps this finite
        names = _names(given, target)
        interpreter = next((s for s in map(_interpreter, names) if s is not None), None)
        if interpreter is not None:
            bad = _interpreter_problem(interpreter, items, position + 1)
            if bad is None:
                return None
            return bad, _message(node, bad, given, interpreter)
        wrapper_name = next((n for n in names if n in _WRAPPERS or n == "busybox"), None)
        if wrapper_name is None:
            return None
        if wrapper_name == "busybox":
            nxt = position + 1
            if nxt >= len(items):
                return None
            if not isinstance(items[nxt][1], str):
                return items[nxt][0], _wrapper_message(node, items[nxt][0], given)
            position, given, target = nxt, str(items[nxt][1]), None
            continue
        outcome = _wrapper_program(_WRAPPERS[wrapper_name], items, position + 1)
        if isinstance(outcome, _Bad):
            return outcome.index, _wrapper_message(node, outcome.index, given)
        if outcome is None:
            return None
        items, position = outcome
        part = items[position][1]
        if not isinstance(part, str):
            return items[position][0], _wrapper_message(node, items[position][0], given)
        given, target = part, lookup(part)
    later = next((index for index, part in items[position:] if not isinstance(part, str)), None)
    if later is None:
        return None
    return later, _wrapper_message(node, later, given)  # wrappers nested too deep to follow: fail closed


@dataclass(frozen=True)
class _Bad:
    index: int


def _wrapper_program(
    wrapper: _Wrapper, items: list[tuple[int, ArgvPart]], start: int
) -> tuple[list[tuple[int, ArgvPart]], int] | _Bad | None:
    """Where the wrapped program's name is (items may be rewritten by ``env -S``); _Bad at a
    reference before it; None when the wrapper runs no program (or hands static code to sh)."""
    j = start
    positional = wrapper.positional
    while j < len(items):
        index, part = items[j]
        if not isinstance(part, str):
            return _Bad(index)
        if part == "--":
            j += 1
            break
        if part.startswith("--"):
            name, eq, _ = part.partition("=")
            if name in wrapper.long_code:
                return _static_value(items, j + 1) if not eq else None
            if name == "--split-string":
                if eq:
                    return _split(items, j, part.split("=", 1)[1])
                bad = _static_value(items, j + 1)
                if bad is not None:
                    return bad
                return _split(items, j + 1, str(items[j + 1][1])) if j + 1 < len(items) else None
            if name in wrapper.long_value and not eq:
                j += 1
            j += 1
            continue
        if part.startswith("-") and len(part) > 1 and not part[1:].isdigit():
            letters = part[1:]
            for k, ch in enumerate(letters):
                rest = letters[k + 1 :]
                if ch in wrapper.code:
                    return _static_value(items, j + 1) if not rest else None
                if ch in wrapper.value:
                    if ch == "S" and wrapper.assignments:
                        if rest:
                            return _split(items, j, rest)
                        bad = _static_value(items, j + 1)
                        if bad is not None:
                            return bad
                        return _split(items, j + 1, str(items[j + 1][1])) if j + 1 < len(items) else None
                    if not rest:
                        j += 1
                    break
            j += 1
            continue
        if part.startswith("-") and len(part) > 1:  # nice -10
            j += 1
            continue
        if wrapper.assignments and "=" in part:
            j += 1
            continue
        if positional:
            positional -= 1
            j += 1
            continue
        return items, j
    while j < len(items) and positional:
        if not isinstance(items[j][1], str):
            return _Bad(items[j][0])
        positional -= 1
        j += 1
    return (items, j) if j < len(items) else None


def _static_value(items: list[tuple[int, ArgvPart]], j: int) -> _Bad | None:
    if j < len(items) and not isinstance(items[j][1], str):
        return _Bad(items[j][0])
    return None


def _split(
    items: list[tuple[int, ArgvPart]], j: int, text: str
) -> tuple[list[tuple[int, ArgvPart]], int] | _Bad | None:
    """``env -S 'sh -c x'``: the split words take the place of the option and go on from there."""
    index = items[j][0]
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    spliced: list[tuple[int, ArgvPart]] = [*items[:j], *((index, w) for w in words), *items[j + 1 :]]
    again = _wrapper_program(_WRAPPERS["env"], spliced, j)
    return again


def _interpreter_problem(spec: _Interpreter, items: list[tuple[int, ArgvPart]], start: int) -> int | None:
    """The argv index of the first reference in the program position of ``spec``; None if none."""
    program_next = True  # whether the first operand is the program (script path or sh -c text)
    j = start
    while j < len(items):
        index, part = items[j]
        if not isinstance(part, str):
            return index
        if part == "--":
            nxt = j + 1
            if program_next and nxt < len(items) and not isinstance(items[nxt][1], str):
                return items[nxt][0]
            return None
        is_option = len(part) > 1 and (part[0] == "-" or (spec.family == "shell" and part[0] == "+"))
        if not is_option:
            # A static operand: the program itself, or (after code) the first datum; options end.
            return None
        if part.startswith("--") or (spec.long_value and part in spec.long_value):
            name, eq, _ = part.partition("=")
            role = _long_role(spec, name)
            if role and not eq:
                j += 1
                if j < len(items) and not isinstance(items[j][1], str):
                    return items[j][0]
            if role in ("code", "program"):
                if spec.stops_at_program:
                    return None
                program_next = spec.script_after_code
            j += 1
            continue
        outcome = _short_cluster(spec, part[1:], items, j)
        if isinstance(outcome, _Bad):
            return outcome.index
        j, role = outcome
        if role in ("code", "program"):
            if spec.stops_at_program:
                return None
            program_next = spec.script_after_code
        j += 1
    return None


def _long_role(spec: _Interpreter, name: str) -> str:
    if name in spec.long_code:
        return "code"
    if name in spec.long_program:
        return "program"
    if name in spec.long_value:
        return "value"
    return ""


def _short_cluster(
    spec: _Interpreter, letters: str, items: list[tuple[int, ArgvPart]], j: int
) -> tuple[int, str] | _Bad:
    """Walk one ``-abc`` cluster: the index of its last argument and whether it carried code."""
    role = ""
    k = 0
    while k < len(letters):
        ch = letters[k]
        rest = letters[k + 1 :]
        if spec.family == "node" and ch in spec.code and rest and all(c in spec.code for c in rest):
            rest = ""  # node -pe CODE
        if ch in spec.code or ch in spec.program or ch in spec.value:
            if not rest:
                j += 1
                if j < len(items) and not isinstance(items[j][1], str):
                    return _Bad(items[j][0])
            if ch in spec.code:
                role = "code"
            elif ch in spec.program:
                role = "program"
            return j, role
        if ch in spec.attached:
            return j, role
        if ch in spec.digits:
            k += 1
            if ch == "0" and rest.startswith("x"):
                k += 1
                while k < len(letters) and letters[k] in "0123456789abcdefABCDEF":
                    k += 1
            else:
                while k < len(letters) and letters[k] in "01234567":
                    k += 1
            continue
        k += 1
    return j, role


def _message(node: str, index: int, given: str, spec: _Interpreter) -> str:
    where = (
        "its program (the -c/-e code, the script path, or an option before them)"
        if spec.stops_at_program
        else "its program or its options (it reads options after -e code; data is safe only after '--')"
    )
    return (
        f"node {node!r}: argv[{index}] is a template with an output of an earlier node in the place where "
        f"{given!r} ({spec.family} interpreter) reads {where}, so that data would run as code. Keep the "
        f"program static text and pass values as positional arguments after it, e.g. {spec.example}"
    )


def _wrapper_message(node: str, index: int, given: str) -> str:
    return (
        f"node {node!r}: argv[{index}] is a template with an output of an earlier node where {given!r} reads "
        f"its options or the program it runs; the program a wrapper runs must be static text. Pass values as "
        f'positional arguments after a static program, e.g. ["{given}", "sh", "-c", "echo \\"$1\\"", "sh", '
        f"output(...)]"
    )
