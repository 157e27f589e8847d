"""The agent catalog: the built-in agents and the search that resolves an agent id to one definition.

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

import difflib
import functools
import hashlib
import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from rho_notebook.agents.definition import is_agent_id, parse_agent_definition
from rho_notebook.errors import Diagnostic, InvalidWorkflow
from rho_notebook.model.agent import AgentDefinition, AgentOrigin

__all__ = ["BUILTIN_AGENT_IDS", "builtin_agents", "resolve_agent"]

_READ_ONLY_FRONT = """\
runtime: rho
model-policy: inherit
tools: [read_file, list_dir, grep, glob]
---
"""

_ALL_TOOLS_FRONT = """\
runtime: rho
model-policy: inherit
tools: all
---
"""

_BUILTIN_TEXTS: dict[str, str] = {
    "default": "---\ndescription: General-purpose coding agent with every capability the host offers\n"
    + _ALL_TOOLS_FRONT
    + "Work directly on the task you are given. Read the relevant code before you change it, keep "
    "changes small and in the style of the surrounding code, and check your work by running the "
    "project's tests or build when you can. When you finish, say what you changed, how you "
    "verified it, and anything left undone.\n",
    "explorer": "---\ndescription: Read-only explorer that maps the workspace and answers questions "
    "about the code\n"
    + _READ_ONLY_FRONT
    + "You explore; you never modify files. Answer the question you were given by reading the "
    "workspace: start broad with list_dir and glob, narrow down with grep, then read the files "
    "that matter. Report what you found with file paths and line numbers, quote only the lines "
    "that carry the answer, and say plainly what you could not find or could not confirm.\n",
    "reviewer": "---\ndescription: Read-only reviewer that finds defects in code changes and reports "
    "them with evidence\n"
    + _READ_ONLY_FRONT
    + "You review; you never modify files. Read the changed code and enough of its callers and "
    "tests to judge it. Look for correctness bugs first, then security problems, missing error "
    "handling, missing tests and unclear code. For each finding give the file and line, what is "
    "wrong, why it matters and a concrete fix, most severe first. If nothing needs to change, "
    "say so; do not invent issues.\n",
    "worker": "---\ndescription: Implements a delegated task end to end, editing files and running "
    "commands\n"
    + _ALL_TOOLS_FRONT
    + "Complete the delegated task fully before you finish. Read the code you will touch, make the "
    "change in the style of the surrounding code, and run the relevant tests or build to check "
    "it. Stay within the scope you were given and leave unrelated code alone. Finish with a short "
    "report: the files you changed, how you verified the change, and anything that still needs "
    "attention.\n",
}

BUILTIN_AGENT_IDS: tuple[str, ...] = tuple(_BUILTIN_TEXTS)
"""Ids of the agents that ship with rho_notebook."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_ID_LINE = re.compile(r"id\s*:\s*(.*?)\s*")


