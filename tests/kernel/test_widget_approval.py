"""A supervised notebook run approved from the approvals widget in a real kernel (nbclient): the
person clicks Approve on the card that shows the exact process facts, and the decision is
journaled with via=notebook; a denial from the widget ends the launch in denial."""

from __future__ import annotations

import asyncio

from tests.conftest import Project
from tests.kernel.helpers import C
from tests.kernel.test_kernel import kernel

WORKFLOW = f"""
def build(inputs):
    return workflow(name = "supervised", nodes = [
        command(name = "write", argv = ["touch", "approved.txt"], {C}),
        command(name = "second", argv = ["touch", "denied.txt"], needs = ["write"], {C}),
    ])

WORKFLOW = define(inputs = {{}}, build = build)
"""

CLICK = """
import asyncio
DONE = globals().setdefault("DONE", set())
for _ in range(400):  # the panel refreshes once the owner process has journaled the request
    if panel.children and panel.children[0].request_id not in DONE:
        break
    await asyncio.sleep(0.05)
card = panel.children[0]
DONE.add(card.request_id)
print(json.dumps({"request": card.request_id, "facts": card.children[0].value}))
card.comment.value = COMMENT
(card.approve_button if APPROVE else card.deny_button).click()
"""


def test_supervised_run_approved_and_denied_from_the_widget(ws: Project) -> None:
    ws.write("wf.star", WORKFLOW)

    async def scenario() -> None:
        async with kernel(ws) as k:
            await k.ok(
                "import json, rho_notebook as rho\n"
                "from rho_notebook.widgets import approvals_view\n"
                "plan = rho.plan('wf.star')\n"
                "run = rho.run(plan, yes=True, mode='supervised')\n"
                "panel = approvals_view(run)\n"
            )
            first = await k.json("COMMENT = 'fine'; APPROVE = True\n" + CLICK)
            assert "/touch" in first["facts"] and "approved.txt" in first["facts"]
            second = await k.json("COMMENT = 'not this one'; APPROVE = False\n" + CLICK)
            assert second["request"] != first["request"] and "denied.txt" in second["facts"]
            final = await k.json(
                "final = await run\nprint(json.dumps({n: r.state.value for n, r in final.nodes.items()}))"
            )
            assert final == {"write": "success", "second": "denial"}
            events = await k.json(
                "from rho_notebook.store.journal import read_journal\nimport rho_notebook.notebook.api as rho_api\n"
                "evs = read_journal(rho_api.service().run_store.folder(run.run_id).events).events\n"
                "print(json.dumps([e for e in evs if e['kind'] == 'approval_decided']))"
            )
            assert [(e["decision"], e["via"], e["comment"]) for e in events] == [
                ("approve", "notebook", "fine"),
                ("deny", "notebook", "not this one"),
            ]

    asyncio.run(scenario())
    assert (ws.root / "approved.txt").exists()
    assert not (ws.root / "denied.txt").exists()
