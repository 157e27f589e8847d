"""The model operation: one completion over a message list, the same for every caller.

A script's ``run_model`` step, an item graph's ``model`` step and a flow's in-memory call
(:mod:`rho_notebook.service.completion`) all build a :class:`ModelCall` with :func:`model_call`
and answer it through :func:`ask` (outside a run) or :func:`run_model` (an attempt):

* the request: leading ``system`` messages form the system prompt (plus the answer instructions
  of an ``output`` schema); the rest are user, assistant and tool messages; tools are ``{"name",
  "description", "parameters"}`` objects, refused together with ``output`` (a completion that
  calls tools has no final answer to validate);
* the provider and model come from settings (:func:`~rho_notebook.agents.completion.select_provider`),
  the credential from the run's environment by reference, redacted from everything stored;
* an attempt leaves ``completion.json`` (the redacted completion) and the answer text
  (:data:`~rho_notebook.store.layout.ANSWER_TEXT_FILE`), and journals :meth:`ModelCall.record`
  completed by the outcome (``outcome``, ``failure_kind``, tokens, timings), and reports the call to
  the run's ledger (``calls``: asked before the request, which a budget may refuse, and told the
  usage once it completed, under ``key`` when given);
* its value: the validated value with ``output``, ``{"content", "tool_calls"}`` with tools, else None.

Errors are :class:`~rho_notebook.errors.StepInvalid` for a malformed request (``subject`` names the
step), :class:`~rho_notebook.errors.SettingsError` for an unknown provider or model, and for
:func:`ask` the provider's :class:`~rho_notebook.errors.ProviderError` or
:class:`~rho_notebook.errors.AgentFailure`; :func:`run_model` turns those into the attempt's state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from rho_notebook.agents.answer import answer_instructions, parse_typed_answer
from rho_notebook.agents.completion import complete_once, select_provider
from rho_notebook.agents.provider import Completion, CompletionRequest, Message, ToolSpec, call_record, output_limit
from rho_notebook.agents.redact import Redactor
from rho_notebook.agents.resolve import Selection
from rho_notebook.agents.settings import AgentSettings
from rho_notebook.errors import AgentFailure, AnswerError, ProviderError, StepInvalid
from rho_notebook.exec.base import ModelCalls
from rho_notebook.model.schema import Schema
from rho_notebook.model.state import NodeState
from rho_notebook.store.files import atomic_write, atomic_write_json
from rho_notebook.store.layout import ANSWER_TEXT_FILE, COMPLETION_FILE

if TYPE_CHECKING:  # a type only: httpx (and rich, which it imports) load when a model is called
    import httpx

__all__ = [
    "KeyedCalls",
    "ModelCall",
    "ModelOutcome",
    "ask",
    "conversation",
    "model_call",
    "run_model",
    "tool_list",
]

_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "tool_name", "is_error"})


@dataclass(frozen=True)
class ModelCall:
    """One completion to ask for: the resolved provider, the request and how to read the answer."""

    selection: Selection
    request: CompletionRequest
    output: Schema | None
    """The schema the answer must match (None: the answer is text)."""
    messages: Sequence[Any]
    """The messages as given (digested and shown to whoever approves the call)."""
    tools: list[dict[str, Any]] | None
    """The tools as given (None when none were)."""

    def inputs(self) -> dict[str, Any]:
        """What changes the completion: provider, model, messages, tools and output schema."""
        return {
            "provider": self.selection.provider,
            "model": self.selection.model,
            "messages": self.messages,
            "tools": self.tools,
            "output": None if self.output is None else self.output.model_dump(mode="json"),
        }

    def facts(self) -> dict[str, Any]:
        """What a person or a hook decides on: who answers, with which credential, asked what."""
        selection = self.selection
        return {
            "provider": selection.provider,
            "provider_type": selection.settings.type,
            "base_url": selection.settings.url(),
            "model": selection.model,
            "credential": selection.credential,
            "messages": self.messages,
            "tools": [t["name"] for t in self.tools or ()],
        }

    def record(self) -> dict[str, Any]:
        """The start of the exit record journaled with the attempt (never the credential's value)."""
        selection = self.selection
        return {
            "kind": "model",
            "provider": selection.provider,
            "model": selection.model,
            "credential": selection.credential,
        }


def model_call(
    settings: AgentSettings,
    *,
    messages: Any,
    provider: str | None = None,
    model: str | None = None,
    tools: Any = None,
    output: Schema | None = None,
    subject: str = "",
) -> ModelCall:
    """Check a completion request and resolve who answers it (the operation's prepare step).

    ``subject`` prefixes every refusal (``"step 'k': "``). Raises :class:`StepInvalid` for a
    malformed request and :class:`~rho_notebook.errors.SettingsError` for the provider or model.
    """
    system, turns = conversation(messages, subject=subject)
    given = tool_list(tools, subject=subject)
    if given and output is not None:
        msg = f"{subject}give tools or output, not both: a completion that calls tools has no final answer to validate"
        raise StepInvalid(msg)
    selection = select_provider(settings, provider=provider, model=model)
    if output is not None:
        system = "\n\n".join(p for p in (system, answer_instructions(output)) if p)
    request = CompletionRequest(
        model=selection.model,
        system=system,
        messages=turns,
        tools=tuple(ToolSpec.model_validate(t) for t in given),
    )
    return ModelCall(
        selection=selection, request=request, output=output, messages=messages, tools=None if tools is None else given
    )


def conversation(raw: Any, *, subject: str = "") -> tuple[str, tuple[Message, ...]]:
    """(system prompt, conversation) of a message list: leading system messages form the prompt."""
    if not isinstance(raw, list) or not raw:
        msg = f"{subject}messages must be a non-empty list of {{'role', 'content'}} objects"
        raise StepInvalid(msg)
    system: list[str] = []
    turns: list[Message] = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping) or set(item) - _MESSAGE_KEYS:
            msg = f"{subject}messages[{index}] must be an object with role and content"
            raise StepInvalid(msg)
        if item.get("role") == "system":
            if turns or not isinstance(item.get("content"), str) or set(item) - {"role", "content"}:
                msg = f"{subject}messages[{index}]: system messages come first and hold only content text"
                raise StepInvalid(msg)
            system.append(item["content"])
            continue
        try:
            turns.append(Message.model_validate(dict(item)))
        except ValidationError as err:
            problem = err.errors()[0]
            where = ".".join(str(p) for p in problem["loc"])
            msg = f"{subject}messages[{index}].{where}: {problem['msg']} (roles: system, user, assistant, tool)"
            raise StepInvalid(msg) from None
    if not turns:
        msg = f"{subject}messages hold no user message after the system prompt"
        raise StepInvalid(msg)
    return "\n\n".join(system), tuple(turns)


