"""A notebook's run outlives its kernel (issue 30): the run's owner is a process of its own, so a
kernel killed with SIGKILL or restarted mid-run leaves the run going, and the new kernel gets it
back with ``rho.attach(RUN)`` (listeners, ``await``) or ``rho.show(RUN)`` (the live DAG).

Real kernels through nbclient (jupyter_client's KernelManager underneath), a real owner process,
real signals. The slow node waits for a ``go`` file the test writes once the new kernel has
attached, then appends one line to ``marker.txt``: the marker proves the node ran exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from typing import Any

from tests.conftest import Project
from tests.kernel.helpers import C, owner_pid, status_json, workflow_cell
from tests.kernel.test_kernel import Kernel, _maybe, kernel, wait_for_state
from tests.processes import alive

SLOW = workflow_cell(
    "slow",
    f"""        shell(name = "slow", executable = "sh", arguments = ["-c"],
              command = "while [ ! -e go ]; do sleep 0.05; done; sleep 1; echo once >> marker.txt", {C}),
        command(name = "after", argv = ["true"], needs = ["slow"], {C}),
""",
)

ATTACH = """
import json, rho_notebook as rho
run = rho.attach(RUN_ID[:13])
seen = []
run.add_listener(lambda record: seen.append(record["kind"]))
print(json.dumps({"run_id": run.run_id, "done": run.done(), "lifecycle": run.state().lifecycle.value}))
"""

AWAIT = """
final = await run
print(json.dumps({
    "outcome": final.outcome,
    "nodes": {n: [r.state.value, r.attempt] for n, r in final.nodes.items()},
    "done": run.done(),
    "error": repr(run.exception()),
    "seen": seen,
}))
"""


async def _start(k: Kernel, ws: Project) -> tuple[str, str]:
    """Run the slow workflow from a cell: (the run ID, the run cell's text output)."""
    await k.ok(SLOW)
    out = await k.ok("run = %workflow run slow --yes\nimport json\nprint(json.dumps(run.run_id))")
    run_id: str = json.loads(out["stdout"].strip().splitlines()[-1])
    await wait_for_state(ws, run_id, "slow", "running")
    return run_id, out["text"]


async def _restarted(k: Kernel) -> None:
    """Wait until the restarted kernel answers, then load the extension again."""
    km = k.client.km
    assert km is not None
    await k.client.async_wait_for_reply(await _maybe(k.client.kc.kernel_info()))  # type: ignore[union-attr]
    await k.ok("%load_ext rho_notebook")


def _kernel_pid(k: Kernel) -> int:
    km = k.client.km
    assert km is not None and km.provisioner is not None
    pid = km.provisioner.pid  # type: ignore[attr-defined]
    assert isinstance(pid, int)
    return pid


async def _wait_dead(k: Kernel, timeout: float = 30.0) -> None:
    """Wait until the kernel manager sees its kernel gone (and has reaped it)."""
    km = k.client.km
    assert km is not None
    deadline = time.monotonic() + timeout
    while await _maybe(km.is_alive()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not await _maybe(km.is_alive()), "the kernel survived SIGKILL"


def test_a_killed_kernel_leaves_the_run_going_and_a_new_kernel_attaches(ws: Project) -> None:
    async def scenario() -> dict[str, Any]:
        async with kernel(ws) as k:
            run_id, text = await _start(k, ws)
            assert f"reattach with: %workflow show {run_id[:13]}" in text  # the run cell says how
            kernel_pid = _kernel_pid(k)
            owner = owner_pid(ws.home, run_id)
            assert owner and owner != kernel_pid

            os.kill(kernel_pid, signal.SIGKILL)  # the kernel crashes
            await _wait_dead(k)
            assert not alive(kernel_pid)
            assert alive(owner)
            assert status_json(ws, run_id)["lifecycle"] == "running"  # not needs_recovery: its owner lives

            km = k.client.km
            assert km is not None
            await _maybe(km.restart_kernel(now=True))
            await _restarted(k)
            attached = await k.json(f"RUN_ID = {run_id!r}\n" + ATTACH)
            assert attached == {"run_id": run_id, "done": False, "lifecycle": "running"}
            (ws.root / "go").write_text("")
            final: dict[str, Any] = await k.json(AWAIT)
            assert owner_pid(ws.home, run_id) is None  # the owner ended with its run
            return final

    final = asyncio.run(scenario())
    assert final["outcome"] == "success" and final["done"] is True and final["error"] == "None"
    assert final["nodes"] == {"slow": ["success", 1], "after": ["success", 1]}
    assert {"node_finished", "run_completed"} <= set(final["seen"])  # the attached handle's listeners hear the end
    assert (ws.root / "marker.txt").read_text() == "once\n"  # the slow node ran exactly once
    assert status_json(ws, run_id_of(ws))["outcome"] == "success"


def run_id_of(ws: Project) -> str:
    [run] = (ws.home / "workflows" / "runs").iterdir()
    return run.name


SHOW = """
import json, time, rho_notebook as rho
from rho_notebook.service import default_runner
picker = rho.show(RUN_ID)
handle = default_runner().handle(RUN_ID)
print(json.dumps({"attached": handle is not None, "done": handle is not None and handle.done(),
                  "lifecycle": picker.dag.run.get("lifecycle")}))
"""

SHOWN_END = """
final = await handle
deadline = time.monotonic() + 30
while picker.dag.run.get("lifecycle") != "completed" and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps({"outcome": final.outcome, "view": [picker.dag.run.get("lifecycle"), picker.dag.run.get("outcome")],
                  "states": {n: v["state"] for n, v in picker.dag.nodes.items()}}))
"""


def test_a_restarted_kernel_leaves_the_run_going_and_show_follows_it(ws: Project) -> None:
    async def scenario() -> dict[str, Any]:
        async with kernel(ws) as k:
            run_id, _ = await _start(k, ws)
            owner = owner_pid(ws.home, run_id)
            km = k.client.km
            assert km is not None and owner
            await _maybe(km.restart_kernel(now=True))  # a normal restart: the kernel shuts down cleanly
            await _restarted(k)
            assert alive(owner)
            data = status_json(ws, run_id)
            assert data["lifecycle"] == "running" and data["nodes"]["slow"]["state"] == "running"
            shown = await k.json(f"RUN_ID = {run_id!r}\n" + SHOW)
            assert shown == {"attached": True, "done": False, "lifecycle": "running"}  # a live view of a live run
            (ws.root / "go").write_text("")
            ended: dict[str, Any] = await k.json(SHOWN_END)
            return ended

    ended = asyncio.run(scenario())
    assert ended["outcome"] == "success"
    assert ended["view"] == ["completed", "success"]  # the widget followed the run to its end
    assert ended["states"] == {"slow": "success", "after": "success"}
    assert (ws.root / "marker.txt").read_text() == "once\n"
    assert status_json(ws, run_id_of(ws))["outcome"] == "success"
