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
from dataclasses import dataclass
from typing import Any

from rho_notebook.flow import keys
from rho_notebook.flow._errors import FlowError
from rho_notebook.flow.backend import ModelCall, Tool, ask, in_run, run_tool, transcript
from rho_notebook.flow.module import AgentParam, EmptyWorkflow, Workflow
from rho_notebook.flow.providers import resolve_provider
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


@dataclass(frozen=True)
class _Call:
    """Who makes a flow call and where: its key book, module path, book-carrying input session,
    the AgentParam and the provider the call goes to."""

    book: keys.KeyBook
    path: str
    session: Session
    param: AgentParam
    provider: str | None

    def model_call(
        self, key: str, messages: Sequence[Message], tools: tuple[dict[str, Any], ...] | None = None
    ) -> ModelCall:
        """The request: the agent's system prompt (inline agents), then ``messages``."""
        param = self.param
        head = [{"role": "system", "content": param.system}] if param.system is not None else []
        return ModelCall(
            key=key,
            messages=(*head, *(m.to_dict() for m in messages)),
            provider=self.provider,
            model=param.model,
            tools=tools,
            agent=param.agent,
        )


def _call(session: Session, agent: AgentParam | Session, provider: str | None) -> _Call:
    """The :class:`_Call` of ``agent`` (an AgentParam, or an agent session: the one of an
    AgentParam stands for it, any other is an unregistered inline agent) on ``session``, sent to
    ``provider`` (None: the AgentParam's own placement)."""
    if not isinstance(session, Session):
        msg = f"expected a Session, got {type(session).__name__}"
        raise TypeError(msg)
    if isinstance(agent, Session):
        owner = agent.owner
        param = owner if isinstance(owner, AgentParam) else AgentParam(agent)
    elif isinstance(agent, AgentParam):
        param = agent
    else:
        msg = f"expected an AgentParam or its agent_session, got {type(agent).__name__}"
        raise TypeError(msg)
    book = keys.book_for(session)
    path = book.path_of(param)
    if provider is not None:
        if not isinstance(provider, str) or not provider:
            msg = f"{path}: agent_provider= must be a provider name in settings (e.g. 'local'), got {provider!r:.60}"
            raise TypeError(msg)
        if param.agent is not None and provider != param.provider:
            msg = (
                f"{path}: catalog agent {param.agent!r} runs on the provider its definition names; drop agent_provider="
            )
            raise FlowError(msg)
        resolve_provider(provider, where=f"{path}: agent_provider")
    return _Call(book, path, session.bound_to(book), param, provider if provider is not None else param.provider)


