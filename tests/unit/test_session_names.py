"""A kernel session asked for a workflow it has no cell for names its workflows and the one meant."""

from __future__ import annotations

import pytest

from rho_notebook.errors import NotFound
from rho_notebook.notebook.session import NotebookSession
from rho_notebook.service.cells import parse_cell

BODY = 'def build(inputs):\n    return workflow(name = "triage", nodes = [])\n\nWORKFLOW = define(build = build)\n'


def test_a_misspelled_cell_name_is_answered_with_the_one_meant() -> None:
    session = NotebookSession()
    with pytest.raises(NotFound) as empty:
        session.cell("triage")
    assert "(its workflows: none yet); run the cell first" in str(empty.value)
    session.cells.add(parse_cell("workflow", "triage", BODY, display="cell 1"))
    assert session.cell("triage").name == "triage"
    with pytest.raises(NotFound) as missing:
        session.cell("traige")
    assert "(its workflows: triage; did you mean 'triage'?); run the cell first" in str(missing.value)
    with pytest.raises(NotFound) as unlike:
        session.cell("zzz")
    assert "(its workflows: triage); run the cell first" in str(unlike.value)
