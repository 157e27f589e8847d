"""A run widget follows its run, not the call that made it (issue 32), in a real kernel (nbclient).

The widget is made from the first ``rho.run`` handle. A cancel from a terminal (the real CLI, a
process of its own), ``rho.resume`` in a later cell (a new owner, a new handle), the widget's own
Resume button and a second terminal cancel each change what the widget holds: its run view
(lifecycle, outcome, Cancel / Resume offered) and node views, read with ``get_state`` as a
front end that (re)connects receives them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.conftest import Project
from tests.kernel.helpers import C
from tests.kernel.test_kernel import Kernel, cli, kernel

WORKFLOW = f"""
def build(inputs):
    return workflow(name = "follow", nodes = [
        shell(name = "long", executable = "sh", arguments = ["-c"], command = "sleep 60", {C}),
        command(name = "after", argv = ["true"], needs = ["long"], {C}),
    ])

WORKFLOW = define(inputs = {{}}, build = build)
"""

VIEW = """
def view_state(view):
    state = view.get_state()
    run = state["run"]
    return {
        "lifecycle": run["lifecycle"], "outcome": run["outcome"],
        "can_cancel": run["can_cancel"], "can_resume": run["can_resume"],
        "long": [state["nodes"]["long"]["state"], state["nodes"]["long"]["attempt"]],
        "message": run.get("message", ""), "sent": view.messages_sent,
    }

async def until(test, timeout=60):
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = view_state(view)
        if test(shown):
            return shown
        await asyncio.sleep(0.05)
    raise AssertionError(f"the widget never got there: {view_state(view)}")
