"""The hub lists every authoring cell of the notebook with its kind (issue 32): ``%%workflow``,
``%%script``, ``%%flow`` and ``%%graph`` cells with a Start button when they validated, and the
``%%star`` / ``%%py`` modules and ``%%agent`` cells they use without one. Cells are run through the
extension's magics in IPython's in-process shell."""

from __future__ import annotations

from typing import Any

from tests.conftest import Project
from tests.kernel.conftest import ip, no_owner_outlives_the_test, ws  # noqa: F401 - the shell fixtures
from tests.kernel.helpers import C, ok, workflow_cell
from tests.unit.test_itemgraph_validate import TRIAGE

FLOW = """%%flow nothing --compile
from rho_notebook.flow import Workflow


class Nothing(Workflow):
    def forward(self, session):
        return session


nothing = Nothing()
"""


def _rows(hub: Any) -> dict[str, list[str]]:
    """START row text -> the descriptions of its buttons."""
    rows = {}
    for row in hub.start_box.children:
        labels = " ".join(c.value for c in row.children if not hasattr(c, "on_click"))
        rows[labels] = [c.description for c in row.children if hasattr(c, "on_click")]
    return rows


def test_the_hub_lists_every_authoring_cell_with_its_kind(ip: Any, ws: Project) -> None:  # noqa: F811
    from rho_notebook.notebook.extension import current_session
    from rho_notebook.widgets import hub_view

    ok(ip, "%%star //lib/common.star\nGREETING = 'hi'\n")
    ok(ip, "%%py //nodes/stats.py\ndef total(values):\n    return sum(values)\n")
    ok(ip, workflow_cell("quick", f'        command(name = "a", argv = ["true"], {C}),\n'))
    ok(ip, "%%script probe\nx = 1\n")
    ok(ip, "%%graph triage\n" + TRIAGE)
    ok(ip, FLOW)
    session = current_session(ip)
    kinds = {form.name: form.kind for form in session.forms}
    assert kinds == {
        "quick": "workflow",
        "probe": "script",
        "triage": "graph",
        "nothing": "flow",
        "//lib/common.star": "star",
        "//nodes/stats.py": "py",
    }
    hub = hub_view(session)
    rows = _rows(hub)
    started = {text.split("</b>")[0].split("<b>")[1]: buttons for text, buttons in rows.items()}
    assert started == {
        "quick": ["Start quick"],
        "probe": ["Start probe"],
        "triage": ["Start triage"],
        "nothing": [],  # held by --compile, not planned: the cell itself runs it
        "//lib/common.star": [],
        "//nodes/stats.py": [],
    }
    for text in rows:
        kind = kinds[text.split("</b>")[0].split("<b>")[1]]
        assert f"<code>%%{kind}</code>" in text, text
    static = hub._repr_mimebundle_()[0]["text/html"]
    assert "%%graph triage" in static and "%%flow nothing" in static and "%%script probe" in static

    # Start on a script cell plans it and starts a run, shown live below
    probe = next(row for row in hub.start_box.children if "probe" in row.children[0].description)
    probe.children[0].click()
    assert "run " in hub.message.value and "started" in hub.message.value, hub.message.value
    run = session.runs()[-1]
    assert run.workflow == "probe"
    run.wait(60)
