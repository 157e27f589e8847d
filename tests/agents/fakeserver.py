"""A real local HTTP server that answers model-provider requests from a script.

It speaks whatever the script says: each request to ``/v1/chat/completions`` (OpenAI-compatible)
or ``/v1/messages`` (Anthropic) takes the next :class:`Reply` (or calls a function of the request
that returns one). Every request is recorded (path, headers, JSON body). A reply can be delayed or
held until an event is set; while holding, the server notices when the client disconnects. The
server keeps its own count of the usage its successful replies reported (:meth:`ScriptedServer.totals`),
which the ledger tests compare with what the run journaled.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Recorded", "Reply", "ScriptedServer", "Wire", "OPENAI", "ANTHROPIC"]


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    hold: threading.Event | None = None
    """Wait for this event before answering (the test sets it, or the client disconnects)."""


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


Step = Reply | Callable[[Recorded], Reply]


class ScriptedServer:
    """``with ScriptedServer([...]) as server:`` then point a provider at ``server.url``."""

    def __init__(self, script: list[Step], *, repeat_last: bool = False) -> None:
        self.script = list(script)
        self.repeat_last = repeat_last
        self.requests: list[Recorded] = []
        self.disconnected = threading.Event()
        self.arrived = threading.Condition()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._holds: list[threading.Event] = []
        self.served: list[dict[str, Any]] = []
        """The ``usage`` object of every 200 reply actually sent, in order."""

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for hold in self._holds:
            hold.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def totals(self) -> dict[str, int]:
        """What the server itself reported, in the ledger's terms: completed calls, every prompt
        token (Anthropic's cache reads and writes added, as OpenAI counts them), cached, output and
        reasoning tokens; and every request it received (``requests``, retried ones included)."""
        found = dict.fromkeys(("calls", "input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens"), 0)
        with self.arrived:
            served, found["requests"] = list(self.served), len(self.requests)
        for usage in served:
            found["calls"] += 1
            if "prompt_tokens" in usage:
                found["input_tokens"] += usage["prompt_tokens"]
                found["output_tokens"] += usage["completion_tokens"]
                found["cached_tokens"] += (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                found["reasoning_tokens"] += (usage.get("completion_tokens_details") or {}).get("reasoning_tokens", 0)
            else:
                read = usage.get("cache_read_input_tokens", 0)
                found["input_tokens"] += usage["input_tokens"] + read + usage.get("cache_creation_input_tokens", 0)
                found["output_tokens"] += usage["output_tokens"]
                found["cached_tokens"] += read
        return found

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"expected {count} requests, got {len(self.requests)}")

    def _next(self, request: Recorded) -> Reply:
        with self.arrived:
            self.requests.append(request)
            self.arrived.notify_all()
            if not self.script:
                return Reply(status=500, body={"error": {"message": "script exhausted"}})
            step = self.script[0] if (self.repeat_last and len(self.script) == 1) else self.script.pop(0)
        reply = step(request) if callable(step) else step
        if reply.hold is not None:
            self._holds.append(reply.hold)
        return reply

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                recorded = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._next(recorded)
                if reply.delay and self._wait_or_disconnect(None, reply.delay):
                    return
                if reply.hold is not None and self._wait_or_disconnect(reply.hold, 60.0):
                    return
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    server.disconnected.set()
                    return
                if reply.status == 200 and isinstance(reply.body, dict) and isinstance(reply.body.get("usage"), dict):
                    with server.arrived:
                        server.served.append(reply.body["usage"])

            def _wait_or_disconnect(self, event: threading.Event | None, limit: float) -> bool:
                """Wait for ``event`` (or ``limit`` seconds); True when the client went away first."""
                deadline = time.monotonic() + limit
                sock: socket.socket = self.connection
                while time.monotonic() < deadline:
                    if event is not None and event.wait(0.02):
                        return False
                    if event is None:
                        time.sleep(0.02)
                    readable, _, _ = select.select([sock], [], [], 0)
                    if readable:
                        try:
                            peek = sock.recv(1, socket.MSG_PEEK)
                        except OSError:
                            peek = b""
                        if not peek:
                            server.disconnected.set()
                            return True
                return False

        return Handler


class Wire:
    """Reply builders for one wire format."""

    def __init__(self, name: str, path: str, base: Callable[[str], str]) -> None:
        self.name = name
        self.path = path
        self.base = base
        """server URL -> the provider's base_url."""

    def usage(self, tokens: tuple[int, int], *, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
        """A ``usage`` object; ``cached`` and ``reasoning`` add the details a provider reports
        (OpenAI ``prompt_tokens_details`` / ``completion_tokens_details``, Anthropic
        ``cache_read_input_tokens``, which Anthropic counts apart from ``input_tokens``)."""
        if self.name == "openai":
            usage: dict[str, Any] = {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}
            if cached:
                usage["prompt_tokens_details"] = {"cached_tokens": cached}
            if reasoning:
                usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
            return usage
        usage = {"input_tokens": tokens[0], "output_tokens": tokens[1]}
        if cached:
            usage["cache_read_input_tokens"] = cached
        return usage

    def answer(
        self,
        text: str,
        *,
        tokens: tuple[int, int] = (11, 7),
        truncated: bool = False,
        cached: int = 0,
        reasoning: int = 0,
    ) -> Reply:
        usage = self.usage(tokens, cached=cached, reasoning=reasoning)
        if self.name == "openai":
            finish = "length" if truncated else "stop"
            return Reply(
                body={
                    "id": "chatcmpl-1",
                    "model": "test-model",
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                    ],
                    "usage": usage,
                }
            )
        return Reply(
            body={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "test-model",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "max_tokens" if truncated else "end_turn",
                "usage": usage,
            }
        )

    def tools(self, *calls: tuple[str, str, dict[str, Any]], text: str = "") -> Reply:
        """A turn that calls tools: each call is (id, name, arguments)."""
        if self.name == "openai":
            return Reply(
                body={
                    "model": "test-model",
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": text or None,
                                "tool_calls": [
                                    {
                                        "id": cid,
                                        "type": "function",
                                        "function": {"name": name, "arguments": json.dumps(args)},
                                    }
                                    for cid, name, args in calls
                                ],
                            },
                            "finish_reason": "tool_calls",
                        }
                    ],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 3},
                }
            )
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls]
        return Reply(
            body={
                "model": "test-model",
                "role": "assistant",
                "content": content,
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 5, "output_tokens": 3},
            }
        )

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        if self.name == "openai":
            body: dict[str, Any] = {"error": {"message": message, "type": "invalid_request_error"}}
        else:
            body = {"type": "error", "error": {"type": "error", "message": message}}
        return Reply(status=status, body=body, headers=headers or {})

    def tool_results(self, request: Recorded) -> list[tuple[str, str, bool]]:
        """(tool call id, content, is_error) of every tool result in a recorded request."""
        found: list[tuple[str, str, bool]] = []
        for message in request.body["messages"]:
            if self.name == "openai" and message["role"] == "tool":
                found.append((message["tool_call_id"], message["content"], False))
            if self.name == "anthropic" and message["role"] == "user" and isinstance(message["content"], list):
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        found.append((block["tool_use_id"], block["content"], bool(block.get("is_error"))))
        return found

    def system(self, request: Recorded) -> str:
        if self.name == "openai":
            return str(request.body["messages"][0]["content"])
        return str(request.body["system"])

    def task(self, request: Recorded) -> str:
        messages = request.body["messages"]
        first = messages[1] if self.name == "openai" else messages[0]
        return str(first["content"])

    def tool_names(self, request: Recorded) -> list[str]:
        tools = request.body.get("tools", [])
        if self.name == "openai":
            return sorted(t["function"]["name"] for t in tools)
        return sorted(t["name"] for t in tools)


OPENAI = Wire("openai", "/v1/chat/completions", lambda url: url + "/v1")
ANTHROPIC = Wire("anthropic", "/v1/messages", lambda url: url)