@functools.cache
def builtin_agents() -> Mapping[str, AgentDefinition]:
    """The built-in agents by id (parsed once, on first use)."""
    return MappingProxyType(
        {
            agent_id: parse_agent_definition(
                text, file=f"<builtin:{agent_id}>", default_id=agent_id, origin="builtin"
            )
            for agent_id, text in _BUILTIN_TEXTS.items()
        }
    )


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
        Definitions from the notebook, id -> (file label, text); they beat every directory.

    Returns
    -------
    tuple[AgentDefinition, Path | None]
        The definition and the file it came from (None for the overlay and the built-ins).

    Raises
    ------
    InvalidWorkflow
        ``agent.unknown`` when no root defines the id; the file's own diagnostics when the file
        claiming the id cannot be loaded; ``agent.duplicate`` when one root defines it twice;
        ``agent.root`` when a searched agent directory is a symlink or not a directory.
    """
    roots = _roots(workflow_dir=workflow_dir, workspace=workspace, user_home=user_home)
    searched: list[str] = []
    available: set[str] = set()
    if overlay is not None:
        searched.append("notebook overlay")
        candidates = [_overlay_candidate(key, label, text) for key, (label, text) in overlay.items()]
        found = _select(agent_id, candidates, where="the notebook overlay")
        if found is not None:
            return found, None
        available.update(_valid_ids(candidates))
    for origin, directory in roots:
        searched.append(str(directory))
        candidates = list(_directory_candidates(directory, origin))
        found = _select(agent_id, candidates, where=str(directory))
        if found is not None:
            return found, _path_of(found, candidates)
        available.update(_valid_ids(candidates))
    searched.append("built-ins")
    builtins = builtin_agents()
    if agent_id in builtins:
        return builtins[agent_id], None
    raise _unknown(agent_id, available=available | set(builtins), searched=searched)


@dataclass(frozen=True)
class _Candidate:
    """One definition file of a root: parsed, or the diagnostics of why it could not be."""

    label: str
    path: Path | None
    claims: frozenset[str]
    """Ids this file claims: its definition id, or (if broken) its stem and any ``id:`` value."""
    definition: AgentDefinition | None = None
    problems: tuple[Diagnostic, ...] = ()


def _roots(*, workflow_dir: Path | None, workspace: Path, user_home: Path) -> list[tuple[AgentOrigin, Path]]:
    roots: list[tuple[AgentOrigin, Path]] = []
    if workflow_dir is not None:
        roots.append(("workflow", workflow_dir / "agents"))
    roots.append(("project", workspace / ".rho" / "agents"))
    roots.append(("user", user_home / "agents"))
    return roots


def _select(agent_id: str, candidates: list[_Candidate], *, where: str) -> AgentDefinition | None:
    """The one valid definition of ``agent_id`` in a root, None if the root lacks it."""
    valid = [c for c in candidates if c.definition is not None and c.definition.id == agent_id]
    broken = [c for c in candidates if c.definition is None and agent_id in c.claims]
    if broken:
        found = [problem for candidate in broken for problem in candidate.problems]
        found += [_claimed_by_broken(agent_id, candidate, broken[0]) for candidate in valid]
        raise InvalidWorkflow(found)
    if len(valid) > 1:
        raise InvalidWorkflow([_duplicate(agent_id, c, first=valid[0], where=where) for c in valid[1:]])
    return valid[0].definition if valid else None


def _path_of(definition: AgentDefinition, candidates: list[_Candidate]) -> Path | None:
    for candidate in candidates:
        if candidate.definition is definition:
            return candidate.path
    return None


def _valid_ids(candidates: list[_Candidate]) -> Iterator[str]:
    for candidate in candidates:
        if candidate.definition is not None:
            yield candidate.definition.id


# -- loading ------------------------------------------------------------------------------------


def _overlay_candidate(key: str, label: str, text: str) -> _Candidate:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return _parsed(text, label=label, path=None, stem=key, origin="notebook", digest=digest)


def _directory_candidates(directory: Path, origin: AgentOrigin) -> Iterator[_Candidate]:
    """Every ``*.md`` entry of an agent directory, in name order; nothing if it does not exist."""
    dir_fd = _open_root(directory)
    if dir_fd is None:
        return
    try:
        with os.scandir(dir_fd) as entries:
            names = sorted(
                (entry.name, entry.is_symlink())
                for entry in entries
                if entry.name.endswith(".md") and not entry.is_dir(follow_symlinks=False)
            )
        for name, is_link in names:
            yield _file_candidate(directory, name, dir_fd=dir_fd, is_link=is_link, origin=origin)
    finally:
        os.close(dir_fd)


def _open_root(directory: Path) -> int | None:
    """A no-follow descriptor of an agent directory, None when it does not exist."""
    try:
        info = os.lstat(directory)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise _root_error(directory, f"cannot be inspected ({error.strerror})") from error
    if stat.S_ISLNK(info.st_mode):
        raise _root_error(
            directory,
            "is a symbolic link; agent directories are not followed through symlinks, "
            "make it a real directory",
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
        data = _read_no_follow(name, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == os.errno.ELOOP if False else _is_loop(error):
            return _broken(path, stem, rule="agent.symlink", message=_symlink_message(path))
        return _broken(path, stem, rule="agent.file", message=f"{path} cannot be read ({error.strerror})")
    except _NotRegularFile:
        return _broken(path, stem, rule="agent.file", message=f"{path} is not a regular file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return _broken(
            path,
            stem,
            rule="agent.encoding",
            message=f"{path} is not UTF-8 text (invalid byte at offset {error.start}); save it as UTF-8",
        )
    digest = hashlib.sha256(data).hexdigest()
    return _parsed(text, label=str(path), path=path, stem=stem, origin=origin, digest=digest)
