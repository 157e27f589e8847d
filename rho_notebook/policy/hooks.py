"""before_tool_use / after_tool_use hooks: commands from settings that may deny, never grant.

Configured in settings (user ``$RHO_NOTEBOOK_HOME/settings.json``; project ``.rho/settings.json``
only when the workspace is trusted)::

    {"hooks": {"before_tool_use": [{"command": ["/usr/local/bin/check", "--strict"], "timeout_seconds": 5}],
               "after_tool_use":  [{"command": ["audit-log"]}]}}

Hooks see every launch of every form, through the launch gate (:mod:`rho_notebook.policy.gate`):
permission mode -> before hooks -> carried approval -> a person's approval when the mode requires
it -> the launch -> after hooks. The before hook runs even when policy allows; a launch the mode
denies reaches no hook. docs/approvals.md ("The launch gate") has what each rule does to each kind
of launch.

The JSON contract. A hook gets one object on stdin::

    {"hook_event": "before_tool_use" | "after_tool_use",
     "tool": "workflow_command" | "workflow_python" | "workflow_agent" | "workflow_model" | "workflow_script",
     "run_id": ..., "node": ..., "attempt": N, "mode": "auto" | "supervised" | "plan",
     "policy": "allow" | "ask", "facts": {...},
     "result": {"state", "exit"}}          # after_tool_use only

``tool`` is ``workflow_command`` for command and shell nodes, item command steps, script
``run_command`` steps and flow tool calls; ``workflow_python`` for Python nodes;
``workflow_agent`` for agent nodes, item agent steps and ``run_step``; ``workflow_model`` for item
model steps, ``run_model`` and a flow's model calls; ``workflow_script`` for the script or flow
process itself, whose ``node`` is ``(script)``. ``mode`` is ``plan`` only for what plan mode
allows (model calls, read-only agents). ``facts`` are what a person approving the launch is shown:
for a process ``{"executable", "sha256", "interpreters", "argv", "cwd"}``; other kinds have no
``argv`` (docs/approvals.md lists the facts of each).

A hook may print one object on stdout::

    {"decision": "deny" | "continue", "reason": "text"}

Empty stdout means continue. ``deny`` (or a non-zero exit, invalid JSON, or a timeout: hooks fail
closed) stops the launch (before) or fails a successful launch (after). Anything else a hook says —
"allow", "approve", new argv, outputs, scheduling — is ignored and reported in the journal, because
a hook cannot grant authority, schedule nodes, rewrite plans or provide workflow data.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from rho_notebook.errors import StoreError
from rho_notebook.model.base import FrozenModel
from rho_notebook.oshelpers import signal_group
from rho_notebook.store.settings import settings_documents

__all__ = ["HookSpec", "HookVerdict", "load_hooks", "run_hooks", "HookEvent"]

HookEvent = Literal["before_tool_use", "after_tool_use"]
_OUTPUT_LIMIT = 65536
_ALLOWED_KEYS = {"decision", "reason"}


class HookSpec(FrozenModel):
    command: tuple[str, ...] = Field(min_length=1)
    timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    origin: Literal["user", "project"] = "user"

    @property
    def label(self) -> str:
        return f"{self.origin}:{self.command[0]}"


@dataclass
class HookVerdict:
    denied: bool = False
    reason: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)
    """hook_ran / hook_ignored journal payloads (without run/node fields)."""


def load_hooks(home: Path, workspace: Path | None, *, trusted: bool) -> dict[str, list[HookSpec]]:
    """Hooks from user settings, plus project settings when the workspace is trusted."""
    hooks: dict[str, list[HookSpec]] = {"before_tool_use": [], "after_tool_use": []}
    for doc in settings_documents(home, workspace, trusted=trusted):
        section = doc.data.get("hooks")
        if section is None:
            continue
        if not isinstance(section, dict):
            raise StoreError(f"{doc.path}: 'hooks' must be an object with before_tool_use / after_tool_use lists")
        for event, entries in section.items():
            if event not in hooks:
                raise StoreError(f"{doc.path}: unknown hook event {event!r} (before_tool_use, after_tool_use)")
            for index, entry in enumerate(entries if isinstance(entries, list) else [entries]):
                try:
                    hooks[event].append(HookSpec.model_validate({**entry, "origin": doc.origin}))
                except (ValidationError, TypeError) as err:
                    raise StoreError(f"{doc.path}: hooks.{event}[{index}] is invalid: {err}") from None
    return hooks


async def _run_one(
    spec: HookSpec, payload: dict[str, Any], *, cwd: Path
) -> tuple[str, str, dict[str, Any] | None, str]:
    """(status, reason, parsed output, stderr tail); status is ok | failed | timeout."""
    program = spec.command[0]
    resolved = program if "/" in program else shutil.which(program)
    if resolved is None:
        return "failed", f"hook program {program!r} not found on PATH", None, ""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "USER", "LOGNAME", "TMPDIR")}
    env["RHO_HOOK_EVENT"] = str(payload["hook_event"])
    try:
        proc = await asyncio.create_subprocess_exec(
            resolved,
            *spec.command[1:],
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as err:
        return "failed", f"hook {program!r} could not start: {err.strerror}", None, ""
    try:
        out, err_bytes = await asyncio.wait_for(
            proc.communicate(json.dumps(payload).encode()), timeout=spec.timeout_seconds
        )
    except TimeoutError:
        signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()
        return "timeout", f"hook {program!r} did not answer within {spec.timeout_seconds:g} s", None, ""
    stderr = err_bytes[-500:].decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        return "failed", f"hook {program!r} exited with code {proc.returncode}", None, stderr
    text = out[:_OUTPUT_LIMIT].decode("utf-8", "replace").strip()
    if not text:
        return "ok", "", {}, stderr
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return "failed", f"hook {program!r} printed something that is not one JSON object", None, stderr
    if not isinstance(parsed, dict):
        return "failed", f"hook {program!r} printed JSON that is not an object", None, stderr
    return "ok", str(parsed.get("reason", "")), parsed, stderr


async def run_hooks(event: HookEvent, specs: list[HookSpec], payload: dict[str, Any], *, cwd: Path) -> HookVerdict:
    """Run every hook for ``event`` in order; the first deny (or failure: fail closed) stops."""
    verdict = HookVerdict()
    for spec in specs:
        status, reason, output, stderr = await _run_one(spec, {**payload, "hook_event": event}, cwd=cwd)
        if status != "ok" or output is None:
            verdict.records.append(
                {
                    "hook_event": event,
                    "hook": spec.label,
                    "verdict": "deny",
                    "reason": f"{reason}; failing closed" + (f" ({stderr})" if stderr else ""),
                }
            )
            verdict.denied, verdict.reason = True, f"{event} hook {spec.label}: {reason}; failing closed"
            return verdict
        extra = sorted(set(output) - _ALLOWED_KEYS)
        decision = output.get("decision", "continue")
        if decision not in ("deny", "continue"):
            extra.append(f"decision={decision}")
        if extra:
            verdict.records.append(
                {
                    "hook_event": event,
                    "hook": spec.label,
                    "keys": extra,
                    "reason": "hooks may only deny; these were ignored",
                }
            )
        if decision == "deny":
            verdict.records.append({"hook_event": event, "hook": spec.label, "verdict": "deny", "reason": reason})
            verdict.denied, verdict.reason = (
                True,
                f"{event} hook {spec.label} denied" + (f": {reason}" if reason else ""),
            )
            return verdict
        verdict.records.append({"hook_event": event, "hook": spec.label, "verdict": "continue", "reason": reason})
    return verdict
