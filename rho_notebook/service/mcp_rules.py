"""What a run started through the model-facing tool (MCP) may do without a person.

A model may plan and run what it wrote, but it cannot approve anything only a person may approve.
Two rules settle what that means for the two choices a tool call makes:

1. **The mode ceiling** (:func:`mcp_run_mode`). The mode a call asks for (``auto``, ``plan``,
   ``supervised``) is granted up to a ceiling. Modes order by what runs without a person:
   ``plan`` (every launch denied) < ``supervised`` (each launch waits for a person) < ``auto``.
   The ceiling is ``supervised``, unless a person approved the run's exact graph digest
   (``rho-notebook approve-plan``), or the **user** settings file
   (``$RHO_NOTEBOOK_HOME/settings.json``, never a project's ``.rho/settings.json``, never the
   environment) says ``"mcp_max_mode": "auto"``; then it is ``auto``. Asking for less than the
   ceiling is always granted: ``plan`` still denies every launch.
2. **Decisions** (:func:`check_mcp_decisions`). A tool may pass a script run's ``rerun``/``skip``
   decision only for a step halted by ``recovery="manual"``: the step settled (it failed, was
   denied or cancelled) and its author asked to decide any rerun. Every other halt (a launch
   whose outcome is unknown, a stored result that cannot be read) needs a person to look first,
   and so does a decision for a step that is not halted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import get_args

from rho_notebook.errors import DecisionNeedsPerson, RunRefused, SettingsError
from rho_notebook.policy.plan_approval import PlanApproval
from rho_notebook.runtime.replay import MANUAL
from rho_notebook.runtime.status import load_state
from rho_notebook.service.requests import Mode
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.settings import settings_documents

__all__ = ["MCP_MAX_MODE", "mcp_run_mode", "user_max_mode", "check_mcp_decisions"]

MCP_MAX_MODE = "mcp_max_mode"
"""The user settings key that raises the ceiling: ``"supervised"`` (the default) or ``"auto"``."""


def user_max_mode(layout: StoreLayout) -> tuple[Mode, str]:
    """The ceiling the user settings file sets (``supervised`` when it says nothing) and where it
    was read. Project settings and the environment are never read.

    Raises
    ------
    SettingsError
        ``mcp_max_mode`` holds anything but ``"supervised"`` or ``"auto"``.
    """
    for doc in settings_documents(layout.home, None, trusted=False):
        if doc.origin != "user" or MCP_MAX_MODE not in doc.data:
            continue
        value = doc.data[MCP_MAX_MODE]
        if value not in ("supervised", "auto"):
            msg = f'{doc.path}: "{MCP_MAX_MODE}" must be "supervised" or "auto", not {value!r}'
            raise SettingsError(msg)
        return ("auto" if value == "auto" else "supervised"), str(doc.path)
    return "supervised", ""


def mcp_run_mode(
    digest: str, requested: Mode, *, approval: PlanApproval | None, setting: tuple[Mode, str]
) -> tuple[Mode, str]:
    """The mode a run started through MCP gets, and why, in words a model can pass on.

    Parameters
    ----------
    digest
        The graph digest of the run.
    requested
        The mode the tool call asked for.
    approval
        The ``approve-plan`` record of ``digest``, if a person made one.
    setting
        :func:`user_max_mode`: the user setting's ceiling and the file it was read from.

    Raises
    ------
    RunRefused
        ``requested`` is not a mode.
    """
    if requested not in get_args(Mode):
        msg = f"mode {requested!r} is not one of {', '.join(get_args(Mode))}"
        raise RunRefused(msg)
    if requested == "plan":
        return "plan", "mode plan, as asked: every launch is denied, nothing runs"
    if requested == "supervised":
        return "supervised", (
            "mode supervised, as asked: each launch waits for a person to approve it "
            "(`rho-notebook approve RUN_ID`, the run's widget or the JupyterLab sidebar)"
        )
    if approval is not None and approval.graph_digest == digest:
        return "auto", f"mode auto, as asked: graph digest {digest} was approved by {approval.by} at {approval.at}"
    ceiling, where = setting
    if ceiling == "auto":
        return "auto", f'mode auto, as asked: the user setting "{MCP_MAX_MODE}": "auto" in {where} allows it'
    return "supervised", (
        f"mode supervised, not auto: a run started through MCP runs supervised until a person approves "
        f"its graph digest, so each launch waits for a person (`rho-notebook approve RUN_ID`, the run's "
        f"widget or the JupyterLab sidebar). For auto, a person runs `rho-notebook approve-plan {digest}`"
    )


def check_mcp_decisions(layout: StoreLayout, run_id: str, decisions: Mapping[str, str]) -> None:
    """Refuse unless every decision is ``rerun`` or ``skip`` for a step of run ``run_id`` (a full
    ID) halted by ``recovery="manual"`` (rule 2 of the module docstring).

    Raises
    ------
    DecisionNeedsPerson
        A decision names a step that is not halted, or halted for another reason; the message
        names the step and the command a person runs to decide it.
    """
    if not decisions:
        return
    state = load_state(layout, run_id)
    halted = {str(h.get("step")): str(h.get("why", "")) for h in state.halted}
    short = run_id[:13]
    for step, decision in sorted(decisions.items()):
        shown = decision if decision in ("rerun", "skip") else "rerun"
        command = f"rho-notebook resume {short} --decide {step}={shown}"
        if decision not in ("rerun", "skip"):
            msg = f"decision {step}={decision!r}: a decision is rerun or skip"
            raise DecisionNeedsPerson(msg, run_id=run_id, step=step, command=command)
        why = halted.get(step)
        if why is None:
            waiting = ", ".join(sorted(halted)) or "none"
            msg = (
                f"step {step!r} of run {short} is not halted (halted steps: {waiting}); over MCP a decision "
                f'may only answer a step halted by recovery="manual". A person decides other steps: `{command}`'
            )
            raise DecisionNeedsPerson(msg, run_id=run_id, step=step, command=command)
        if not why.startswith(MANUAL):
            msg = (
                f"step {step!r} of run {short} halted because {why}: a person must look at what it did before "
                f"deciding (`rho-notebook logs {short} {step}`), then run `{command}` (or =skip); "
                f'over MCP only steps halted by recovery="manual" can be decided'
            )
            raise DecisionNeedsPerson(msg, run_id=run_id, step=step, command=command)
