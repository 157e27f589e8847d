"""``%workflow fork`` and ``rho.fork`` in a real IPython shell (issue 35, docs/fork.md)."""

from __future__ import annotations

from typing import Any

import rho_notebook as rho
from tests.conftest import Project
from tests.kernel.helpers import C, ok, status_json, usage_error, workflow_cell


def chain() -> str:
    return workflow_cell(
        "chain",
        f"""        command(name = "a", argv = ["echo", "1"], output = schema.stdout_json(schema.integer()), {C}),
        command(name = "b", argv = ["echo", "2"], needs = ["a"], output = schema.stdout_json(schema.integer()), {C}),
        command(name = "c", argv = ["echo", "3"], needs = ["b"], {C}),
""",
    )


def test_fork_magic_and_api(ip: Any, ws: Project) -> None:
    ok(ip, chain())
    first, _ = ok(ip, "%workflow run chain --yes --wait")
    source = first.data.run_id

    state, captured = ok(ip, f"%workflow fork {source[:13]} --at b --value 20 --yes --wait")
    assert f"taken from run {source[:13]}: a" in captured.stdout and "runs anew: c" in captured.stdout
    forked = state.data
    assert forked.outcome == "success"
    assert forked.nodes["a"].current.reused_from is not None and forked.nodes["b"].current.reused_from is not None
    assert "edited by" in forked.nodes["b"].current.message
    assert forked.nodes["c"].current.reused_from is None  # launched anew
    assert rho.result(forked.run_id).nodes["b"].output == 20

    message = usage_error(ip, f"%workflow fork {source[:13]} --at b --value '\"x\"' --yes")
    assert "b" in message and "integer" in message
    message = usage_error(ip, f"%workflow fork {source[:13]} --at b --value NaN --yes")
    assert message.startswith("%workflow fork: --value is not JSON: NaN is no JSON value"), message

    handle = rho.fork(source, at="b", output=21, yes=True)
    assert handle.wait(60).outcome == "success"
    assert handle.result().nodes["b"].output == 21
    assert handle.result().nodes["a"].output == 1  # taken from the source run


def test_the_plan_card_of_a_fork_confirms_the_same_fork(ip: Any, ws: Project) -> None:
    """Without --yes the card said ``%workflow fork RUN --at b --value '...' --yes`` and dropped
    ``--from-plan`` (and ``--input``), so the line it offered forked something else (another
    digest), and a value with a quote in it broke the line. The line now asks for the same fork."""
    ok(ip, chain())
    first, _ = ok(ip, "%workflow run chain --yes --wait")
    source, plan_id = first.data.run_id, first.data.plan_id
    _, card = ok(ip, f"%workflow fork {source[:13]} --at b --value 30 --from-plan {plan_id[:13]}")
    (derived,) = [line.split("digest ")[1] for line in card.stdout.splitlines() if line.startswith("fork of run")]
    shown = "\n".join(str(o.data.get("text/plain", "")) for o in card.outputs)
    (confirm,) = [line.split("confirm the digest: ")[1] for line in shown.splitlines() if "confirm the" in line]
    assert f"--from-plan {plan_id[:13]}" in confirm and confirm.endswith("--yes"), confirm
    state, again = ok(ip, confirm + " --wait")
    assert f"digest {derived}" in again.stdout
    assert (
        state.data.nodes["b"].current.reused_from is not None and rho.result(state.data.run_id).nodes["b"].output == 30
    )


def test_fork_magic_takes_the_run_budget_flags(ip: Any, ws: Project) -> None:
    """``%workflow fork --max-tokens`` was refused as an unknown flag: a fork that runs agents again
    could not be given a budget at start. It is journaled as ``%workflow run``'s (source ``run``),
    and the plan card's confirm line keeps it."""
    ok(ip, chain())
    first, _ = ok(ip, "%workflow run chain --yes --wait")
    source = first.data.run_id
    state, _ = ok(ip, f"%workflow fork {source[:13]} --at b --value 20 --yes --wait --max-tokens 500 --max-wall 60")
    (budget,) = status_json(ws, state.data.run_id)["budgets"]
    assert (budget["source"], budget["max_tokens"], budget["max_wall_seconds"]) == ("run", 500, 60.0)
    assert "--max-tokens" in usage_error(ip, f"%workflow fork {source[:13]} --at b --yes --max-tokens 0")
    _, card = ok(ip, f"%workflow fork {source[:13]} --at b --value 30 --max-tokens 700")
    shown = "\n".join(str(o.data.get("text/plain", "")) for o in card.outputs)
    (confirm,) = [line.split("confirm the digest: ")[1] for line in shown.splitlines() if "confirm the" in line]
    assert "--max-tokens 700 --yes" in confirm, confirm
