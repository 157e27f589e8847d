"""Budgets written in a workflow's source, checked and frozen into the graph.

``define(..., budget = {"tokens": 20000, "cost": "0.50", "wall": 600})`` in Starlark, a script's or
flow's module-level ``BUDGET = {...}`` (read like ``INPUTS``, never imported) and ``budget = {...}``
on an agent node. Starlark has no floats, so a cost may be written as a string (``"0.50"``) or a whole
number of dollars. The frozen :class:`~rho_notebook.model.budget_spec.BudgetSpec` is part of the
graph (and its digest) only when given. Problems are ``define.budget`` (Starlark) and
``script.budget`` (scripts and flows) diagnostics naming where.
"""

from __future__ import annotations

import ast
from typing import Any

from rho_notebook.errors import Diagnostic, InvalidWorkflow
from rho_notebook.model.budget_spec import BudgetSpec, budget_spec

__all__ = ["module_budget", "script_budget", "source_budget"]


def _number(value: Any) -> Any:
    """A cost or wall written as a decimal string ("0.50") as its number; anything else as is."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def source_budget(
    value: Any, *, where: str, rule: str = "define.budget", file: str | None = None, line: int | None = None
) -> BudgetSpec | None:
    """``budget = {...}`` as written, frozen (None: no budget).

    Raises
    ------
    InvalidWorkflow
        Not a dict of ``tokens`` / ``cost`` / ``wall`` numbers above 0.
    """
    if value is None:
        return None
    try:
        if not isinstance(value, dict):
            msg = f"{where}: a budget is a dict such as {{'tokens': 20000, 'cost': '0.50', 'wall': 600}}"
            raise ValueError(msg)
        return budget_spec({str(k): _number(v) for k, v in value.items()}, where=where)
    except ValueError as err:
        raise InvalidWorkflow([Diagnostic(rule=rule, message=str(err), file=file, line=line)]) from None


def module_budget(tree: ast.Module, display: str) -> BudgetSpec | None:
    """A script's or flow's module-level ``BUDGET = {...}`` literal, frozen (None: none).

    Raises
    ------
    InvalidWorkflow
        ``BUDGET`` is not a literal dict of limits (``script.budget``).
    """
    for statement in tree.body:
        if not isinstance(statement, ast.Assign):
            continue
        if not any(isinstance(t, ast.Name) and t.id == "BUDGET" for t in statement.targets):
            continue
        try:
            value = ast.literal_eval(statement.value)
        except ValueError:
            msg = f"{display}: BUDGET must be a literal dict such as {{'tokens': 20000}}"
            raise InvalidWorkflow(
                [Diagnostic(rule="script.budget", message=msg, file=display, line=statement.lineno)]
            ) from None
        return source_budget(
            value, where=f"BUDGET in {display}", rule="script.budget", file=display, line=statement.lineno
        )
    return None


def script_budget(text: str, display: str) -> BudgetSpec | None:
    """:func:`module_budget` of a script's or flow's text (None too when it does not parse: the
    lint that runs first reports that)."""
    try:
        tree = ast.parse(text, filename=display)
    except SyntaxError:
        return None
    return module_budget(tree, display)
