"""Helpers for agent tests: definitions, settings pointing at a scripted server, one-attempt runs."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rho_notebook.agents.loop import LoopLimits
from rho_notebook.agents.settings import AgentSettings, ProviderSettings
from rho_notebook.exec.agent import AgentExecutor
from rho_notebook.exec.base import AttemptContext, AttemptResult
from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import AgentNode, EnvironmentPolicy, Graph
from rho_notebook.model.reference import Template
from rho_notebook.model.schema import EnumSchema, RecordSchema, Schema, StringSchema
from rho_notebook.store.artifacts import AttemptFiles
from tests.agents.fakeserver import OPENAI, ScriptedServer, Wire
from tests.processes import alive

SECRET = "sk-test-0123456789-SECRET-abcdef"
KEY_ENV = "RHO_TEST_PROVIDER_KEY"

DECISION = RecordSchema(fields=(("decision", EnumSchema(members=("approve", "revise"))), ("summary", StringSchema())))


def definition(**fields: Any) -> AgentDefinition:
    base: dict[str, Any] = {"id": "tester", "description": "test agent", "body": "Be brief."}
    base.update(fields)
    return AgentDefinition(**base)


def write_settings_for(home: Path, server: ScriptedServer, **extra: Any) -> None:
    """``settings.json`` in the store home ``home`` whose default provider ``local`` (OpenAI wire,
    key from ``KEY_ENV``) is ``server``, default model ``test-model``; ``extra`` adds top-level keys."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    settings = {
        "providers": {"local": {"type": "openai", "base_url": OPENAI.base(server.url), "api_key_env": KEY_ENV}},
        "default_provider": "local",
        "default_model": "test-model",
        **extra,
    }
    (home / "settings.json").write_text(json.dumps(settings))


def settings_for(server: ScriptedServer, wire: Wire = OPENAI, **provider: Any) -> AgentSettings:
    fields: dict[str, Any] = {"type": wire.name, "base_url": wire.base(server.url), "api_key_env": KEY_ENV}
    fields.update(provider)
    return AgentSettings(
        providers={"local": ProviderSettings(**fields)},
        default_provider="local",
        default_model="test-model",
    )


@dataclass
class Attempt:
    """One agent attempt run straight through the executor."""

    workspace: Path
    attempt_dir: Path
    result: AttemptResult
    elapsed: float

    def artifact(self, name: str) -> Any:
        path = self.attempt_dir / name
        return json.loads(path.read_text()) if name.endswith(".json") else path.read_text()

    def has(self, name: str) -> bool:
        return (self.attempt_dir / name).exists()

    @property
    def usage(self) -> dict[str, Any]:
        data: dict[str, Any] = self.artifact("usage.json")
        return data


@dataclass
class Runner:
    tmp_path: Path
    workspace: Path
    environ: dict[str, str] = field(default_factory=dict)

    def run(
        self,
        *,
        agent: AgentDefinition,
        settings: AgentSettings | None,
        prompt: str = "Inspect the workspace.",
        output: Schema | None = None,
        access: str = "mutating",
        timeout: int = 30,
        max_output_bytes: int = 12000,
        limits: LoopLimits = LoopLimits(),
        during: Callable[[CancelHandle], Any] | None = None,
        outputs: dict[str, Any] | None = None,
        prompt_template: Template | None = None,
    ) -> Attempt:
        """Execute one attempt; ``during(cancel)`` runs in a thread alongside it."""
        node = AgentNode(
            name="inspect",
            agent=agent.id,
            prompt=prompt_template or Template(parts=(prompt,)),
            access=access,  # type: ignore[arg-type]
            output=output,
            timeout_seconds=timeout,
            max_output_bytes=max_output_bytes,
        )
        graph = Graph(name="t", inputs=(), nodes=(node,), agents=(agent,))
        attempt_dir = self.tmp_path / f"attempt-{len(list(self.tmp_path.glob('attempt-*')))}"
        attempt_dir.mkdir()
        executor = AgentExecutor(settings=settings, graph=graph, limits=limits)

        async def started(pid: int) -> None:
            return None

        async def go() -> tuple[AttemptResult, float]:
            cancel = asyncio.Event()
            known = outputs or {}
            ctx = AttemptContext(
                run_id="run-1",
                node=node,
                attempt=1,
                files=AttemptFiles.made(attempt_dir),
                workspace=self.workspace,
                identities={},
                environment=EnvironmentPolicy(),
                outputs=lambda name: known.get(name, UNAVAILABLE),
                cancel=cancel,
                on_started=started,
                source_environ={"PATH": "/usr/bin:/bin", "HOME": str(self.tmp_path), **self.environ},
            )
            loop = asyncio.get_running_loop()
            helper = None
            if during is not None:
                helper = loop.run_in_executor(None, lambda: during(CancelHandle(loop, cancel)))
            began = loop.time()
            result = await executor.execute(ctx)
            elapsed = loop.time() - began
            if helper is not None:
                await helper
            return result, elapsed

        result, elapsed = asyncio.run(go())
        return Attempt(self.workspace, attempt_dir, result, elapsed)


class CancelHandle:
    """Lets a helper thread set the attempt's cancel event on the loop's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        self._loop = loop
        self._event = event

    def set(self) -> None:
        self._loop.call_soon_threadsafe(self._event.set)


def assert_no_secret(root: Path, secret: str = SECRET) -> None:
    """No file below ``root`` contains ``secret``."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert secret.encode() not in path.read_bytes(), f"secret found in {path}"


def process_alive(pid: int, command: str) -> bool:
    """Whether ``pid`` is a live (non-zombie) process running ``command`` (guards against PID reuse)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return command.encode() in cmdline and alive(pid)


FAKE_CLAUDE = f"""#!{sys.executable}
import json, os, sys, time
args = sys.argv[1:]
record = {{"argv": args, "stdin": sys.stdin.read(), "cwd": os.getcwd(), "env": sorted(os.environ), "pid": os.getpid()}}
for flag in ("--append-system-prompt-file", "--system-prompt-file"):
    if flag in args:
        record["system_prompt"] = open(args[args.index(flag) + 1]).read()
with open(os.environ["CLAUDE_FAKE_RECORD"], "w") as handle:
    json.dump(record, handle)
mode = os.environ.get("CLAUDE_FAKE_MODE", "ok")
if mode == "sleep":
    time.sleep(60)
if mode == "fail":
    print("Invalid API key · Please run /login", file=sys.stderr)
    sys.exit(1)
if mode == "error-result":
    print(json.dumps({{"type": "result", "subtype": "error_max_turns", "is_error": True, "result": "hit the turn limit"}}))
    sys.exit(0)
answer = open(os.environ["CLAUDE_FAKE_ANSWER"]).read()
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": answer, "num_turns": 2,
                  "usage": {{"input_tokens": 30, "cache_read_input_tokens": 5, "output_tokens": 9}},
                  "modelUsage": {{"claude-sonnet-test": {{}}}}}}))
"""


def install_fake_claude(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    program = directory / "claude"
    program.write_text(FAKE_CLAUDE)
    program.chmod(0o755)
    return program
