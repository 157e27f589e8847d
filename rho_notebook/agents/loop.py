"""The agent loop of runtime rho: ask the model, run the tools it calls, repeat until it answers.

Each turn is one provider call, reported to the run's ledger (``calls``: asked before the request,
which a budget may refuse, and told its usage once it completed). A response with tool calls has
every call run (in order) and the results fed back; a response without tool calls is the final
answer. The loop is bounded by a turn budget and a tool-error budget here, and by the node
timeout and cancellation in the executor (which cancels the task running this loop; in-flight
requests and tool processes stop).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.agents.provider import CallMeter, Completion, CompletionRequest, Message, Provider, call_record
from rho_notebook.agents.session import Session
from rho_notebook.agents.tools import ToolBox, ToolLimits
from rho_notebook.errors import AgentFailure, ProviderError
from rho_notebook.model.agent import AgentDefinition

__all__ = ["LoopLimits", "run_loop"]


@dataclass(frozen=True)
class LoopLimits:
    max_turns: int = 32
    """Provider calls per attempt; an agent still calling tools after this many fails."""
    max_tool_errors: int = 8
    """Refused or failed tool calls per attempt; one more fails the attempt."""
    tools: ToolLimits = field(default_factory=ToolLimits)


async def run_loop(
    provider: Provider,
    *,
    definition: AgentDefinition,
    model: str,
    task: str,
    toolbox: ToolBox,
    session: Session,
    limits: LoopLimits,
    calls: CallMeter | None = None,
    max_output_tokens: int | None = None,
) -> str:
    """Run the conversation to its final answer (the text of the last assistant message).

    ``calls`` hears of every turn (``max_output_tokens``: each request's output limit, None when
    it sets none); without it nothing is reported.

    Raises
    ------
    AgentFailure
        Provider failures (their kind), ``truncated``, ``turn_budget`` or ``tool_budget``.
    BudgetExceeded
        ``calls`` refused the next turn (it was not sent).
    """
    specs = toolbox.specs()
    session.messages.append(Message(role="user", content=task))
    for turn in range(1, limits.max_turns + 1):
        request = CompletionRequest(
            model=model,
            system=session.system,
            messages=tuple(session.messages),
            tools=specs,
            reasoning=definition.reasoning,
        )
        if calls is not None:
            await calls.before_call(max_output_tokens=max_output_tokens)
        began = time.monotonic()
        try:
            completion = await provider.complete(request)
        except ProviderError as err:
            session.retries.extend(err.retries)
            raise AgentFailure(err.message, kind=err.kind, status=err.status) from None
        if calls is not None:
            await calls.after_call(call_record(session.provider or provider.name, model, completion, began=began))
        message = completion.message
        session.messages.append(message)
        session.usage = session.usage.plus(completion.usage)
        session.retries.extend(completion.retries)
        session.turns.append(_turn_record(turn, completion, began=began))
        if not message.tool_calls:
            if completion.truncated:
                msg = (
                    f"the model's final answer was cut off at its output token limit (stop reason "
                    f"{completion.stop_reason!r}); raise max_tokens in the provider settings"
                )
                raise AgentFailure(msg, kind="truncated")
            return message.content
        await _run_tools(message, toolbox=toolbox, session=session, limits=limits)
    msg = (
        f"the agent used its whole turn budget ({limits.max_turns} model calls) without a final "
        "answer; it was still calling tools"
    )
    raise AgentFailure(msg, kind="turn_budget")


def _turn_record(turn: int, completion: Completion, *, began: float) -> dict[str, Any]:
    """What the session records of one provider call."""
    return {
        "turn": turn,
        "duration_ms": round((time.monotonic() - began) * 1000, 3),
        "input_tokens": completion.usage.input_tokens,
        "output_tokens": completion.usage.output_tokens,
        "stop_reason": completion.stop_reason,
        "model": completion.model,
        "tool_calls": [call.name for call in completion.message.tool_calls],
        "retries": [r.model_dump() for r in completion.retries],
    }


async def _run_tools(message: Message, *, toolbox: ToolBox, session: Session, limits: LoopLimits) -> None:
    """Run the tool calls of ``message`` in order, feeding each result back into the conversation.

    Raises
    ------
    AgentFailure
        ``tool_budget`` when the refused or failed calls pass ``limits.max_tool_errors``.
    """
    for call in message.tool_calls:
        result = await toolbox.call(call)
        session.tool_calls += 1
        session.messages.append(
            Message(
                role="tool",
                content=result.content,
                tool_call_id=call.id,
                tool_name=call.name,
                is_error=result.is_error,
            )
        )
        if result.is_error:
            session.tool_errors += 1
            if session.tool_errors > limits.max_tool_errors:
                msg = (
                    f"the agent's tool calls failed {session.tool_errors} times, more than the "
                    f"budget of {limits.max_tool_errors}; the last, {call.name}: {result.content[:200]}"
                )
                raise AgentFailure(msg, kind="tool_budget")