"""

RUNNING = (
    "shown = await until(lambda s: s['lifecycle'] == 'running' and s['long'][0] == 'running' and s['long'][1] == {n})\n"
    "print(json.dumps(shown))"
)
CANCELLED = (
    "shown = await until(lambda s: s['lifecycle'] == 'completed' and s['long'] == ['cancellation', {n}])\n"
    "print(json.dumps(shown))"
)


async def _running(k: Kernel, attempt: int) -> dict[str, Any]:
    shown: dict[str, Any] = await k.json(RUNNING.format(n=attempt))
    assert shown["can_cancel"] is True and shown["can_resume"] is False, shown  # no Resume on a running run
    return shown


async def _cancel_from_a_terminal(k: Kernel, ws: Project, run_id: str, attempt: int) -> dict[str, Any]:
    code, out, err, _ = await cli(ws, "cancel", run_id)
    assert code == 0, (out, err)
    shown: dict[str, Any] = await k.json(CANCELLED.format(n=attempt))
    assert shown["outcome"] == "cancellation" and shown["can_resume"] is True, shown  # Resume offered
    assert shown["can_cancel"] is False, shown
    return shown


def test_a_widget_follows_its_run_through_cli_cancels_and_rho_resume(ws: Project) -> None:
    ws.write("wf.star", WORKFLOW)

    async def scenario() -> None:
        async with kernel(ws) as k:
            await k.ok(
                "import asyncio, json, rho_notebook as rho\n"
                "from rho_notebook.widgets import run_view\n"
                "run = rho.run(rho.plan('wf.star'), yes=True)\n"
                "view = run_view(run)\n" + VIEW
            )
            run_id = (await k.ok("print(run.run_id)"))["stdout"].strip()
            await _running(k, 1)
            first = await _cancel_from_a_terminal(k, ws, run_id, 1)

            # a new owner and a new handle: the widget made from the first handle follows it
            await k.ok("again = rho.resume(run.run_id, yes=True)\nassert again is not run")
            resumed = await _running(k, 2)
            assert resumed["sent"] > first["sent"], "no message went to the front end after the resume"

            # the second execution, cancelled from a terminal, reaches the same widget
            await _cancel_from_a_terminal(k, ws, run_id, 2)
            await k.ok("await again")

    asyncio.run(scenario())


def test_the_widgets_own_resume_shows_the_resumed_run_at_once(ws: Project) -> None:
    """After the Resume button the run view is the resumed run's as soon as the resume returns
    (its run_started is folded), and it then shows the resumed attempt: the records the resumed
    owner journaled before the view followed it are not dropped."""
    ws.write("wf.star", WORKFLOW)

    async def scenario() -> None:
        async with kernel(ws) as k:
            await k.ok(
                "import asyncio, json, rho_notebook as rho\n"
                "from rho_notebook.widgets._run import RunController\n"
                "run = rho.run(rho.plan('wf.star'), yes=True)\n"
                "controller = RunController(run)\n"
                "view = controller.widget\n"
                "other = RunController(run).widget\n" + VIEW
            )
            run_id = (await k.ok("print(run.run_id)"))["stdout"].strip()
            await _running(k, 1)
            await _cancel_from_a_terminal(k, ws, run_id, 1)
            clicked = await k.json(
                "view._handle_front_end(view, {'kind': 'action', 'action': 'resume'}, None)\n"
                "state = controller.tracker.state\n"  # folded before the click's handler returned
                "print(json.dumps({'lifecycle': state.lifecycle.value, 'message': view.run.get('message', ''),\n"
                "                  'long': state.nodes['long'].attempt}))"
            )
            # the resume returns once run_started is folded (RunHandle.begin); the owner's first
            # launch is its next write, which may come a moment later: the view then shows it
            assert clicked["lifecycle"] == "running" and clicked["long"] in (1, 2), clicked
            await _running(k, 2)
            # every view of the run follows the new execution, not only the one clicked
            shared = await k.json(
                "view = other\nshown = await until(lambda s: s['long'] == ['running', 2])\nprint(json.dumps(shown))"
            )
            assert shared["lifecycle"] == "running" and shared["can_resume"] is False, shared
            await k.ok("view = controller.widget")
            await _cancel_from_a_terminal(k, ws, run_id, 2)

    asyncio.run(scenario())


def test_views_of_one_run_share_one_follower(ws: Project) -> None:
    """Two views of a live run and a journal watch of it: one feed, following the live handle
    (the watch does not poll while the handle follows the run)."""
    ws.write("wf.star", WORKFLOW)

    async def scenario() -> None:
        async with kernel(ws) as k:
            found = await k.json(
                "import json, rho_notebook as rho\n"
                "from rho_notebook.widgets import run_view\n"
                "from rho_notebook.service import Service\n"
                "from rho_notebook.widgets._run import JournalWatch, RunController\n"
                "run = rho.run(rho.plan('wf.star'), yes=True)\n"
                "a, b = RunController(run), RunController(run)\n"
                "watch = JournalWatch(Service.default(), run.run_id)\n"
                "c = RunController(watch)\n"
                "print(json.dumps({'shared': a.feed is b.feed is c.feed, 'source': a.feed.source is run,\n"
                "                  'watch_polls': watch._polling}))\n"
                "rho.cancel(run.run_id)\n"
                "await run"
            )
            assert found == {"shared": True, "source": True, "watch_polls": False}

    asyncio.run(scenario())


def test_a_widget_follows_a_resume_from_a_terminal(ws: Project) -> None:
    """A stopped run resumed by another process (the CLI: no handle reaches this kernel) is
    followed through the journal; the next cancel from a terminal reaches the widget too."""
    ws.write("wf.star", WORKFLOW)

    async def scenario() -> None:
        async with kernel(ws) as k:
            await k.ok(
                "import asyncio, json, rho_notebook as rho\n"
                "from rho_notebook.widgets import run_view\n"
                "run = rho.run(rho.plan('wf.star'), yes=True)\n"
                "view = run_view(run)\n" + VIEW
            )
            run_id = (await k.ok("print(run.run_id)"))["stdout"].strip()
            await _running(k, 1)
            await _cancel_from_a_terminal(k, ws, run_id, 1)
            await k.ok("await run")

            code, out, err, _ = await cli(ws, "resume", run_id, "--yes", "--detach")
            assert code == 0, (out, err)
            await _running(k, 2)
            await _cancel_from_a_terminal(k, ws, run_id, 2)

    asyncio.run(scenario())
