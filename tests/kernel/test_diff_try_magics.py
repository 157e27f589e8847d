"""``%workflow diff``, ``%workflow try`` and the plan card's changes in a real IPython shell."""

from __future__ import annotations

from typing import Any

from rho_notebook.notebook import api
from rho_notebook.service import DiffResult, Service, StoreLayout
from rho_notebook.widgets import plan_card
from tests.conftest import Project
from tests.kernel.helpers import C, ok, usage_error, workflow_cell


def chain(last: str = "c") -> str:
    return workflow_cell(
        "chain",
        f"""        command(name = "a", argv = ["echo", "a"], {C}),
        command(name = "b", argv = ["echo", "b"], needs = ["a"], {C}),
        command(name = "c", argv = ["echo", "{last}"], needs = ["b"], {C}),
""",
    )


def test_diff_try_and_the_plan_cards_changes(ip: Any, ws: Project) -> None:
    ok(ip, chain())
    run_line = "%workflow run chain --yes --wait"
    first, _ = ok(ip, run_line)
    assert first.data.outcome == "success"
    source_run = first.data.run_id
    [old_plan] = ws.stored_plans()

    ok(ip, chain("cc"))
    _, captured = ok(ip, "%workflow run chain")
    card = [o.data for o in captured.outputs if "changes since the previous plan" in str(o.data.get("text/plain"))]
    assert card, [o.data.get("text/plain") for o in captured.outputs]
    assert "~ c: argv" in card[0]["text/plain"]
    assert "~ c: argv" in card[0]["text/html"]
    new_plan = next(p for p in ws.stored_plans() if p != old_plan)
    service = Service(layout=StoreLayout(home=ws.home))
    old, new = (api.call(service.load_plan(p)) for p in (old_plan, new_plan))
    widget = plan_card(new, on_run=lambda: None, changes=api.call(service.diff_plans(old, new)))
    assert widget.children.index(widget.changes_view) < 2  # before the Run button
    assert "rho-plan-changes" in widget.changes_view.value and "<td" in widget.changes_view.value
    assert "rho-plan-changes" in widget._static_views()["text/html"]

    report, _ = ok(ip, f"%workflow diff {old_plan[:13]} {new_plan[:13]}")
    assert isinstance(report.data, DiffResult)
    assert str(report).splitlines()[1:] == ["~ c: argv", "will reuse: (none)", "will launch: a, b, c"]

    state, captured = ok(ip, "%workflow try c --yes --wait")
    assert f"upstream values from run {source_run}: a, b" in captured.stdout
    tried = state.data
    assert tried.outcome == "success" and set(tried.nodes) == {"a", "b", "c"}
    assert tried.nodes["a"].current.reused_from["run_id"] == source_run
    assert tried.nodes["c"].current.reused_from is None

    ok(ip, chain("cc").replace('"echo", "a"', '"echo", "A"'))
    message = usage_error(ip, f"%workflow try c --from {source_run[:13]} --yes")
    assert "node 'a'" in message and "argv" in message


def test_try_of_a_script_cell_says_to_fork_a_run_of_it(ip: Any) -> None:
    ok(
        ip,
        "%%script steps\nfrom rho_notebook.script import run_command\n"
        "run_command(['true'], step_id='x', timeout_seconds=5, max_output_bytes=10)\n",
    )
    message = usage_error(ip, "%workflow try x")
    assert message == (
        "%workflow try x: steps is a %%script cell, whose steps are known only once it runs; "
        "run one step again from a run of it with %workflow fork RUN --at x"
    )
