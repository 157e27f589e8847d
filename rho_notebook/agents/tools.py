"""The tools a runtime-rho agent uses inside the workspace, and the box that offers only some.

Read-only: ``list_dir``, ``read_file``, ``grep``, ``glob``. Mutating: ``write``, ``edit``, and
``bash`` / ``shell`` (both run ``bash -c``; ``shell`` is the platform shell, bash on Linux).

Rules every tool keeps:

- Paths are relative to the workspace root (absolute paths are accepted only inside it). Every path
  is resolved (``..`` and symlinks) and refused unless the result stays inside the workspace; the
  final component is then opened without following symlinks.
- Output is bounded (:class:`ToolLimits`); a cut is said in the result.
- A failure is returned to the model as an error result, never raised: the agent can recover.
- :class:`ToolBox` offers only the tools of the frozen capability set (minus mutating ones for a
  read-only node); a call to any other tool is refused as an error result.
- Shell commands run in their own process group with the workspace as working directory and the
  frozen environment allowlist (so no provider credential); the group is killed on timeout,
  cancellation and exit.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.agents._process import run_supervised
from rho_notebook.agents.provider import ToolCall, ToolSpec
from rho_notebook.errors import NotRegularFile
from rho_notebook.oshelpers import read_regular_nofollow

__all__ = [
    "IMPLEMENTED_TOOLS",
    "MUTATING_TOOL_NAMES",
    "READ_ONLY_TOOL_NAMES",
    "ToolBox",
    "ToolLimits",
    "ToolResult",
]

READ_ONLY_TOOL_NAMES: frozenset[str] = frozenset({"list_dir", "read_file", "grep", "glob"})
MUTATING_TOOL_NAMES: frozenset[str] = frozenset({"write", "edit", "bash", "shell"})
IMPLEMENTED_TOOLS: frozenset[str] = READ_ONLY_TOOL_NAMES | MUTATING_TOOL_NAMES
"""Rho capability names this host supplies to runtime-rho agents."""

_SKIP_DIRS = frozenset({".git"})
_BINARY_PROBE = 8192


@dataclass(frozen=True)
class ToolLimits:
    output_bytes: int = 32_000
    """Most bytes of one tool result."""
    read_lines: int = 2000
    list_entries: int = 500
    glob_matches: int = 500
    grep_matches: int = 200
    grep_file_bytes: int = 2 * 1024 * 1024
    """Larger files are skipped by grep."""
    shell_timeout_default: float = 120.0
    shell_timeout_max: float = 3600.0


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False


class _ToolCallRefused(Exception):
    """A tool call that cannot be carried out; the message goes back to the model."""


class ToolBox:
    """The tools offered to one agent attempt, acting inside ``root``."""

    def __init__(
        self,
        root: Path,
        *,
        offered: Iterable[str],
        environ: Mapping[str, str],
        read_only: bool,
        limits: ToolLimits = ToolLimits(),
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.read_only = read_only
        names = set(offered) & IMPLEMENTED_TOOLS
        if read_only:
            names -= MUTATING_TOOL_NAMES
        self.offered: tuple[str, ...] = tuple(sorted(names))
        self._environ = dict(environ)
        self._limits = limits
        self._run: dict[str, Callable[[dict[str, Any]], Any]] = {
            "list_dir": self._list_dir,
            "read_file": self._read_file,
            "grep": self._grep,
            "glob": self._glob,
            "write": self._write,
            "edit": self._edit,
        }

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(_SPECS[name] for name in self.offered)

    async def call(self, call: ToolCall) -> ToolResult:
        """Run one tool call; refusals and failures come back as error results."""
        if call.name not in self.offered:
            return ToolResult(self._unoffered(call.name), is_error=True)
        if call.arguments is None:
            return ToolResult(
                f"the arguments of {call.name} are not a JSON object; send an object matching its parameters",
                is_error=True,
            )
        try:
            if call.name in ("bash", "shell"):
                return await self._shell(call.arguments)
            text = await asyncio.to_thread(self._run[call.name], call.arguments)
        except _ToolCallRefused as refused:
            return ToolResult(str(refused), is_error=True)
        except OSError as err:
            return ToolResult(f"{call.name} failed: {err.strerror or err}", is_error=True)
        except ValueError as err:  # text that is not UTF-8 (edit)
            return ToolResult(f"{call.name} failed: {err}", is_error=True)
        return ToolResult(_bound(str(text), self._limits.output_bytes))

    def _unoffered(self, name: str) -> str:
        offered = ", ".join(self.offered) or "none"
        if self.read_only and name in MUTATING_TOOL_NAMES:
            return (
                f"refused: {name} is not available because this workflow step is read-only "
                f'(access = "read_only"); you may use: {offered}'
            )
        return f"refused: there is no tool {name!r} for this agent; you may use: {offered}"

    # -- paths ---------------------------------------------------------------------------------

    def _resolve(self, raw: Any, *, what: str = "path") -> Path:
        if not isinstance(raw, str) or not raw or "\0" in raw:
            raise _ToolCallRefused(f"{what} must be a non-empty string (a path relative to the workspace root)")
        candidate = Path(raw) if os.path.isabs(raw) else self.root / raw
        real = Path(os.path.realpath(candidate))
        if real == self.root or self.root in real.parents:
            return real
        lexical = Path(os.path.normpath(candidate))
        if lexical == self.root or self.root in lexical.parents:
            raise _ToolCallRefused(f"refused: {raw!r} leads through a symbolic link to a place outside the workspace")
        raise _ToolCallRefused(f"refused: {raw!r} is outside the workspace; use paths inside the workspace root")

    def _shown(self, path: Path) -> str:
        return "." if path == self.root else str(path.relative_to(self.root))

    # -- read-only tools -------------------------------------------------------------------------

    def _list_dir(self, args: dict[str, Any]) -> str:
        folder = self._resolve(args.get("path", "."))
        if not folder.is_dir():
            raise _ToolCallRefused(f"{self._shown(folder)} is not a directory")
        with os.scandir(folder) as entries:
            rows = sorted(_dir_row(entry) for entry in entries)
        cut = len(rows) > self._limits.list_entries
        lines = rows[: self._limits.list_entries]
        if cut:
            lines.append(f"[... {len(rows) - len(lines)} more entries not shown]")
        return "\n".join(lines) if lines else "(empty directory)"

    def _read_file(self, args: dict[str, Any]) -> str:
        path = self._resolve(args.get("path"))
        offset = _int_arg(args, "offset", 1, minimum=1)
        limit = _int_arg(args, "limit", self._limits.read_lines, minimum=1)
        data = _read_regular(path, shown=self._shown(path))
        if b"\0" in data[:_BINARY_PROBE]:
            raise _ToolCallRefused(f"{self._shown(path)} is a binary file; read_file shows text only")
        lines = data.decode("utf-8", errors="replace").splitlines()
        end = min(len(lines), offset - 1 + min(limit, self._limits.read_lines))
        shown = [f"{number:>6}\t{lines[number - 1]}" for number in range(offset, end + 1)]
        text = "\n".join(shown) if shown else f"(no lines from line {offset}; the file has {len(lines)} lines)"
        if end < len(lines):
            text += f"\n[... the file has {len(lines)} lines; read on with offset={end + 1}]"
        return text

    def _grep(self, args: dict[str, Any]) -> str:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise _ToolCallRefused("pattern must be a non-empty regular expression")
        flags = re.IGNORECASE if args.get("ignore_case") is True else 0
        try:
            regex = re.compile(pattern, flags)
        except re.error as err:
            raise _ToolCallRefused(f"pattern is not a valid regular expression: {err}") from None
        include = args.get("include")
        if include is not None and not isinstance(include, str):
            raise _ToolCallRefused("include must be a glob pattern string such as '*.py'")
        base = self._resolve(args.get("path", "."))
        if not base.exists():
            raise _ToolCallRefused(f"{self._shown(base)} does not exist")
        found: list[str] = []
        for path in self._walk(base):
            if include and not fnmatch.fnmatch(path.name, include):
                continue
            for number, line in _matching_lines(path, regex, max_bytes=self._limits.grep_file_bytes):
                if len(found) >= self._limits.grep_matches:
                    found.append(f"[... stopped after {self._limits.grep_matches} matches; narrow the search]")
                    return "\n".join(found)
                found.append(f"{self._shown(path)}:{number}: {line[:300]}")
        return "\n".join(found) if found else "no matches"

    def _walk(self, base: Path) -> Iterable[Path]:
        if base.is_file():
            yield base
            return
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            for name in sorted(files):
                path = Path(folder) / name
                if not path.is_symlink():
                    yield path

    def _glob(self, args: dict[str, Any]) -> str:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise _ToolCallRefused("pattern must be a non-empty glob such as 'src/**/*.py'")
        if os.path.isabs(pattern) or ".." in Path(pattern).parts:
            raise _ToolCallRefused("refused: glob patterns are relative to the workspace root and may not use '..'")
        base = self._resolve(args.get("path", "."))
        if not base.is_dir():
            raise _ToolCallRefused(f"{self._shown(base)} is not a directory")
        matches: list[str] = []
        more = False
        for path in base.glob(pattern):
            real = Path(os.path.realpath(path))
            if real != self.root and self.root not in real.parents:
                continue
            if _SKIP_DIRS & set(path.relative_to(base).parts):
                continue
            if len(matches) == self._limits.glob_matches:
                more = True
                break
            matches.append(self._shown(path) + ("/" if path.is_dir() else ""))
        matches.sort()
        if more:
            matches.append(f"[... more than {self._limits.glob_matches} matches; narrow the pattern]")
        return "\n".join(matches) if matches else "no matches"

    # -- mutating tools ------------------------------------------------------------------------------

    def _write(self, args: dict[str, Any]) -> str:
        path = self._resolve(args.get("path"))
        content = args.get("content")
        if not isinstance(content, str):
            raise _ToolCallRefused("content must be a string (the whole new file)")
        if path == self.root or path.is_dir():
            raise _ToolCallRefused(f"{self._shown(path)} is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode()
        _write_regular(path, data)
        return f"wrote {len(data)} bytes to {self._shown(path)}"

    def _edit(self, args: dict[str, Any]) -> str:
        path = self._resolve(args.get("path"))
        old, new = args.get("old_string"), args.get("new_string")
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise _ToolCallRefused("old_string (non-empty) and new_string must be strings")
        text = _read_regular(path, shown=self._shown(path)).decode("utf-8")
        count = text.count(old)
        if count == 0:
            raise _ToolCallRefused(
                f"old_string does not occur in {self._shown(path)}; read the file and copy the exact text"
            )
        if count > 1 and args.get("replace_all") is not True:
            raise _ToolCallRefused(
                f"old_string occurs {count} times in {self._shown(path)}; include more surrounding text "
                "to make it unique, or set replace_all to true"
            )
        _write_regular(path, text.replace(old, new).encode())
        return f"replaced {count} occurrence{'s' if count > 1 else ''} in {self._shown(path)}"

    async def _shell(self, args: dict[str, Any]) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise _ToolCallRefused("command must be a non-empty string")
        timeout = args.get("timeout_seconds", self._limits.shell_timeout_default)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise _ToolCallRefused("timeout_seconds must be a positive number")
        timeout = min(float(timeout), self._limits.shell_timeout_max)
        bash = shutil.which("bash", path=self._environ.get("PATH", os.defpath))
        if bash is None:
            raise _ToolCallRefused("bash is not on the PATH of this run; no shell is available")
        half = self._limits.output_bytes // 2
        outcome = await run_supervised(
            [bash, "-c", command], cwd=self.root, env=self._environ, timeout=timeout, max_bytes=half
        )
        parts = [f"exit code: {outcome.exit_code}" if outcome.signal is None else f"killed by signal {outcome.signal}"]
        if outcome.timed_out:
            parts[0] = f"timed out after {timeout:g} s; the command's process group was stopped"
        for name, data, cut in (
            ("stdout", outcome.stdout, outcome.stdout_truncated),
            ("stderr", outcome.stderr, outcome.stderr_truncated),
        ):
            if data or cut:
                note = " (truncated)" if cut else ""
                parts.append(f"--- {name}{note} ---\n{data.decode('utf-8', errors='replace')}")
        return ToolResult("\n".join(parts), is_error=outcome.timed_out)


# -- helpers -------------------------------------------------------------------------------------------


def _dir_row(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return f"{entry.name}@"
    return entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")


def _int_arg(args: dict[str, Any], key: str, default: int, *, minimum: int) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _ToolCallRefused(f"{key} must be an integer >= {minimum}")
    return value


def _read_regular(path: Path, *, shown: str) -> bytes:
    try:
        return read_regular_nofollow(path, nonblock=True)
    except FileNotFoundError:
        raise _ToolCallRefused(f"{shown} does not exist") from None
    except NotRegularFile:
        raise _ToolCallRefused(f"{shown} is not a regular file") from None


def _write_regular(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _matching_lines(path: Path, regex: re.Pattern[str], *, max_bytes: int) -> Iterable[tuple[int, str]]:
    try:
        if path.stat().st_size > max_bytes:
            return
        data = path.read_bytes()
    except OSError:
        return
    if b"\0" in data[:_BINARY_PROBE]:
        return
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if regex.search(line):
            yield number, line


def _bound(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", errors="ignore")
    return kept + f"\n[... output truncated at {limit} bytes of {len(data)}]"


def _spec(name: str, description: str, *, properties: dict[str, Any], required: tuple[str, ...] = ()) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": list(required),
            "additionalProperties": False,
        },
    )


_PATH = {"type": "string", "description": "Path relative to the workspace root"}
_SHELL_PROPS = {
    "command": {"type": "string", "description": "The command text, run with bash -c"},
    "timeout_seconds": {"type": "number", "description": "Stop the command after this many seconds (default 120)"},
}
_SHELL_TEXT = (
    "Run a shell command (bash -c) in the workspace root and return its exit code, stdout and stderr "
    "(bounded). Standard input is closed."
)

_SPECS: dict[str, ToolSpec] = {
    "list_dir": _spec(
        "list_dir",
        "List the entries of a workspace directory (directories end with /, symlinks with @).",
        properties={"path": {**_PATH, "description": "Directory relative to the workspace root (default .)"}},
    ),
    "read_file": _spec(
        "read_file",
        "Read a text file of the workspace; lines come back numbered. Use offset and limit for long files.",
        properties={
            "path": _PATH,
            "offset": {"type": "integer", "description": "First line to show, 1-based (default 1)"},
            "limit": {"type": "integer", "description": "How many lines to show (default 2000)"},
        },
        required=("path",),
    ),
    "grep": _spec(
        "grep",
        "Search workspace files for a regular expression (Python syntax); returns path:line: text.",
        properties={
            "pattern": {"type": "string", "description": "Regular expression"},
            "path": {**_PATH, "description": "File or directory to search (default .)"},
            "include": {"type": "string", "description": "Only files whose name matches this glob, e.g. *.py"},
            "ignore_case": {"type": "boolean"},
        },
        required=("pattern",),
    ),
    "glob": _spec(
        "glob",
        "Find workspace paths matching a glob pattern such as src/**/*.py.",
        properties={
            "pattern": {"type": "string", "description": "Glob relative to path; ** matches any depth"},
            "path": {**_PATH, "description": "Directory to search from (default .)"},
        },
        required=("pattern",),
    ),
    "write": _spec(
        "write",
        "Create or overwrite a workspace file with the given content (parent directories are created).",
        properties={"path": _PATH, "content": {"type": "string", "description": "The complete new file content"}},
        required=("path", "content"),
    ),
    "edit": _spec(
        "edit",
        "Replace exact text in a workspace file. old_string must occur exactly once unless replace_all is true.",
        properties={
            "path": _PATH,
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"type": "boolean"},
        },
        required=("path", "old_string", "new_string"),
    ),
    "bash": _spec("bash", _SHELL_TEXT, properties=_SHELL_PROPS, required=("command",)),
    "shell": _spec(
        "shell", _SHELL_TEXT + " (the platform shell: bash)", properties=_SHELL_PROPS, required=("command",)
    ),
}
