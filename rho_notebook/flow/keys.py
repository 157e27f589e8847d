"""Step keys of a flow's model and tool calls: ``<module path>[/<branch>]#<n>``.

Every model call (and tool call) a flow makes is one step of the script tier, journaled under its
key; on resume the same key with the same inputs replays. The key must therefore come out the
same on every run of the same flow, whatever the thread timing. The rule:

* **module path**: the dotted attribute path of the :class:`~rho_notebook.flow.AgentParam` making
  the call, from the root, prefixed by the root's name: ``team.research.writer`` for
  ``team.research.writer``. The root's name is the ``--flow NAME`` / ``%%flow NAME`` of a run, or
  the root class name in snake case (``ReviewFlow`` -> ``review_flow``). An AgentParam that is
  not registered in the tree (a local variable) is keyed ``<root>._unnamed``; a call made outside
  any workflow, ``flow._unnamed``.
* **branch**: empty on the root session, ``f1``, ``f2``, ... for its forks, ``f1.2`` for the second
  fork of ``f1`` (:meth:`~rho_notebook.flow.Session.fork`); the branch travels in the session.
* **n**: the call's number among the calls of that (module path, branch), from 1; a tool call
  takes the next number after the model call that asked for it.

So ``team.research.writer/f1#2`` is the second call of ``writer`` on branch ``f1``. Grammar
(:data:`KEY`)::

    [a-z_][a-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*(/f[0-9]+(\\.[0-9]+)*)?#[0-9]+

A flow key always ends in ``#<n>``, and ``#`` is outside the step-id grammar an author's
``step_id=`` follows (:data:`rho_notebook.script.channel.STEP_ID`, defined once in the shim). So a
flow's keys and the ids of steps a flow module calls itself (``run_step(..., step_id=...)``) share
one namespace in the journal and can never be the same key; the shim refuses a built key that
is a step id.

Calls of one (module path, branch) must happen one after another (as they do in one thread);
calls on different branches may run at the same time. Two threads calling the same agent on the
same branch (a session not forked before it went to a pool, or a fresh ``Session`` made inside a
thread) get their numbers in thread order, which can differ between runs: ``validate`` warns
where a flow starts threads without any ``fork()``.

The counters live in a :class:`KeyBook`, made when a root workflow is called (:func:`run_flow`,
or ``workflow(session)`` on a session that is not inside a running flow) and carried by every
session derived from the root's input. Inside a run, a second root call of the same name in the
same process is named ``<name>_2``, ``<name>_3`` ..., so its keys never repeat the first's.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from rho_notebook.flow._errors import FlowError

__all__ = ["KEY", "UNNAMED", "KeyBook", "root_name", "book_for", "rooted", "inside_flow"]

KEY = re.compile(r"[a-z_][a-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(/f[0-9]+(\.[0-9]+)*)?#[0-9]+")
"""The grammar of a flow step key (matched whole)."""
UNNAMED = "_unnamed"
"""The path segment of calls by an AgentParam that is not registered in the tree."""
_STANDALONE_ROOT = "flow"


class _Tree(Protocol):
    def named_modules(self) -> list[tuple[str, Any]]: ...


class KeyBook:
    """The key counters of one root call: (module path, branch) -> calls so far; thread-safe."""

    def __init__(self, name: str, root: _Tree | None) -> None:
        self.name = name
        """The root's name, the first segment of every key."""
        self.root = root
        self.active = True
        """True while the root call runs."""
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}

    def path_of(self, param: object) -> str:
        """The module path of ``param`` (an AgentParam) in the root's tree, first found in
        depth-first pre-order; ``<root>._unnamed`` when it is not registered."""
        if self.root is not None:
            for path, module in self.root.named_modules():
                for attribute, agent in module.named_agents():
                    if agent is param:
                        return ".".join(p for p in (self.name, path, attribute) if p)
        return f"{self.name}.{UNNAMED}"

    def next_key(self, path: str, branch: str) -> str:
        """The next key of ``path`` on ``branch``."""
        with self._lock:
            n = self._counts.get((path, branch), 0) + 1
            self._counts[(path, branch)] = n
        key = f"{path}/{branch}#{n}" if branch else f"{path}#{n}"
        if KEY.fullmatch(key) is None:
            msg = f"step key {key!r} does not follow the flow key grammar; name modules and agents with identifiers"
            raise FlowError(msg)
        return key


def root_name(text: str) -> str:
    """``text`` as a key's first segment: snake case, lower case, ``[a-z_][a-z0-9_]*``."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", text).lower()
    cleaned = re.sub(r"[^a-z0-9_]", "_", snake)
    if not cleaned or not re.match(r"[a-z_]", cleaned):
        cleaned = "_" + cleaned
    return cleaned


class _Books:
    """Process-wide state: the active books, each thread's running roots, names used in a run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: list[KeyBook] = []
        self.used: dict[str, int] = {}
        self.local = threading.local()
        self.standalone: KeyBook | None = None

    def stack(self) -> list[KeyBook]:
        found: list[KeyBook] | None = getattr(self.local, "stack", None)
        if found is None:
            found = []
            self.local.stack = found
        return found


_BOOKS = _Books()


def _running(session: object) -> KeyBook | None:
    """The running root a call on ``session`` belongs to: the session's book (while its root runs),
    else the root running in this thread, else the only running root (a fresh session handed to a
    pool thread); None when no root, or several, run."""
    book = getattr(session, "_book", None)
    if isinstance(book, KeyBook) and book.active:
        return book
    stack = _BOOKS.stack()
    if stack:
        return stack[-1]
    with _BOOKS.lock:
        return _BOOKS.active[0] if len(_BOOKS.active) == 1 else None


def inside_flow(session: object) -> bool:
    """Whether a call on ``session`` belongs to a running root (a workflow called then is nested)."""
    return _running(session) is not None


def book_for(session: object) -> KeyBook:
    """The book a call on ``session`` counts in: its running root's, else the process's standalone
    book (root name ``flow``)."""
    book = _running(session)
    if book is not None:
        return book
    with _BOOKS.lock:
        if _BOOKS.standalone is None:
            _BOOKS.standalone = KeyBook(_STANDALONE_ROOT, None)
        return _BOOKS.standalone


@contextmanager
def rooted(root: _Tree, *, name: str, unique: Callable[[], bool]) -> Iterator[KeyBook]:
    """A new book for one root call of ``root`` named ``name`` (a valid first key segment), active
    and on this thread's stack while the block runs. ``unique()`` true: a name already used in this
    process gets ``_2``, ``_3`` ... (inside a run, where a key may be journaled only once)."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) is None:
        msg = f"flow name {name!r} must be lower-case letters, digits and '_' (not starting with a digit)"
        raise FlowError(msg)
    with _BOOKS.lock:
        if unique():
            count = _BOOKS.used.get(name, 0) + 1
            _BOOKS.used[name] = count
            if count > 1:
                name = f"{name}_{count}"
        book = KeyBook(name, root)
        _BOOKS.active.append(book)
    stack = _BOOKS.stack()
    stack.append(book)
    try:
        yield book
    finally:
        stack.pop()
        book.active = False
        with _BOOKS.lock:
            _BOOKS.active.remove(book)
