"""The calls a flow makes and the preset workflows around them.

Functions (OpenRath's names): :func:`run_session_loop` (one agent loop with tools),
:func:`run_session_compress` (a shorter user-side session), :func:`select_session` (one routing
request) and :func:`parse_selection`. Presets: :class:`Agent`, :class:`Compressor`,
:class:`Selector`, each a :class:`~rho_notebook.flow.Workflow` wrapping one
:class:`~rho_notebook.flow.AgentParam` and one of those functions.

Every model call is one step under its key (:mod:`rho_notebook.flow.keys`), sent to the script
tier inside a run and to the in-memory backend outside one (:mod:`rho_notebook.flow.backend`).
A step depends (DAG edges) on the steps whose answers its input session holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rho_notebook.flow import keys
from rho_notebook.flow._errors import FlowError
from rho_notebook.flow.backend import ModelCall, Tool, ask, run_tool, transcript
from rho_notebook.flow.module import AgentParam, EmptyWorkflow, Workflow
from rho_notebook.flow.session import Message, Session

__all__ = [
    "Agent",
    "Compressor",
    "Selector",
    "run_session_loop",
    "run_session_compress",
    "select_session",
    "parse_selection",
    "COMPRESS_PROMPT",
    "SELECT_PROMPT",
    "MAX_TURNS",
]

MAX_TURNS = 8
"""Default limit of model calls in one :func:`run_session_loop`."""
COMPRESS_PROMPT = (
    "You compress conversations. Rewrite the conversation you are given as one self-contained "
    "message from the user that keeps every fact, decision and open question needed to continue. "
    "Answer with that message only."
)
"""The system prompt of :class:`Compressor` when none is given."""
SELECT_PROMPT = (
    "You route a conversation to the workflow that should handle it next. Answer with the number of "
    "the best candidate only, or -1 when none applies."
)
"""The system prompt of :class:`Selector` when none is given."""
_FIRST_INTEGER = re.compile(r"-?[0-9]+")


def _call(session: Session, param: AgentParam) -> tuple[keys.KeyBook, str, Session]:
    """The book, module path and book-carrying session of a call by ``param`` on ``session``."""
    if not isinstance(session, Session):
        msg = f"expected a Session, got {type(session).__name__}"
        raise TypeError(msg)
    if not isinstance(param, AgentParam):
        msg = f"expected an AgentParam, got {type(param).__name__}"
        raise TypeError(msg)
    book = keys.book_for(session)
    return book, book.path_of(param), session.bound_to(book)


def _messages(param: AgentParam, messages: Sequence[Message]) -> tuple[dict[str, Any], ...]:
    """The request's messages: the agent's system prompt (inline agents), then the conversation."""
    head = [{"role": "system", "content": param.system}] if param.system is not None else []
    return (*head, *(m.to_dict() for m in messages))


def run_session_loop(
    session: Session,
    agent: AgentParam,
    *,
    tools: Sequence[Tool] | None = None,
    max_turns: int = MAX_TURNS,
) -> Session:
    """Run ``agent`` on ``session`` until it answers without calling a tool; the longer session.

    Each turn is one model call (a ``model`` step inside a run) with the agent's system prompt
    followed by the session's messages and the tools offered; when the answer asks for tools, each
    call runs as a verified ``command`` step (:class:`~rho_notebook.flow.Tool`), its output becomes
    a tool message, and the next turn goes. The output session holds the input's messages, then
    every assistant and tool message of the loop; its parent is ``session``. A catalog agent
    (``AgentParam("id")``) is one ``agent`` step on the conversation's text, with its own tools.

    Raises
    ------
    FlowError
        A call failed, ``max_turns`` calls went by without a final answer, or ``tools`` were given
        to a catalog agent.
    """
    book, path, current = _call(session, agent)
    offered = {tool.name: tool for tool in tools or ()}
    if agent.agent is not None and offered:
        msg = f"{path}: catalog agent {agent.agent!r} uses its own tools; pass tools only to inline agents (system=...)"
        raise FlowError(msg)
    specs = tuple(tool.spec() for tool in offered.values()) or None
    added: list[Message] = []
    after = current.steps
    for _ in range(max_turns):
        key = book.next_key(path, current.branch)
        call = ModelCall(
            key=key,
            messages=_messages(agent, (*current.messages, *added)),
            provider=agent.provider,
            model=agent.model,
            tools=specs,
            agent=agent.agent,
        )
        reply = ask(call, after=after)
        added.append(Message("assistant", reply.content, tool_calls=reply.tool_calls))
        after = (key,)
        if not reply.tool_calls:
            return current.answered((*current.messages, *added), steps=after)
        used = []
        for asked in reply.tool_calls:
            tool = offered.get(asked.name)
            if tool is None:
                known = ", ".join(sorted(offered)) or "none"
                added.append(
                    Message(
                        "tool",
                        f"there is no tool {asked.name!r} (tools: {known})",
                        tool_call_id=asked.id,
                        tool_name=asked.name,
                        is_error=True,
                    )
                )
                continue
            tool_key = book.next_key(path, current.branch)
            added.append(run_tool(tool_key, tool, asked, asked_by=key))
            used.append(tool_key)
        after = (key, *used)
    msg = (
        f"{path}: the agent made {max_turns} model calls without a final answer; raise max_turns or give it fewer tools"
    )
    raise FlowError(msg)


def run_session_compress(session: Session, agent: AgentParam) -> Session:
    """One call asking ``agent`` to rewrite ``session`` as one user message; a new session holding
    only that message, on the same branch, whose parent is ``session``."""
    book, path, current = _call(session, agent)
    key = book.next_key(path, current.branch)
    ask_for = Message("user", "Compress this conversation:\n\n" + transcript([m.to_dict() for m in current.messages]))
    call = ModelCall(
        key=key,
        messages=_messages(agent, (ask_for,)),
        provider=agent.provider,
        model=agent.model,
        agent=agent.agent,
    )
    reply = ask(call, after=current.steps)
    return current.answered((Message("user", reply.content),), steps=(key,))


def select_session(session: Session, router: AgentParam, *descriptions: str) -> int | None:
    """One request (tools disabled) asking ``router`` which candidate fits ``session``; its index.

    The request shows the conversation and a menu ``0. DESCRIPTION``, ``1. ...``; the answer's first
    integer is the choice (:func:`parse_selection`). No session is made and no lineage stamped.

    Returns
    -------
    int | None
        The zero-based index, or None for no match (no integer, negative, out of range, no candidates:
        then no request is made).
    """
    book, path, current = _call(session, router)
    if not descriptions:
        return None
    menu = "\n".join(
        f"{index}. {' '.join(str(text).split()) or '(no description)'}" for index, text in enumerate(descriptions)
    )
    question = Message(
        "user",
        "Conversation:\n\n"
        + transcript([m.to_dict() for m in current.messages])
        + f"\n\nCandidates:\n{menu}\n\nAnswer with the number of the best candidate, or -1 if none applies.",
    )
    key = book.next_key(path, current.branch)
    call = ModelCall(
        key=key,
        messages=_messages(router, (question,)),
        provider=router.provider,
        model=router.model,
        agent=router.agent,
    )
    return parse_selection(ask(call, after=current.steps).content, len(descriptions))


def parse_selection(text: str, count: int) -> int | None:
    """The first integer token of ``text`` as an index into ``count`` candidates; None when there is
    no integer, it is negative, or it is ``count`` or more."""
    found = _FIRST_INTEGER.search(text)
    if found is None:
        return None
    index = int(found.group())
    return index if 0 <= index < count else None


# -- presets ----------------------------------------------------------------------------------------


class Agent(Workflow):
    """One agent loop with tools: ``forward`` is :func:`run_session_loop` of ``self.agent``.

    Parameters
    ----------
    system, agent
        An inline system prompt, or a catalog agent id (exactly one).
    provider, model
        Placement (see :class:`~rho_notebook.flow.AgentParam`).
    tools
        :class:`~rho_notebook.flow.Tool` values; :meth:`register_tool` adds more.
    description
        Routing text for a :class:`Selector`.
    """

    def __init__(
        self,
        system: str | None = None,
        provider: str | None = None,
        *,
        agent: str | None = None,
        model: str | None = None,
        tools: Sequence[Tool] = (),
        description: str | None = None,
        max_turns: int = MAX_TURNS,
    ) -> None:
        super().__init__(description=description)
        self.agent = AgentParam(agent, system=system, provider=provider, model=model)
        self.tools: list[Tool] = []
        self.max_turns = max_turns
        for tool in tools:
            self.register_tool(tool)

    def register_tool(self, tool: Tool) -> Agent:
        """Offer ``tool``; one of the same name is replaced (tools are unique by name). ``self``."""
        if not isinstance(tool, Tool):
            msg = f"register_tool takes a rho_notebook.flow.Tool, got {type(tool).__name__}"
            raise TypeError(msg)
        self.tools = [t for t in self.tools if t.name != tool.name] + [tool]
        return self

    def forward(self, session: Session) -> Session:
        return run_session_loop(session, self.agent, tools=self.tools, max_turns=self.max_turns)


class Compressor(Workflow):
    """Shortens a session: ``forward`` is :func:`run_session_compress` of ``self.agent``."""

    def __init__(
        self,
        system: str | None = None,
        provider: str | None = None,
        *,
        model: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(description=description)
        self.agent = AgentParam(system=system or COMPRESS_PROMPT, provider=provider, model=model)

    def forward(self, session: Session) -> Session:
        return run_session_compress(session, self.agent)


class Selector(Workflow):
    """Chooses the next workflow: ``forward(session, *workflows)`` returns one of them or an
    :class:`~rho_notebook.flow.EmptyWorkflow`, never a session.

    Candidates are the workflows passed to :meth:`forward`, else those given here as
    ``candidates`` (which :meth:`~rho_notebook.flow.Workflow.compile` lists with their
    descriptions; pass the registered siblings, e.g. ``candidates=(self.triage, self.resolve)``).
    """

    def __init__(
        self,
        system: str | None = None,
        provider: str | None = None,
        *,
        model: str | None = None,
        candidates: Sequence[Workflow] = (),
        description: str | None = None,
    ) -> None:
        super().__init__(description=description)
        self.router = AgentParam(system=system or SELECT_PROMPT, provider=provider, model=model)
        for candidate in candidates:
            if not isinstance(candidate, Workflow):
                msg = f"Selector candidates are Workflows, got {type(candidate).__name__}"
                raise TypeError(msg)
        self.candidates: tuple[Workflow, ...] = tuple(candidates)

    def forward(self, session: Session, *workflows: Workflow) -> Workflow:  # type: ignore[override]
        """The chosen workflow (not called), or an EmptyWorkflow for no match."""
        choices = workflows or self.candidates
        index = select_session(session, self.router, *(w.description for w in choices))
        return EmptyWorkflow() if index is None else choices[index]

    def __call__(self, session: Session, *workflows: Workflow) -> Workflow:  # type: ignore[override]
        return self.forward(session, *workflows)
