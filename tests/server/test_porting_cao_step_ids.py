"""Issue 33, point 2, in the REST API: a step id of the form the CAO seed's fan-out derives
(``step_id=f"summarize:{name}"``, /work/shared/seeds/cao-workflows.txt, "Fan-out (concurrency)"),
here with a name holding ``/`` and ``@`` (``summarize:docs/guide@v2.md``), is one node of the run:
the node pane and its artifacts answer it as one percent-encoded path segment, as the sidebar asks
(``encodeURIComponent``). A command step stands for the seed's agent step (an agent writes no
stdout to read back); the call is otherwise the seed's, through ``rho_notebook.script``."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

from tests.server.helpers import Store

SCRIPT = """\
from rho_notebook.script import run_command, emit_output

def summarize(name):
    h = run_command(["echo", f"summary of {name}"], step_id=f"summarize:{name}",
                    timeout_seconds=60, max_output_bytes=10000)
    return name, h.output

emit_output(dict(map(summarize, sorted(["docs/guide@v2.md", "report.md"]))))
"""


async def test_a_seed_shaped_step_id_is_one_node_in_the_api(
    http_server_client: Any, jp_auth_header: dict[str, str], jp_base_url: str, store: Store
) -> None:
    store.project.write("fanout.py", SCRIPT)
    done = await asyncio.to_thread(store.project.cli, "run", "fanout.py", "--yes", "--output", "jsonl")
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = json.loads(done.stdout.splitlines()[0])["run_id"]

    async def get(*parts: str) -> Any:
        path = "/".join(quote(part, safe="") for part in ("rho", "api", "runs", run_id, "nodes", *parts))
        return await http_server_client.fetch(
            f"{jp_base_url.rstrip('/')}/{path}", headers=jp_auth_header, raise_error=False
        )

    for key, name in (("summarize:docs/guide@v2.md", "docs/guide@v2.md"), ("summarize:report.md", "report.md")):
        detail = await get(key)
        assert detail.code == 200, detail.body
        shown = json.loads(detail.body)
        assert shown["node"] == key and shown["stdout"]["text"] == f"summary of {name}\n"
        stdout = await get(key, "artifacts", "stdout")
        assert (stdout.code, stdout.body) == (200, f"summary of {name}\n".encode())
    assert (await get("summarize:docs")).code == 404
