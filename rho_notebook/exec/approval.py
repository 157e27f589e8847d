"""The executor for approval nodes: a person decides, whatever the permission mode.

Approve -> success with the output record {by, comment, at} (readable by later conditions and
templates); deny -> denial; no decision within timeout_seconds -> failure; cancel -> cancellation.
"""

from __future__ import annotations

from rho_notebook.errors import UnavailableValue
from rho_notebook.exec.base import AttemptContext, AttemptResult, render_template
from rho_notebook.model.graph import ApprovalNode
from rho_notebook.model.state import NodeState
from rho_notebook.store.files import atomic_write, atomic_write_json
from rho_notebook.store.layout import PROMPT_FILE, VALUE_FILE

__all__ = ["ApprovalExecutor"]


class ApprovalExecutor:
    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        node = ctx.node
        if not isinstance(node, ApprovalNode):
            msg = f"ApprovalExecutor cannot run a {node.kind} node"
            raise TypeError(msg)
        if ctx.request_approval is None:
            return AttemptResult(state=NodeState.FAILURE, message="approval nodes need an owner that can ask a person")
        try:
            prompt = render_template(node.prompt, ctx.outputs)
        except UnavailableValue as err:
            return AttemptResult(state=NodeState.FAILURE, message=f"cannot render the approval prompt: {err}")
        folder = await ctx.directory()
        atomic_write(folder / PROMPT_FILE, prompt.encode(), durable=False)
        decided = await ctx.request_approval({"prompt": prompt, "node": node.name}, float(node.timeout_seconds))
        if decided == "cancelled":
            return AttemptResult(state=NodeState.CANCELLATION, message="cancelled while waiting for a person")
        if decided is None:
            return AttemptResult(state=NodeState.FAILURE, message=f"nobody decided within {node.timeout_seconds} s")
        if decided.decision != "approve":
            return AttemptResult(
                state=NodeState.DENIAL,
                message=f"denied by {decided.by}" + (f": {decided.comment}" if decided.comment else ""),
            )
        value = {"by": decided.by, "comment": decided.comment, "at": decided.at}
        atomic_write_json(folder / VALUE_FILE, value)
        return AttemptResult(
            state=NodeState.SUCCESS, value=value, artifacts={"prompt": PROMPT_FILE, "value": VALUE_FILE}
        )
