"""A ``%%graph`` cell with a human step, run in the background of a real kernel (nbclient): the
step's form appears in the run's DAG widget and is answered from the widget (the comm message
the front end sends on Submit), a wrong-typed value is refused on the form with the field named
while the run keeps waiting, and the answered fields end up in the result item. The same form
answered with ``%workflow answer RUN STEP FIELD=JSON...``."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.conftest import Project
from tests.kernel.test_kernel import Kernel, kernel

GRAPH = """%%graph ask
name: ask
inputs:
  score: {type: integer}
steps:
  - id: start
    kind: set
    params: {fields: {score: "={{ $json.score }}"}}
  - id: escalate
    kind: human
    params:
      question: "=Escalate ticket {{ $json.score }}?"
      fields:
        assignee: {type: enum, choices: [oncall, backlog], label: Who takes it}
        priority: {type: integer, default: 3}
        note: {type: string, default: ""}
  - {id: done, kind: output}
edges:
  - {from: start, to: escalate}
  - {from: escalate, to: done}
"""

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

FORMS = """
import asyncio, json
from ipywidgets.widgets.widget import _instances
view = _instances[MODEL]
for _ in range(600):
    if view.forms and (view.forms[0].get("error") or not WANT_ERROR):
        break
    await asyncio.sleep(0.05)
print(json.dumps({"forms": view.forms, "done": run.done(), "state": run.state().nodes["escalate"].state.value}))
"""

RESULT = """
final = await run
import json, rho_notebook.notebook.api as rho_api
from rho_notebook.store.journal import read_journal
result = rho_api.result(run.run_id).to_json()
events = read_journal(rho_api.service().run_store.folder(run.run_id).events).events
decided = [e for e in events if e["kind"] == "approval_decided"]
print(json.dumps({"outcome": result["outcome"], "output": result["output"], "decided": decided}))
"""


def _widget_model_id(k: Kernel) -> str:
    """The model ID of the run's DAG widget, from the display of the cell that started the run."""
    outputs = k.client.nb.cells[-1].outputs
    found = [o.data[WIDGET_MIME]["model_id"] for o in outputs if WIDGET_MIME in o.get("data", {})]
    assert len(found) == 1, outputs  # the run view (an item graph has no approvals panel)
    model_id: str = found[0]
    return model_id


def _from_front_end(k: Kernel, model_id: str, content: dict[str, Any]) -> None:
    """Send the widget the custom comm message its front end sends (anywidget's model.send)."""
    kc = k.client.kc
    assert kc is not None
    message = kc.session.msg("comm_msg", {"comm_id": model_id, "data": {"method": "custom", "content": content}})
    kc.shell_channel.send(message)


async def _forms(k: Kernel, model_id: str, *, want_error: bool) -> dict[str, Any]:
    found: dict[str, Any] = await k.json(f"MODEL = {model_id!r}; WANT_ERROR = {want_error}\n" + FORMS)
    return found


def test_a_human_step_is_answered_from_the_dag_widget(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            await k.ok(GRAPH)
            await k.ok("run = %workflow run ask --input score=70 --yes")
            model_id = _widget_model_id(k)

            waiting = await _forms(k, model_id, want_error=False)
            [form] = waiting["forms"]
            assert (form["node"], form["step"], form["prompt"]) == ("escalate", "escalate", "Escalate ticket 70?")
            assert form["form"]["assignee"] == {
                "type": "enum",
                "required": True,
                "choices": ["oncall", "backlog"],
                "label": "Who takes it",
                "default": None,
            }
            assert form["form"]["priority"]["default"] == 3 and "error" not in form
            assert (waiting["done"], waiting["state"]) == (False, "running")

            # a wrong-typed value: refused on the form, naming the field; the run keeps waiting
            wrong = {"assignee": "oncall", "priority": "high"}
            _from_front_end(k, model_id, {"kind": "answer", "request": form["request_id"], "values": wrong})
            refused = await _forms(k, model_id, want_error=True)
            [still] = refused["forms"]
            assert still["request_id"] == form["request_id"]
            assert "priority" in still["error"], still
            assert (refused["done"], refused["state"]) == (False, "running")

            right = {"assignee": "oncall", "note": "call Bob"}
            _from_front_end(k, model_id, {"kind": "answer", "request": form["request_id"], "values": right})
            final = await k.json(RESULT)
            assert final["outcome"] == "success"
            assert final["output"] == {"score": 70, "assignee": "oncall", "priority": 3, "note": "call Bob"}
            [decided] = final["decided"]
            assert (decided["decision"], decided["via"]) == ("approve", "notebook")
            assert decided["answer"] == {"assignee": "oncall", "priority": 3, "note": "call Bob"}
            # the form is gone from the widget once the run stopped
            gone = await k.json(f"print(json.dumps(_instances[{model_id!r}].forms))")
            assert gone == []

    asyncio.run(scenario())


def test_a_declined_form_ends_the_step_in_denial(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            await k.ok(GRAPH)
            await k.ok("run = %workflow run ask --input score=5 --yes")
            model_id = _widget_model_id(k)
            [form] = (await _forms(k, model_id, want_error=False))["forms"]
            _from_front_end(k, model_id, {"kind": "decline", "request": form["request_id"]})
            states = await k.json(
                "final = await run\nprint(json.dumps({n: r.state.value for n, r in final.nodes.items()}))"
            )
            assert states["escalate"] == "denial" and states["done"] != "success", states

    asyncio.run(scenario())


def test_workflow_answer_answers_a_human_step_from_a_cell(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            await k.ok(GRAPH)
            run_id = await k.json(
                "import json\nrun = %workflow run ask --input score=9 --yes\nprint(json.dumps(run.run_id))"
            )
            await _forms(k, _widget_model_id(k), want_error=False)

            missing = await k.cell(f"%workflow answer {run_id} nosuch assignee='\"oncall\"'")
            [(ename, message)] = missing["errors"]
            assert ename == "UsageError" and "no human step 'nosuch' is waiting" in message and "escalate" in message

            wrong = await k.cell("%workflow answer {run.run_id} escalate assignee='\"nobody\"'")
            [(ename, message)] = wrong["errors"]
            assert ename == "UsageError" and "'assignee'" in message, message
            assert (await k.json("print(json.dumps(run.done()))")) is False

            answered = await k.ok(
                "%workflow answer {run.run_id} escalate assignee='\"backlog\"' priority=1 --comment 'not urgent'"
            )
            assert "human step escalate asks:" in answered["stdout"], answered
            assert "answered step escalate by " in answered["stdout"]
            assert '{"assignee": "backlog", "note": "", "priority": 1}' in answered["stdout"]
            final = await k.json(RESULT)
            assert final["outcome"] == "success"
            assert final["output"] == {"score": 9, "assignee": "backlog", "priority": 1, "note": ""}
            [decided] = final["decided"]
            assert (decided["via"], decided["comment"]) == ("notebook", "not urgent")

    asyncio.run(scenario())
