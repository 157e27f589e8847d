"""Freezing a program once per execution: argv[0] resolved and hashed, reused while its files are unchanged.

A script's command step resolves argv[0] exactly as planning resolves a command node's
(:class:`~rho_notebook.planning.resolve.Resolver`: the search path, ``#!`` interpreters,
version-manager shims) and freezes it with its sha256 and file identity. Resolving and hashing
costs most of a step call's preparation, and a replayed call needs the digest all the same, so
:class:`Freezes` keeps each freeze for the same (argv[0], cwd) while ``os.stat`` of every file it
froze still gives the :func:`~rho_notebook.store.files.file_version` (dev, inode, size, mtime_ns,
ctime_ns) it had when it was hashed: a write or a replacement changes that version (user space
cannot set ctime back), and a freeze is kept only when its files had settled
(:func:`~rho_notebook.exec.verify.is_settled`, as the verifier's digest cache does), so two writes
inside one timestamp tick cannot share it. For a name with a ``/`` the path as given is stat'ed (a
link retargeted is a change); a bare name's PATH lookup is kept for the execution, as a plan keeps
it for all its nodes; a freeze that went through a version-manager shim is never reused (the
manager's answer depends on more than files).

Security does not rest on this cache: every launch still opens the frozen files through verified
handles and checks their content against the frozen sha256 (:mod:`rho_notebook.exec.verify`)
exactly as without it. The cache only saves hashing the files again to compute the step's digest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rho_notebook.exec.verify import is_settled, resolve_path
from rho_notebook.model.graph import FrozenExecutable
from rho_notebook.model.identity import FileIdentity, identity_of_stat
from rho_notebook.planning.resolve import Resolver
from rho_notebook.store.files import FileVersion, file_version

__all__ = ["Freeze", "Freezes"]


@dataclass(frozen=True)
class Freeze:
    """argv[0] as frozen once in this execution."""

    executable: FrozenExecutable
    identities: dict[str, FileIdentity]
    """Identities of the executable and its interpreters, by frozen path (as Resolver records them)."""
    versions: tuple[tuple[str, FileVersion], ...]
    """(path to stat, the version it had when frozen) for each frozen file."""

    def unchanged(self) -> bool:
        """Whether every frozen file still has the version it had when it was hashed."""
        for path, version in self.versions:
            try:
                if file_version(os.stat(path)) != version:
                    return False
            except OSError:
                return False
        return True


class Freezes:
    """The freezes of one execution, by (argv[0], cwd label)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._kept: dict[tuple[str, str], Freeze] = {}

    def reused(self, name: str, *, cwd: str) -> Freeze | None:
        """This execution's freeze of ``name`` in ``cwd`` when a stat proves its files unchanged
        (a few ``stat`` calls: fine on an event loop); None when it must be frozen again."""
        kept = self._kept.get((name, cwd))
        if kept is not None and kept.unchanged():
            return kept
        return None

    def freeze(self, resolver: Resolver, name: str, *, cwd: str, node: str) -> Freeze:
        """``name`` frozen as planning freezes it (blocking: it hashes files and may ask a version
        manager), kept for :meth:`reused` when its files had settled. Raises PlanError and OSError
        as :meth:`Resolver.executable` does."""
        executable = resolver.executable(name, cwd_label=cwd, node=node)
        frozen = (executable.file, *executable.interpreters)
        identities = {f.path: resolver.identities[f.path] for f in frozen}
        made = Freeze(executable=executable, identities=identities, versions=())
        if resolver.via(executable.file.path) or any(resolver.via(i.path) for i in executable.interpreters):
            return made  # a version manager's answer depends on more than these files: ask it every time
        given = name if name.startswith("/") else str(resolver.workspace_path(cwd) / name) if "/" in name else None
        versions = _versions(
            [(given or str(resolve_path(executable.file.path, self.workspace)), identities[executable.file.path])]
            + [(str(resolve_path(i.path, self.workspace)), identities[i.path]) for i in executable.interpreters]
        )
        if versions is None:
            return made
        made = Freeze(executable=executable, identities=identities, versions=versions)
        self._kept[(name, cwd)] = made
        return made


def _versions(files: list[tuple[str, FileIdentity]]) -> tuple[tuple[str, FileVersion], ...] | None:
    """(path, version) of each file, or None when one is unsettled or no longer has the identity
    the resolver recorded as it hashed it (changed since: that freeze must not be reused)."""
    versions: list[tuple[str, FileVersion]] = []
    for path, identity in files:
        try:
            info = os.stat(path)
        except OSError:
            return None
        if identity_of_stat(info) != identity or not is_settled(info):
            return None
        versions.append((path, file_version(info)))
    return tuple(versions)
