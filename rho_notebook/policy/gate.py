"""The launch gate: the one place that decides whether a launch may start, for every form.

Every launch of every authoring form passes it, in this order (docs/approvals.md has the table of
what each rule does to each kind of launch):

1. **permission mode** (:func:`~rho_notebook.policy.permission.decide`): ``plan`` denies a process
   launch or a mutating agent before anything else runs;
2. **before hooks** (``before_tool_use``): a deny, a non-zero exit, unreadable output or a
   timeout denies the launch (hooks fail closed);
3. **carried approval**: under ``supervised``, a person's earlier approval of exactly these launch
   facts in this workspace counts (journaled ``approval_carried`` before the launch);
4. **ask a person**: an approval request, answered from any front end;
5. **fail closed**: nobody decided within the time allowed, so the launch is denied;
6. the caller **launches**;
7. **after hooks** (``after_tool_use``): a deny (or failure) turns a success into a failure.

The caller owns the journal and the request folder; the gate gets them as callables (``emit``,
``carry``, ``ask``), so the graph driver and the script driver share it without sharing a base
class. A launch resumed while its approval request was pending (``resume_request``) waits on that
same request again: its before hooks already ran and nothing is carried.

Each refusal has one wording, whatever the form: the messages are built only here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rho_notebook.model.events import EventKind, event
from rho_notebook.model.state import NodeState
from rho_notebook.policy.approvals import ApprovalDecision
from rho_notebook.policy.hooks import HookEvent, HookSpec, HookVerdict, run_hooks
from rho_notebook.policy.permission import LaunchDecision, LaunchKind, PermissionMode, decide

__all__ = ["Asker", "Launch", "LaunchGate", "Refusal"]


@dataclass(frozen=True)
class Launch:
    """One launch about to be decided."""

    kind: LaunchKind
    node: str
    """The node name, the step key, or ``(script)`` for the script's own process."""
    attempt: int
    read_only: bool = False
    """An agent that cannot write, start processes or nest agents: allowed in every mode."""
    approval_seconds: float = 3600.0
    """How long a person who can be asked now has to decide."""


@dataclass(frozen=True)
class Refusal:
    """Why a launch did not start (or why its success became a failure): the attempt's state."""

    state: NodeState
    message: str


class Asker(Protocol):
    """Writes an approval request and waits for it: the decision, None on timeout, or "cancelled"."""

    def __call__(
        self,
        node: str,
        attempt: int,
        *,
        facts: dict[str, Any],
        timeout: float,
        cancel: Any,
        request_id: str | None,
    ) -> Awaitable[ApprovalDecision | None | str]: ...


