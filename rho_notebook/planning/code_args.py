"""Data never becomes code: no data where an interpreter reads its program or a wrapper its program.

One rule for every way a workflow runs a command (docs/workflows.md, "Data is never code"): a
Starlark command node whose argv holds ``output()`` values of earlier nodes, an item-graph command
step whose argv holds mappings (``"={{ $json.c }}"``: any argv string starting with ``=`` is data),
and a script or flow command step whose argv holds step values (``{"step": KEY, "text": ...}``,
a flow tool's model-written arguments among them). Such an argv item is a *datum*. The rule:

* A datum never chooses the program: argv[0] is static text, and so is the program any wrapper
  runs. Wrappers are looked through with all their option forms: ``env`` (``-``, ``-i``,
  ``-u NAME``, ``-uNAME``, ``-C DIR``, ``-S``/``--split-string`` whose words take its place,
  ``--``, ``NAME=value``, long options and their unambiguous prefixes), ``timeout``, ``nice``,
  ``nohup``, ``setsid``, ``stdbuf``, ``xargs``, ``ionice``, ``time``, ``taskset``, ``flock``
  (``-c`` text goes to ``sh -c``), ``chrt`` (``-p`` and ``-m`` run nothing) and ``busybox
  APPLET``; every argument up to and including the program they run must be static text (the
  tables are in :mod:`rho_notebook.planning._code_specs`).
* A datum never becomes code: when the program is an interpreter (a shell: sh, bash, dash, zsh,
  ksh, mksh, ash, ...; fish, python, pypy, perl, ruby, node, php, lua, tclsh, awk, sed, Rscript,
  julia, osascript), every argument up to and including its program must be static text: the
  ``-c`` / ``-e`` / ``--eval`` text (also in combined flags such as ``-ec``, ``-lc``, ``-Ic``,
  ``-ne``), a ``-m`` module or ``-f`` file, the script path, a shell's command string, and every
  option before them. Shells, Python and awk stop reading options at their program, so every
  argument after it is data; perl, ruby, node, php and fish go on reading options after ``-e``
  code, so there a datum is data only after ``--`` or a static operand; sed reads options
  anywhere, so there only after ``--``.
* An interpreter is recognised by the name given and by the file it resolves to (a ``sh`` that is
  ``dash``, a ``python3`` that is ``python3.12``, any name linked to ``bash``). What cannot be
  told fails closed, no datum may follow it: an option of a wrapper this module does not know,
  an ``env -S`` text it cannot split, a bare program name after ``env PATH=...`` or ``-P``, a
  relative program path after ``env -C``, and, when a lookup is given (planning and script steps
  resolve names; ``validate`` of an item graph goes by names only), a program a wrapper runs that
  resolves to no file.
* Workflow inputs are static: they are substituted at plan time and shown with the plan.

:func:`code_argument_problem` answers the first offending argv index with a message naming the
node or step, the argument, the datum and the fix (pass values as positional arguments).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from rho_notebook.errors import MappingError
from rho_notebook.model.mapping import is_mapping, parse_mapping
from rho_notebook.model.reference import OutputRef, Template
from rho_notebook.planning._code_specs import WRAPPERS, Interpreter, Wrapper, interpreter_of, long_role

__all__ = [
    "ArgvItem",
    "CodeArgumentProblem",
    "Datum",
    "Lookup",
    "code_argument_problem",
    "interpreter_family",
    "item_argv",
    "step_datum",
    "wrapper_names",
]


@dataclass(frozen=True)
class Datum:
    """An argv item whose text is known only when the command runs."""

    shown: str
    """The reference as the author wrote it: ``{{ $json.c }}``, ``step 'x'``."""
    source: str
    """What it is, for messages: ``an item field``, ``a step value``."""
    example: str
    """How the author writes it in the fix's example: ``"={{ $json.c }}"``, ``h.output``."""


ArgvItem = str | Template | Datum
"""A static argument, or data: an ``output()`` template (Starlark) or a :class:`Datum`."""

Lookup = Callable[[str], str | None]
"""The canonical file name a program name resolves to (through symlinks), or None."""


class CodeArgumentProblem(NamedTuple):
    """Where data could become code or choose the program, and the message saying so."""

    argument: int
    """The argv index of the offending argument."""
    message: str


def interpreter_family(name: str) -> str | None:
    """``"shell"``, ``"python"``, ... for an interpreter's file name; None for any other program."""
    found = interpreter_of(name)
    return found.family if found is not None else None


def wrapper_names() -> tuple[str, ...]:
    """The wrappers looked through, ``busybox`` included."""
    return (*WRAPPERS, "busybox")


