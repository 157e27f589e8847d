"""Worker errors as diagnostics: rule, message and the user's file:line:column."""

from __future__ import annotations

import re

from rho_notebook.source._starlark.pseudo_files import DRIVER, PRELUDE
from rho_notebook.source._starlark.signals import Budget, RhoBuiltinError

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

    from rho_notebook.source._starlark.session import Session

_SPAN = re.compile(r"--> (.+?):(\d+):(\d+)")
_FRAME = re.compile(r"\* (.+?):(\d+), in ")
_PARSE_ERROR = re.compile(r"^(Parse error: unexpected .+? here), expected one of (.+)$", re.S)
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"')
_EXPRESSION_START = frozenset(
    {"(", "+", "-", "~", "...", "[", "{", "FLOAT", "FSTRING", "IDENTIFIER", "INTEGER", "STRING", "lambda", "not"}
)
# What a person most often meant to type where a token was unexpected, most likely first.
_WORTH_NAMING = (",", "]", ")", "}", ":", "=", "\\n", "(", "[", ".", "for", "if", "else", "in")
_SHOWN_TOKENS = 5


def short_parse_error(message: str) -> str:
    """A parse error with the few expected tokens that matter, not the parser's whole list.

    starlark-rust lists every token the grammar allows (up to ~50: each operator and augmented
    assignment); a list that long hides the one a person forgot. An expression-start set becomes
    "an expression"; otherwise the separators and closing brackets are named, at most five.
    """
    match = _PARSE_ERROR.match(message)
    if match is None:
        return message
    head, listed = match.groups()
    tokens = _TOKEN.findall(listed)
    if len(tokens) <= _SHOWN_TOKENS:
        return message

    def join(names: list[str]) -> str:
        quoted = [f'"{name}"' for name in names]
        return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]

    if "IDENTIFIER" in tokens and _EXPRESSION_START & set(tokens) >= {"IDENTIFIER", "INTEGER", "STRING"}:
        others = [t for t in _WORTH_NAMING if t in tokens and t not in _EXPRESSION_START][: _SHOWN_TOKENS - 1]
        tail = f" or {join(others)}" if others else ""
        return f"{head}, expected an expression (a name, number, string, list, dict or call){tail}"
    named = [t for t in _WORTH_NAMING if t in tokens][:_SHOWN_TOKENS] or tokens[:_SHOWN_TOKENS]
    rest = len(tokens) - len(named)
    return f"{head}, expected {join(named)} (or one of {rest} other operators and keywords)"


def diagnose(err: BaseException, session: Session) -> dict[str, Any]:
    """The diagnostic of ``err``: the budget or builtin error the session remembers, else
    Starlark's own error with its message cleaned and its location found."""
    text = str(err)
    known = session.last_error
    if isinstance(known, Budget):
        at = location_of(text)
        return {
            "rule": f"limit.{known.budget}",
            "budget": known.budget,
            "limit": known.limit,
            "measured": known.measured,
            "message": known.detail,
            "file": at[0],
            "line": at[1],
            "column": at[2],
        }
    if isinstance(known, RhoBuiltinError) and known.message in text or known is err:
        at = known.at if known.at and known.at[0] else location_of(text)
        return {"rule": known.rule, "message": known.message, "file": at[0], "line": at[1], "column": at[2]}
    return starlark_diagnostic(text)


def starlark_diagnostic(text: str) -> dict[str, Any]:
    """Starlark's own error ``text`` as a diagnostic: its message cleaned, with a hint where one
    helps, at the user's file, line and column."""
    at = location_of(text)
    message = next((ln[len("error: ") :] for ln in text.splitlines() if ln.startswith("error: ")), text.strip())
    rule = "starlark.syntax" if "Parse error" in message else "starlark.error"
    if rule == "starlark.syntax":
        message = short_parse_error(message)
    if "serde::serialize" in message and "function" in message:
        message = "a function cannot be used as a workflow value (only None, bool, int, string, list and dict)"
        rule = "value.type"
    message = re.sub(
        r"^(RhoBuiltinError|ValueError|TypeError): ", "", re.sub(r"(StarlarkError: error: )+", "", message)
    )
    if message.startswith(_TOP_RETURN):  # the body of build written as the whole module
        message += _TOP_RETURN_HINT
    message += _undeclared_input_hint(message, text)
    return {"rule": rule, "message": public_hint(message), "file": at[0], "line": at[1], "column": at[2]}


