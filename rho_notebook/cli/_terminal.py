"""The terminal while a run goes on: live progress lines, the end-of-run summary, and approval
prompts answered on the controlling terminal (``run`` and ``resume``)."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rho_notebook.errors import AlreadyDecided, RhoError
from rho_notebook.model.events import TERMINAL_PROGRESS_KINDS, describe_event
from rho_notebook.model.graph import Graph
from rho_notebook.model.run_state import RunState
from rho_notebook.service import (
    ApprovalRequest,
    Responder,
    RunFolder,
    Service,
    describe_request,
    load_limits,
    parse_input_args,
)
from rho_notebook.service.sync import run_sync

__all__ = ["Printer", "allowed_failures", "print_summary", "terminal_responder"]


class Printer:
    """Live progress of a followed run; a failure of a node with ``allow_failure = True`` is
    shown as allowed (the journal records the state, the graph says the failure does not fail the
    run). ``folder`` is the run's folder (attempt output is read from it); ``live`` asks for the
    redrawn display of a terminal. Call it with each record, :meth:`tick` after each poll of the
    follower, and :meth:`close` once (the end of the run, or a detach)."""

    def __init__(
        self,
        mode: str,
        *,
        allowed: frozenset[str] = frozenset(),
        folder: RunFolder | None = None,
        live: bool = False,
    ) -> None:
        self.mode = mode
        self.allowed = allowed
        self.folder = folder
        self.live = live
        self.start = time.monotonic()

    def tick(self, state: RunState) -> None:
        """After each poll of the follower: redraw elapsed times, print heartbeats."""

    def close(self) -> None:
        """Stop any live display (leaving what it showed last on the screen)."""

    def __call__(self, record: dict[str, Any]) -> None:
        if record["kind"] == "output_chunk":
            return
        if self.mode == "jsonl":
            print(json.dumps(record, separators=(",", ":")), flush=True)
            return
        if record["kind"] not in TERMINAL_PROGRESS_KINDS:
            return
        elapsed = time.monotonic() - self.start
        node = record.get("node", "")
        detail = describe_event(record)
        if record["kind"] == "node_finished" and record.get("state") == "failure" and node in self.allowed:
            detail = "failure (allowed)" + detail.removeprefix("failure")
        print(f"[{elapsed:7.2f}s] {node:<24} {detail}", flush=True)


_OUTPUT_WIDTH = 100
"""Characters of a node's output value shown in the end-of-run summary (``result`` shows it all)."""


def allowed_failures(graph: Graph) -> frozenset[str]:
    """The nodes whose failure does not fail the run (``allow_failure = True``)."""
    return frozenset(node.name for node in graph.nodes if node.allow_failure)


def print_summary(service: Service, run_id: str, graph: Graph) -> None:
    """After ``run ... outcome ...``: each node's state and its validated output, one line each,
    in graph order (``rho-notebook result RUN`` has the attempts and artifacts)."""
    data = run_sync(service.result(run_id))
    allowed = allowed_failures(graph)
    names = [node.name for node in graph.nodes if node.name in data["nodes"]]
    width = max((len(name) for name in names), default=0)
    for name in names:
        node = data["nodes"][name]
        state = node["state"] + (" (allowed)" if node["state"] == "failure" and name in allowed else "")
        line = f"  {name:<{width}}  {state:<17}"
        if "output" in node:
            value = json.dumps(node["output"], ensure_ascii=False)
            line += " " + (value if len(value) <= _OUTPUT_WIDTH else value[: _OUTPUT_WIDTH - 1] + "…")
        print(line.rstrip())


def terminal_responder(service: Service) -> Responder:
    """Ask on the controlling terminal (in a daemon thread, so a decision made elsewhere wins)."""
    asked: set[str] = set()

    def respond(request: ApprovalRequest) -> None:
        if request.request_id in asked:
            return
        asked.add(request.request_id)
        threading.Thread(
            target=_prompt, args=(service, request), daemon=True, name=f"approve-{request.request_id[:8]}"
        ).start()

    return respond


def _prompt(service: Service, request: ApprovalRequest) -> None:
    print("\n" + describe_request(request), file=sys.stderr, flush=True)
    if request.kind == "form":
        _fill_form(service, request)
        return
    try:
        answer = input("approve? [y/N, or type a comment after y/n:] ").strip()
    except EOFError:
        return
    approve = answer[:1].lower() == "y"
    comment = answer[1:].strip(" :") or None
    try:  # this thread's own loop: the owner's loop is busy running the run
        run_sync(service.decide(request, approve=approve, comment=comment, via="terminal"))
    except RhoError as err:  # decided elsewhere first, or refused: say so, the run goes on
        print(f"rho-notebook: {err.message}", file=sys.stderr, flush=True)


def _fill_form(service: Service, request: ApprovalRequest) -> None:
    """Ask for each field of a human step's form on the terminal until the answer fits it (an
    empty line leaves an optional field at its default); EOF leaves the step waiting."""
    while True:
        raw: list[str] = []
        for name, decl in (request.facts.get("form") or {}).items():
            try:
                typed = input(f"  {decl.get('label') or name} ({decl.get('type')}) = ").strip()
            except EOFError:
                return
            if typed:
                raw.append(f"{name}={typed}")
        try:
            values = parse_input_args(raw, limits=load_limits())
            run_sync(service.answer(request, values, via="terminal"))
            return
        except AlreadyDecided as err:  # answered elsewhere first: nothing to try again
            print(f"rho-notebook: {err.message}", file=sys.stderr, flush=True)
            return
        except RhoError as err:
            print(f"rho-notebook: {err.message}; try again", file=sys.stderr, flush=True)
