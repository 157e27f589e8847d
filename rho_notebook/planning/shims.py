"""Version-manager shims (pyenv, asdf, rbenv, nodenv, ...): recognising one, freezing what it runs.

A shim is a small ``#!`` script that picks the real program from its own name (``${0##*/}``) and
from the caller's working directory (``.python-version``, ``.tool-versions``) and environment.
A frozen executable is launched as ``/proc/self/fd/N``, so a shim would see that path as its name
and fail (``pyenv: 91: command not found``); and what it runs would not be frozen anyway. So
planning recognises a shim -- a ``#!`` script in a folder named ``shims``, or one that takes its
own name from ``$0`` and hands over to a manager (``exec MANAGER exec "$program"``) -- and asks its manager which program it runs, with argv as a list (no shell),
in the node's working directory and with the node's frozen environment. The answer is frozen in
place of the shim; when there is no answer the plan is rejected with the fix.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rho_notebook.errors import PlanError
from rho_notebook.model.graph import EnvironmentPolicy

__all__ = ["Shim", "detect_shim", "frozen_environment", "shim_program"]

_HEAD_MAX = 8192
_WHICH_TIMEOUT_SECONDS = 20

_SELF_NAME = re.compile(r"""\$\{0##|basename\s+(?:--\s+)?["']?\$\{?0\b""")
"""How a script takes its own name from ``$0``: ``${0##*/}``, ``basename "$0"``."""
_MANAGER_EXEC = re.compile(r"""^\s*exec\s+["']?([^"'\s]+)["']?\s+exec\s""", re.MULTILINE)
"""The shim's hand-over: ``exec "/root/.pyenv/libexec/pyenv" exec "$program" "$@"``."""
_EXPORT = re.compile(r"""^\s*export\s+([A-Z_][A-Z0-9_]*)=["']?([^"'$`\n;]*)["']?\s*$""", re.MULTILINE)
"""Static ``export NAME="value"`` lines of a shim (pyenv and rbenv set their root this way)."""


@dataclass(frozen=True)
class Shim:
    """A shim found where argv[0] resolved."""

    path: Path
    """The shim as found on PATH (not made canonical: its file name is the program it stands for)."""
    manager: str
    """The manager's name, for messages and the plan: ``pyenv``, ``asdf``, ``rbenv``, ..."""
    command: Path | None
    """The manager's executable, when it could be found."""
    exports: tuple[tuple[str, str], ...]
    """Variables the shim exports before handing over, added to the environment of ``which``."""

    def describe(self) -> str:
        return f"via {self.manager} shim {self.path}"


def frozen_environment(search_path: str, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a command node gets (the allowlist of :class:`EnvironmentPolicy`), with
    ``PATH`` set to the planning search path."""
    policy = EnvironmentPolicy()
    source = os.environ if source is None else source
    env = {k: v for k, v in source.items() if k in policy.names or k.startswith(policy.prefixes)}
    env["PATH"] = search_path
    return env


def detect_shim(path: Path, *, search_path: str) -> Shim | None:
    """The shim at ``path`` (as found on PATH), or None when it is not one."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD_MAX)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    text = head.decode("utf-8", "replace")
    in_shims = path.parent.name == "shims"
    handover = _MANAGER_EXEC.search(text)
    if not in_shims and (handover is None or not _SELF_NAME.search(text)):
        return None  # outside shims/: only a script that takes its name from $0 and hands over
    command: Path | None = None
    manager = ""
    if handover is not None:
        named = handover.group(1)
        manager = Path(named).name
        command = _executable(Path(named)) if "/" in named else _on_path(named, search_path)
    root = path.parent.parent if in_shims else None
    if not manager and root is not None:
        manager = root.name.lstrip(".") or "version manager"
    if command is None and root is not None and manager:
        for candidate in (root / "bin" / manager, root / "libexec" / manager):
            command = command or _executable(candidate)
    exports = tuple((m.group(1), m.group(2)) for m in _EXPORT.finditer(text))
    return Shim(path=path, manager=manager or "version manager", command=command, exports=exports)


def shim_program(shim: Shim, *, cwd: Path, environment: Mapping[str, str], node: str) -> Path:
    """Ask the shim's manager which program it runs in ``cwd`` with ``environment``.

    Raises
    ------
    PlanError
        When the manager cannot be found or gives no usable answer; the message names the fix.
    """
    name = shim.path.name
    if shim.command is None:
        raise PlanError(_unresolved(shim, node=node, why=f"its manager {shim.manager!r} was not found"))
    argv = [str(shim.command), "which", name]
    env = {**environment, **dict(shim.exports)}
    try:
        done = subprocess.run(  # noqa: S603 - argv is a list; no shell, nothing from workflow data
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_WHICH_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PlanError(_unresolved(shim, node=node, why=f"running {' '.join(argv)} failed: {err}")) from None
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        why = f"`{' '.join(argv)}` in {cwd} answered: {said}"
        raise PlanError(_unresolved(shim, node=node, why=why))
    answer = Path(lines[-1])
    if not answer.is_absolute() or _executable(answer) is None:
        why = f"`{' '.join(argv)}` in {cwd} answered {str(answer)!r}, which is not an executable file"
        raise PlanError(_unresolved(shim, node=node, why=why))
    return answer


def _unresolved(shim: Shim, *, node: str, why: str) -> str:
    return (
        f"node {node!r}: {shim.path} is a {shim.manager} shim (a script that picks the program from its own "
        f"name, the working directory and the environment), and planning could not tell which program it runs: "
        f"{why}. Put the real interpreter first on PATH (e.g. an activated venv), or give its absolute path as "
        f"argv[0] (what `{shim.manager} which {shim.path.name}` prints in the node's working directory)"
    )


def _executable(path: Path) -> Path | None:
    return path if path.is_file() and os.access(path, os.X_OK) else None


def _on_path(name: str, search_path: str) -> Path | None:
    for folder in search_path.split(os.pathsep):
        if folder and (found := _executable(Path(folder) / name)) is not None:
            return found
    return None
