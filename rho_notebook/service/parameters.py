"""papermill's ``parameters`` cell in a saved notebook: the workflow's input values, headless.

papermill marks one code cell with the tag ``parameters`` and reads it as the notebook's defaults.
A headless ``run NOTEBOOK.ipynb`` (and every other planning of a saved notebook:
:func:`rho_notebook.service.planning.plan_notebook`) reads that cell the same way, as data, never
executed: it may hold only ``NAME = literal`` assignments (``NAME: type = literal`` too; comments
and blank lines are ignored), each value read with :func:`ast.literal_eval` and kept only when it is
a JSON value (a tuple becomes a list; a set, bytes, a complex or a non-finite number is refused).
Anything else is refused with the cell and line named, before anything is planned.

Each value replaces the default of the input of that name (the ``%%workflow`` cell's own
``--input`` too); ``--input`` on the command line wins over it. The planner checks the merged
values as it checks every input: a NAME the workflow does not declare, or a value of another type
than the declared one, fails planning; :meth:`Parameters.explain` makes those diagnostics point at
the parameters cell's line (``nb.ipynb cell 2:3: error[input.type]: parameters cell: ...``), so
they say where the bad value came from.

In a kernel the cell is ordinary Python (papermill's habit); a ``%workflow run`` there takes its
inputs from the magic line, as before.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rho_notebook.errors import Diagnostic, ExportError, InvalidWorkflow
from rho_notebook.service.export import cell_display
from rho_notebook.service.notebook_file import read_notebook_json, tagged_code_cells

__all__ = ["PARAMETERS_TAG", "Parameters", "parse_parameters", "read_parameters"]

PARAMETERS_TAG = "parameters"
"""The cell tag papermill reads (and JupyterLab's property inspector sets)."""

_WRITE = "a parameters cell holds only NAME = literal assignments (numbers, strings, True, False, None, lists and dicts of them)"


@dataclass(frozen=True)
class Parameters:
    """The values of a notebook's parameters cell (none when it has no such cell)."""

    values: Mapping[str, Any] = field(default_factory=dict)
    """NAME -> value, in cell order (a NAME assigned twice keeps its last value, as Python would)."""
    lines: Mapping[str, int] = field(default_factory=dict)
    """NAME -> the cell line of the assignment that set it."""
    display: str = ""
    """``NOTEBOOK.ipynb cell N``: where diagnostics about a value point."""

    def merged(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """The inputs to plan with: these values, then ``given`` (``--input``) over them."""
        return {**self.values, **(given or {})}

    def explain(self, err: InvalidWorkflow, *, given: Mapping[str, Any] | None) -> InvalidWorkflow:
        """``err`` with each diagnostic about an input this cell set (and ``given`` did not) pointed
        at the cell's line and said to come from it; ``err`` itself when none is."""
        mine = {key: line for key, line in self.lines.items() if key not in (given or {})}
        found = err.diagnostics()
        rewritten = [self._pointed(diagnostic, mine) for diagnostic in found]
        if rewritten == found:
            return err
        return InvalidWorkflow(rewritten)

    def _pointed(self, diagnostic: Diagnostic, mine: Mapping[str, int]) -> Diagnostic:
        if not diagnostic.rule.startswith("input."):
            return diagnostic
        for key, line in mine.items():
            if f"input {key!r}" in diagnostic.message:
                message = f"parameters cell: {diagnostic.message}"
                return Diagnostic(rule=diagnostic.rule, message=message, file=self.display, line=line, column=1)
        return diagnostic


def read_parameters(notebook: Path, *, where: str | None = None) -> Parameters:
    """The parameters cell of the saved notebook ``notebook`` (no values when it has none).

    Raises
    ------
    ExportError
        The notebook is malformed (:mod:`~rho_notebook.service.notebook_file`), several cells are
        tagged ``parameters``, or the cell holds anything but ``NAME = literal`` assignments.
    """
    shown = where or str(notebook)
    cells = tagged_code_cells(notebook, read_notebook_json(notebook), PARAMETERS_TAG)
    if not cells:
        return Parameters()
    if len(cells) > 1:
        numbers = ", ".join(str(index) for index, _, _ in cells)
        msg = f"{shown}: cells {numbers} are all tagged {PARAMETERS_TAG}; keep the tag on one cell"
        raise ExportError(msg)
    index, _, source = cells[0]
    display = cell_display(notebook, index)
    values, lines = parse_parameters(source, display=display)
    return Parameters(values=values, lines=lines, display=display)


def parse_parameters(text: str, *, display: str) -> tuple[dict[str, Any], dict[str, int]]:
    """(NAME -> value, NAME -> line) of a parameters cell's text; ``display`` names it in errors.

    Raises
    ------
    ExportError
        A line that is not ``NAME = literal`` (named with its line and text), or a value that is
        not a JSON value.
    """
    try:
        tree = ast.parse(text, mode="exec")
    except SyntaxError as err:
        line = err.lineno or 1
        msg = f"{display} (tagged {PARAMETERS_TAG}) line {line}: {_line(text, line)!r} is not Python ({err.msg}); {_WRITE}"
        raise ExportError(msg) from None
    except (ValueError, RecursionError) as err:  # a NUL byte; nesting too deep to compile
        msg = f"{display} (tagged {PARAMETERS_TAG}): not readable as Python ({err}); {_WRITE}"
        raise ExportError(msg) from None
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for statement in tree.body:
        name, value = _assignment(statement, text, display=display)
        values[name] = value
        lines[name] = statement.lineno
    return values, lines


def _assignment(statement: ast.stmt, text: str, *, display: str) -> tuple[str, Any]:
    """(NAME, value) of one ``NAME = literal`` (or ``NAME: type = literal``) statement."""
    where = f"{display} (tagged {PARAMETERS_TAG}) line {statement.lineno}: {_line(text, statement.lineno)!r}"
    target: ast.expr | None = None
    value: ast.expr | None = None
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        target, value = statement.target, statement.value
    if not isinstance(target, ast.Name) or value is None:
        msg = f"{where} is not NAME = literal; {_WRITE}"
        raise ExportError(msg)
    try:
        found = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        msg = f"{where}: the value of {target.id} is not a literal (it would have to run); {_WRITE}"
        raise ExportError(msg) from None
    problem = _not_json(found)
    if problem is not None:
        msg = f"{where}: the value of {target.id} is {problem}, not a JSON value; {_WRITE}"
        raise ExportError(msg)
    return target.id, _as_json(found)


def _not_json(value: Any) -> str | None:
    """What keeps ``value`` (a literal) from being a JSON value, or None (iterative: no recursion)."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, bool | int | str):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"the number {item}"
            continue
        if isinstance(item, list | tuple):
            stack.extend(item)
            continue
        if isinstance(item, dict):
            bad = next((key for key in item if not isinstance(key, str)), None)
            if bad is not None:
                return f"a dict with the key {bad!r} (JSON keys are strings)"
            stack.extend(item.values())
            continue
        return f"a {type(item).__name__}"
    return None


def _as_json(value: Any) -> Any:
    """``value`` with every tuple made a list (what ``--input`` would give for the same JSON)."""
    return json.loads(json.dumps(value, allow_nan=False))


def _line(text: str, line: int) -> str:
    """Line ``line`` (1-based) of ``text``, stripped, at most 80 characters."""
    found: Iterable[str] = text.splitlines()[line - 1 : line]
    shown = next(iter(found), "").strip()
    return shown if len(shown) <= 80 else shown[:77] + "..."
