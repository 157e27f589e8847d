"""The value a flow passes between modules: :class:`Session`, messages with lineage and a branch.

A :class:`Session` is immutable as far as callers can see: every operation (:meth:`~Session.append`,
:meth:`~Session.fork`, :meth:`~Session.detach`, :meth:`~Session.merge`, and the agent calls of
:mod:`rho_notebook.flow.presets`) returns a new session and leaves its input as it was, so one
session can be handed to several branches, threads included.

**Lineage.** Every session has an :attr:`~Session.id` and the ids of the sessions it was made from
(:attr:`~Session.parents`): one for ``append``, ``fork`` and an agent call, two for ``merge``, none
for ``detach`` (which keeps the messages and cuts the history) and for a new session.

**Branches.** :meth:`~Session.fork` puts the copy on a child branch of its own: ``f1``, ``f2``, ...
for forks of a root-branch session, in fork order, ``f1.1``, ``f1.2`` for forks of ``f1``. The
count is kept per branch for every session derived from the same start (forking ``s`` and later
``s.append(...)`` gives ``f1`` then ``f2``, never ``f1`` twice), and the branch travels in the
session itself, so a thread pool (which does not copy context variables) still sees it. Step keys
(:mod:`rho_notebook.flow.keys`) count model calls per module path and branch: fork before handing
sessions to threads, and fork in a fixed order, and every branch's keys are the same on every run.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rho_notebook.flow._errors import FlowError

__all__ = ["ROLES", "Message", "ToolCall", "Session"]

ROLES = ("system", "user", "assistant", "tool")
"""The roles a message may have (leading system messages go before the agent's own prompt)."""
_SESSION_FORMAT = "rho-flow-session/1"


@dataclass(frozen=True)
class ToolCall:
    """One tool call an assistant message asked for."""

    id: str
    name: str
    arguments_json: str
    """The arguments as canonical JSON text (``null`` when the model sent no JSON object)."""

    @property
    def arguments(self) -> dict[str, Any] | None:
        """The decoded arguments (a fresh dict each time), or None."""
        value = json.loads(self.arguments_json)
        return value if isinstance(value, dict) else None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """From ``{"id", "name", "arguments"}`` as a model step's value holds it."""
        arguments = data.get("arguments")
        return cls(
            id=str(data.get("id", "")),
            name=str(data.get("name", "")),
            arguments_json=_canonical(arguments if isinstance(arguments, dict) else None),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Message:
    """One message: a role and its text, with the tool fields of assistant and tool messages."""

    role: str
    """``system``, ``user``, ``assistant`` or ``tool``."""
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    """Assistant only: the tool calls of this turn."""
    tool_call_id: str | None = None
    """Tool only: the call this message answers."""
    tool_name: str | None = None
    is_error: bool = False
    """Tool only: the call was refused or failed."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            msg = f"message role {self.role!r} is not one of {', '.join(ROLES)}"
            raise ValueError(msg)
        if not isinstance(self.content, str):
            msg = f"message content must be text, got {type(self.content).__name__}"
            raise TypeError(msg)

    def to_dict(self) -> dict[str, Any]:
        """The message as a model step sends it (only the fields that are set)."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.tool_name is not None:
            data["tool_name"] = self.tool_name
        if self.is_error:
            data["is_error"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """From the shape :meth:`to_dict` gives."""
        calls = data.get("tool_calls") or ()
        return cls(
            role=str(data.get("role", "")),
            content=str(data.get("content", "")),
            tool_calls=tuple(ToolCall.from_dict(call) for call in calls),
            tool_call_id=None if data.get("tool_call_id") is None else str(data["tool_call_id"]),
            tool_name=None if data.get("tool_name") is None else str(data["tool_name"]),
            is_error=data.get("is_error") is True,
        )


class _Forks:
    """How many forks each branch has had, shared by all sessions derived from one start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def child(self, branch: str) -> str:
        with self._lock:
            n = self._counts.get(branch, 0) + 1
            self._counts[branch] = n
        return f"f{n}" if not branch else f"{branch}.{n}"


class Session:
    """Messages with lineage and a branch; immutable (every operation returns a new session).

    Parameters
    ----------
    messages
        :class:`Message` values or ``{"role", "content", ...}`` dicts.
    """

    __slots__ = ("_messages", "_id", "_parents", "_branch", "_forks", "_book", "_after", "_owner")

    _messages: tuple[Message, ...]
    _id: str
    _parents: tuple[str, ...]
    _branch: str
    _forks: _Forks
    _book: object | None
    _after: tuple[str, ...]
    _owner: object | None

    def __init__(self, messages: Iterable[Message | Mapping[str, Any]] = ()) -> None:
        items = tuple(m if isinstance(m, Message) else Message.from_dict(m) for m in messages)
        _fill(self, messages=items, parents=(), branch="", forks=_Forks(), book=None, after=())

    def _derive(
        self,
        *,
        messages: tuple[Message, ...] | None = None,
        parents: tuple[str, ...] | None = None,
        branch: str | None = None,
        book: object | None = None,
        after: tuple[str, ...] | None = None,
    ) -> Session:
        """A new session from this one: same branch, fork counts and key book unless given; parent:
        this session unless given."""
        made = Session.__new__(Session)
        _fill(
            made,
            messages=self._messages if messages is None else messages,
            parents=(self._id,) if parents is None else parents,
            branch=self._branch if branch is None else branch,
            forks=self._forks,
            book=self._book if book is None else book,
            after=self._after if after is None else after,
        )
        return made

    def __setattr__(self, name: str, value: object) -> None:
        msg = (
            f"a Session is immutable; {name!r} cannot be set (append, fork, merge and agent calls return new sessions)"
        )
        raise AttributeError(msg)

    def __delattr__(self, name: str) -> None:
        msg = f"a Session is immutable; {name!r} cannot be deleted"
        raise AttributeError(msg)

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    def from_user_message(cls, text: str) -> Session:
        """A new session holding one user message."""
        return cls([Message("user", text)])

    @classmethod
    def from_agent_prompt(cls, text: str) -> Session:
        """A new *agent* session holding one system message: the prompt of an agent, as OpenRath's
        ``Session.from_agent_prompt`` makes it for ``AgentParam(session, provider)``."""
        if not isinstance(text, str) or not text.strip():
            msg = f"Session.from_agent_prompt takes the agent's prompt as non-empty text, got {text!r:.60}"
            raise TypeError(msg)
        return cls([Message("system", text)])

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Session:
        """The session :meth:`to_json` gave (its messages, id, parents and branch; fork counts and the
        step-key book start afresh)."""
        made = cls(Message.from_dict(m) for m in data.get("messages", ()))
        branch = data.get("branch", "")
        parents = data.get("parents", ())
        object.__setattr__(made, "_branch", branch if isinstance(branch, str) else "")
        object.__setattr__(made, "_parents", tuple(str(p) for p in parents))
        if isinstance(data.get("id"), str) and data["id"]:
            object.__setattr__(made, "_id", data["id"])
        return made

    # -- reading --------------------------------------------------------------------------------

    @property
    def messages(self) -> tuple[Message, ...]:
        return self._messages

    @property
    def id(self) -> str:
        """This session's id (random; lineage only, never part of a step key or digest)."""
        return self._id

    @property
    def parents(self) -> tuple[str, ...]:
        """The ids of the sessions this one was made from."""
        return self._parents

    @property
    def branch(self) -> str:
        """``""`` on the root branch, ``f1``, ``f2``, ``f1.2`` ... after :meth:`fork`."""
        return self._branch

    @property
    def steps(self) -> tuple[str, ...]:
        """The keys of the flow steps whose answers this session holds: the steps the next flow call
        on it depends on (its DAG edges inside a run); empty for a session no flow call made."""
        return self._after

    @property
    def owner(self) -> object | None:
        """The :class:`~rho_notebook.flow.AgentParam` whose ``agent_session`` this is, else None
        (a flow call given this session as its agent keys the call by that AgentParam)."""
        return self._owner

    def text(self) -> str | None:
        """The last assistant message's text, or None when there is none."""
        for message in reversed(self._messages):
            if message.role == "assistant":
                return message.content
        return None

    def to_json(self) -> dict[str, Any]:
        """JSON data: ``{"format", "id", "parents", "branch", "messages": [{"role", "content", ...}]}``."""
        return {
            "format": _SESSION_FORMAT,
            "id": self._id,
            "parents": list(self._parents),
            "branch": self._branch,
            "messages": [m.to_dict() for m in self._messages],
        }

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        where = f", branch={self._branch!r}" if self._branch else ""
        return f"Session(messages={len(self._messages)}{where})"

    # -- deriving -------------------------------------------------------------------------------

    def append(self, role: str, text: str) -> Session:
        """A new session with one more message."""
        return self._derive(messages=(*self._messages, Message(role, text)))

    def extend(self, messages: Sequence[Message]) -> Session:
        """A new session with ``messages`` added at the end."""
        return self._derive(messages=(*self._messages, *messages))

    def fork(self) -> Session:
        """The same messages on a new child branch (``f1``, ``f2``, ... in fork order)."""
        return self._derive(branch=self._forks.child(self._branch))

    def to(self, target: str, *, spec: str | None = None) -> Session:
        """This session's messages bound for the backend ``target`` (OpenRath's ``Session.to``): a new
        session whose parent is this one.

        Only ``"local"`` exists here: tools run as verified commands in the run's workspace, in the
        folder their :class:`~rho_notebook.flow.Tool` ``cwd`` names. ``spec=`` (a per-branch
        sandbox folder in OpenRath) is refused rather than ignored: give each branch's tools their
        ``cwd`` instead (docs/flows.md, "Differences from OpenRath").

        Raises
        ------
        FlowError
            ``target`` is not ``"local"``, or ``spec`` is given.
        """
        if target != "local":
            msg = f"Session.to({target!r:.40}): the only backend here is 'local' (tools run as verified commands in the run's workspace)"
            raise FlowError(msg)
        if spec is not None:
            msg = (
                f"Session.to('local', spec={spec!r:.60}): a per-session sandbox folder is not supported; "
                "give the branch's tools a folder with Tool(..., cwd='//FOLDER') instead"
            )
            raise FlowError(msg)
        return self._derive()

    def owned_by(self, owner: object) -> Session:
        """This session's messages as the agent session of ``owner`` (an AgentParam), parent this
        session: what :attr:`AgentParam.agent_session` gives; a flow author does not call it."""
        made = self._derive(messages=self._messages)
        object.__setattr__(made, "_owner", owner)
        return made

    def detach(self) -> Session:
        """The same messages and branch without history: no parents."""
        return self._derive(parents=())

    def merge(self, other: Session) -> Session:
        """This session's messages followed by ``other``'s, on this session's branch; both are parents."""
        if not isinstance(other, Session):
            msg = f"merge takes a Session, got {type(other).__name__}"
            raise TypeError(msg)
        return self._derive(
            messages=(*self._messages, *other._messages),
            parents=(self._id, other._id),
            after=tuple(dict.fromkeys((*self._after, *other._after))),
        )

    # -- the flow layer's --------------------------------------------------------------------------

    def bound_to(self, book: object) -> Session:
        """This very session (same id and parents) counting its flow step keys in ``book``, a root
        call's :class:`~rho_notebook.flow.keys.KeyBook`: how a root workflow's input joins its flow."""
        made = self._derive(book=book, parents=self._parents)
        object.__setattr__(made, "_id", self._id)
        return made

    def answered(self, messages: tuple[Message, ...], *, steps: tuple[str, ...]) -> Session:
        """What a flow call on this session returns: ``messages``, on this session's branch and key
        book, made from this session and holding the answers of ``steps``."""
        return self._derive(messages=messages, after=steps)


def _fill(
    session: Session,
    *,
    messages: tuple[Message, ...],
    parents: tuple[str, ...],
    branch: str,
    forks: _Forks,
    book: object | None,
    after: tuple[str, ...],
) -> None:
    """Set every slot of a new ``session`` (a Session refuses ordinary attribute assignment)."""
    setter = object.__setattr__
    setter(session, "_messages", messages)
    setter(session, "_id", uuid.uuid4().hex[:16])
    setter(session, "_parents", parents)
    setter(session, "_branch", branch)
    setter(session, "_forks", forks)
    setter(session, "_book", book)
    setter(session, "_after", after)
    setter(session, "_owner", None)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
