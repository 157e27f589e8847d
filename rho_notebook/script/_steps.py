"""Step calls: keys, edges, argument checks, and the handle a step returns.

**Keys.** A step is journaled under its key. ``step_id="..."`` is the author's key and must
follow the step-id grammar :data:`STEP_ID`, ``[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}``, wide enough
for the ids CAO scripts derive from their items (``summarize:{name}``, ``fetch@v2/part``);
``call-N`` is reserved. Without one a call gets ``call-N``, N counting the calls made *without* an
id in this execution, from 1, under a lock (so explicit-id steps never shift the default keys of
the others). Thread timing decides which of two concurrent default-keyed calls gets which N, so
concurrent steps need explicit, stable ids. A key used twice in one execution is a
:class:`ValueError`. :mod:`rho_notebook.flow` builds its own keys (``team.writer/f1#2``: always
with a ``#``, which no step id holds, so the two never meet) and sends them through
:func:`_keyed_step` (public as :func:`rho_notebook.script.channel.keyed_step`). The grammar is
defined here once; the linter (``validate``) and the flow keys read it through
:mod:`rho_notebook.script.channel`.

**Edges.** A step's ``after`` keys (the live DAG's edges) are the handles in ``after=`` followed
by every :class:`StepHandle` found in the step's arguments (argv items, the prompt, messages,
tools, nested lists and dicts), and every object that *is* the ``.output`` or ``.value`` of an
earlier handle. "Is" means identity: the objects a step returns are remembered by ``id()`` (a
strong reference keeps the id from being reused) when they are a string of two or more
characters or a non-empty list or dict; shorter strings, numbers, booleans and None are shared by
the interpreter and cannot be told apart. Anything computed from an output (``f"{h.output}"``,
``h.output.split()``, an equal literal) is a new object and makes no edge: pass the object itself
or say ``after=[h]``. A handle standing in an argument is replaced by its ``.output``; in a
command's argv, such an item goes to the runner as ``{"step": KEY, "text": TEXT}`` (step data,
which the runner never lets an interpreter read as code), every other item as plain text.

**Where.** Every step request carries ``"where": "FILE:LINE"``, the call's place in the author's
code (the first frame outside this package and :mod:`rho_notebook.flow`; a frozen module by its
``//`` label). It is not part of the request's fingerprint nor of the step's digest: the runner
names it in refusals, and a refusal (``ValueError``) that does not name it gets it appended here.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import re
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from rho_notebook.script._channel import ChannelError, request, step_request
from rho_notebook.script.schema import Schema, is_schema

__all__ = ["StepHandle", "run_step", "run_command", "run_model", "get_inputs", "emit_output"]

_ID_CHARS = "A-Za-z0-9._:@/-"
STEP_ID_PATTERN = rf"[A-Za-z0-9][{_ID_CHARS}]{{0,127}}"
"""The grammar an author's ``step_id`` follows, matched whole (docs/scripts.md, "Step keys")."""
STEP_ID = re.compile(STEP_ID_PATTERN)
""":data:`STEP_ID_PATTERN`, compiled."""
STEP_ID_TEXT = re.compile(rf"[{_ID_CHARS}]*")
"""Text that may stand anywhere in a step id (the literal parts of an f-string id), matched whole."""
_DEFAULT_KEY = re.compile(r"call-[0-9]+")
RECOVERIES = ("rerun", "manual")
"""The ``recovery=`` values besides None (see docs/scripts.md)."""


@dataclass(frozen=True, eq=False)
class StepHandle:
    """What a step call returns: its result, from this execution or replayed from the journal.

    A step that ran and failed returns a handle too (``state="failure"``, ``message`` says why);
    check ``ok`` (or ``state``) before using ``output``. Handles compare by identity.
    """

    step_id: str
    """The step's key: the author's ``step_id`` or ``call-N``."""
    state: str
    """How the step settled: ``success``, ``failure``, ``cancellation`` or ``denial``."""
    output: Any
    """Agent steps: the answer text (or the validated value with ``output=``); command steps: stdout
    text; model steps: the completion text (or the validated value)."""
    value: Any
    """The validated value when the step declared ``output=``, command steps' ``{"exit_code", "stdout",
    "stderr"}``, else None (as the runner stores it)."""
    replayed: bool
    """True when the runner answered from the journal and nothing ran in this execution."""
    message: str = ""
    """The runner's message for a step that did not succeed."""

    @property
    def ok(self) -> bool:
        """Whether the step succeeded."""
        return self.state == "success"


