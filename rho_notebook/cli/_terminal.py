"""The terminal while a run goes on: live progress lines, the end-of-run summary, and approval
prompts answered on the controlling terminal (``run`` and ``resume``)."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rho_notebook.cli._live import LiveArea, running_since, tail_lines
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
from rho_notebook.views.state import allowed_failures  # the one rule of what `failure (allowed)` is

__all__ = ["HEARTBEAT_SECONDS", "Printer", "allowed_failures", "print_summary", "terminal_responder"]


HEARTBEAT_SECONDS = 10
"""Without a TTY, a node running this long gets a ``still running`` line, and again each as long."""

_NODE_ENDS = frozenset({"node_finished", "node_skipped", "node_blocked"})

_TAIL_INDENT = " " * 11
"""Lines under a progress line start under its node name's column (after ``[   0.08s] ``)."""


class Printer:
    """Live progress of a followed run; a failure of a node with ``allow_failure = True`` is
    shown as allowed (the journal records the state, the graph says the failure does not fail the
    run). ``folder`` is the run's folder (attempt output is read from it); ``live`` asks for the
    redrawn display of a terminal. Call it with each record, :meth:`tick` after each poll of the
    follower, and :meth:`close` once (the end of the run, or a detach).

    In text mode a line per progress record, as today, except that a reused node is printed once
    (its ``node_finished`` names the run it was taken from) and a failed node (not allowed to
    fail) is followed by the last lines of its stderr. With ``live`` (a TTY) the running nodes are
    a redrawn area instead of ``running`` lines (:class:`~rho_notebook.cli._live.LiveArea`);
    without it a node running longer than :data:`HEARTBEAT_SECONDS` gets a heartbeat line. The
    jsonl mode prints every journal record as it is."""

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
        self.live = live and mode == "text"
        self.start = time.monotonic()
        self._area = LiveArea(folder) if self.live else None
        self._beats: dict[tuple[str, int], int] = {}
        """(node, attempt) -> seconds of running at which its next heartbeat is due."""

    def tick(self, state: RunState) -> None:
        """After each poll of the follower: redraw the live area, or print heartbeats."""
        if self.mode != "text":
            return
        if self._area is None:
            self._heartbeats(state)
        elif state.waiting_requests():  # a person may be asked on this terminal: no redraw over the prompt
            self._area.pause()
        else:
            self._area.resume()
            self._area.update(state)

    def close(self) -> None:
        """Stop any live display (leaving what it showed last on the screen)."""
        if self._area is not None:
            self._area.stop()

    def __call__(self, record: dict[str, Any]) -> None:
        kind = record["kind"]
        if kind == "output_chunk":
            if self._area is not None:
                self._area.grew(str(record["node"]), int(record.get("attempt") or 0), str(record.get("stream")))
            return
        if self.mode == "jsonl":
            print(json.dumps(record, separators=(",", ":")), flush=True)
            return
        if kind not in TERMINAL_PROGRESS_KINDS or kind == "node_reused":  # reused: its node_finished says so
            return
        node = str(record.get("node", ""))
        if self._area is not None:
            if kind == "node_launched":  # the live area shows it running
                return
            if kind in _NODE_ENDS:
                self._area.ended(node, int(record.get("attempt") or 0))
        self._line(node, self._detail(record))
        if kind == "node_finished" and record.get("state") == "failure" and node not in self.allowed:
            self._output_tail(node, int(record.get("attempt") or 0), str(record.get("run_id", "")))

    def _detail(self, record: dict[str, Any]) -> str:
        detail = describe_event(record)
        node = record.get("node", "")
        if record["kind"] == "node_finished" and record.get("state") == "failure" and node in self.allowed:
            detail = "failure (allowed)" + detail.removeprefix("failure")
        if record["kind"] == "run_completed" and record.get("message"):
            detail += f"  {record['message']}"  # why a script run failed
        return detail

    def _line(self, node: str, detail: str) -> None:
        self._emit(f"[{time.monotonic() - self.start:7.2f}s] {node:<24} {detail}")

    def _emit(self, text: str) -> None:
        """A permanent line: above the live area, or plainly."""
        if self._area is not None:
            self._area.print(text)
        else:
            print(text, flush=True)

    def _output_tail(self, node: str, attempt: int, run_id: str) -> None:
        """The last lines a failed attempt wrote to stderr (stdout when stderr is empty)."""
        if self.folder is None or attempt < 1:
            return
        for stream in ("stderr", "stdout"):
            lines = tail_lines(self.folder, self.folder.attempt_dir(node, attempt) / stream)
            if lines:
                command = f"rho-notebook logs {run_id[:13]} {node} --stream {stream}"
                head = f"{_TAIL_INDENT}last lines of its {stream} (all of it: {command}):"
                for text in (head, *(f"{_TAIL_INDENT}  {line}" for line in lines)):
                    self._emit(text)
                return

    def _heartbeats(self, state: RunState) -> None:
        """A line for each node that has run :data:`HEARTBEAT_SECONDS` more since its last one."""
        wall = time.time()
        for name, record in state.nodes.items():
            since = running_since(record)
            if since is None:
                continue
            running = wall - since
            key = (name, record.attempt)
            if running < self._beats.get(key, HEARTBEAT_SECONDS):
                continue
            self._beats[key] = (int(running) // HEARTBEAT_SECONDS + 1) * HEARTBEAT_SECONDS
            current = record.current
            waiting = current is not None and current.pending_approval
            self._line(name, f"{'still waiting for a person' if waiting else 'still running'} ({int(running)} s)")


_OUTPUT_WIDTH = 100
"""Characters of a node's output value shown in the end-of-run summary (``result`` shows it all)."""


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
