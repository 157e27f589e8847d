"""Resolving and freezing executables, script interpreters and working directories at plan time.

The first argv value is found on PATH (a bare name) or relative to the node's working directory
(a name with a ``/``), made canonical, and frozen with its sha256 and file identity. A ``#!``
script freezes its interpreter too; for ``#!/usr/bin/env NAME`` both env and the NAME it finds
on PATH now. Paths inside the workspace are frozen ``//``-relative so that two checkouts of one
project plan to the same graph digest.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from rho_notebook.errors import PlanError
from rho_notebook.model.graph import FrozenExecutable, FrozenFile
from rho_notebook.model.identity import FileIdentity, identity_of_stat

__all__ = ["Resolver", "resolve_cwd_label"]

_SHEBANG_MAX = 256


def resolve_cwd_label(cwd: str) -> str | None:
    """``"."`` -> ``"//"``, ``"sub/dir"`` -> ``"//sub/dir"``; None when the path leaves the workspace."""
    if cwd.startswith("/") or "\\" in cwd:
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
    identities: dict[str, FileIdentity] = field(default_factory=dict)
    _digests: dict[str, str] = field(default_factory=dict)
    _executables: dict[tuple[str, str], FrozenExecutable] = field(default_factory=dict)

    def workspace_path(self, label: str) -> Path:
        return self.workspace / label[2:] if label != "//" else self.workspace

    def frozen_dir(self, cwd: str, *, node: str) -> str:
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

    def _which(self, name: str, *, node: str, role: str) -> Path:
        for folder in self.search_path.split(os.pathsep):
            if not folder:
                continue
            candidate = Path(folder) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        msg = f"node {node!r}: {role} {name!r} was not found on PATH ({self.search_path})"
        raise PlanError(msg)

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
            chain.append(
                self._freeze_file(
                    self._which(names[0], node=node, role="script interpreter"), node=node, role="script interpreter"
                )
            )
        return FrozenExecutable(file=file, interpreters=tuple(chain), interpreter_args=tuple(args))


def _read_shebang(path: Path) -> tuple[str, list[str]] | None:
    with open(path, "rb") as handle:
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
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()