_TOP_RETURN = "`return` cannot be used outside of a `def` function"
_TOP_RETURN_HINT = (
    ": an entry module (a .star entry, a %%workflow cell) defines its workflow; put the nodes and the "
    "return in `def build(inputs):` and end with `WORKFLOW = define(build = build)`"
)


_MISSING_KEY = re.compile(r'Key `"([^"`]*)"` was not found')
_SNIPPET_LINE = re.compile(r"^\d+ \|(.*)$", re.M)


def _undeclared_input_hint(message: str, text: str) -> str:
    """For ``inputs["x"]`` in ``build`` where ``x`` is not declared (a missing key of the dict
    ``build`` gets: it holds every declared input, defaults filled in), how to declare it."""
    found = _MISSING_KEY.fullmatch(message)
    if found is None:
        return ""
    name = found.group(1)
    code = "\n".join(_SNIPPET_LINE.findall(text))
    if not re.search(rf"""\binputs\s*\[\s*["']{re.escape(name)}["']""", code):
        return ""
    return (
        f"; the workflow declares no input {name!r}: declare it in "
        f'define(inputs = {{"{name}": input.string()}}, build = build) (or input.integer, input.bool, input.enum)'
    )


_HINT = re.compile(r", did you mean `(_\w+)`\?")


def public_hint(message: str) -> str:
    """``message`` with Starlark's "did you mean" naming what a person can write: the closest
    name in scope can be one of the prelude's private builtins (``input_string`` ->
    ``_input_string``, ``node`` -> ``_node``), which is then replaced by its public form
    (``input.string``, the node constructors) or dropped. A private name of the person's own
    stays suggested."""
    found = _HINT.search(message)
    if found is None:
        return message
    name = found.group(1)
    public = _public_forms().get(name)
    if public is None and name not in _private_names():
        return message
    hint = f", did you mean {public}?" if public is not None else ""
    return message[: found.start()] + hint + message[found.end() :]


def _public_forms() -> dict[str, str]:
    """Private builtin -> how a person writes it (the prelude's structs and constructors)."""
    from rho_notebook.source._starlark.builtins import STRUCTS_SOURCE
    from rho_notebook.source._starlark.crossing import NODE_KINDS

    constructors = ", ".join(f"`{kind}`" for kind in NODE_KINDS)
    forms = {"_node": f"one of the node constructors {constructors}", "_workflow": "`workflow`"}
    forms.update({f"_{kind}_json": f"`{kind}`" for kind in NODE_KINDS})
    for struct, fields in re.findall(r"^(\w+) = struct\(([^)]*)\)", STRUCTS_SOURCE, re.M):
        for field, private in re.findall(r"(\w+) = (_\w+)", fields):
            forms.setdefault(private, f"`{struct}.{field}`")
    return forms


def _private_names() -> set[str]:
    """Every private name the preludes give a module."""
    from rho_notebook.source._starlark.builtins import FAST_PRELUDE_SOURCE, PRELUDE_SOURCE

    return set(re.findall(r"\b_\w+", PRELUDE_SOURCE + FAST_PRELUDE_SOURCE))


def location_of(text: str) -> list[Any]:
    spans = _SPAN.findall(text)
    if spans and spans[-1][0] not in (PRELUDE, DRIVER):
        file, line, col = spans[-1]
        return [file, int(line), int(col)]
    frames = [f for f in _FRAME.findall(text) if f[0] not in (PRELUDE, DRIVER)]
    if frames:
        return [frames[-1][0], int(frames[-1][1]), None]
    return [None, None, None]
