"""Helpers for the REST tests: workflows, planning off the test's event loop, SSE parsing."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.model.plan import Plan
from tests.conftest import REPO, Project, star

C = "timeout_seconds = 60, max_output_bytes = 10000"

QUICK = star(f"""
return workflow(name = "quick", nodes = [
    command(name = "first", argv = ["true"], {C}),
    command(name = "hello", argv = ["echo", "hi"], needs = ["first"], {C}),
])
""")

STEPS = star(f"""
return workflow(name = "steps", nodes = [
    command(name = "a", argv = ["sleep", "0.4"], {C}),
    command(name = "b", argv = ["sleep", "0.4"], needs = ["a"], {C}),
    command(name = "c", argv = ["sleep", "0.4"], needs = ["b"], {C}),
    command(name = "d", argv = ["true"], needs = ["c"], {C}),
])
""")

LONG = star(f"""
return workflow(name = "long", nodes = [
    command(name = "wait", argv = ["sleep", "30"], {C}),
    command(name = "after", argv = ["true"], needs = ["wait"], {C}),
])
""")

GATE = star(f"""
return workflow(name = "gate", nodes = [
    approval(name = "ok", prompt = template(["Ship it?"]), timeout_seconds = 60, max_output_bytes = 1000),
    command(name = "ship", argv = ["echo", output("ok", ["by"])], needs = ["ok"], {C}),
])
""")


@dataclass
class Store:
    """The test's workspace and store, with planning that never touches the test's event loop."""

    project: Project
    _plans: dict[str, Plan] = field(default_factory=dict)

    def plan(self, name: str, source: str) -> Plan:
        """Plan ``source`` (stored as ``<name>.star``) in a worker thread with its own loop."""
        if name not in self._plans:
            self.project.write(f"{name}.star", source)
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                self._plans[name] = pool.submit(self.project.plan, f"{name}.star").result(timeout=120)
        return self._plans[name]

    def cli_run(self, plan: Plan) -> subprocess.Popen[str]:
        """``rho-notebook run PLAN --yes --output jsonl`` in its own session (the terminal case)."""
        env = {**os.environ, "RHO_NOTEBOOK_HOME": str(self.project.home), "PYTHONPATH": str(REPO)}
        return subprocess.Popen(
            [sys.executable, "-m", "rho_notebook", "run", plan.plan_id, "--yes", "--output", "jsonl"],
            cwd=self.project.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def journal_seqs(self, run_id: str) -> list[int]:
        path = self.project.home / "workflows" / "runs" / run_id / "events.jsonl"
        return [json.loads(line)["seq"] for line in path.read_text().splitlines() if line.strip()]


@dataclass(frozen=True)
class Message:
    id: str | None
    event: str
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def parse_sse(text: str) -> list[Message]:
    """Complete SSE messages in ``text`` (comments and ``retry:`` lines skipped)."""
    messages = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))
        if "data" not in fields:
            continue
        messages.append(
            Message(
                id=fields.get("id", [None])[-1],
                event=fields.get("event", ["message"])[-1],
                data="\n".join(fields["data"]),
            )
        )
    return messages


def body(response: Any) -> Any:
    return json.loads(response.body.decode())


async def wait_until(predicate: Any, *, timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Await ``predicate()`` (a coroutine function) until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(interval)