def tool_list(raw: Any, *, subject: str) -> list[dict[str, Any]]:
    """The tools offered, each ``{"name": str, "description": str, "parameters": JSON Schema object}``."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        msg = f"{subject}tools must be a list of {{'name', 'description', 'parameters'}} objects"
        raise StepInvalid(msg)
    for index, item in enumerate(raw):
        if (
            not isinstance(item, Mapping)
            or set(item) != {"name", "description", "parameters"}
            or not isinstance(item["name"], str)
            or not isinstance(item["description"], str)
            or not isinstance(item["parameters"], dict)
        ):
            msg = (
                f"{subject}tools[{index}] must be {{'name': str, 'description': str, 'parameters': JSON Schema object}}"
            )
            raise StepInvalid(msg)
    return [dict(item) for item in raw]


async def ask(
    call: ModelCall,
    *,
    environ: Mapping[str, str],
    redactor: Redactor,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Completion:
    """The completion of ``call`` (raises :class:`ProviderError` or :class:`AgentFailure`)."""
    return await complete_once(call.selection, call.request, environ=environ, redactor=redactor, transport=transport)


@dataclass
class ModelOutcome:
    """How one attempt of the model operation ended."""

    state: NodeState
    message: str = ""
    exit: dict[str, Any] = field(default_factory=dict)
    """:meth:`ModelCall.record` with the outcome: journaled with ``node_finished``."""
    text: str | None = None
    """The redacted answer text (None when no completion came)."""
    value: Any = None
    """The typed answer, the tool calls, or None (see the module docstring)."""
    artifacts: dict[str, str] = field(default_factory=dict)


async def run_model(
    call: ModelCall,
    *,
    folder: Path,
    environ: Mapping[str, str],
    cancel: asyncio.Event,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout_seconds: float | None = None,
    calls: ModelCalls | None = None,
    key: str | None = None,
) -> ModelOutcome:
    """One attempt of ``call`` whose files go to ``folder`` (which exists). Never raises for a
    failing completion: the outcome's state and message say how it ended. ``calls`` hears of the
    call (see the module docstring); a budget's :class:`~rho_notebook.errors.BudgetExceeded`
    propagates, the request unsent."""
    redactor = Redactor()
    if calls is not None:
        await calls.before_call(
            max_output_tokens=output_limit(call.selection.settings, call.request.reasoning), key=key
        )
    started = time.monotonic()
    record = call.record()
    work = ask(call, environ=environ, redactor=redactor, transport=transport)
    try:
        completion = await _unless_cancelled(work, cancel, timeout_seconds)
    except (ProviderError, AgentFailure) as err:
        record.update(outcome="failure", failure_kind=err.kind, duration_ms=_ms(started))
        return ModelOutcome(NodeState.FAILURE, f"model {err.kind}: {redactor.text(err.message)}", record)
    except TimeoutError:
        record.update(outcome="failure", failure_kind="node_timeout", duration_ms=_ms(started))
        return ModelOutcome(NodeState.FAILURE, f"timed out after {timeout_seconds:g} s", record)
    if completion is None:
        record.update(outcome="cancellation", duration_ms=_ms(started))
        return ModelOutcome(NodeState.CANCELLATION, "cancelled; the in-flight model request was stopped", record)
    if calls is not None:
        selection = call.selection
        await calls.after_call(call_record(selection.provider, selection.model, completion, began=started, key=key))
    record.update(
        outcome="success",
        answered_by=completion.model,
        stop_reason=completion.stop_reason,
        truncated=completion.truncated,
        input_tokens=completion.usage.input_tokens,
        output_tokens=completion.usage.output_tokens,
        retries=len(completion.retries),
        duration_ms=_ms(started),
    )
    text = redactor.text(completion.message.content)
    await asyncio.to_thread(_write_completion, folder, completion, text)
    outcome = ModelOutcome(
        NodeState.SUCCESS, "", record, text, None, {"completion": COMPLETION_FILE, "answer": ANSWER_TEXT_FILE}
    )
    if call.tools:
        asked = completion.message.tool_calls
        outcome.value = {
            "content": text,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in asked],
        }
    elif call.output is not None:
        try:
            outcome.value = parse_typed_answer(text, call.output)
        except AnswerError as err:
            record.update(outcome="failure", failure_kind=err.kind)
            outcome.state = NodeState.FAILURE
            outcome.message = f"model {err.kind}: {err.message} (the completion is in {COMPLETION_FILE})"
    return outcome


async def _unless_cancelled(
    work: Coroutine[Any, Any, Completion], cancel: asyncio.Event, timeout: float | None
) -> Completion | None:
    """``work``'s result, or None when ``cancel`` is set first; raises TimeoutError after
    ``timeout`` seconds. ``work`` is cancelled when it does not finish."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, waiter, return_exceptions=True)
    if task.cancelled():
        if cancel.is_set():
            return None
        raise TimeoutError
    return task.result()


@dataclass(frozen=True)
class KeyedCalls:
    """``calls`` with every call keyed ``key`` unless it has a key of its own: an item graph's
    aggregate instance ``STEP[i]`` reports under the aggregate's attempt, keyed by the instance."""

    calls: ModelCalls
    key: str

    async def before_call(self, *, max_output_tokens: int | None, key: str | None = None) -> None:
        await self.calls.before_call(max_output_tokens=max_output_tokens, key=key or self.key)

    async def after_call(self, call: Mapping[str, Any]) -> None:
        await self.calls.after_call(call if call.get("key") else {**call, "key": self.key})


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


def _write_completion(folder: Path, completion: Completion, text: str) -> None:
    record = completion.model_dump(mode="json")
    record["usage"] = completion.usage.reported_fields()  # as before the ledger when nothing more was reported
    record["message"]["content"] = text
    atomic_write_json(folder / COMPLETION_FILE, record)
    atomic_write(folder / ANSWER_TEXT_FILE, text.encode())