def item_argv(argv: Sequence[str]) -> tuple[ArgvItem, ...]:
    """An item-graph command's argv as the rule sees it: every mapping (a string starting with
    ``=``) is a :class:`Datum` naming its ``{{ ... }}`` places; other strings are static."""
    items: list[ArgvItem] = []
    for text in argv:
        if not is_mapping(text):
            items.append(text)
            continue
        try:
            refs = parse_mapping(text).refs()
        except MappingError:  # reported by its own rule (graph.mapping_syntax); data all the same
            refs = ()
        shown = ", ".join(f"{{{{ {ref.source} }}}}" for ref in refs) or repr(text)
        roots = {ref.root for ref in refs}
        source = "an item field" if "json" in roots else "a run field" if roots else "a mapping"
        items.append(Datum(shown=shown, source=source, example=json.dumps(text)))
    return tuple(items)


def step_datum(key: str) -> Datum:
    """A script or flow step's value (``{"step": KEY, "text": ...}``) as the rule sees it."""
    return Datum(shown=f"step {key!r}", source="a step value", example="handle.output")


def _is_data(part: ArgvItem) -> bool:
    return not isinstance(part, str)


_Items = list[tuple[int, ArgvItem]]


@dataclass(frozen=True)
class _Bad:
    index: int
    why: str = "wrapper"
    """``wrapper``: before or as a wrapper's program; ``unknown``: after a wrapper option not known;
    ``unresolved``: after a wrapped program that resolves to no file; ``split``: after an
    ``env -S`` text that cannot be split; ``path``: after ``env PATH=...``; ``deep``: too deep."""
    detail: str = ""


@dataclass(frozen=True)
class _Program:
    items: _Items
    at: int
    moved: frozenset[str]
    """``path`` (``env PATH=...``, ``-P``) or ``chdir`` (``env -C``): how the wrapper changed
    where the program's name is looked up."""


def code_argument_problem(
    argv: Sequence[ArgvItem],
    *,
    resolved: str | None,
    lookup: Lookup | None,
    node: str,
    subject: str = "node",
    where: str = "",
) -> CodeArgumentProblem | None:
    """The first argv index where data could become code or choose the program; None if none.

    Parameters
    ----------
    argv
        Static strings and data (templates with ``output()`` references, :class:`Datum` s).
    resolved
        The canonical path argv[0] was frozen to; None: go by names only.
    lookup
        Finds what a name a wrapper runs resolves to; None: go by names only (then nothing fails
        closed for want of a file).
    node, subject, where
        Who the message names: ``node 'b'``, ``step 'b'``; ``where`` (``wf.py:12``) is added after
        it when given.
    """
    who = f"{subject} {node!r}" + (f" (called at {where})" if where else "")
    items: _Items = list(enumerate(argv))
    if not items:
        return None
    if _is_data(argv[0]):
        return CodeArgumentProblem(0, _message(who, argv[0], 0, ("program", "", None)))
    position, given, target = 0, str(argv[0]), resolved
    for _ in range(16):  # wrappers nest (env timeout nice sh ...); a bound keeps this finite
        names = _names(given, target)
        interpreter = next((s for s in map(interpreter_of, names) if s is not None), None)
        if interpreter is not None:
            bad = _interpreter_problem(interpreter, items, position + 1)
            return None if bad is None else _problem(who, items, bad, ("interpreter", given, interpreter))
        wrapper_name = next((n for n in names if n in WRAPPERS or n == "busybox"), None)
        if wrapper_name is None:
            return None
        outcome = _unwrapped(wrapper_name, items, position + 1)
        if outcome is None:
            return None
        if isinstance(outcome, _Bad):
            return _problem(who, items, outcome, ("wrapper", given, None))
        items, position = outcome.items, outcome.at
        given = str(items[position][1])
        if wrapper_name == "busybox":
            target = None
            continue
        unknown, target = _program_file(given, outcome.moved, lookup)
        if unknown:
            later = _first_datum(items, position + 1, why=unknown, detail=given)
            return None if later is None else _problem(who, items, later, ("wrapper", wrapper_name, None))
    later = _first_datum(items, position, why="deep")
    return None if later is None else _problem(who, items, later, ("wrapper", given, None))


def _unwrapped(wrapper_name: str, items: _Items, start: int) -> _Program | _Bad | None:
    """Where the program that wrapper ``wrapper_name`` runs is (see :func:`_wrapper_program`)."""
    if wrapper_name == "busybox":
        return _applet(items, start)
    return _wrapper_program(WRAPPERS[wrapper_name], items, start)