class _Keys:
    """The keys used in this execution and the ``call-N`` counter."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._used: set[str] = set()

    def claim(self, step_id: str | None) -> str:
        if step_id is not None:
            _check_step_id(step_id)
        with self._lock:
            if step_id is None:
                self._count += 1
                key = f"call-{self._count}"
            else:
                key = step_id
            if key in self._used:
                msg = (
                    f"step id {key!r} is already used by an earlier step call of this run; "
                    "every step call needs its own id (derive it from the item, e.g. step_id=f'review-{n}')"
                )
                raise ValueError(msg)
            self._used.add(key)
            return key

    def claim_built(self, key: str) -> str:
        """Claim a key a caller built (``rho_notebook.flow``'s ``team.writer/f1#2``): any non-empty
        text without a NUL, outside the step-id grammar so it never meets an author's id."""
        if not isinstance(key, str) or not key or "\0" in key:
            msg = f"a built step key must be non-empty text, got {key!r:.60}"
            raise ValueError(msg)
        if STEP_ID.fullmatch(key) is not None:
            msg = f"a built step key must not be a plain step id, got {key!r}"
            raise ValueError(msg)
        with self._lock:
            if key in self._used:
                msg = f"step key {key!r} is already used by an earlier step call of this run"
                raise ValueError(msg)
            self._used.add(key)
            return key


def step_id_problem(step_id: str) -> str | None:
    """Why ``step_id`` is not an author's step id (it breaks :data:`STEP_ID` or is a reserved
    ``call-N``), or None; the one wording the shim and ``validate`` use."""
    if STEP_ID.fullmatch(step_id) is None:
        return (
            f"step_id {step_id!r:.140} is not a valid step id: it must match {STEP_ID_PATTERN} "
            "(a letter or digit, then up to 127 letters, digits or . _ : @ / -)"
        )
    if _DEFAULT_KEY.fullmatch(step_id) is not None:
        return f"step_id {step_id!r} is reserved for steps without an id (call-1, call-2, ...); choose another id"
    return None


def _check_step_id(step_id: object) -> None:
    if not isinstance(step_id, str):
        msg = f"step_id must be a string, got {type(step_id).__name__} {step_id!r:.60}"
        raise TypeError(msg)
    problem = step_id_problem(step_id)
    if problem is not None:
        raise ValueError(problem)


class _Lineage:
    """The objects earlier steps returned, by identity, and the step each came from."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[int, tuple[object, str]] = {}

    def remember(self, handle: StepHandle) -> None:
        with self._lock:
            for item in (handle.output, handle.value):
                if _trackable(item):
                    self._by_id[id(item)] = (item, handle.step_id)

    def source(self, item: object) -> str | None:
        if not _trackable(item):
            return None
        with self._lock:
            entry = self._by_id.get(id(item))
        return entry[1] if entry is not None and entry[0] is item else None


def _trackable(item: object) -> bool:
    if isinstance(item, str):
        return len(item) >= 2
    return isinstance(item, list | dict) and len(item) > 0


_KEYS = _Keys()
_LINEAGE = _Lineage()
_INPUTS_LOCK = threading.Lock()
_inputs: dict[str, Any] | None = None


def _resolve(item: Any, sources: list[str]) -> Any:
    """``item`` as JSON-ready data (handles replaced by their output, tuples by lists, paths by
    strings), adding the key of every handle or earlier output found in it to ``sources``."""
    if isinstance(item, StepHandle):
        sources.append(item.step_id)
        return _resolve(item.output, [])
    key = _LINEAGE.source(item)
    if key is not None:
        sources.append(key)
    if isinstance(item, list | tuple):
        return [_resolve(x, sources) for x in item]
    if isinstance(item, dict):
        return {k: _resolve(v, sources) for k, v in item.items()}
    if isinstance(item, os.PathLike):
        return os.fspath(item)
    return item


def _argv_item(item: Any, index: int, sources: list[str]) -> str | dict[str, str]:
    """One argv item as sent: literal text as a string; an earlier step's output (its handle or
    the very object) as ``{"step": KEY, "text": TEXT}``, so that the runner knows it is data and
    refuses it where an interpreter would read it as code (``sh -c``, ``python -c``)."""
    found: list[str] = []
    text = _resolve(item, found)
    if not isinstance(text, str):
        msg = f"run_command(argv=...) item {index} must be a string, got {type(text).__name__} {text!r:.60}"
        raise TypeError(msg)
    if not found:
        return text
    sources.extend(found)
    return {"step": found[0], "text": text}


def _check_json(value: Any, where: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as err:
        msg = f"{where} must be JSON data (str, int, float, bool, None, lists, dicts with str keys): {err}"
        raise TypeError(msg) from err


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        msg = f"{where} must be a non-empty string, got {type(value).__name__} {value!r:.60}"
        raise TypeError(msg)
    return value


def _positive(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        msg = f"{where} must be a positive integer, got {value!r:.60}"
        raise TypeError(msg)
    return value


def _schema(value: Any, where: str) -> Schema | None:
    if value is None:
        return None
    if not is_schema(value):
        msg = f"{where} must be a schema from rho_notebook.script.schema (schema.string(), ...) or None, got {value!r:.80}"
        raise TypeError(msg)
    result: Schema = value
    return result


def _budget(args: dict[str, Any], value: Any, where: str) -> dict[str, Any]:
    """``args`` with the step's ``budget`` (``{"tokens": N, "cost": USD, "wall": S}``) when one is
    given; the runner checks its limits (a bad one is refused, naming the step). Left out when
    None, so a call without one is the request it always was (its replay fingerprint too)."""
    if value is None:
        return args
    if not isinstance(value, dict):
        msg = f"{where} must be a dict such as {{'tokens': 20000, 'cost': 0.5}} or None, got {value!r:.80}"
        raise TypeError(msg)
    return {**args, "budget": dict(value)}


def _after_keys(after: StepHandle | Iterable[StepHandle] | None) -> list[str]:
    if after is None:
        return []
    items = [after] if isinstance(after, StepHandle) else list(after)
    for item in items:
        if not isinstance(item, StepHandle):
            msg = f"after= takes the StepHandles of earlier steps, got {type(item).__name__} {item!r:.60}"
            raise TypeError(msg)
    return [item.step_id for item in items]


def _step(
    kind: str,
    args: dict[str, Any],
    *,
    sources: list[str],
    step_id: str | None,
    recovery: str | None,
    after: StepHandle | Iterable[StepHandle] | None,
    checked: bool = False,
) -> StepHandle:
    """Send one step call; ``checked``: ``args`` are JSON data by construction."""
    if recovery is not None and recovery not in RECOVERIES:
        msg = f"recovery={recovery!r} is not a recovery policy; use None, 'rerun' or 'manual'"
        raise ValueError(msg)
    edges = list(dict.fromkeys([*_after_keys(after), *sources]))
    if not checked:
        _check_json(args, f"the arguments of this {kind} step")
    return _send(kind, _KEYS.claim(step_id), args, recovery=recovery, edges=edges)


def _keyed_step(kind: str, key: str, args: dict[str, Any], *, after: Sequence[str] = ()) -> StepHandle:
    """A step under a key the caller built (:mod:`rho_notebook.flow`'s calls); other packages reach it
    as :func:`rho_notebook.script.channel.keyed_step`.

    ``args`` go to the runner as given (already JSON data in the runner's shape for ``kind``:
    model ``{"messages", "provider", "model", "tools", "output"}``, agent ``{"agent", "prompt",
    "output"}``, command ``{"argv", "cwd", "timeout_seconds", "max_output_bytes"}``, argv items
    that are model output as ``{"step": KEY, "text": TEXT}``); ``after`` are the keys of the steps
    it depends on. The key must not match the step-id grammar, so built keys and authors' ids
    never meet; a key used twice in one execution is a :class:`ValueError`."""
    _check_json(args, f"the arguments of this {kind} step")
    return _send(kind, _KEYS.claim_built(key), args, recovery=None, edges=list(dict.fromkeys(after)))


def _caller() -> str | None:
    """``FILE:LINE`` of the call that made this step: the first frame outside this package,
    :mod:`rho_notebook.flow` and the standard library's thread machinery (a step called in a
    worker thread of a flow's fork names no line of the author's, and gets None). A file under the
    frozen modules folder (``sys.path[0]`` in a run) is shown by its workspace label,
    ``//scripts/review.py:12``."""
    frame: FrameType | None = inspect.currentframe()  # None in an interpreter without frame access
    while frame is not None and _own(str(frame.f_globals.get("__name__", ""))):
        frame = frame.f_back
    if frame is None:
        return None
    return f"{_label(frame.f_code.co_filename, sys.path[0] if sys.path else '')}:{frame.f_lineno}"


