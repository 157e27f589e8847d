"""What a terminal shows of the nodes a followed run is running: the tail of an attempt's output,
and the live area of a TTY (one line per running node, redrawn in place).

The tails are read from the attempt's ``stdout``/``stderr`` files as the run folder reads them
(never through a link), and bounded (a few KiB from the end), so a node that writes gigabytes costs the terminal
nothing. What a node wrote is shown as text only: escape sequences and control characters are
removed, so a node's output can neither move the cursor nor recolour the terminal.

The live area uses ``rich``, imported when it starts (only ``run``, ``resume`` and ``wait`` on a
TTY show it), and redraws at most :data:`REDRAW_SECONDS` apart; a permanent line (a node that
finished) is printed above it. While a person is being asked something on the terminal the area
is paused, so the prompt is not drawn over.
"""

from __future__ import annotations

import os
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from rho_notebook.errors import RhoError
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.model.state import NodeState
from rho_notebook.service import RunFolder

__all__ = ["LiveArea", "REDRAW_SECONDS", "running_since", "tail_lines", "last_line", "clock"]

REDRAW_SECONDS = 0.25
"""The live area is redrawn (and the running attempts' output tails read) at most this often."""

TAIL_BYTES = 4096
"""How much of the end of an output file is read for its last lines."""

_STREAMS = frozenset({"stdout", "stderr"})
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _clean(text: str) -> str:
    """``text`` without escape sequences and control characters (a tab becomes a space)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text)).replace("\t", " ")


def _tail(folder: RunFolder, path: Path, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of an output file in the run's folder as text ("" when it is
    missing or refused: the folder checks every component, as ``logs`` does)."""
    try:
        size = os.stat(path, follow_symlinks=False).st_size
        start = max(0, size - limit)
        data = folder.read_from(path, start)[-limit:]
    except (RhoError, OSError):
        return ""
    text = data.decode("utf-8", "replace")
    return text.split("\n", 1)[1] if start > 0 and "\n" in text else text  # a cut first line is dropped


def tail_lines(folder: RunFolder, path: Path, *, lines: int = 10, chars: int = 2000) -> list[str]:
    """The last non-blank lines of an output file, at most ``lines`` of them and ``chars``
    characters in all (a carriage return starts a line, as a progress bar redraws one)."""
    found = [_clean(line).rstrip() for line in re.split(r"\r\n|\r|\n", _tail(folder, path))]
    kept: list[str] = []
    total = 0
    for line in reversed([line for line in found if line.strip()]):
        if len(kept) == lines or total + len(line) > chars:
            break
        kept.append(line)
        total += len(line)
    return kept[::-1]


def last_line(folder: RunFolder, path: Path) -> str:
    """The last non-blank line of an output file ("" when there is none)."""
    found = tail_lines(folder, path, lines=1, chars=TAIL_BYTES)
    return found[0].strip() if found else ""


def running_since(record: NodeRecord) -> float | None:
    """When (epoch seconds) the running attempt of ``record`` started; None if it is not running."""
    current = record.current
    if record.state is not NodeState.RUNNING or current is None or not current.started_at:
        return None
    try:
        return datetime.fromisoformat(current.started_at).timestamp()
    except ValueError:
        return None


def clock(seconds: float) -> str:
    """``4.2s``, ``1m05s``, ``2h03m``: a running node's elapsed time, short."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


class LiveArea:
    """The redrawn lines of a TTY: one per running node (name, elapsed time, the last line its
    attempt wrote), with permanent lines printed above them."""

    def __init__(self, folder: RunFolder | None) -> None:
        self.folder = folder
        self._live: Any = None
        self._paused = False
        self._drawn = 0.0
        self._lines: dict[tuple[str, int], str] = {}
        self._state: RunState | None = None
        self._ended: set[tuple[str, int]] = set()
        self._grown: dict[tuple[str, int], str] = {}
        """(node, attempt) -> the stream that grew last, not read yet."""

    def _start(self) -> Any:
        if self._live is None:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=sys.stdout, force_terminal=True, highlight=False, markup=False, emoji=False)
            self._live = Live(console=console, auto_refresh=False, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        return self._live

    def print(self, line: str) -> None:
        """A permanent line, above the live area (plainly while it is paused)."""
        if self._paused:
            print(line, flush=True)
            return
        from rich.text import Text

        self._start().console.print(Text(line), soft_wrap=True)

    def grew(self, node: str, attempt: int, stream: str) -> None:
        """The attempt's ``stream`` grew: show its last line from the next redraw on."""
        if stream in _STREAMS:
            self._grown[(node, attempt)] = stream

    def update(self, state: RunState) -> None:
        """Redraw the running nodes of ``state`` (at most every :data:`REDRAW_SECONDS`)."""
        self._state = state
        if not self._paused and time.monotonic() - self._drawn >= REDRAW_SECONDS:
            self._redraw()

    def ended(self, node: str, attempt: int) -> None:
        """The node's attempt ended: off the area now, before its permanent line is printed."""
        self._ended.add((node, attempt))
        if self._live is not None and not self._paused:
            self._redraw()

    def _redraw(self) -> None:
        from rich.console import Group
        from rich.text import Text

        self._drawn = time.monotonic()
        rows = [Text(row, no_wrap=True, overflow="ellipsis") for row in self._rows()]
        self._start().update(Group(*rows), refresh=True)

    def _rows(self) -> list[str]:
        rows: list[str] = []
        if self._state is None:
            return rows
        wall = time.time()
        for name, record in self._state.nodes.items():
            since = running_since(record)
            key = (name, record.attempt)
            if since is None or key in self._ended:
                continue
            current = record.current
            if current is not None and current.pending_approval:
                said = "waiting for a person"
            else:
                said = self._last(key)
            rows.append(f"  {name:<24} {clock(max(0.0, wall - since)):>7}  {said}".rstrip())
        return rows

    def _last(self, key: tuple[str, int]) -> str:
        """The last line node ``key`` wrote, read again only when its output grew."""
        stream = self._grown.pop(key, None)
        if stream is not None and self.folder is not None:
            found = last_line(self.folder, self.folder.attempt_dir(*key) / stream)
            self._lines[key] = found or self._lines.get(key, "")
        return self._lines.get(key, "")

    def pause(self) -> None:
        """Clear the area and stop redrawing (a prompt may be on the terminal)."""
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(""), refresh=True)
            self._live.stop()
            self._live = None
        self._paused = True

    def resume(self) -> None:
        """Redraw again after :meth:`pause` (from the next :meth:`update`)."""
        if self._paused:
            self._paused = False
            self._drawn = 0.0

    def stop(self) -> None:
        """Stop the live area for good, leaving its last lines on the screen."""
        if self._live is not None:
            self._live.stop()
            self._live = None