def _names(given: str, resolved: str | None) -> list[str]:
    names = [os.path.basename(given)]
    if resolved is not None and os.path.basename(resolved) not in names:
        names.append(os.path.basename(resolved))
    return names


def _program_file(given: str, moved: frozenset[str], lookup: Lookup | None) -> tuple[str, str | None]:
    """(why the file a wrapper runs is not known: ``path``, ``chdir``, ``unresolved``, or "";
    the file it resolves to, when looked up)."""
    name = os.path.basename(given)
    if interpreter_of(name) is not None or name in wrapper_names():
        return "", None  # known by its name wherever it is found
    if "path" in moved and "/" not in given:
        return "path", None
    if "chdir" in moved and "/" in given and not given.startswith("/"):
        return "chdir", None
    target = lookup(given) if lookup is not None else None
    return ("unresolved" if lookup is not None and target is None else ""), target


def _first_datum(items: _Items, start: int, *, why: str, detail: str = "") -> _Bad | None:
    index = next((index for index, part in items[start:] if _is_data(part)), None)
    return None if index is None else _Bad(index, why, detail)


# -- wrappers ---------------------------------------------------------------------------------------


def _applet(items: _Items, start: int) -> _Program | _Bad | None:
    """``busybox APPLET ...``: the applet name must be static; ``busybox --list`` runs nothing."""
    if start >= len(items):
        return None
    index, part = items[start]
    if _is_data(part):
        return _Bad(index)
    return None if str(part).startswith("-") else _Program(items, start, frozenset())


_NICE_DIGITS = re.compile(r"-[-+]?[0-9]+")


def _wrapper_program(wrapper: Wrapper, items: _Items, start: int) -> _Program | _Bad | None:
    """Where the wrapped program's name is (items may be rewritten by ``env -S``); _Bad at data
    before it or after an option that is not known; None when the wrapper runs no program (or
    hands static code to ``sh -c``). After ``--`` env still reads ``-`` and ``NAME=value``."""
    j, positional, moved, options = start, wrapper.positional, frozenset[str](), True
    while j < len(items):
        index, part = items[j]
        if _is_data(part):
            return _Bad(index)
        text = str(part)
        step: _Step
        if (wrapper.dash_is_option and text == "-") or (options and text == "--"):
            options = options and text != "--"
            j += 1
            continue
        if options and wrapper.digit_options and _NICE_DIGITS.fullmatch(text):
            j += 1
            continue
        if options and text.startswith("--"):
            step = _long_wrapper_option(wrapper, text, items, j)
        elif options and text.startswith("-") and len(text) > 1:
            step = _cluster(text, items, j, wrapper)
        elif wrapper.assignments and "=" in text:
            moved |= {"path"} if text.startswith("PATH=") else frozenset[str]()
            j += 1
            continue
        elif positional:
            positional -= 1
            j += 1
            continue
        else:
            return _Program(items, j, moved)
        if not isinstance(step, tuple):
            return step
        items, j, changed = step
        moved |= {changed} - {""}
    return None  # no program: the wrapper stops with a usage error (or prints, as env does)


_Step = tuple[_Items, int, str] | _Bad | None
"""What one option does: (items, the next index, how it moved the program's lookup: ``path``,
``chdir`` or ""), or the wrapper's outcome (_Bad, or None when it runs no program)."""


def _long_wrapper_option(wrapper: Wrapper, text: str, items: _Items, j: int) -> _Step:
    """One ``--name[=value]`` option of a wrapper."""
    name, eq, value = text.partition("=")
    role = long_role(wrapper.long, name)
    if role in ("", "ambiguous") or (role == "flag" and eq):  # getopt_long refuses it
        return _first_datum(items, j + 1, why="unknown", detail=text)
    return _option(role, value if eq else None, items, j)


def _cluster(text: str, items: _Items, j: int, wrapper: Wrapper) -> _Step:
    """One ``-abc`` cluster of a wrapper's short options."""
    letters = text[1:]
    for k, letter in enumerate(letters):
        role = wrapper.short.get(letter, "")
        if role == "flag":
            continue
        if role == "attached":
            return items, j + 1, ""
        if not role:
            return _first_datum(items, j + 1, why="unknown", detail=f"-{letter}")
        return _option(role, letters[k + 1 :] or None, items, j)
    return items, j + 1, ""


