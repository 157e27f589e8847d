"""Freezing what Python nodes run with: the interpreter and its environment, the modules they
import by label, and the workspace files declared as reuse inputs.

The interpreter is given by path (``PlanRequest.python_interpreter``, else the planning
process's own ``sys.executable``), never looked up on PATH, and frozen like any executable: its
canonical path, sha256 and file identity (compared before launch). It is then asked, by the path
it was given (so that a virtual environment finds its ``pyvenv.cfg``) and in isolated mode
(``-I``), for its version, ``sys.path``, site directories and installed distributions; those join
the graph digest, so a changed environment makes a new plan. The answer is remembered for the
life of the process per (given path, interpreter digest) while the folders on its ``sys.path``
keep their modification times (installing or removing a distribution changes its site folder's),
so a kernel that ``pip install``-ed something plans with the new environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rho_notebook.errors import NotRegularFile, PlanError
from rho_notebook.model.graph import FrozenExecutable, FrozenFile, PythonModule, PythonRuntime
from rho_notebook.oshelpers import lstat_components, open_regular_nofollow
from rho_notebook.planning.resolve import Resolver
from rho_notebook.source.labels import check_label
from rho_notebook.source.pymodules import ModuleIndex, harness_sha256

__all__ = [
    "InterpreterFacts",
    "freeze_runtime",
    "frozen_modules",
    "interpreter_path",
    "probe_interpreter",
    "reuse_input",
]

PROBE_TIMEOUT_S = 30.0
_PROBE_ENV = {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
_PROBE = """\
import importlib.metadata, json, platform, re, site, sys
path = [p for p in sys.path if p]
sites = [p for p in site.getsitepackages() if p in path] if hasattr(site, "getsitepackages") else []
seen = {}
for dist in importlib.metadata.distributions():
    name = dist.metadata["Name"]
    if not name:
        continue
    key = re.sub(r"[-_.]+", "-", name).lower()
    seen.setdefault(key, dist.version or "")
print(json.dumps({"version": platform.python_version(), "sys_path": path, "site_dirs": sites,
                  "distributions": sorted(seen.items())}))
