"""What a person must do for a run started or followed over MCP: the lines ``workflow_run`` and
``workflow_wait`` answer in ``person``, each with the command that person runs (no tool does it)."""

from __future__ import annotations

from rho_notebook.model.graph import ItemNode
from rho_notebook.model.plan import Plan
from rho_notebook.service import ApprovalRequest

__all__ = ["person_note", "run_notes"]


def person_note(run_id: str, request: ApprovalRequest) -> str:
    """What a person runs to settle one pending request: approve a launch or node, or fill a form."""
    if request.kind == "form":
        step = request.facts.get("step", request.node)
        command = " ".join(
            ["rho-notebook answer", run_id, step, *(f"{name}=JSON" for name in request.facts.get("form") or {})]
        )
        return (
            f"human step {request.node} waits for a person to fill its form: {command} (or rho-notebook approve "
            f"{run_id} {request.request_id} --deny to decline), or the notebook widget or the JupyterLab sidebar; "
            "no tool can answer it"
        )
    return (
        f"node {request.node} waits for a person to approve "
        + ("this approval node" if request.kind == "node" else "this launch")
        + f": rho-notebook approve {run_id} {request.request_id} (or --deny), or the notebook widget "
        "or the JupyterLab sidebar; no tool can approve it"
    )


def run_notes(plan: Plan, run_id: str, mode: str, *, asked: str) -> list[str]:
    """When a run started here will wait for a person, and the commands that person runs; the
    plan's approval is named only when it would change the mode (``mode`` is below ``asked``)."""
    notes = []
    if mode == "supervised":
        notes.append(
            "supervised: every command, shell and mutating-agent launch waits for a person's approval: "
            f"rho-notebook approve {run_id} lists the pending requests, rho-notebook approve {run_id} REQUEST "
            "approves one (or the notebook widget, or the JupyterLab sidebar)"
        )
    elif mode == "plan":
        notes.append("plan mode: every command, shell and mutating-agent launch is denied; nothing is launched")
    approvals = [node.name for node in plan.graph.nodes if node.kind == "approval"]
    if approvals:
        notes.append(
            f"approval node(s) {', '.join(approvals)} wait for a person: rho-notebook approve {run_id} REQUEST "
            "(workflow_wait names the request)"
        )
    humans = [node.name for node in plan.graph.nodes if isinstance(node, ItemNode) and node.step_kind == "human"]
    if humans:
        notes.append(
            f"human step(s) {', '.join(humans)} wait for a person to fill a form: rho-notebook answer {run_id} "
            "STEP field=JSON... (workflow_wait names the fields)"
        )
    if mode != asked and notes:
        notes.append(
            f"a person who read this plan may approve it with rho-notebook approve-plan {plan.plan_id}; "
            "runs of this digest then use the mode asked for"
        )
    return notes
