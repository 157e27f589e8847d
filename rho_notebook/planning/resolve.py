"""Resolving and freezing executables, script interpreters and working directories at plan time.

The first argv value is found on PATH (a bare name) or relative to the node's working directory
(a name with a ``/``), made canonical, and frozen with its sha256 and file identity. A ``#!``
script freezes its interpreter too; for ``#!/usr/bin/env NAME`` both env and the NAME it finds
on PATH now. Paths inside the workspace are frozen ``//``-relative so that two checkouts of one
project plan to the same graph digest.

A version-manager shim (pyenv, asdf, rbenv, ...) is not frozen itself: its manager is asked which
program it runs in the node's working directory with the node's frozen environment, and that
program is frozen instead (:mod:`rho_notebook.planning.shims`); :meth:`Resolver.via` says so.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rho_notebook.errors import PlanError
from rho_notebook.model.graph import FrozenExecutable, FrozenFile
from rho_notebook.model.identity import FileIdentity, identity_of_stat
from rho_notebook.oshelpers import open_regular_nofollow
from rho_notebook.planning.shims import detect_shim, frozen_environment, shim_program

__all__ = ["Resolver", "resolve_cwd_label"]

_SHEBANG_MAX = 256


def resolve_cwd_label(cwd: str) -> str | None:
    """``"."`` -> ``"//"``, ``"sub/dir"`` -> ``"//sub/dir"``; None when the path leaves the workspace."""
    if cwd.startswith("/") or "\\" in cwd or "\x00" in cwd:
        return None
    parts = [p for p in cwd.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return None
    return "//" + "/".join(parts)


@dataclass
class Resolver:
    """Freezes files for one plan, remembering identities (for the manifest) as it goes."""

    workspace: Path
    search_path: str
    environment: Mapping[str, str] | None = None
    """The environment a shim's manager is asked in; None: the frozen allowlist of this process."""
    identities: dict[str, FileIdentity] = field(default_factory=dict)
    _via: dict[str, set[str]] = field(default_factory=dict)
    _digests: dict[str, str] = field(default_factory=dict)
    _executables: dict[tuple[str, str], FrozenExecutable] = field(default_factory=dict)
    _dirs: dict[str, str] = field(default_factory=dict)

    def via(self, path: str) -> tuple[str, ...]:
        """How a frozen executable path was reached when not directly (``via pyenv shim ...``)."""
        return tuple(sorted(self._via.get(path, ())))

    def workspace_path(self, label: str) -> Path:
        return self.workspace / label[2:] if label != "//" else self.workspace

    def frozen_dir(self, cwd: str, *, node: str) -> str:
        """The ``//`` label of a node's working directory, checked (no symlink on the way, a
        directory) once per plan and recorded with its identity."""
        if cwd in self._dirs:
            return self._dirs[cwd]
        label = resolve_cwd_label(cwd)
        if label is None:
            msg = f"node {node!r}: cwd {cwd!r} must be a relative path inside the workspace (no '..', no absolute path)"
            raise PlanError(msg)
        path = self.workspace_path(label)
        current = self.workspace
        for part in [p for p in label[2:].split("/") if p]:
            current = current / part
            try:
                info = os.lstat(current)
            except FileNotFoundError:
                msg = f"node {node!r}: working directory {cwd!r} does not exist under {self.workspace}"
                raise PlanError(msg) from None
            if stat.S_ISLNK(info.st_mode):
                msg = f"node {node!r}: working directory {cwd!r} passes through the symlink {current}"
                raise PlanError(msg)
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode):
            msg = f"node {node!r}: working directory {cwd!r} is not a directory"
            raise PlanError(msg)
        self.identities[label] = identity_of_stat(info)
        self._dirs[cwd] = label
        return label

    def _freeze_file(self, path: Path, *, node: str, role: str) -> FrozenFile:
        canonical = Path(os.path.realpath(path))
        try:
            info = os.stat(canonical)
        except FileNotFoundError:
            msg = f"node {node!r}: {role} {path} does not exist"
            raise PlanError(msg) from None
        if not stat.S_ISREG(info.st_mode):
            msg = f"node {node!r}: {role} {canonical} is not a regular file"
            raise PlanError(msg)
        if not os.access(canonical, os.X_OK):
            msg = f"node {node!r}: {role} {canonical} is not executable (chmod +x it)"
            raise PlanError(msg)
        try:
            relative = canonical.relative_to(self.workspace)
            shown, inside = "//" + relative.as_posix(), True
        except ValueError:
            shown, inside = str(canonical), False
        digest = self._digests.get(shown)
        if digest is None:
            digest = _sha256_file(canonical)
            self._digests[shown] = digest
        self.identities[shown] = identity_of_stat(info)
        return FrozenFile(path=shown, in_workspace=inside, sha256=digest)

    def freeze_interpreter(self, path: Path, *, node: str) -> FrozenFile:
        """Freeze the Python interpreter of Python nodes, given by path (never looked up on PATH)."""
        return self._freeze_file(path, node=node, role="Python interpreter")

    def _which(self, name: str, *, node: str, role: str) -> Path:
        for folder in self.search_path.split(os.pathsep):
            if not folder:
                continue
            candidate = Path(folder) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        msg = f"node {node!r}: {role} {name!r} was not found on PATH ({self.search_path})"
        raise PlanError(msg)

    def _unshim(self, path: Path, *, cwd_label: str, node: str) -> Path:
        """``path``, or the program its manager names when it is a version-manager shim."""
        shim = detect_shim(path, search_path=self.search_path)
        if shim is None:
            return path
        environment = self.environment
        if environment is None:
            environment = frozen_environment(self.search_path)
        answer = shim_program(shim, cwd=self.workspace_path(cwd_label), environment=environment, node=node)
        if detect_shim(answer, search_path=self.search_path) is not None:
            msg = (
                f"node {node!r}: {shim.manager} answered {answer} for the shim {shim.path}, which is a shim "
                f"itself; put the real interpreter first on PATH, or give its absolute path as argv[0]"
            )
            raise PlanError(msg)
        shown = self._freeze_file(answer, node=node, role=f"program of the {shim.manager} shim {shim.path}").path
        self._via.setdefault(shown, set()).add(shim.describe())
        return answer

    def canonical_name(self, name: str, *, cwd_label: str) -> str | None:
        """The canonical path a program name resolves to now (PATH or the cwd), or None; not frozen."""
        if "/" in name:
            base = self.workspace_path(cwd_label)
            path = Path(name) if name.startswith("/") else base / name
        else:
            found = [Path(f) / name for f in self.search_path.split(os.pathsep) if f]
            path = next((p for p in found if p.is_file() and os.access(p, os.X_OK)), Path(name))
        return os.path.realpath(path) if path.is_file() else None

    def executable(self, name: str, *, cwd_label: str, node: str) -> FrozenExecutable:
        """Freeze argv[0] (and its ``#!`` interpreter chain); resolved once per name and cwd."""
        key = (name, cwd_label)
        if key not in self._executables:
            self._executables[key] = self._resolve_executable(name, cwd_label=cwd_label, node=node)
        return self._executables[key]

    def _resolve_executable(self, name: str, *, cwd_label: str, node: str) -> FrozenExecutable:
        if "/" in name:
            base = self.workspace_path(cwd_label)
            path = Path(name) if name.startswith("/") else base / name
            role = "executable"
        else:
            path = self._which(name, node=node, role="executable")
            role = "executable"
        path = self._unshim(path, cwd_label=cwd_label, node=node)
        file = self._freeze_file(path, node=node, role=role)
        real = Path(os.path.realpath(path))
        shebang = _read_shebang(real)
        if shebang is None:
            return FrozenExecutable(file=file)
        interpreter, args = shebang
        chain = [self._freeze_file(Path(interpreter), node=node, role="script interpreter")]
        if Path(interpreter).name == "env":
            names = [a for a in args if not a.startswith("-")]
            if not names:
                msg = f"node {node!r}: {real} has '#!{interpreter}' without a program name"
                raise PlanError(msg)
            found = self._which(names[0], node=node, role="script interpreter")
            found = self._unshim(found, cwd_label=cwd_label, node=node)
            chain.append(self._freeze_file(found, node=node, role="script interpreter"))
        return FrozenExecutable(file=file, interpreters=tuple(chain), interpreter_args=tuple(args))


def _read_shebang(path: Path) -> tuple[str, list[str]] | None:
    fd, _ = open_regular_nofollow(path)  # canonical: no final link; never blocks on a FIFO
    with os.fdopen(fd, "rb") as handle:
        head = handle.read(_SHEBANG_MAX)
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    if not line:
        return None
    interpreter, *args = line.split()
    return interpreter, args


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    fd, _ = open_regular_nofollow(path)
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()
