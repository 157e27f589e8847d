"""What a script's imports and step calls may name, checked against the script API itself.

``validate SCRIPT.py`` reads the script without running it (:mod:`.script_lint`); these two rules
compare what it names with what ``rho_notebook.script`` and ``rho_notebook.flow`` really provide,
so that a misspelled import or argument is refused before the run instead of failing it:

``script.import_name`` (error)
    ``from rho_notebook.script import NAME`` (or ``rho_notebook.flow``) of a name the module does
    not have: the run would stop at its first line with an ``ImportError``.
``script.step_argument`` (error)
    A call of ``run_step``, ``run_command`` or ``run_model`` imported from ``rho_notebook.script``
    with a keyword it does not take (spelled out, or in a ``**`` splat the linter can read) or
    more positional arguments than it takes.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect

from rho_notebook.model.spelling import meant

__all__ = ["argument_problems", "missing_name"]


def missing_name(module: str, name: str) -> str | None:
    """Why ``from module import name`` fails (None: it does not)."""
    if name == "*":
        return None
    loaded = importlib.import_module(module)
    if hasattr(loaded, name) or importlib.util.find_spec(f"{module}.{name}") is not None:
        return None
    public = [n for n in getattr(loaded, "__all__", ()) if isinstance(n, str)]
    close = meant(name, public)
    if close:
        return f"{module} has no {name!r}; did you mean {close!r}?"
    return f"{module} has no {name!r}; it provides {', '.join(public)}"


def argument_problems(function: str, call: ast.Call, spelled: dict[str, ast.expr] | None) -> list[str]:
    """What is wrong with ``call`` of ``rho_notebook.script.<function>``. ``spelled`` holds the
    keywords its ``**`` splats pass when they can be read, None when one cannot (then only what
    the call spells out is checked)."""
    import rho_notebook.script as script

    parameters = inspect.signature(getattr(script, function)).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return []
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    given = [k.arg for k in call.keywords if k.arg is not None] + list(spelled or {})
    problems = []
    for name in given:
        if name not in named:
            close = meant(name, named)
            guess = f" (did you mean {close!r}?)" if close else ""
            problems.append(f"{function}() takes no argument {name!r}{guess}; it takes {', '.join(named)}")
    starred = any(isinstance(a, ast.Starred) for a in call.args)
    if not starred and len(call.args) > len(positional):
        problems.append(
            f"{function}() takes {len(positional)} positional argument(s) ({', '.join(p.name for p in positional)}), "
            f"{len(call.args)} given; pass the others by keyword"
        )
    return problems