@dataclass
class LaunchGate:
    """The rules of one execution: its mode and hooks, and how to journal and ask."""

    run_id: str
    mode: PermissionMode
    hooks: Mapping[str, Sequence[HookSpec]]
    workspace: Path
    """Where hooks run."""
    emit: Callable[..., None]
    """Journals records (the caller's journal: ``emit(*records)``)."""
    carry: Callable[[str, int, dict[str, Any]], bool]
    """Whether these launch facts were approved before in this workspace (journals it if so)."""
    ask: Asker
    attended: Callable[[], bool] = lambda: False
    """Whether someone can answer requests now (a follower with a prompt, a notebook widget):
    asked when a supervised launch starts to wait, since followers come and go during a run."""
    approval_timeout: float = 0.0
    """How long a supervised launch waits when nobody can be asked now, then fails closed."""

    def policy(self, launch: Launch) -> LaunchDecision:
        return decide(self.mode, launch.kind, read_only=launch.read_only)

    def passes(self, kind: LaunchKind, *, read_only: bool) -> bool:
        """Whether every launch of ``kind`` passes with nothing to compute, run, carry or ask: the
        mode allows it and no hook is configured (:meth:`admit` and :meth:`review` would return
        None at once). A caller may then skip both; the rule stays this one."""
        return decide(self.mode, kind, read_only=read_only) is LaunchDecision.ALLOW and not any(self.hooks.values())

    def needs_facts(self, launch: Launch) -> bool:
        """Whether :meth:`admit` will need the launch facts (a person or a hook reads them)."""
        policy = self.policy(launch)
        if launch.kind is LaunchKind.NONE or policy is LaunchDecision.DENY:
            return False
        return policy is LaunchDecision.ASK or any(self.hooks.values())

    async def admit(
        self,
        launch: Launch,
        facts: dict[str, Any] | None,
        *,
        cancel: Any,
        resume_request: str | None = None,
    ) -> Refusal | None:
        """None when the launch may start; else why not. ``facts`` may be None only when
        :meth:`needs_facts` said no."""
        policy = self.policy(launch)
        if policy is LaunchDecision.DENY:
            return Refusal(NodeState.DENIAL, f"denied by permission mode {self.mode.value!r}: nothing was started")
        if launch.kind is LaunchKind.NONE:
            return None
        if facts is None:
            if self.needs_facts(launch):  # a caller's mistake must not open the gate
                return Refusal(NodeState.DENIAL, "the launch facts were not computed, so it fails closed")
            return None
        if resume_request is None:
            verdict = await self._hooks("before_tool_use", launch, self._payload(launch, facts, policy))
            if verdict.denied:
                return Refusal(NodeState.DENIAL, verdict.reason)
        if policy is not LaunchDecision.ASK:
            return None
        if resume_request is None and self.carry(launch.node, launch.attempt, facts):
            return None
        return await self._ask_person(launch, facts, cancel=cancel, resume_request=resume_request)

    async def _ask_person(
        self, launch: Launch, facts: dict[str, Any], *, cancel: Any, resume_request: str | None
    ) -> Refusal | None:
        """A supervised launch: None when a person approved it; else why not (denied, nobody
        decided in time, or cancelled while waiting)."""
        attended = self.attended()
        timeout = launch.approval_seconds if attended else self.approval_timeout
        decided = await self.ask(
            launch.node, launch.attempt, facts=facts, timeout=timeout, cancel=cancel, request_id=resume_request
        )
        if decided == "cancelled":
            return Refusal(NodeState.CANCELLATION, "cancelled while waiting for approval")
        if decided is None:
            how = "nobody decided" if attended else "no approval responder is available"
            return Refusal(
                NodeState.DENIAL, f"supervised launch needs approval; {how} within {timeout:g} s, so it fails closed"
            )
        if isinstance(decided, ApprovalDecision) and decided.decision != "approve":
            comment = f": {decided.comment}" if decided.comment else ""
            return Refusal(NodeState.DENIAL, f"launch denied by {decided.by}{comment}")
        return None

    async def review(
        self, launch: Launch, facts: dict[str, Any] | None, *, state: NodeState, exit: dict[str, Any] | None
    ) -> Refusal | None:
        """After the launch: the after hooks see its result; a refusal when they fail a success."""
        if facts is None or launch.kind is LaunchKind.NONE or not self.hooks.get("after_tool_use"):
            return None
        payload = self._payload(launch, facts, self.policy(launch))
        payload["result"] = {"state": state.value, "exit": exit}
        verdict = await self._hooks("after_tool_use", launch, payload)
        if verdict.denied and state is NodeState.SUCCESS:
            return Refusal(NodeState.FAILURE, verdict.reason)
        return None

    def _payload(self, launch: Launch, facts: dict[str, Any], policy: LaunchDecision) -> dict[str, Any]:
        return {
            "tool": launch.kind.tool,
            "run_id": self.run_id,
            "node": launch.node,
            "attempt": launch.attempt,
            "mode": self.mode.value,
            "policy": policy.value,
            "facts": facts,
        }

    async def _hooks(self, hook_event: HookEvent, launch: Launch, payload: dict[str, Any]) -> HookVerdict:
        specs = list(self.hooks.get(hook_event, ()))
        if not specs:
            return HookVerdict()
        verdict = await run_hooks(hook_event, specs, payload, cwd=self.workspace)
        records = [
            event(
                EventKind.HOOK_IGNORED if "keys" in record else EventKind.HOOK_RAN,
                self.run_id,
                node=launch.node,
                attempt=launch.attempt,
                **record,
            )
            for record in verdict.records
        ]
        if records:
            self.emit(*records)
        return verdict
