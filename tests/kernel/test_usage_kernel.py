"""``rho.usage(run)`` in a real kernel (nbclient): the table of typed rows of a run of agent
nodes made through the CLI against a local OpenAI-compatible server, shown as an HTML table
(``_repr_html_``, no pandas) with the counts the server reported."""

from __future__ import annotations

import os
from typing import Any

from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from tests.agents.fakeserver import ScriptedServer
from tests.agents.helpers import write_settings_for
from tests.cli.test_usage_status import PRICES, WORKFLOW, _replies, _run
from tests.conftest import REPO, Project


def test_rho_usage_shows_a_table_in_a_kernel(project: Project) -> None:
    with ScriptedServer(_replies()) as server:
        write_settings_for(project.home, server, prices=PRICES)
        project.write("src/main.py", "print('hello')\n")
        project.write("spend.star", WORKFLOW)
        run_id = _run(project, "spend.star")
    nb = new_notebook(
        cells=[
            new_code_cell(
                "import sys, rho_notebook as rho\n"
                f"rows = rho.usage({run_id!r})\n"
                "print([(r.key, r.level, r.usage.calls, r.usage.input_tokens) for r in rows])\n"
                "print('pandas' in sys.modules)"
            ),
            new_code_cell("rows"),
            new_code_cell(f"%load_ext rho_notebook\n%workflow show {run_id}"),
        ]
    )
    client = NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(project.root)}})
    client.execute(env={**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)})
    printed = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert "('run', 'run', 3, 36)" in printed and "('first', 'node', 2, 16)" in printed, printed
    assert printed.strip().endswith("False"), "rho.usage must not import pandas"
    shown: Any = next(o for o in nb.cells[1].outputs if o.output_type == "execute_result")
    html = shown.data["text/html"]
    assert html.startswith("<table") and "<td>second</td>" in html and "<td>$0.000064</td>" in html
    shown_run = "".join(o.get("data", {}).get("text/plain", "") for o in nb.cells[2].outputs)
    assert "usage 3 calls  36 in / 14 out tokens" in shown_run, shown_run  # %workflow show has the run's line