_OWN_MODULES = ("rho_notebook.script", "rho_notebook.flow", "threading", "concurrent.futures")
_owned: dict[str, bool] = {}
"""Module name -> whether :func:`_caller` skips its frames (a loop of steps asks the same few)."""
_labels: dict[tuple[str, str], str] = {}
"""(file, sys.path[0]) -> how :func:`_caller` names the file."""


def _own(module: str) -> bool:
    found = _owned.get(module)
    if found is None:
        found = _owned[module] = any(module == name or module.startswith(name + ".") for name in _OWN_MODULES)
    return found


def _label(path: str, root: str) -> str:
    """``path``, or its ``//`` label when it lies under the frozen modules folder ``root``."""
    found = _labels.get((path, root))
    if found is None:
        found = path
        if root and os.path.isabs(path) and path.startswith(os.path.join(root, "")):
            found = "//" + os.path.relpath(path, root).replace(os.sep, "/")
        if len(_labels) < 4096:
            _labels[(path, root)] = found
    return found


def _send(kind: str, key: str, args: dict[str, Any], *, recovery: str | None, edges: list[str]) -> StepHandle:
    where = _caller()
    fields = {"key": key, "kind": kind, "args": args, "recovery": recovery, "after": edges, "where": where}
    try:
        answer = step_request(fields)
    except ValueError as err:  # a refusal: name the call, if the runner did not
        if where is None or where in str(err):
            raise
        msg = f"{err} (step call at {where})"
        raise ValueError(msg) from None
    if answer.get("key", key) != key:
        msg = f"the rho-notebook runner answered step {answer.get('key')!r} to a call of step {key!r}"
        raise ChannelError(msg)
    handle = StepHandle(
        step_id=key,
        state=str(answer.get("state", "")),
        output=answer.get("output"),
        value=answer.get("value"),
        replayed=answer.get("replayed") is True,
        message=str(answer.get("message") or ""),
    )
    _LINEAGE.remember(handle)
    return handle


