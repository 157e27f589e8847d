"""Notebook runs in real Jupyter kernels (nbclient): a run keeps going while later cells block,
later cells await it and read outputs, a terminal sees and cancels it, and a kernel restart
leaves it going (its owner is a process of its own) for the new kernel to attach to."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from tests.conftest import REPO, Project
from tests.kernel.helpers import C, status_json, workflow_cell

STEPS = workflow_cell(
    "steps",
    f"""        shell(name = "a", executable = "sh", arguments = ["-c"], command = "sleep 0.5", {C}),
        shell(name = "b", executable = "sh", arguments = ["-c"], command = "sleep 0.5", needs = ["a"], {C}),
        shell(name = "c", executable = "sh", arguments = ["-c"], command = "sleep 0.5", needs = ["b"], {C}),
        command(name = "d", argv = ["python3", "-c", "import json; print(json.dumps({{'total': 6, 'parts': [1, 2, 3]}}))"], needs = ["c"],
                output = schema.stdout_json(schema.record({{"total": schema.integer(), "parts": schema.list(schema.integer())}})), {C}),
""",
)

LONG = workflow_cell(
    "long",
    f"""        shell(name = "long", executable = "sh", arguments = ["-c"], command = "sleep 60", {C}),
        command(name = "after", argv = ["true"], needs = ["long"], {C}),
""",
)

GATED = workflow_cell(
    "gated",
    f"""        command(name = "first", argv = ["true"], {C}),
        shell(name = "wait", executable = "sh", arguments = ["-c"], needs = ["first"],
              command = "while [ ! -e go ]; do sleep 0.05; done; echo released", {C}),
        command(name = "last", argv = ["true"], needs = ["wait"], {C}),
""",
)


class Kernel:
    """One real kernel running notebook cells in the project's workspace."""

    def __init__(self, client: NotebookClient) -> None:
        self.client = client
        self.index = 0

    async def cell(self, source: str) -> dict[str, Any]:
        """Execute a cell; returns {"stdout", "text", "errors"} (errors: [(ename, evalue)])."""
        node = new_code_cell(source)
        self.client.nb.cells.append(node)
        await self.client.async_execute_cell(node, len(self.client.nb.cells) - 1)
        stdout = "".join(o.get("text", "") for o in node.outputs if o.output_type == "stream" and o.name == "stdout")
        text = "\n".join(
            o.data.get("text/plain", "") for o in node.outputs if o.output_type in ("execute_result", "display_data")
        )
        stderr = "".join(o.get("text", "") for o in node.outputs if o.output_type == "stream" and o.name == "stderr")
        errors = [(o.ename, o.evalue) for o in node.outputs if o.output_type == "error"]
        if stderr.startswith("UsageError: "):  # IPython prints usage errors, without a traceback
            errors.append(("UsageError", stderr.removeprefix("UsageError: ")))
        return {"stdout": stdout, "text": text, "errors": errors}

    async def ok(self, source: str) -> dict[str, Any]:
        out = await self.cell(source)
        assert not out["errors"], out
        return out

    async def json(self, source: str) -> Any:
        return json.loads((await self.ok(source))["stdout"].strip().splitlines()[-1])


@asynccontextmanager
async def kernel(project: Project) -> AsyncIterator[Kernel]:
    nb = new_notebook()
    client = NotebookClient(
        nb, kernel_name="python3", timeout=120, allow_errors=True, resources={"metadata": {"path": str(project.root)}}
    )
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    async with client.async_setup_kernel(env=env):
        assert client.kc is not None
        await client.async_wait_for_reply(await _maybe(client.kc.kernel_info()))
        k = Kernel(client)
        await k.ok("%load_ext rho_notebook")
        yield k


