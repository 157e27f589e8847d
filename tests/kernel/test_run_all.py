"""Run All of notebooks/03_cancel_and_resume.ipynb, twice, on one real kernel (jupyter_client),
with a stand-in front end that keeps its widgets talking: every execute request ends with a
``status: idle`` whose parent is that request (what JupyterLab needs to finish a cell), and the
run widget's patches, sent from the widget pump thread, carry the parent of the cell that
created the widget.

The stand-in sends every widget a ``hello`` custom message (what the DAG view sends when it
renders) every few milliseconds, from one sender thread, so that comm messages are handled while
cells await (``await run.until(...)``, ``await run``): that is when ipykernel 7's concurrent comm
dispatch restored a stale parent and left the next cell at ``[*]`` (issue 13).
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

NOTEBOOK = REPO / "notebooks" / "03_cancel_and_resume.ipynb"
ROUNDS = 2
ROUND_TIMEOUT = 90.0


class FrontEnd:
    """A kernel client that sends execute requests and widget ``hello`` messages from one lock."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.lock = threading.Lock()
        self.comms: list[str] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._chatter, name="fake-front-end", daemon=True)

    def execute_all(self, codes: list[str]) -> list[str]:
        with self.lock:  # Run All: every request is queued at once
            return [self.client.execute(code) for code in codes]

    def opened(self, comm_id: str) -> None:
        with self.lock:
            self.comms.append(comm_id)

    def _chatter(self) -> None:
        while not self.stopped.wait(0.01):
            with self.lock:
                for comm_id in self.comms[-6:]:
                    data = {"method": "custom", "content": {"kind": "hello"}}
                    self.client.shell_channel.send(
                        self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
                    )


@pytest.fixture
def front_end(tmp_path: Path) -> Iterator[FrontEnd]:
    from jupyter_client.manager import start_new_kernel

    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(REPO), env=env)
    found = FrontEnd(client)
    found.thread.start()
    try:
        yield found
    finally:
        found.stopped.set()
        found.thread.join(5)
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _codes() -> list[str]:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]


def _run_all(front_end: FrontEnd, codes: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Send every cell at once; collect IOPub until each request's idle or the deadline."""
    requests = front_end.execute_all(codes)
    waiting = set(requests)
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + ROUND_TIMEOUT
    while waiting and time.monotonic() < deadline:
        try:
            msg = front_end.client.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        messages.append(msg)
        content = msg["content"]
        if msg["msg_type"] == "comm_open" and content.get("target_name") == "jupyter.widget":
            front_end.opened(content["comm_id"])
        if msg["msg_type"] == "status" and content["execution_state"] == "idle":
            waiting.discard(msg["parent_header"].get("msg_id"))
    return requests, messages


def _trace(requests: list[str], messages: list[dict[str, Any]]) -> str:
    def who(msg_id: str | None) -> str:
        return f"cell {requests.index(msg_id)}" if msg_id in requests else f"other {str(msg_id)[:8]}"

    lines = [
        f"{m['msg_type']} {m['content'].get('execution_state', '')} {who(m['parent_header'].get('msg_id'))}"
        for m in messages
        if m["parent_header"].get("msg_id") in requests
    ]
    return "\n".join(lines[-40:])


def test_run_all_twice_every_idle_names_its_own_request(front_end: FrontEnd) -> None:
    codes = _codes()
    for round_ in range(ROUNDS):
        requests, messages = _run_all(front_end, codes)
        trace = _trace(requests, messages)
        statuses = [
            (m["content"]["execution_state"], m["parent_header"].get("msg_id"))
            for m in messages
            if m["msg_type"] == "status" and m["parent_header"].get("msg_id") in requests
        ]
        # each request: one busy, then one idle, both naming it, in the order the cells were sent
        assert statuses == [(state, r) for r in requests for state in ("busy", "idle")], f"round {round_}:\n{trace}"
        errors = [m["content"] for m in messages if m["msg_type"] == "error"]
        assert not errors, errors
        text = "".join(m["content"].get("text", "") for m in messages if m["msg_type"] == "stream")
        assert "slow: running" in text and "outcome: success" in text, text
        # the run widget's patches (pump thread) carry the parent of the cell that created it
        owners = {
            m["content"]["comm_id"]: m["parent_header"].get("msg_id") for m in messages if m["msg_type"] == "comm_open"
        }
        patches = [
            m
            for m in messages
            if m["msg_type"] == "comm_msg"
            and (m["content"]["data"].get("content") or {}).get("kind") == "patch"
            and m["content"]["comm_id"] in owners
        ]
        assert patches, f"round {round_}: no patch from the run widget"
        wrong = [
            (requests.index(owners[m["content"]["comm_id"]]), m["parent_header"].get("msg_id"))
            for m in patches
            if m["parent_header"].get("msg_id") != owners[m["content"]["comm_id"]]
        ]
        assert not wrong, f"round {round_}: patches with another cell's parent: {wrong}"


class _Kernel:
    """The two methods the guard wraps, with one current shell parent (as the shared context)."""

    def __init__(self) -> None:
        self.parent: dict[str, Any] = {}
        self.calls: list[str] = []
        self._parent_ident = {"shell": b"ident"}

    def set_parent(self, ident: Any, parent: dict[str, Any], channel: str = "shell") -> None:
        self.parent = parent
        self.calls.append(parent["header"]["msg_id"])

    def get_parent(self, channel: str | None = None) -> dict[str, Any]:
        return self.parent


def _request(msg_id: str) -> dict[str, Any]:
    return {"header": {"msg_id": msg_id, "msg_type": "execute_request"}}


def test_the_guard_turns_a_stale_restore_into_a_refresh_of_the_current_request() -> None:
    from rho_notebook.widgets._parent import guard_kernel_parent

    kernel = _Kernel()
    assert guard_kernel_parent(kernel) and guard_kernel_parent(kernel)  # once; the second is a no-op
    kernel.set_parent(b"a", _request("cell-6"))  # dispatch of cell 6 (it awaits; a comm arrives)
    kernel.set_parent(b"a", _request("cell-6"))  # the comm's restore while cell 6 is current: kept
    kernel.set_parent(b"b", _request("cell-8"))  # cell 6 ended, cell 8 dispatched
    kernel.set_parent(b"a", _request("cell-6"))  # the comm's late restore of cell 6: refused
    assert kernel.get_parent()["header"]["msg_id"] == "cell-8"
    assert kernel.calls == ["cell-6", "cell-6", "cell-8", "cell-8"]
    kernel.set_parent(b"c", _request("comm-1"))  # a new request still goes through
    assert kernel.get_parent()["header"]["msg_id"] == "comm-1"
