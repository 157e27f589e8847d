"""The agent catalog: built-in agents, and the search that resolves an agent id to a definition.

Roots are searched highest precedence first: a notebook overlay (origin ``notebook``),
``<workflow_dir>/agents/*.md`` (``workflow``), ``<workspace>/.rho/agents/*.md`` (``project``),
``<user_home>/agents/*.md`` (``user``), then the built-ins (``builtin``). The first root holding the
id wins. A file's id is its ``id:`` key, else its file stem.

A file that cannot be loaded (symlink, unreadable, not UTF-8, invalid definition) matters only
when it claims the requested id (by stem or ``id:``): then its diagnostics are raised instead of
quietly falling back to a lower root. Two valid files of one root with the same id are an error.
Agent files and the agent directories themselves are opened without following symlinks; the
sha256 of a file's bytes is recorded on its definition.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from rho_notebook.agents.definition import is_agent_id, parse_agent_definition
from rho_notebook.errors import Diagnostic, InvalidWorkflow, NotRegularFile
from rho_notebook.model.agent import AgentDefinition, AgentOrigin
from rho_notebook.model.spelling import meant
from rho_notebook.oshelpers import read_regular_nofollow

__all__ = ["BUILTIN_AGENT_IDS", "builtin_agents", "catalog_claims", "resolve_agent"]

_READ_ONLY = "[read_file, list_dir, grep, glob]"

_BUILTINS: dict[str, tuple[str, str, str]] = {
    "default": (
        "General-purpose coding agent with every capability the host offers",
        "all",
        "Work directly on the task you are given. Read the relevant code before you change it, "
        "keep changes small and in the style of the surrounding code, and check your work by "
        "running the project's tests or build when you can. When you finish, say what you "
        "changed, how you verified it, and anything left undone.",
    ),
    "explorer": (
        "Read-only explorer that maps the workspace and answers questions about the code",
        _READ_ONLY,
        "You explore; you never modify files. Answer the question you were given by reading the "
        "workspace: start broad with list_dir and glob, narrow down with grep, then read the "
        "files that matter. Report what you found with file paths and line numbers, quote only "
        "the lines that carry the answer, and say plainly what you could not find or confirm.",
    ),
    "reviewer": (
        "Read-only reviewer that finds defects in code changes and reports them with evidence",
        _READ_ONLY,
        "You review; you never modify files. Read the changed code and enough of its callers and "
        "tests to judge it. Look for correctness bugs first, then security problems, missing "
        "error handling, missing tests and unclear code. For each finding give the file and "
        "line, what is wrong, why it matters and a concrete fix, most severe first. If nothing "
        "needs to change, say so; do not invent issues.",
    ),
    "worker": (
        "Implements a delegated task end to end, editing files and running commands",
        "all",
        "Complete the delegated task fully before you finish. Read the code you will touch, make "
        "the change in the style of the surrounding code, and run the relevant tests or build to "
        "check it. Stay within the scope you were given and leave unrelated code alone. Finish "
        "with a short report: the files you changed, how you verified the change, and anything "
        "that still needs attention.",
    ),
}
"""id -> (description, tools, body) of the built-in agents; all run on rho and inherit the model."""

BUILTIN_AGENT_IDS: tuple[str, ...] = tuple(_BUILTINS)
"""Ids of the agents that ship with rho_notebook."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_ID_LINE = re.compile(r"id\s*:\s*(.*?)\s*")


@functools.cache
def builtin_agents() -> Mapping[str, AgentDefinition]:
    """The built-in agents by id (parsed once, on first use)."""
    return MappingProxyType(
        {
            agent_id: parse_agent_definition(
                _builtin_text(*fields),
                file=f"<builtin:{agent_id}>",
                default_id=agent_id,
                origin="builtin",
            )
            for agent_id, fields in _BUILTINS.items()
        }
    )