def _option(role: str, inline: str | None, items: _Items, j: int) -> _Step:
    """An option with ``role`` at ``items[j]`` whose value is ``inline`` or else the next item."""
    if role in ("flag", "attached"):
        return items, j + 1, ""
    if role == "nothing":
        return None
    value_at = j if inline is not None else j + 1
    if value_at >= len(items):
        return None  # a missing value: the wrapper stops with a usage error
    index, part = items[value_at]
    if _is_data(part):
        return _Bad(index, "shell" if role == "code" else "wrapper")
    value = inline if inline is not None else str(part)
    if role == "code":
        return None  # static text handed to sh -c; nothing else runs
    if role != "split":
        return items, value_at + 1, role if role in ("path", "chdir") else ""
    words = _env_split(value)
    if words is None:
        return _first_datum(items, value_at + 1, why="split", detail=value)
    spliced: _Items = [*items[:j], *((index, word) for word in words), *items[value_at + 1 :]]
    return spliced, j, ""


_ENV_ESCAPES = {
    **{ch: ch for ch in "\\\"'$#"},
    **{"f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"},
}
"""``env -S`` escapes besides ``\\_`` and ``\\c``."""


class _EnvWords:
    """The words of an ``env -S`` text so far, and the word and quote being read."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.word: str | None = None
        self.quote = ""

    def add(self, text: str) -> None:
        self.word = (self.word or "") + text

    def end_word(self) -> None:
        if self.word is not None:
            self.words.append(self.word)
        self.word = None

    def char(self, ch: str) -> str:
        """Read one character other than an escape: "" to go on, ``stop`` or ``invalid``."""
        if not self.quote and ch in " \t\n\f\v\r":
            self.end_word()
        elif not self.quote and ch == "#" and self.word is None:
            return "stop"
        elif ch == "$" and self.quote != "'":
            return "invalid"
        elif ch in "'\"" and (not self.quote or self.quote == ch):
            self.quote = "" if self.quote else ch
            self.word = self.word or ""
        else:
            self.add(ch)
        return ""

    def escape(self, nxt: str) -> str:
        """Read the escape ``\\`` + ``nxt``: "" to go on, ``stop`` (``\\c``) or ``invalid``."""
        if self.quote == "'" and nxt not in "\\'":
            self.add("\\" + nxt)
        elif nxt == "_":
            if self.quote:
                self.add(" ")
            else:
                self.end_word()
        elif nxt == "c" and not self.quote:
            return "stop"
        elif nxt in _ENV_ESCAPES:
            self.add(_ENV_ESCAPES[nxt])
        else:
            return "invalid"
        return ""


def _env_split(text: str) -> list[str] | None:
    """``env -S TEXT`` split as GNU env splits it (quotes, ``\\`` escapes, ``\\_``, ``\\c``, ``#``
    comments); None when the words depend on the environment (``${NAME}``) or the text is not
    valid."""
    read = _EnvWords()
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            i += 1
            outcome = read.escape(text[i])
        else:
            outcome = read.char(text[i])
        if outcome == "stop":
            break
        if outcome == "invalid":
            return None
        i += 1
    if read.quote:
        return None
    read.end_word()
    return read.words


# -- interpreters -----------------------------------------------------------------------------------


def _interpreter_problem(spec: Interpreter, items: _Items, start: int) -> _Bad | None:
    """The first datum in the program position of ``spec`` (or among its options); None if none."""
    program_next = True  # whether the first operand is the program (script path or sh -c text)
    j = start
    while j < len(items):
        index, part = items[j]
        if _is_data(part):
            return _Bad(index, "program" if program_next else "options")
        text = str(part)
        if text == "--" or (spec.dash_ends_options and text == "-"):
            return _after_options(items, j + 1, program_next=program_next)
        is_option = len(text) > 1 and (text[0] == "-" or (spec.family == "shell" and text[0] == "+"))
        if not is_option:
            if not spec.permutes:
                return None  # a static operand: the program itself, or (after code) the first datum
            program_next = False
            j += 1
            continue
        if text.startswith("--") or text in spec.long:
            outcome = _long_option(spec, text, items, j)
        else:
            outcome = _short_cluster(spec, text[1:], items, j)
        if isinstance(outcome, _Bad):
            return outcome
        j, role = outcome
        if role in ("code", "program"):
            if spec.stops_at_program:
                return None
            program_next = spec.script_after_code
        j += 1
    return None


def _after_options(items: _Items, nxt: int, *, program_next: bool) -> _Bad | None:
    """After ``--`` (or ``-``): a datum at ``nxt`` is the program when it comes next."""
    if program_next and nxt < len(items) and _is_data(items[nxt][1]):
        return _Bad(items[nxt][0], "program")
    return None


def _long_option(spec: Interpreter, text: str, items: _Items, j: int) -> tuple[int, str] | _Bad:
    name, eq, _ = text.partition("=")
    role = long_role(spec.long, name)
    if role == "ambiguous":
        role = "value"  # the careful reading: the program must still come, as static text
    if role in ("code", "program", "value", "data") and not eq:
        j += 1
        if j < len(items) and _is_data(items[j][1]) and role != "data":
            return _Bad(items[j][0], "program" if role in ("code", "program") else "options")
    return j, role


def _short_cluster(spec: Interpreter, letters: str, items: _Items, j: int) -> tuple[int, str] | _Bad:
    """Walk one ``-abc`` cluster: the index of its last argument and the role that ended it."""
    k = 0
    while k < len(letters):
        ch = letters[k]
        role = spec.short.get(ch, "flag")
        rest = letters[k + 1 :]
        if spec.family == "node" and role == "code" and rest and all(spec.short.get(c) == "code" for c in rest):
            rest = ""  # node -pe CODE
        if role in ("code", "program", "value", "data"):
            if not rest:
                j += 1
                if j < len(items) and _is_data(items[j][1]) and role != "data":
                    return _Bad(items[j][0], "program" if role in ("code", "program") else "options")
            return j, role
        if role == "attached":
            return j, role
        k += 1
        if role == "digits":
            hexa = ch == "0" and letters[k : k + 1] == "x"
            k += 1 if hexa else 0
            while k < len(letters) and letters[k] in ("0123456789abcdefABCDEF" if hexa else "01234567"):
                k += 1
    return j, ""


# -- messages ---------------------------------------------------------------------------------------


def _describe(part: ArgvItem) -> tuple[str, str, str]:
    """(shown, source, example) of a datum."""
    if isinstance(part, Datum):
        return part.shown, part.source, part.example
    if isinstance(part, Template):
        shown = [_output(p) if isinstance(p, OutputRef) else json.dumps(p) for p in part.parts]
        text = shown[0] if len(shown) == 1 else f"template([{', '.join(shown)}])"
        return text, "an output of an earlier node", "output(...)"
    return repr(part), "static text", "..."


def _output(ref: OutputRef) -> str:
    path = f", {json.dumps(list(ref.path))}" if ref.path else ""
    return f"output({json.dumps(ref.node)}{path})"


def _problem(who: str, items: _Items, bad: _Bad, context: tuple[str, str, Interpreter | None]) -> CodeArgumentProblem:
    part = next(p for i, p in items if i == bad.index)
    kind, given, spec = context
    if kind == "wrapper" and bad.why != "wrapper":
        context = (bad.why, given, None)
    elif kind == "interpreter":
        context = (bad.why, given, spec)
    return CodeArgumentProblem(bad.index, _message(who, part, bad.index, context, detail=bad.detail))


def _message(
    who: str, part: ArgvItem, index: int, context: tuple[str, str, Interpreter | None], *, detail: str = ""
) -> str:
    shown, source, example = _describe(part)
    why, given, spec = context
    head = f"{who}: argv[{index}] is {shown} ({source})"
    fix = "Keep the program static text and pass values as positional arguments after it"
    if spec is not None:
        where = (
            "its program (the -c/-e code, the script path, or an option before them)"
            if why == "program" or spec.stops_at_program
            else "its program or its options (it reads options after its code; data is safe only after '--')"
        )
        return (
            f"{head}, in the place where {given!r} ({spec.family} interpreter) reads {where}, so that data "
            f"would run as code. {fix}, e.g. {spec.example.replace('{data}', example)}"
        )
    reasons = {
        "program": "where argv[0], the program, must be static text: data must not choose the program",
        "wrapper": f"where {given!r} reads its options or the program it runs: data must not choose the program",
        "shell": f"where {given!r} reads the command text it hands to 'sh -c', so that data would run as code",
        "unknown": f"after {given!r} option {detail!r}, which rho-notebook does not know, so it cannot tell "
        "which program runs or where it reads code",
        "unresolved": f"after {detail!r}, the program {given!r} runs, which resolves to no file, so rho-notebook "
        "cannot tell whether it reads data as code",
        "split": f"after {given!r} -S text {detail!r}, which rho-notebook cannot split (it reads the "
        "environment or is not valid), so it cannot tell which program runs",
        "path": f"after {given!r} sets PATH, so rho-notebook cannot tell which file {detail!r} is; give the "
        "program by its path",
        "chdir": f"after {given!r} changes the working directory, so rho-notebook cannot tell which file "
        f"{detail!r} is; give the program by its absolute path",
        "deep": "after wrappers nested too deep to follow",
    }
    wrapper = f'"{given}", ..., ' if given else ""
    sample = f'[{wrapper}"sh", "-c", "echo \\"$1\\"", "sh", {example}]'
    return f"{head}, {reasons[why]}. {fix}, e.g. {sample}"
