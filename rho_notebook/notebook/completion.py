"""Tab completion for ``%workflow`` lines and ``%%workflow`` headers (pure; IPython adapts it).

Completes verbs, flags and their choices, workflow names of the session, plan IDs (for ``run``)
and run IDs (newest first; runs of this kernel before the rest of the store), and node names for
``logs RUN NODE``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rho_notebook.service.cell_args import VERBS, options_of, verb_parser

__all__ = ["Candidates", "CompletionSource", "complete_line", "newest_first"]

_VALUE_FLAGS = {
    "--input": (),
    "--output": ("text", "json", "jsonl"),
    "--mode": ("auto", "plan", "supervised"),
    "--stream": ("stdout", "stderr", "both"),
    "--state": ("planned", "running", "waiting", "cancelling", "completed", "needs_recovery", "damaged"),
    "--limit": (),
    "--comment": (),
    "--workflow": (),
    "--approval-timeout": (),
    "--node": (),
}
_OUTPUTS = {
    "validate": ("text", "json"),
    "plan": ("text", "json"),
    "run": ("text", "jsonl"),
    "resume": ("text", "jsonl"),
    "status": ("text", "json"),
    "runs": ("text", "json"),
    "plans": ("text", "json"),
    "result": ("text", "json"),
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


def _positionals(tokens: Sequence[str]) -> list[str]:
    """The positional arguments among ``tokens`` (flags and their values skipped)."""
    found: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
            continue
        if token.startswith("--"):
            skip = token in _VALUE_FLAGS
            continue
        found.append(token)
    return found


def complete_line(text_until_cursor: str, source: CompletionSource) -> Candidates | None:
    """Completions for the magic line before the cursor, or None when it is not ours."""
    stripped = text_until_cursor.lstrip()
    if stripped.startswith("%%workflow"):
        head, rest = "%%workflow", stripped[len("%%workflow") :]
    elif stripped.startswith("%workflow"):
        head, rest = "%workflow", stripped[len("%workflow") :]
    else:
        return None
    if "\n" in rest:
        return None
    if not rest or not rest[0].isspace():
        return None
    tokens = rest.split()
    fragment = "" if rest[-1].isspace() else tokens.pop()
    if head == "%%workflow":
        if tokens and tokens[-1] == "--input" or fragment.startswith("-"):
            return Candidates(fragment, _filter(fragment, ["--input"]))
        if _positionals(tokens):
            return Candidates(fragment, ())
        return Candidates(fragment, _filter(fragment, sorted(source.workflows())))
    if not tokens:
        return Candidates(fragment, _filter(fragment, VERBS))
    verb, args = tokens[0], tokens[1:]
    if verb not in VERBS:
        return Candidates(fragment, ())
    if args and args[-1] in _VALUE_FLAGS:
        flag = args[-1]
        if flag == "--output":
            return Candidates(fragment, _filter(fragment, _OUTPUTS.get(verb, ())))
        if flag == "--workflow":
            return Candidates(fragment, _filter(fragment, sorted(source.workflows())))
        return Candidates(fragment, _filter(fragment, _VALUE_FLAGS[flag]))
    if fragment.startswith("-"):
        return Candidates(fragment, _filter(fragment, options_of(verb_parser()).get(verb, [])))
    wanted = _POSITIONALS.get(verb, ())
    index = len(_positionals(args))
    if index >= len(wanted):
        return Candidates(fragment, ())
    kind = wanted[index]
    if kind == "workflow":
        names: Iterable[str] = sorted(source.workflows())
    elif kind == "workflow_or_plan":
        names = [*sorted(source.workflows()), *source.plan_ids()]
    elif kind == "run":
        names = source.run_ids()
    else:
        names = sorted(source.nodes(_positionals(args)[0]))
    return Candidates(fragment, _filter(fragment, names))


def newest_first(folder: os.PathLike[str] | str) -> list[str]:
    """Entry names of a store folder (UUIDv7 IDs sort by time), newest first."""
    try:
        names = [n for n in os.listdir(folder) if not n.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(names, reverse=True)