def _builtin_text(description: str, tools: str, body: str) -> str:
    """The definition file a built-in agent would have on disk."""
    front = f"description: {description}\nruntime: rho\nmodel-policy: inherit\ntools: {tools}"
    return f"---\n{front}\n---\n{body}\n"


def resolve_agent(
    agent_id: str,
    *,
    workflow_dir: Path | None,
    workspace: Path,
    user_home: Path,
    overlay: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[AgentDefinition, Path | None]:
    """Find the definition of ``agent_id`` in the catalog roots, highest precedence first.

    Parameters
    ----------
    agent_id
        The id an agent node names.
    workflow_dir
        Directory of the workflow entry file; its ``agents/`` is searched first. None skips it.
    workspace
        The project checkout; ``<workspace>/.rho/agents`` is searched.
    user_home
        The user's rho_notebook home; ``<user_home>/agents`` is searched.
    overlay
        Definitions from the notebook, id -> (file label, text); they beat every directory. The
        key plays the part of the file stem.

    Returns
    -------
    tuple[AgentDefinition, Path | None]
        The definition and the file it came from (None for the overlay and the built-ins).

    Raises
    ------
    InvalidWorkflow
        ``agent.unknown`` when no root defines the id; the file's own diagnostics when a file
        claiming the id cannot be loaded; ``agent.duplicate`` when one root defines it twice;
        ``agent.root`` when a searched agent directory is a symlink or not a directory.
    """
    searched: list[str] = []
    available: set[str] = set()
    for where, load in _roots(workflow_dir=workflow_dir, workspace=workspace, user_home=user_home, overlay=overlay):
        searched.append(where)
        candidates = load()
        chosen = _select(agent_id, candidates, where=where)
        if chosen is not None:
            return chosen
        available.update(_valid_ids(candidates))
    searched.append("built-ins")
    builtins = builtin_agents()
    if agent_id in builtins:
        return builtins[agent_id], None
    home = workspace / ".rho" / "agents" if workflow_dir is None else workflow_dir / "agents"
    place = f"{home / agent_id}.md" + (" (or a %%agent cell)" if overlay is not None else "")
    raise _unknown(agent_id, available=available | set(builtins), searched=searched, place=place)


def catalog_claims(*, workflow_dir: Path | None, workspace: Path, user_home: Path) -> dict[str, list[str]]:
    """Every agent id a definition file of the catalog's directories claims (a valid file its id, a
    broken one its stem and any ``id:`` it declares) -> the files claiming it, highest precedence
    first: what :func:`resolve_agent` chooses among for a workflow in ``workflow_dir``. The
    built-ins are not listed (:data:`BUILTIN_AGENT_IDS`).

    Raises
    ------
    InvalidWorkflow
        ``agent.root`` when an agent directory is a symlink or not a directory.
    """
    claims: dict[str, list[str]] = {}
    for _, load in _roots(workflow_dir=workflow_dir, workspace=workspace, user_home=user_home, overlay=None):
        for candidate in load():
            for agent_id in sorted(candidate.claims):
                claims.setdefault(agent_id, []).append(candidate.label)
    return claims


@dataclass(frozen=True)
class _Candidate:
    """One definition file of a root: parsed, or the diagnostics of why it could not be."""

    label: str
    path: Path | None
    claims: frozenset[str]
    """Ids the file claims: its definition id, or (if broken) its stem and any ``id:`` value."""
    definition: AgentDefinition | None = None
    problems: tuple[Diagnostic, ...] = ()
    id_line: int = 1
    """Line of the ``id:`` key (1, the opening fence, when the id is the stem)."""


_Loader = Callable[[], list[_Candidate]]


def _roots(
    *,
    workflow_dir: Path | None,
    workspace: Path,
    user_home: Path,
    overlay: Mapping[str, tuple[str, str]] | None,
) -> list[tuple[str, _Loader]]:
    """(description, loader) of every root to search, highest precedence first."""
    roots: list[tuple[str, _Loader]] = []
    if overlay:
        roots.append(("notebook overlay", functools.partial(_overlay_candidates, overlay)))
    directories: list[tuple[AgentOrigin, Path | None]] = [
        ("workflow", None if workflow_dir is None else workflow_dir / "agents"),
        ("project", workspace / ".rho" / "agents"),
        ("user", user_home / "agents"),
    ]
    for origin, directory in directories:
        if directory is not None:
            roots.append((str(directory), functools.partial(_directory_candidates, directory, origin)))
    return roots


def _select(agent_id: str, candidates: list[_Candidate], *, where: str) -> tuple[AgentDefinition, Path | None] | None:
    """The valid definition of ``agent_id`` in one root and its path; None if the root lacks it."""
    valid = [(c, c.definition) for c in candidates if c.definition is not None and c.definition.id == agent_id]
    broken = [c for c in candidates if c.definition is None and agent_id in c.claims]
    if broken:
        found = [problem for candidate in broken for problem in candidate.problems]
        found += [_claimed_by_broken(agent_id, candidate, broken[0]) for candidate, _ in valid]
        raise InvalidWorkflow(found)
    if len(valid) > 1:
        first = valid[0][0]
        raise InvalidWorkflow([_duplicate(agent_id, c, first=first, where=where) for c, _ in valid[1:]])
    if not valid:
        return None
    candidate, definition = valid[0]
    return definition, candidate.path


def _valid_ids(candidates: list[_Candidate]) -> Iterator[str]:
    for candidate in candidates:
        if candidate.definition is not None:
            yield candidate.definition.id


# -- loading ------------------------------------------------------------------------------------


def _overlay_candidates(overlay: Mapping[str, tuple[str, str]]) -> list[_Candidate]:
    candidates = []
    for key, (label, text) in overlay.items():
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        candidates.append(_parsed(text, label=label, path=None, stem=key, origin="notebook", digest=digest))
    return candidates


def _directory_candidates(directory: Path, origin: AgentOrigin) -> list[_Candidate]:
    """Every ``*.md`` entry of an agent directory, in name order; empty if it does not exist."""
    dir_fd = _open_root(directory)
    if dir_fd is None:
        return []
    try:
        with os.scandir(dir_fd) as entries:
            names = sorted(
                (entry.name, entry.is_symlink())
                for entry in entries
                if entry.name.endswith(".md") and not entry.is_dir(follow_symlinks=False)
            )
        return [
            _file_candidate(directory, name, dir_fd=dir_fd, is_link=is_link, origin=origin) for name, is_link in names
        ]
    finally:
        os.close(dir_fd)


def _open_root(directory: Path) -> int | None:
    """A no-follow descriptor of an agent directory; None when it does not exist."""
    try:
        info = os.lstat(directory)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise _root_error(directory, f"cannot be inspected ({error.strerror})") from error
    if stat.S_ISLNK(info.st_mode):
        raise _root_error(
            directory,
            "is a symbolic link; agent directories are not followed through symlinks, make it a real directory",
        )
    if not stat.S_ISDIR(info.st_mode):
        raise _root_error(directory, "is not a directory; agent definitions go in <root>/<id>.md")
    try:
        return os.open(directory, _DIR_FLAGS)
    except OSError as error:
        raise _root_error(directory, f"cannot be opened ({error.strerror})") from error


def _file_candidate(directory: Path, name: str, *, dir_fd: int, is_link: bool, origin: AgentOrigin) -> _Candidate:
    path = directory / name
    stem = name[: -len(".md")]
    if is_link:
        return _broken(path, stem, rule="agent.symlink", message=_symlink_message(path))
    try:
        data = read_regular_nofollow(name, nonblock=True, dir_fd=dir_fd)  # ELOOP if it became a symlink
    except NotRegularFile:
        return _broken(path, stem, rule="agent.file", message=f"{path} is not a regular file")
    except OSError as error:
        if error.errno == errno.ELOOP:
            return _broken(path, stem, rule="agent.symlink", message=_symlink_message(path))
        return _broken(path, stem, rule="agent.file", message=f"{path} cannot be read ({error.strerror})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        message = f"{path} is not UTF-8 text (invalid byte at offset {error.start}); save it as UTF-8"
        return _broken(path, stem, rule="agent.encoding", message=message)
    digest = hashlib.sha256(data).hexdigest()
    return _parsed(text, label=str(path), path=path, stem=stem, origin=origin, digest=digest)


def _parsed(text: str, *, label: str, path: Path | None, stem: str, origin: AgentOrigin, digest: str) -> _Candidate:
    declared = _declared_id(text)
    try:
        definition = parse_agent_definition(text, file=label, default_id=stem, origin=origin, content_sha256=digest)
    except InvalidWorkflow as error:
        claims = {stem} if declared is None else {stem, declared[0]}
        problems = tuple(error.diagnostics())
        return _Candidate(label=label, path=path, claims=frozenset(claims), problems=problems)
    return _Candidate(
        label=label,
        path=path,
        claims=frozenset({definition.id}),
        definition=definition,
        id_line=1 if declared is None else declared[1],
    )


def _broken(path: Path, stem: str, *, rule: str, message: str) -> _Candidate:
    problem = Diagnostic(rule=rule, message=message, file=str(path))
    return _Candidate(label=str(path), path=path, claims=frozenset({stem}), problems=(problem,))


def _declared_id(text: str) -> tuple[str, int] | None:
    """The raw ``id:`` value of a frontmatter and its line, even when the file is invalid."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    if lines[0] != "---":
        return None
    for number, line in enumerate(lines[1:], start=2):
        if line == "---":
            return None
        match = _ID_LINE.fullmatch(line)
        if match:
            value = match.group(1)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            return value, number
    return None


# -- diagnostics --------------------------------------------------------------------------------


def _symlink_message(path: Path) -> str:
    return (
        f"{path} is a symbolic link; agent definition files are read without following symlinks, "
        "so replace it with a regular file (for example a copy of its target)"
    )


def _root_error(directory: Path, problem: str) -> InvalidWorkflow:
    return InvalidWorkflow(
        [
            Diagnostic(
                rule="agent.root",
                message=f"agent directory {directory} {problem}",
                file=str(directory),
            )
        ]
    )


def _duplicate(agent_id: str, candidate: _Candidate, *, first: _Candidate, where: str) -> Diagnostic:
    return Diagnostic(
        rule="agent.duplicate",
        message=(
            f"agent id {agent_id!r} is defined twice in {where}: by {first.label} and by "
            f"{candidate.label}; rename one file or change its id"
        ),
        file=candidate.label,
        line=candidate.id_line,
        column=1,
    )


def _claimed_by_broken(agent_id: str, candidate: _Candidate, broken: _Candidate) -> Diagnostic:
    return Diagnostic(
        rule="agent.duplicate",
        message=(
            f"agent id {agent_id!r} is defined by {candidate.label} and also claimed by "
            f"{broken.label}, which cannot be loaded; fix or remove {broken.label}"
        ),
        file=candidate.label,
        line=candidate.id_line,
        column=1,
    )


def _unknown(agent_id: str, *, available: set[str], searched: list[str], place: str) -> InvalidWorkflow:
    message = f"unknown agent {agent_id!r}"
    close = meant(agent_id, sorted(available))
    if close:
        message += f" (did you mean {close!r}?)"
    if not is_agent_id(agent_id):
        message += "; agent ids are 1-64 lowercase ASCII letters and digits joined by single hyphens"
    message += (
        f"; available agents: {', '.join(sorted(available))}; searched, highest precedence first: {', '.join(searched)}"
    )
    if is_agent_id(agent_id):
        message += f". Define it in {place} or use an available agent"
    return InvalidWorkflow([Diagnostic(rule="agent.unknown", message=message)])
