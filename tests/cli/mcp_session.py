"""The SDK's own MCP client talking over stdio to a real ``rho-notebook mcp`` subprocess.

The client lives on an event loop in a background thread (entered and left by one task there, as
the SDK requires), so synchronous tests call tools one line at a time: :meth:`McpSession.answer`
for a call that must succeed (its JSON answer), :meth:`McpSession.error` for one that must be a tool
error (its text).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import mcp_types as types
from mcp import Client, StdioServerParameters

from tests.conftest import REPO, Project

T = TypeVar("T")

CLIENT_NAME = "pytest-mcp-client"
_CALL_SECONDS = 120.0


class McpSession:
    """``rho-notebook mcp --workspace ROOT`` with the store at ``project.home``, and a client of it."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()
        self._ready: asyncio.Future[Client] = self._loop.create_future()
        self._stop = asyncio.Event()
        self._serving = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        self.client = asyncio.run_coroutine_threadsafe(_wait(self._ready), self._loop).result(_CALL_SECONDS)

    async def _serve(self) -> None:
        env = {**os.environ, "RHO_NOTEBOOK_HOME": str(self.project.home)}
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "rho_notebook", "mcp", "--workspace", str(self.project.root)],
            env=env,
            cwd=str(self.project.root.parent),
        )
        try:
            async with Client(server, client_info=types.Implementation(name=CLIENT_NAME, version="1.0")) as client:
                self._ready.set_result(client)
                await self._stop.wait()
        except BaseException as err:
            if not self._ready.done():
                self._ready.set_exception(err)
            raise

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(_CALL_SECONDS)

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        return self._run(self.client.call_tool(name, arguments or {}))

    def answer(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """The JSON answer of a call that succeeds."""
        result = self.call(name, arguments)
        text = _text(result)
        assert not result.is_error, f"{name}({arguments}) failed: {text}"
        return json.loads(text)

    def error(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """The text of a call answered with a tool error."""
        result = self.call(name, arguments)
        text = _text(result)
        assert result.is_error, f"{name}({arguments}) did not fail: {text}"
        return text

    def tools(self) -> list[types.Tool]:
        return self._run(self.client.list_tools()).tools

    def read(self, uri: str) -> str:
        result = self._run(self.client.read_resource(uri))
        content = result.contents[0]
        assert isinstance(content, types.TextResourceContents)
        return content.text

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._serving.result(_CALL_SECONDS)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_CALL_SECONDS)
        self._loop.close()


async def _wait(future: asyncio.Future[Client]) -> Client:
    return await future


def _text(result: types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


def make_project(root: Path) -> Project:
    """A workspace (with .rho/ and a copy of examples/hello) and a store home under ``root``."""
    workspace = root / "ws"
    (workspace / ".rho").mkdir(parents=True)
    shutil.copytree(REPO / "examples" / "hello", workspace / "examples" / "hello")
    return Project(root=workspace.resolve(), home=(root / "home").resolve())
