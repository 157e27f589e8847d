"""The resources of ``rho-notebook mcp``: what a tool's answer cuts short, read whole and paged.

``rho://runs/{run_id}/events`` is the run's journal, one JSON record per line (``?after_seq=N``
reads the records after N); ``rho://runs/{run_id}/nodes/{node}/output`` is the node's entry of
``workflow_result`` (``?offset=N`` pages it); ``rho://runs/{run_id}/output`` is the run's output
value (a script's ``emit_output``), ``?offset=N`` paged. A page longer than :data:`MAX_TEXT` ends
with a marker line naming the URI that reads on.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, unquote, urlsplit

import mcp_types as types
from mcp.shared.exceptions import MCPError

from rho_notebook.mcp._paging import page
from rho_notebook.mcp.tools import MAX_TEXT
from rho_notebook.model.node_names import no_node
from rho_notebook.service import Service

__all__ = ["RunResources"]

_RUN_ID = re.compile(r"^[0-9a-fA-F-]{1,36}$")
_EVENTS_URI = re.compile(r"^rho://runs/(?P<run>[^/?#]+)/events$")
_NODE_OUTPUT_URI = re.compile(r"^rho://runs/(?P<run>[^/?#]+)/nodes/(?P<node>[^/?#]+)/output$")
_RUN_OUTPUT_URI = re.compile(r"^rho://runs/(?P<run>[^/?#]+)/output$")
_LISTED = "read rho://runs/RUN_ID/events, rho://runs/RUN_ID/nodes/NODE/output or rho://runs/RUN_ID/output"


class RunResources:
    """The run resources over ``service``; a refusal of the service (no such run) is raised as it is."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def templates(self) -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                name="run-events",
                uri_template="rho://runs/{run_id}/events",
                description="A run's journal, one JSON record per line; a long one is cut with a marker "
                "naming the ?after_seq=N to read on.",
                mime_type="application/x-ndjson",
            ),
            types.ResourceTemplate(
                name="node-output",
                uri_template="rho://runs/{run_id}/nodes/{node}/output",
                description="A node's result (state, attempts, validated output, artifacts) as JSON; a long one "
                "is cut with a marker naming the ?offset=N to read on.",
                mime_type="application/json",
            ),
            types.ResourceTemplate(
                name="run-output",
                uri_template="rho://runs/{run_id}/output",
                description="A run's output value (a script's emit_output) as JSON, whole; a long one is cut with "
                "a marker naming the ?offset=N to read on.",
                mime_type="application/json",
            ),
        ]

    async def read(self, uri: str) -> types.TextResourceContents:
        parts = urlsplit(uri)
        query = parse_qs(parts.query)
        base = f"{parts.scheme}://{parts.netloc}{parts.path}"
        if found := _EVENTS_URI.match(base):
            text = await self._events_text(_run_id(found["run"]), _query_int(query, "after_seq"))
            return types.TextResourceContents(uri=uri, mime_type="application/x-ndjson", text=text)
        if found := _NODE_OUTPUT_URI.match(base):
            run_id, node = _run_id(found["run"]), unquote(found["node"])
            data = await self.service.result(run_id)
            if node not in data["nodes"]:
                msg = no_node(f"run {data['run_id']}", node, data["nodes"])
                raise MCPError(types.INVALID_PARAMS, msg)
            text = json.dumps(data["nodes"][node], indent=2, ensure_ascii=False)
            how = f"read rho://runs/{data['run_id']}/nodes/{found['node']}/output?offset={{offset}}"
            window = page(text, offset=_query_int(query, "offset"), limit=MAX_TEXT, how=how)
            return types.TextResourceContents(uri=uri, mime_type="application/json", text=window["text"])
        if found := _RUN_OUTPUT_URI.match(base):
            state = await self.service.status(_run_id(found["run"]))
            if state.output is None:
                msg = f"run {state.run_id} has no output (yet): only a run whose workflow emits one has it"
                raise MCPError(types.INVALID_PARAMS, msg)
            text = json.dumps(state.output, indent=2, ensure_ascii=False)
            how = f"read rho://runs/{state.run_id}/output?offset={{offset}}"
            window = page(text, offset=_query_int(query, "offset"), limit=MAX_TEXT, how=how)
            return types.TextResourceContents(uri=uri, mime_type="application/json", text=window["text"])
        msg = f"no resource {uri!r}: {_LISTED}"
        if base.startswith("rho://runs/") and "/nodes/" in base:  # a script step's key may hold `/`
            msg += " (a NODE that holds / is percent-encoded: %2F, as workflow_result names it)"
        raise MCPError(types.INVALID_PARAMS, msg)

    async def _events_text(self, run_id: str, after_seq: int) -> str:
        read = await self.service.journal(run_id, after_seq=after_seq)
        lines: list[str] = []
        size = 0
        for record in read.events:
            line = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
            if lines and size + len(line) > MAX_TEXT:
                last = lines[-1]
                seq = json.loads(last)["seq"]
                lines.append(f"[... truncated: read rho://runs/{run_id}/events?after_seq={seq} for the rest]")
                break
            lines.append(line)
            size += len(line) + 1
        else:
            if read.damage:  # as `events` says on stderr: the records above are the readable part
                lines.append(f"[... damaged: the journal cannot be trusted past the records above: {read.damage}]")
        return "\n".join(lines) + ("\n" if lines else "")


def _run_id(given: str) -> str:
    if not _RUN_ID.match(given):
        msg = f"{given!r} is not a run ID"
        raise MCPError(types.INVALID_PARAMS, msg)
    return given


def _query_int(query: dict[str, list[str]], key: str) -> int:
    values = query.get(key, ["0"])
    if len(values) != 1 or not values[0].isdigit():
        msg = f"?{key}= takes one non-negative integer"
        raise MCPError(types.INVALID_PARAMS, msg)
    return int(values[0])
