"""Tab completion for ``%workflow`` lines and ``%%workflow`` headers (pure; IPython adapts it).

Completes verbs, flags and their choices, workflow names of the session, plan IDs (for ``run``)
and run IDs (newest first; runs of this kernel before the rest of the store), and node names for
``logs RUN NODE``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rho_notebook.model.state import Lifecycle
from rho_notebook.service.cell_args import VERBS, options_of, verb_parser
from rho_notebook.service.flags import MODES

__all__ = ["Candidates", "CompletionSource", "complete_line", "newest_first"]

_VALUE_FLAGS: dict[str, tuple[str, ...]] = {
    "--input": (),
    "--output": ("text", "json", "jsonl"),
    "--mode": MODES,
    "--stream": ("stdout", "stderr", "both"),
    "--state": tuple(lifecycle.value for lifecycle in Lifecycle),
    "--limit": (),
    "--comment": (),
    "--workflow": (),
    "--approval-timeout": (),
    "--node": (),
    "--flow": (),
    "--executor": ("local", "dask"),
    "--decide": (),
    "--from": (),
    "--at": (),
    "--value": (),
    "--from-plan": (),
    "--max-tokens": (),
    "--max-cost": (),
    "--max-wall": (),
    "--raise-budget": (),
}
"""The flags that take a value (the word after one is not a positional argument), with the
values to offer; ``cancel --wait SECONDS`` also takes one (``run --wait`` does not)."""
_OUTPUTS = {
    "validate": ("text", "json"),
    "plan": ("text", "json"),
    "run": ("text", "jsonl"),
    "resume": ("text", "jsonl"),
    "try": ("text", "jsonl"),
    "fork": ("text", "jsonl"),
    "status": ("text", "json"),
    "cancel": ("text", "json"),
    "runs": ("text", "json"),
    "plans": ("text", "json"),
    "result": ("text", "json"),
    "diff": ("text", "json"),
}
_POSITIONALS: dict[str, tuple[str, ...]] = {
    "validate": ("workflow",),
    "plan": ("workflow",),
    "run": ("workflow_or_plan",),
    "resume": ("run",),
    "status": ("run",),
    "cancel": ("run",),
    "result": ("run",),
    "logs": ("run", "node"),
    "approve": ("run",),
    "answer": ("run",),
    "show": ("run",),
    "fork": ("run",),
}


@dataclass(frozen=True)
class CompletionSource:
    """Where candidate names come from (functions, so nothing is read until needed)."""

    workflows: Callable[[], Iterable[str]]
    plan_ids: Callable[[], Iterable[str]]
    run_ids: Callable[[], Iterable[str]]
    nodes: Callable[[str], Iterable[str]]
    """Node names of a run, by run ID prefix (empty when unknown)."""


@dataclass(frozen=True)
class Candidates:
    fragment: str
    """The text before the cursor that the completions replace."""
    completions: tuple[str, ...]


def _filter(fragment: str, names: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for name in names:
        if name.startswith(fragment) and name not in seen:
            seen[name] = None
    return tuple(seen)


def _takes_value(verb: str, flag: str) -> bool:
    return flag in _VALUE_FLAGS or (verb, flag) == ("cancel", "--wait")


def _positionals(tokens: Sequence[str], verb: str = "") -> list[str]:
    """The positional arguments among ``tokens`` (flags and their values skipped)."""
    found: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
            continue
        if token.startswith("--"):
            skip = _takes_value(verb, token)
            continue
        found.append(token)
    return found


def complete_line(text_until_cursor: str, source: CompletionSource) -> Candidates | None:
    """Completions for the magic line before the cursor, or None when it is not ours."""
    split = _magic_line(text_until_cursor)
    if split is None:
        return None
    head, rest = split
    tokens = rest.split()
    fragment = "" if rest[-1].isspace() else tokens.pop()
    if head == "%%workflow":
        return _header(fragment, tokens, source)
    if not tokens:
        return Candidates(fragment, _filter(fragment, VERBS))
    verb, args = tokens[0], tokens[1:]
    if verb not in VERBS:
        return Candidates(fragment, ())
    if args and _takes_value(verb, args[-1]):
        return Candidates(fragment, _filter(fragment, _flag_values(verb, args[-1], source)))
    if fragment.startswith("-"):
        return Candidates(fragment, _filter(fragment, options_of(verb_parser()).get(verb, [])))
    return Candidates(fragment, _filter(fragment, _positional_names(verb, args, source)))


def _magic_line(text: str) -> tuple[str, str] | None:
    """(``%%workflow`` or ``%workflow``, the rest of the line) when the line is ours and the cursor
    is past the magic's name."""
    stripped = text.lstrip()
    head = next((magic for magic in ("%%workflow", "%workflow") if stripped.startswith(magic)), None)
    if head is None:
        return None
    rest = stripped[len(head) :]
    if "\n" in rest or not rest or not rest[0].isspace():
        return None
    return head, rest


def _header(fragment: str, tokens: list[str], source: CompletionSource) -> Candidates:
    """A ``%%workflow [NAME] [--input KEY=JSON]`` header: the flag, or a workflow name."""
    if tokens and tokens[-1] == "--input" or fragment.startswith("-"):
        return Candidates(fragment, _filter(fragment, ["--input"]))
    if _positionals(tokens):
        return Candidates(fragment, ())
    return Candidates(fragment, _filter(fragment, sorted(source.workflows())))


def _flag_values(verb: str, flag: str, source: CompletionSource) -> Iterable[str]:
    """The values a flag that takes one may have (``--output`` per verb, ``--workflow`` the session's)."""
    if flag == "--output":
        return _OUTPUTS.get(verb, ())
    if flag == "--workflow":
        return sorted(source.workflows())
    if flag == "--from":
        return source.run_ids()
    if flag == "--from-plan":
        return source.plan_ids()
    return _VALUE_FLAGS.get(flag, ())


def _positional_names(verb: str, args: list[str], source: CompletionSource) -> Iterable[str]:
    """Candidates for the verb's next positional argument (none past its last)."""
    wanted = _POSITIONALS.get(verb, ())
    given = _positionals(args, verb)
    if len(given) >= len(wanted):
        return ()
    kind = wanted[len(given)]
    if kind == "workflow":
        return sorted(source.workflows())
    if kind == "workflow_or_plan":
        return [*sorted(source.workflows()), *source.plan_ids()]
    if kind == "run":
        return source.run_ids()
    return sorted(source.nodes(given[0]))


def newest_first(folder: os.PathLike[str] | str) -> list[str]:
    """Entry names of a store folder (UUIDv7 IDs sort by time), newest first."""
    try:
        names = [n for n in os.listdir(folder) if not n.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(names, reverse=True)