def run_step(
    agent: str,
    prompt: str | StepHandle,
    *,
    step_id: str | None = None,
    output: Schema | None = None,
    recovery: str | None = None,
    after: StepHandle | Iterable[StepHandle] | None = None,
    budget: dict[str, Any] | None = None,
) -> StepHandle:
    """Ask an agent of the workspace's catalog, as an agent node would; journaled and replayable.

    Parameters
    ----------
    agent
        The agent's id in the catalog (``rho-notebook agents``).
    prompt
        The prompt text; a :class:`StepHandle` (or an earlier step's ``.output`` object) stands
        for that step's output and draws an edge from it.
    step_id
        The step's key (:data:`STEP_ID_PATTERN`, e.g. ``summarize:report.md``); default
        ``call-N``. Required in practice for concurrent calls.
    output
        A schema from :mod:`rho_notebook.script.schema`: the answer must be JSON matching it, and
        the validated value is ``.value`` (and ``.output``).
    recovery
        ``None``: after a crash while the step ran, resume halts and asks; ``"rerun"``: it runs
        again without asking; ``"manual"``: resume always asks once the step has an attempt.
    after
        Handles of steps this one depends on beyond what its arguments show (DAG edges only).
    budget
        The step's own limits, ``{"tokens": N, "cost": USD, "wall": S}``, checked before each of
        its model calls as a node's budget is: a call that could pass one halts the run
        (``resume RUN --raise-budget STEP:tokens=N`` or ``--decide STEP=skip`` goes on). Not part
        of the digest: a raised budget replays the step's stored result.

    Returns
    -------
    StepHandle
        Also when the agent failed: ``state="failure"`` and ``message``; check ``.ok``.

    Raises
    ------
    DecisionRequired, ReplayDivergenceError, RunCancelled
        The runner stopped the run here; do not catch them.
    ValueError
        A bad ``step_id``, a key used twice, or arguments the runner refused (unknown agent, ...).
    TypeError
        Arguments of the wrong type.
    """
    sources: list[str] = []
    args = {
        "agent": _text(agent, "run_step(agent=...)"),
        "prompt": _text(_resolve(prompt, sources), "run_step(prompt=...)"),
        "output": _schema(output, "run_step(output=...)"),
    }
    args = _budget(args, budget, "run_step(budget=...)")
    return _step("agent", args, sources=sources, step_id=step_id, recovery=recovery, after=after)


