"""The mapping language of item graphs (docs/graphs.md): how a step's parameter reads the carried
item and the run.

A *mapping* is a string that starts with ``=``. After the ``=`` comes text in which
``{{ EXPRESSION }}`` places are replaced; everything else is literal text. The expressions:

``$json.PATH``
    A field of the carried item. PATH is a chain of ``.name`` (``[A-Za-z_][A-Za-z0-9_]*``),
    ``[N]`` (a list index, N >= 0) and ``["any key"]`` (a JSON string) parts; ``$json`` alone is
    the whole item.
``$runId``
    The run's ID.
``$run.initiator`` / ``$run.via`` / ``$run.client``
    Who started the run (the run manifest's fields: OS account, front end, self-reported client).
``$run.members`` / ``$run.participants``
    Lists of people (:func:`run_people`). Locally there is no team, so ``members`` is the
    initiator alone; ``participants`` is the initiator, then each person who answered a human step
    or approved a request in this run, in the order they decided, without repeats.

Resolution (:func:`resolve`):

- A mapping that is exactly one ``{{ ... }}`` place (``"={{ $json.score }}"``) is a *whole-value*
  mapping: it resolves to the value itself, keeping its JSON type (a number stays a number, an
  object stays an object). A missing field resolves to ``None`` (JSON null).
- Otherwise each place is spliced into the text as a string: strings as they are, ``true`` /
  ``false``, integers in decimal, objects and lists as compact JSON, and a missing field or null
  as the empty string.
- A missing field is never an error: a path through a missing key, an index past the end, or a
  part that does not fit the value (``.name`` on a list) is missing.
- ``"=="`` at the start writes a literal ``=``: ``"==5"`` resolves to the text ``=5``.
- Any other value (a string without the leading ``=``, a number, ...) is itself; lists and objects
  are resolved element by element.

Parsing happens once per distinct string (:func:`parse_mapping` is cached) into a small AST
(:class:`Mapping` of :class:`Text` and :class:`Ref` parts) by a regular-expression tokenizer;
nothing is evaluated. A string without the leading ``=`` that holds ``{{ $...`` would be sent as
literal text: :func:`looks_like_mapping` finds it, and graph validation refuses it.

This module is pure: no I/O, no clock. The runner calls :func:`resolve` with the step's frozen
parameter value, the item and a :class:`RunContext`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping as FieldMap
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from rho_notebook.errors import MappingError

if TYPE_CHECKING:  # types only: validation parses mappings without the run state's module
    from rho_notebook.model.run_state import RunState

__all__ = [
    "MISSING",
    "Mapping",
    "Ref",
    "RunContext",
    "Text",
    "is_mapping",
    "looks_like_mapping",
    "lookup",
    "parse_mapping",
    "parse_path",
    "resolve",
    "run_people",
    "splice_text",
    "with_people",
]

RUN_FIELDS = ("initiator", "via", "client", "members", "participants")
"""The fields ``$run.NAME`` may read."""

_PLACE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_EXPRESSION = re.compile(r"^\s*\$(?P<root>json|runId|run)(?P<path>.*?)\s*$", re.DOTALL)
_PATH_PART = re.compile(r'\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)|\[(?P<index>[0-9]+)\]|\[(?P<key>"(?:[^"\\]|\\.)*")\]')
_SUSPECT = re.compile(r"\{\{\s*\$")


class _Missing:
    """The value of a path that does not resolve (distinct from JSON null)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""What :func:`lookup` returns for a path that does not resolve."""


@dataclass(frozen=True)
class Text:
    """Literal text of a mapping."""

    text: str


@dataclass(frozen=True)
class Ref:
    """One ``{{ ... }}`` place: ``$json`` with a path, ``$runId``, or ``$run.NAME``."""

    root: Literal["json", "runId", "run"]
    path: tuple[str | int, ...] = ()
    source: str = ""
    """The expression as written (inside the braces, trimmed), for messages."""


@dataclass(frozen=True)
class Mapping:
    """A parsed mapping: its parts in order. ``whole`` when it is exactly one place."""

    parts: tuple[Text | Ref, ...]

    @property
    def whole(self) -> bool:
        return len(self.parts) == 1 and isinstance(self.parts[0], Ref)

    def refs(self) -> tuple[Ref, ...]:
        return tuple(p for p in self.parts if isinstance(p, Ref))


@dataclass(frozen=True)
class RunContext:
    """What ``$runId`` and ``$run.NAME`` read: the run's ID, the run manifest's who-started-it
    fields (``None`` when not recorded) and the people of the run (:func:`run_people`)."""

    run_id: str
    initiator: str | None = None
    via: str | None = None
    client: str | None = None
    members: tuple[str, ...] = ()
    participants: tuple[str, ...] = ()


def is_mapping(value: Any) -> bool:
    """Whether ``value`` is a mapping string (starts with ``=``)."""
    return isinstance(value, str) and value.startswith("=")


def looks_like_mapping(value: Any) -> bool:
    """Whether ``value`` is a string holding ``{{ $...`` but not starting with ``=``: it would be
    sent as literal text, which validation refuses."""
    return isinstance(value, str) and not value.startswith("=") and _SUSPECT.search(value) is not None


def parse_path(text: str, *, source: str | None = None) -> tuple[str | int, ...]:
    """``.a.b[0]["c d"]`` -> ``("a", "b", 0, "c d")``; a condition's ``field`` (``a.b[0]``, no
    leading dot) is read the same way.

    Raises
    ------
    MappingError
        A part is not ``.name``, ``[N]`` or ``["key"]``.
    """
    shown = text if source is None else source
    if text and text[0] not in ".[":
        text = "." + text
    parts: list[str | int] = []
    at = 0
    while at < len(text):
        match = _PATH_PART.match(text, at)
        if match is None:
            msg = (
                f"{shown!r}: cannot read the path at {text[at:]!r}; a path is made of .name, [N] "
                'and ["any key"] parts, e.g. $json.customer.name or $json.items[0]'
            )
            raise MappingError(msg, text=shown)
        if match.group("name") is not None:
            parts.append(match.group("name"))
        elif match.group("index") is not None:
            parts.append(int(match.group("index")))
        else:
            parts.append(json.loads(match.group("key")))
        at = match.end()
    return tuple(parts)


def _ref(expression: str, mapping: str) -> Ref:
    match = _EXPRESSION.match(expression)
    shown = expression.strip()
    if match is None:
        msg = (
            f"{mapping!r}: {{{{ {shown} }}}} is not a mapping expression; use $json.PATH, $runId "
            f"or $run.{'/$run.'.join(RUN_FIELDS)}"
        )
        raise MappingError(msg, text=mapping)
    root = match.group("root")
    path_text = match.group("path")
    if root == "runId":
        if path_text:
            msg = f"{mapping!r}: $runId has no fields (got {{{{ {shown} }}}})"
            raise MappingError(msg, text=mapping)
        return Ref("runId", (), shown)
    if path_text and path_text[0] not in ".[":
        msg = f"{mapping!r}: {{{{ {shown} }}}} is not a mapping expression; after ${root} comes .name, [N] or nothing"
        raise MappingError(msg, text=mapping)
    path = parse_path(path_text, source=mapping) if path_text else ()
    if root == "run" and (len(path) != 1 or path[0] not in RUN_FIELDS):
        msg = f"{mapping!r}: {{{{ {shown} }}}} is not a run field; use one of $run.{', $run.'.join(RUN_FIELDS)}"
        raise MappingError(msg, text=mapping)
    return Ref("json" if root == "json" else "run", path, shown)


@lru_cache(maxsize=4096)
def parse_mapping(text: str) -> Mapping:
    """Parse a mapping string (it must start with ``=``) into its parts.

    Raises
    ------
    MappingError
        No leading ``=``, a ``{{`` without its ``}}``, or an expression outside the language.
    """
    if not text.startswith("="):
        msg = f"{text!r} is not a mapping: a mapping starts with '='"
        raise MappingError(msg, text=text)
    body = text[1:]
    parts: list[Text | Ref] = []
    at = 0
    for match in _PLACE.finditer(body):
        if match.start() > at:
            parts.append(Text(body[at : match.start()]))
        parts.append(_ref(match.group(1), text))
        at = match.end()
    rest = body[at:]
    if "{{" in rest:
        msg = f"{text!r}: a '{{{{' has no closing '}}}}'"
        raise MappingError(msg, text=text)
    if rest:
        parts.append(Text(rest))
    return Mapping(tuple(parts))


def lookup(value: Any, path: tuple[str | int, ...]) -> Any:
    """The value at ``path`` inside ``value``, or :data:`MISSING`."""
    for part in path:
        if isinstance(part, int) and isinstance(value, list) and part < len(value):
            value = value[part]
        elif isinstance(part, str) and isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return MISSING
    return value


def splice_text(value: Any) -> str:
    """How a value reads inside text: strings as they are, missing and null as empty text,
    booleans as ``true``/``false``, lists and objects as compact JSON."""
    if value is MISSING or value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _value_of(ref: Ref, item: Any, run: RunContext) -> Any:
    if ref.root == "runId":
        return run.run_id
    if ref.root == "run":
        found = getattr(run, str(ref.path[0]))
        if isinstance(found, tuple):
            return list(found)  # a JSON list, like every other value a mapping yields
        return MISSING if found is None else found
    return lookup(item, ref.path)


def resolve(value: Any, item: Any, run: RunContext) -> Any:
    """``value`` with every mapping string in it resolved against ``item`` and ``run`` (rules in
    the module docstring). Pure; ``value`` and ``item`` are not changed.

    Raises
    ------
    MappingError
        A mapping string does not parse (graph validation refuses such documents first).
    """
    if isinstance(value, dict):
        return {key: resolve(child, item, run) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [resolve(child, item, run) for child in value]
    if not is_mapping(value):
        return value
    mapping = parse_mapping(value)
    if mapping.whole:
        found = _value_of(mapping.parts[0], item, run)  # type: ignore[arg-type]
        return None if found is MISSING else found
    return "".join(
        part.text if isinstance(part, Text) else splice_text(_value_of(part, item, run)) for part in mapping.parts
    )


def run_people(initiator: str | None, state: RunState) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(members, participants)`` of a run, read from its state as folded from its journal, so a
    resumed run (whose state is replayed from the journal) reads the same lists.

    Locally there is no team: ``members`` is the initiator (the OS account recorded once in the
    run's manifest when the run was created), or empty when none was recorded. ``participants`` is
    the initiator, then each person who answered a human step or approved a request of this run
    (an ``approval_decided`` record whose decision is ``approve``), in the order they decided
    (``decided_at``; then node and attempt), each once. Left out, as decided outside this run or
    not as an answer: denials, launches approved earlier with the same facts in another run
    (``approval_carried``) and the plan's approval.
    """
    members = (initiator,) if initiator else ()
    if not state.asked:  # nobody was ever asked in this run: no decision to look for (O(1))
        return members, members
    decided = sorted(
        (str(record.approval.get("decided_at") or ""), name, record.number, str(record.approval["by"]))
        for name, node in state.nodes.items()
        for record in node.attempts
        if record.approval is not None
        and record.approval.get("decision") == "approve"
        and record.approval.get("via") != "carried"
        and record.approval.get("by")
    )
    people = dict.fromkeys([*members, *(by for *_, by in decided)])
    return members, tuple(people)


def with_people(fields: FieldMap[str, Any], state: RunState) -> dict[str, Any]:
    """The keyword arguments of :class:`RunContext` (without ``run_id``) for an attempt that starts
    now: ``fields`` (the manifest's ``initiator``, ``via``, ``client``) and the run's ``members``
    and ``participants`` (:func:`run_people`). The driver reads them when an attempt begins, for
    its launch facts and its context in one step of the event loop (before a person is asked), so
    the facts a person approves and the parameters the step runs with agree."""
    initiator = fields.get("initiator")
    members, participants = run_people(initiator if isinstance(initiator, str) else None, state)
    return {**fields, "members": members, "participants": participants}