"""


@dataclass(frozen=True)
class InterpreterFacts:
    """What an interpreter reported about itself when started with ``-I``."""

    version: str
    sys_path: tuple[str, ...]
    site_dirs: tuple[str, ...]
    distributions: tuple[tuple[str, str], ...]
    """(normalised name, version), sorted; the first of a name on ``sys.path`` wins."""


_probed: dict[tuple[str, str, tuple[str, ...] | None], tuple[InterpreterFacts, tuple[int, ...]]] = {}


def _stamp(folders: tuple[str, ...]) -> tuple[int, ...]:
    """Modification times of ``folders`` (-1 for one that is gone): they change on (un)install."""
    stamps = []
    for folder in folders:
        try:
            stamps.append(os.stat(folder).st_mtime_ns)
        except OSError:
            stamps.append(-1)
    return tuple(stamps)


def interpreter_path(given: Path | None) -> Path:
    """The interpreter Python nodes run in: ``given``, else this process's ``sys.executable``.

    Raises
    ------
    PlanError
        When there is none or it is not an absolute path (it is never looked up on PATH).
    """
    path = given if given is not None else (Path(sys.executable) if sys.executable else None)
    if path is None:
        msg = "this Python process does not know its own interpreter (sys.executable is empty); give the interpreter's absolute path"
        raise PlanError(msg)
    if not path.is_absolute():
        msg = f"the Python interpreter {str(path)!r} must be an absolute path; interpreters are never looked up on PATH"
        raise PlanError(msg)
    return path


def probe_interpreter(path: Path, *, sha256: str, sys_path: tuple[str, ...] | None = None) -> InterpreterFacts:
    """Ask the interpreter at ``path`` (run by that path, ``-I``) about itself; cached per
    (path, digest, ``sys_path``) while the folders on its ``sys.path`` are unchanged. ``sys_path``
    replaces the interpreter's own before it answers, as the node harness does (a Dask worker
    checks the environment the plan froze this way, exec/_dask_worker.py).

    Raises
    ------
    PlanError
        When it does not start, times out, fails or answers something that is not the probe's JSON.
    """
    key = (str(path), sha256, sys_path)
    known = _probed.get(key)
    if known is not None and _stamp(known[0].sys_path) == known[1]:
        return known[0]
    code = _PROBE if sys_path is None else f"import sys; sys.path[:] = {list(sys_path)!r}\n{_PROBE}"
    try:
        done = subprocess.run(
            [str(path), "-I", "-c", code],
            env=_PROBE_ENV,
            cwd="/",
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        msg = f"the Python interpreter {path} did not answer within {PROBE_TIMEOUT_S:.0f} s when asked for its version and installed distributions"
        raise PlanError(msg) from None
    except OSError as err:
        msg = f"the Python interpreter {path} could not be started: {err.strerror or err}"
        raise PlanError(msg) from None
    if done.returncode != 0:
        tail = " | ".join(done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:])
        msg = f"the Python interpreter {path} failed when asked for its version and installed distributions (exit {done.returncode}): {tail}"
        raise PlanError(msg)
    try:
        answer = json.loads(done.stdout)
        facts = InterpreterFacts(
            version=str(answer["version"]),
            sys_path=tuple(str(p) for p in answer["sys_path"]),
            site_dirs=tuple(str(p) for p in answer["site_dirs"]),
            distributions=tuple((str(name), str(version)) for name, version in answer["distributions"]),
        )
    except (ValueError, KeyError, TypeError):
        shown = done.stdout[:200].decode("utf-8", "replace")
        msg = f"the Python interpreter {path} gave an answer that is not the probe's JSON: {shown!r}"
        raise PlanError(msg) from None
    _probed[key] = (facts, _stamp(facts.sys_path))
    return facts


def freeze_runtime(given: Path | None, *, resolver: Resolver, node: str) -> PythonRuntime:
    """Freeze the interpreter (path, digest, identity) and what its environment holds.

    ``node`` names the first Python node, for messages about the interpreter file.

    Raises
    ------
    PlanError
        The interpreter is missing, not an executable regular file, or its probe failed.
    """
    path = interpreter_path(given)
    file = resolver.freeze_interpreter(path, node=node)
    facts = probe_interpreter(path, sha256=file.sha256)
    return PythonRuntime(
        interpreter=FrozenExecutable(file=file),
        version=facts.version,
        sys_path=facts.sys_path,
        site_dirs=facts.site_dirs,
        distributions=facts.distributions,
        harness_sha256=harness_sha256(),
    )


def frozen_modules(index: ModuleIndex, labels: set[str]) -> tuple[PythonModule, ...]:
    """The modules at ``labels`` (read through ``index``) as the graph freezes them, sorted by label."""
    found = []
    for label in sorted(labels):
        module = index.module(label)
        found.append(PythonModule(label=label, name=module.name, sha256=module.sha256, text=module.source.text))
    return tuple(found)


def reuse_input(label: str, *, workspace: Path, node: str) -> FrozenFile:
    """A file declared in ``reuse_inputs``, frozen by content digest; no symlink on its way.

    Raises
    ------
    PlanError
        The label leaves the workspace, or the file is missing, linked or not a regular file.
    """
    problem = check_label(label, suffix="")
    if problem is not None:
        msg = f"node {node!r}: reuse_inputs: {problem}"
        raise PlanError(msg)
    parts = label[2:].split("/")
    current = workspace
    try:
        for current, info in lstat_components(workspace, parts):
            if stat.S_ISLNK(info.st_mode):
                msg = (
                    f"node {node!r}: reuse input {label} passes through the symlink {current}; declare the file itself"
                )
                raise PlanError(msg)
        fd, _ = open_regular_nofollow(current)
    except FileNotFoundError:
        msg = f"node {node!r}: reuse input {label} does not exist in the workspace ({current} is missing)"
        raise PlanError(msg) from None
    except NotRegularFile as err:
        msg = f"node {node!r}: reuse input {label}: {err}; reuse inputs are regular files"
        raise PlanError(msg) from None
    except OSError as err:
        msg = f"node {node!r}: reuse input {label} cannot be read: {err.strerror or err}"
        raise PlanError(msg) from None
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return FrozenFile(path=label, in_workspace=True, sha256="sha256:" + digest.hexdigest())