def run_command(
    argv: Sequence[Any],
    *,
    step_id: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout_seconds: int,
    max_output_bytes: int,
    recovery: str | None = None,
    after: StepHandle | Iterable[StepHandle] | None = None,
) -> StepHandle:
    """Run a verified command, as a command node does (no shell); journaled and replayable.

    Parameters
    ----------
    argv
        The executable and its arguments, strings. ``argv[0]`` is resolved and verified like a
        command node's executable and must be literal text. An item that is an earlier step's
        handle (standing for its output) or its ``.output`` object draws an edge and is sent as
        that step's data: the runner refuses data where an interpreter reads code
        (``["sh", "-c", answer.output]``), as it refuses ``output()`` references in command nodes.
        Text built from an output (``f"--name={h.output}"``) is not recognised as data.
    step_id
        The step's key; see :func:`run_step`.
    cwd
        The working directory, a ``//``-relative workspace path; None: the run's working directory.
    timeout_seconds, max_output_bytes
        Required limits, as for command nodes (wall time; retained stdout/stderr per stream).
    recovery, after
        See :func:`run_step`.

    Returns
    -------
    StepHandle
        ``output`` is stdout; ``state`` is ``failure`` when the command exited non-zero, timed out
        or was refused (check ``.ok``).

    Raises
    ------
    DecisionRequired, ReplayDivergenceError, RunCancelled, ValueError, TypeError
        As for :func:`run_step`.
    """
    if isinstance(argv, str | bytes) or not isinstance(argv, Sequence) or not argv:
        msg = f"run_command(argv=...) must be a non-empty list of strings, got {argv!r:.80}"
        raise TypeError(msg)
    sources: list[str] = []
    items = [_argv_item(item, index, sources) for index, item in enumerate(argv)]
    where = None if cwd is None else _text(_resolve(cwd, sources), "run_command(cwd=...)")
    args = {
        "argv": items,
        "cwd": where,
        "timeout_seconds": _positive(timeout_seconds, "run_command(timeout_seconds=...)"),
        "max_output_bytes": _positive(max_output_bytes, "run_command(max_output_bytes=...)"),
    }
    # JSON data by construction (strings, positive ints, step data items): not encoded twice
    return _step("command", args, sources=sources, step_id=step_id, recovery=recovery, after=after, checked=True)


def run_model(
    messages: Sequence[dict[str, Any]],
    *,
    provider: str,
    model: str,
    tools: Sequence[dict[str, Any]] | None = None,
    output: Schema | None = None,
    step_id: str | None = None,
    recovery: str | None = None,
    after: StepHandle | Iterable[StepHandle] | None = None,
    budget: dict[str, Any] | None = None,
) -> StepHandle:
    """One completion over a message list from a configured provider; journaled and replayable.

    Parameters
    ----------
    messages
        Chat messages, ``[{"role": "user", "content": "..."}, ...]``; part of the step's digest.
        Handles and earlier outputs in them draw edges.
    provider, model
        The provider's name (as configured for agents) and the model.
    tools
        Tool definitions offered to the model, or None.
    output, step_id, recovery, after, budget
        See :func:`run_step`.

    Returns
    -------
    StepHandle
        ``output`` is the completion (the validated value with ``output=``); check ``.ok``.

    Raises
    ------
    DecisionRequired, ReplayDivergenceError, RunCancelled, ValueError, TypeError
        As for :func:`run_step`.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        msg = f"run_model(messages=...) must be a non-empty list of message dicts, got {messages!r:.80}"
        raise TypeError(msg)
    sources: list[str] = []
    resolved = [_resolve(item, sources) for item in messages]
    for index, item in enumerate(resolved):
        if not isinstance(item, dict):
            msg = f"run_model(messages=...) item {index} must be a dict like {{'role': 'user', 'content': '...'}}"
            raise TypeError(msg)
    if tools is not None and (isinstance(tools, str | bytes) or not isinstance(tools, Sequence)):
        msg = f"run_model(tools=...) must be a list of tool definitions or None, got {tools!r:.80}"
        raise TypeError(msg)
    args = {
        "messages": resolved,
        "provider": _text(provider, "run_model(provider=...)"),
        "model": _text(model, "run_model(model=...)"),
        "tools": None if tools is None else _resolve(tools, sources),
        "output": _schema(output, "run_model(output=...)"),
    }
    args = _budget(args, budget, "run_model(budget=...)")
    return _step("model", args, sources=sources, step_id=step_id, recovery=recovery, after=after)


def get_inputs() -> dict[str, Any]:
    """The run's resolved inputs (declared in the script's module-level ``INPUTS``): defaults
    filled in, paths canonical. ``{}`` when the script declares none. The same values on every
    resume (they are journaled); each call returns a fresh copy."""
    global _inputs
    with _INPUTS_LOCK:
        if _inputs is None:
            answer = request("inputs", {})
            inputs = answer.get("inputs")
            if not isinstance(inputs, dict):
                msg = "the rho-notebook runner answered the inputs request without an inputs object"
                raise ChannelError(msg)
            _inputs = inputs
        return copy.deepcopy(_inputs)


def emit_output(value: Any) -> None:
    """Set the run's output (``rho-notebook result`` and ``status`` show it); journaled. A later
    call replaces an earlier one. ``value`` must be JSON data; handles in it stand for their output."""
    resolved = _resolve(value, [])
    _check_json(resolved, "emit_output(value)")
    request("emit", {"value": resolved})
