"""The stored values of a script run's settled steps, read ahead for replays, and the replay offers.

While the script's interpreter starts, a thread reads the ``value.json`` of each step whose last
attempt settled (at most :data:`READ_AHEAD_BYTES` in all), so that a replay does not wait for the
file, and encodes the channel answer of each success. A success whose journaled request still
prepares to its journaled digest becomes an *offer*: the script process may answer that call
itself and only report it (see :mod:`rho_notebook.script.channel`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.errors import RhoError, StepInvalid
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import NodeState
from rho_notebook.oshelpers import read_fd
from rho_notebook.runtime.script_channel import encode_answer
from rho_notebook.runtime.script_steps import PreparedStep, StepCall
from rho_notebook.script.channel import request_fingerprint
from rho_notebook.store.files import open_regular, read_nofollow
from rho_notebook.store.layout import VALUE_FILE
from rho_notebook.store.runs import RunFolder

__all__ = ["READ_AHEAD_BYTES", "Offer", "StoredValues", "step_answer"]

READ_AHEAD_BYTES = 32 * 1024 * 1024
"""Most bytes of stored step values read ahead of their replays in one execution."""


def step_answer(key: str, state: str, payload: dict[str, Any], *, replayed: bool) -> dict[str, Any]:
    """The channel's answer to a step call that ended in ``state`` with ``payload`` (``{"output", "value"}``)."""
    return {
        "ok": True,
        "key": key,
        "state": state,
        "output": payload.get("output"),
        "value": payload.get("value"),
        "replayed": replayed,
    }


def _replay_line(key: str, data: bytes) -> bytes | None:
    """The channel's answer line replaying a success whose ``value.json`` holds ``data``; None when
    that is not a JSON object (the replay then finds it unreadable and halts)."""
    try:
        payload = json.loads(data)
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    return encode_answer(step_answer(key, NodeState.SUCCESS.value, payload, replayed=True))


@dataclass(frozen=True)
class Offer:
    """A replay the script process may answer itself (rho_notebook.script.channel)."""

    fingerprint: str
    answer: dict[str, Any]
    attempt: int
    digest: str


@dataclass
class StoredValues:
    """The values of one execution's settled steps, read ahead (each is taken once)."""

    folder: RunFolder
    state: RunState
    prepare: Callable[[StepCall], PreparedStep]
    """Prepares a journaled request again, to check an offer still holds."""
    decided: Mapping[str, object]
    """This resume's unused ``--decide`` decisions: a decided key is never offered."""
    reading: bool = False
    """Whether the read-ahead may go on (cleared when the script ends)."""
    values: dict[tuple[str, int], bytes] = field(default_factory=dict)
    """(step key, attempt) -> its ``value.json``."""
    lines: dict[tuple[str, int], bytes] = field(default_factory=dict)
    """The encoded replay answer of each settled success read ahead (built in the read-ahead
    thread, so that answering a replay encodes nothing)."""
    offers: dict[str, Offer] = field(default_factory=dict)
    """Replay offers made to the script process (read on the loop only once the read-ahead is
    done): a key leaves when its offer is used or its call comes to the owner."""

    def settled(self) -> list[tuple[str, int]]:
        """(key, attempt) of each step whose last attempt settled: what a replay answers from."""
        return [
            (key, record.attempts[-1].number)
            for key, record in self.state.nodes.items()
            if record.attempts and record.attempts[-1].state is not None
        ]

    def read_ahead(self, attempts: list[tuple[str, int]]) -> None:
        """Read the stored values of ``attempts`` (in a thread, while the script's interpreter
        starts), at most ``READ_AHEAD_BYTES`` in all; a value the replay reads first is read
        twice, harmlessly (a settled attempt's value never changes)."""
        budget = READ_AHEAD_BYTES
        for key, number in attempts:
            if not self.reading:
                return
            try:
                fd, info = open_regular(self.folder.attempt_dir(key, number) / VALUE_FILE)
            except (OSError, RhoError):
                continue
            try:
                if info.st_size > budget:
                    return
                data = read_fd(fd)
            except OSError:
                continue
            finally:
                os.close(fd)
            budget -= len(data)
            self.values[(key, number)] = data
            if self.state.nodes[key].attempts[-1].state == NodeState.SUCCESS.value:
                line = _replay_line(key, data)
                if line is not None:
                    self.lines[(key, number)] = line
                    self._offer(key, number, data)

    def _offer(self, key: str, number: int, data: bytes) -> None:
        """Offer the replay of ``key``'s stored success when its journaled request still prepares
        to its journaled digest (in the read-ahead thread)."""
        step = self.state.nodes[key].step or {}
        args, digest = step.get("args"), step.get("digest")
        if key in self.decided or not isinstance(args, dict) or not isinstance(digest, str):
            return
        after = step.get("after") or []
        call = StepCall(
            key=key, kind=str(step.get("kind")), args=args, recovery=step.get("recovery"), after=tuple(after)
        )
        try:
            prepared = self.prepare(call)
        except (StepInvalid, RhoError, OSError, ValueError):
            return
        if prepared.digest != digest:
            return  # changed since (an executable, an agent's definition): the call decides
        fields = {"kind": call.kind, "args": args, "after": list(after), "recovery": call.recovery}
        answer = step_answer(key, NodeState.SUCCESS.value, json.loads(data), replayed=True)
        self.offers[key] = Offer(fingerprint=request_fingerprint(fields), answer=answer, attempt=number, digest=digest)

    def readable(self, key: str, number: int, stored: dict[int, Any]) -> bool:
        """Whether attempt ``number`` of ``key`` has a readable value: an encoded replay line, or
        a JSON object (read ahead, else read now) put into ``stored``."""
        if (key, number) in self.lines:
            return True
        try:
            data = self.values.pop((key, number), None)
            if data is None:
                data = read_nofollow(self.folder.attempt_dir(key, number) / VALUE_FILE)
            stored[number] = json.loads(data)
        except (OSError, RhoError, ValueError):
            return False
        return isinstance(stored[number], dict)

    def clear(self) -> None:
        self.values.clear()
        self.lines.clear()
        self.offers.clear()