def run_session_loop(
    user_session: Session,
    agent_session: AgentParam | Session,
    *,
    agent_provider: str | None = None,
    tools: Sequence[Tool] | None = None,
    max_turns: int = MAX_TURNS,
) -> Session:
    """Run the agent on ``user_session`` until it answers without calling a tool; the longer session.

    The agent is an :class:`~rho_notebook.flow.AgentParam` (``run_session_loop(s, self.writer)``)
    or, as OpenRath writes it, its ``agent_session`` with ``agent_provider=`` (``run_session_loop(s,
    self.writer.agent_session, agent_provider=self.writer.provider)``): the same call, step key and
    digest. ``agent_provider`` (a provider name; None: the AgentParam's) places this call only.

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
    made = _call(user_session, agent_session, agent_provider)
    book, path, current = made.book, made.path, made.session
    offered = {tool.name: tool for tool in tools or ()}
    if made.param.agent is not None and offered:
        msg = f"{path}: catalog agent {made.param.agent!r} uses its own tools; pass tools only to inline agents (system=...)"
        raise FlowError(msg)
    specs = tuple(tool.spec() for tool in offered.values()) or None
    added: list[Message] = []
    after = current.steps
    for _ in range(max_turns):
        key = book.next_key(path, current.branch)
        reply = ask(made.model_call(key, (*current.messages, *added), specs), after=after)
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


def run_session_compress(
    user_session: Session, agent_session: AgentParam | Session, *, agent_provider: str | None = None
) -> Session:
    """One call asking the agent (as for :func:`run_session_loop`) to rewrite ``user_session`` as one
    user message; a new session holding only that message, on the same branch, whose parent is
    ``user_session``."""
    made = _call(user_session, agent_session, agent_provider)
    current = made.session
    key = made.book.next_key(made.path, current.branch)
    ask_for = Message("user", "Compress this conversation:\n\n" + transcript([m.to_dict() for m in current.messages]))
    reply = ask(made.model_call(key, (ask_for,)), after=current.steps)
    return current.answered((Message("user", reply.content),), steps=(key,))


def select_session(
    session: Session, router: AgentParam | Session, *descriptions: str, agent_provider: str | None = None
) -> int | None:
    """One request (tools disabled) asking ``router`` (an AgentParam or its agent session) which
    candidate fits ``session``; its index.

    The request shows the conversation and a menu ``0. DESCRIPTION``, ``1. ...``; the answer's first
    integer is the choice (:func:`parse_selection`). No session is made and no lineage stamped.

    Returns
    -------
    int | None
        The zero-based index, or None for no match (no integer, negative, out of range, no candidates:
        then no request is made).
    """
    made = _call(session, router, agent_provider)
    current = made.session
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
    key = made.book.next_key(made.path, current.branch)
    return parse_selection(ask(made.model_call(key, (question,)), after=current.steps).content, len(descriptions))


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
        An inline system prompt (``system_prompt=`` is OpenRath's name for it), or a catalog agent
        id (exactly one).
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
        system_prompt: str | None = None,
    ) -> None:
        super().__init__(description=description)
        system = _one_prompt(system, system_prompt, "Agent")
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
        system_prompt: str | None = None,
    ) -> None:
        super().__init__(description=description)
        system = _one_prompt(system, system_prompt, "Compressor")
        self.agent = AgentParam(system=system or COMPRESS_PROMPT, provider=provider, model=model)

    def forward(self, session: Session) -> Session:
        return run_session_compress(session, self.agent)


class Selector(Workflow):
    """Chooses the next workflow: ``forward(session, *workflows)`` returns one of them or an
    :class:`~rho_notebook.flow.EmptyWorkflow`, never a session.

    Candidates are the workflows passed to :meth:`forward`, else those given here as
    ``candidates`` (which :meth:`~rho_notebook.flow.Workflow.compile` lists with their
    descriptions; pass the registered siblings, e.g. ``candidates=(self.triage, self.resolve)``).

    The one positional argument is the provider, as in OpenRath's ``Selector(provider)``; the
    routing prompt is ``system=`` (or ``system_prompt=``). Positional use that reads like the old
    ``Selector(prompt, provider)`` (two positionals, or a "provider" holding spaces, which no
    provider name in settings does) raises :class:`~rho_notebook.flow.FlowError` saying what to
    write, instead of silently routing with the wrong prompt. ``on_event`` is stored and not used,
    as in OpenRath v1.3.0.
    """

    def __init__(
        self,
        provider: str | None = None,
        *extra: object,
        system: str | None = None,
        system_prompt: str | None = None,
        model: str | None = None,
        candidates: Sequence[Workflow] = (),
        description: str | None = None,
        on_event: object | None = None,
    ) -> None:
        super().__init__(description=description)
        _selector_provider(provider, extra)
        system = _one_prompt(system, system_prompt, "Selector")
        self.on_event = on_event
        self.router = AgentParam(system=system or SELECT_PROMPT, provider=provider, model=model)
        for candidate in candidates:
            if not isinstance(candidate, Workflow):
                msg = f"Selector candidates are Workflows, got {type(candidate).__name__}"
                raise TypeError(msg)
        self.candidates: tuple[Workflow, ...] = tuple(candidates)

    def forward(self, session: Session, *workflows: Workflow) -> Workflow:  # type: ignore[override]
        """The chosen workflow (not called), or an EmptyWorkflow for no match.

        Called on a session outside any running flow (the seed's ``selector.forward(session, a,
        b)`` at top level), the selector is a root, as ``workflow(session)`` is: its request is
        keyed ``selector.router#1``, not ``flow._unnamed#1``."""
        choices = workflows or self.candidates
        descriptions = tuple(w.description for w in choices)
        if keys.inside_flow(session):
            index = select_session(session, self.router, *descriptions)
        else:
            with keys.rooted(self, name=keys.root_name(type(self).__name__), unique=in_run) as book:
                index = select_session(session.bound_to(book), self.router, *descriptions)
        return EmptyWorkflow() if index is None else choices[index]

    def __call__(self, session: Session, *workflows: Workflow) -> Workflow:  # type: ignore[override]
        return self.forward(session, *workflows)


def _one_prompt(system: str | None, system_prompt: str | None, who: str) -> str | None:
    """The inline prompt given as ``system=`` or as OpenRath's ``system_prompt=`` (not both)."""
    if system is not None and system_prompt is not None:
        msg = f"{who} takes the prompt once: system='...' or system_prompt='...' (the same thing), not both"
        raise FlowError(msg)
    return system if system is not None else system_prompt


def _selector_provider(provider: object, extra: tuple[object, ...]) -> None:
    """Refuse a :class:`Selector`'s positional arguments unless they are one provider name (see its
    docstring); resolve that name as :meth:`AgentParam.to` does."""
    if extra:
        shown = ", ".join(repr(a)[:40] for a in (provider, *extra))
        msg = (
            f"Selector({shown}): Selector takes one positional argument, the provider, as OpenRath's "
            "Selector(provider); write Selector('PROVIDER', system='ROUTING PROMPT') or use keywords"
        )
        raise FlowError(msg)
    if provider is None:
        return
    if not isinstance(provider, str) or not provider:
        msg = f"Selector(provider): the provider is a provider name in settings (e.g. 'local'), got {provider!r:.60}"
        raise TypeError(msg)
    if any(c.isspace() for c in provider):
        msg = (
            f"Selector({provider!r:.60}): the positional argument is the provider, as in OpenRath's "
            "Selector(provider), and a provider name has no spaces; pass a routing prompt as "
            "Selector(system='...') (and the provider as Selector('PROVIDER', system='...'))"
        )
        raise FlowError(msg)
    resolve_provider(provider, where="Selector(provider)")