async def _maybe(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


async def cli(project: Project, *args: str) -> tuple[int, str, str, float]:
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rho_notebook",
        *args,
        cwd=project.root,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode(), time.monotonic() - started


async def wait_for_state(project: Project, run_id: str, node: str, state: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, out, err, _ = await cli(project, "status", run_id, "--output", "json")
        assert code == 0, err
        data: dict[str, Any] = json.loads(out)
        if data["nodes"][node]["state"] == state:
            return data
        await asyncio.sleep(0.1)
    raise AssertionError(f"{node} never became {state}")


def _ts(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


RESULT = """
import json
print(json.dumps({
    "outcome": final.outcome,
    "ended": {n: r.current.ended_at for n, r in final.nodes.items() if r.current},
    "d": run.outputs["d"],
}))
"""


def test_a_run_progresses_while_later_cells_block_then_is_awaited(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            await k.ok(STEPS)
            await k.ok("run = %workflow run steps --yes")
            window = await k.json(
                "import json, time\nt0 = time.time()\ntime.sleep(3)\nprint(json.dumps([t0, time.time()]))"
            )
            data = await k.json("final = await run" + RESULT)
            assert data["outcome"] == "success"
            assert data["d"] == {"total": 6, "parts": [1, 2, 3]}  # a Python value in the kernel
            inside = [n for n, t in data["ended"].items() if window[0] <= _ts(t) <= window[1]]
            assert {"b", "c", "d"} <= set(inside), (window, data["ended"])
            # the same with pure-Python work holding the GIL instead of sleeping
            await k.ok("run = %workflow run steps --yes")
            busy = "import json, time\nt0 = time.time()\nn = 0\nwhile time.time() < t0 + 3:\n    n += sum(range(500))\nprint(json.dumps([t0, time.time()]))"
            window = await k.json(busy)
            data = await k.json("final = await run" + RESULT)
            inside = [n for n, t in data["ended"].items() if window[0] <= _ts(t) <= window[1]]
            assert {"b", "c", "d"} <= set(inside), (window, data["ended"])

    asyncio.run(scenario())


def test_a_terminal_sees_and_cancels_a_notebook_run_while_a_cell_blocks(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            await k.ok(LONG)
            run_id = await k.json("run = %workflow run long --yes\nimport json\nprint(json.dumps(run.run_id))")
            live = await wait_for_state(ws, run_id, "long", "running")
            assert live["lifecycle"] == "running"
            blocking = asyncio.ensure_future(k.ok("import time\ntime.sleep(10)\nprint('slept')"))
            await asyncio.sleep(0.5)
            code, out, err, elapsed = await cli(ws, "cancel", run_id, "--output", "json")
            assert code == 0, err
            answer = json.loads(out)
            assert answer["cancellation_state"] == "acknowledged", answer
            assert (
                elapsed < 6.0
            )  # acknowledged (within the CLI's 2 s bound) by the kernel's runner thread while the cell sleeps
            assert not blocking.done()
            assert status_json(ws, run_id)["outcome"] == "cancellation"
            assert (await blocking)["stdout"] == "slept\n"
            data = await k.json(
                "final = await run\nprint(json.dumps([final.outcome, final.nodes['long'].state.value, final.nodes['after'].state.value]))"
            )
            assert data == ["cancellation", "cancellation", "blocked"]

    asyncio.run(scenario())


def test_a_kernel_restart_leaves_the_run_going_and_a_new_kernel_attaches(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            await k.ok(GATED)
            run_id = await k.json("run = %workflow run gated --yes\nimport json\nprint(json.dumps(run.run_id))")
            await wait_for_state(ws, run_id, "wait", "running")
            km = k.client.km
            assert km is not None
            await _maybe(km.restart_kernel(now=True))
            await k.client.async_wait_for_reply(await _maybe(k.client.kc.kernel_info()))  # type: ignore[union-attr]
            data = status_json(ws, run_id)
            assert data["lifecycle"] == "running"  # the run's owner is not the kernel: it goes on
            assert data["nodes"]["wait"]["state"] == "running" and data["nodes"]["first"]["state"] == "success"
            await k.ok("%load_ext rho_notebook")
            await k.ok(f"import rho_notebook as rho\nrun = rho.attach({run_id[:13]!r})")
            assert not (await k.json("import json\nprint(json.dumps(run.done()))"))
            (ws.root / "go").write_text("")
            data = await k.json(
                "final = await run\nprint(json.dumps({n: [r.state.value, r.attempt] for n, r in final.nodes.items()}))"
            )
            assert data == {"first": ["success", 1], "wait": ["success", 1], "last": ["success", 1]}
        assert status_json(ws, run_id)["outcome"] == "success"

    asyncio.run(scenario())


def test_diagnostics_point_at_the_cell_in_a_kernel(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            out = await k.cell(
                "%%workflow bad\ndef build(inputs):\n    return workflow(name = 'bad', nodes = [command(name = 'x', argv = ['true'], timeout_seconds = 1.5, max_output_bytes = 1)])\n\nWORKFLOW = define(inputs = {}, build = build)\n"
            )
            [(ename, evalue)] = out["errors"]
            assert ename == "UsageError"
            assert "cell In[2]:3:" in evalue and "float" in evalue

    asyncio.run(scenario())
