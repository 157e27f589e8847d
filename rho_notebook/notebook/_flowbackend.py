"""The in-memory model backend of flows called in a plain kernel cell (docs/flows.md, "In a notebook").

Outside a run, a :class:`~rho_notebook.flow.Workflow` sends its model calls to the backend installed
with :func:`rho_notebook.flow.use_backend`; loading the extension installs :func:`memory_backend`,
which answers each call with one :meth:`Service.complete <rho_notebook.service.Service.complete>`
(the completion client and provider selection of a script's ``run_model`` step, settings from the
store home and the notebook's workspace). Nothing is journaled: a crash loses the calls, as in
OpenRath; a ``%%flow`` cell runs the same module as a journaled run.

Each call is awaited on the background runner's loop through the one bridge
(:func:`~rho_notebook.service.wait_for`), never on the kernel's loop; the calling thread (the cell,
or a worker of the cell's thread pool) waits for its own answer, so parallel branches run their
requests concurrently.
"""

from __future__ import annotations

from collections.abc import Callable

from rho_notebook.flow import FlowError, ModelCall, ModelReply, ToolCall
from rho_notebook.service import Service, Workspace, wait_for

__all__ = ["memory_backend"]


def memory_backend(
    *, service: Callable[[], Service], workspace: Callable[[], Workspace]
) -> Callable[[ModelCall], ModelReply]:
    """A backend answering each :class:`ModelCall` with one completion of ``service()`` (called per
    request, so the store home is read when the call is made) in ``workspace()``'s settings."""

    def answer(call: ModelCall) -> ModelReply:
        if call.agent is not None:
            msg = (
                f"flow call {call.key!r} runs the catalog agent {call.agent!r}, which needs a run (its tools are "
                "verified steps): run the flow with a %%flow cell, or give the AgentParam a system= prompt to "
                "call it in memory"
            )
            raise FlowError(msg)
        found = wait_for(
            service().complete(
                list(call.messages),
                provider=call.provider,
                model=call.model,
                tools=None if call.tools is None else list(call.tools),
                workspace=workspace(),
            )
        )
        return ModelReply(
            content=found["text"], tool_calls=tuple(ToolCall.from_dict(item) for item in found["tool_calls"])
        )

    return answer
