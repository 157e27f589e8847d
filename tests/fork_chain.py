"""The workflow the "fork from here" tests fork (issue 35), shared by the server route, the widget
pane and the browser sidebar tests.

A chain a -> b -> c -> d, and ``side`` (needs a, not downstream of c). c prints a JSON record its
output schema checks (``word`` a string, ``count`` an integer) and d echoes c's word, so a fork
that edits c shows in d's stdout (``d got seven``) while a, b and side are taken, never launched.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import journal_of, star


def fork_chain(name: str = "chain", *, timeout_seconds: int = 60) -> str:
    """The Starlark source of the chain, as workflow ``name``; every node may run ``timeout_seconds``."""
    limits = f"timeout_seconds = {timeout_seconds}, max_output_bytes = 10000"
    return star(f"""
return workflow(name = "{name}", nodes = [
    command(name = "a", argv = ["echo", "a ran"], {limits}),
    command(name = "b", argv = ["echo", "b ran"], needs = ["a"], {limits}),
    command(name = "c", argv = ["echo", '{{"word": "two", "count": 2}}'], needs = ["b"],
        output = schema.stdout_json(schema.record({{"word": schema.string(), "count": schema.integer()}})), {limits}),
    command(name = "d", argv = ["echo", "d got", output("c", ["word"])], needs = ["c"], {limits}),
    command(name = "side", argv = ["echo", "side ran"], needs = ["a"], {limits}),
])
""")


def launched(home: Path, run_id: str) -> list[str]:
    """The nodes run ``run_id`` journaled ``node_launched`` for, in order (a fork's taken and edited
    nodes are not among them)."""
    lines = journal_of(home, run_id).read_text().splitlines()
    return [record["node"] for record in map(json.loads, filter(str.strip, lines)) if record["kind"] == "node_launched"]
