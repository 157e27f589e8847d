"""The stored values of a script run's settled steps, read ahead for replays, and the replay offers.

While the script's interpreter starts, a thread reads the ``value.json`` of each step whose last
attempt settled (at most :data:`READ_AHEAD_BYTES` in all), so that a replay does not wait for the
file, and encodes the channel answer of each success. A success whose journaled request still
prepares to its journaled digest becomes an *offer*: the script process may answer that call
itself and only report it (see :mod:`rho_notebook.script.channel`).

A small success's value is also journaled with its ``node_finished``
(:mod:`rho_notebook.runtime.script_attempts`) and its ``value.json`` written without waiting (a
silent step's not at all): when that copy is missing or torn (a silent step, or the owner or the
machine stopped before it was written), the value is taken from the journal.
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
from rho_notebook.runtime.script_attempts import STEP_VALUE_FIELD
from rho_notebook.runtime.script_channel import encode_answer
from rho_notebook.runtime.script_steps import PreparedStep, StepCall
from rho_notebook.script.channel import request_fingerprint
from rho_notebook.store.files import json_bytes, open_regular, read_nofollow
from rho_notebook.store.journal_reader import read_journal
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
    _journaled: dict[tuple[str, int], bytes] | None = None
    """The values journaled inline, read from the journal when first needed (:meth:`journaled`)."""

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
            data, over = self._read(key, number, budget)
            if over:
                return
            if data is None:
                continue
            budget -= len(data)
            if self.state.nodes[key].attempts[-1].state == NodeState.SUCCESS.value:
                line = _replay_line(key, data)
                if line is None:  # a torn copy: the journaled value, if the record holds it
                    data = self.journaled(key, number) or data
                    line = _replay_line(key, data)
                if line is not None:
                    self.lines[(key, number)] = line
                    self._offer(key, number, data)
            self.values[(key, number)] = data

    def _read(self, key: str, number: int, budget: int) -> tuple[bytes | None, bool]:
        """(the ``value.json`` of attempt ``number`` of ``key``, else its journaled copy, else
        None; whether the file is bigger than ``budget``, then not read)."""
        try:
            fd, info = open_regular(self.folder.attempt_dir(key, number) / VALUE_FILE)
        except (OSError, RhoError):
            data = self.journaled(key, number)  # gone: its copy was not yet written at a crash
            return data, data is not None and len(data) > budget
        try:
            if info.st_size > budget:
                return None, True
            return read_fd(fd), False
        except OSError:
            return None, False
        finally:
            os.close(fd)

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
            stored[number] = None
        if not isinstance(stored[number], dict):  # gone or torn: the journaled value, if any
            data = self.journaled(key, number)
            stored[number] = None if data is None else json.loads(data)
        return isinstance(stored[number], dict)

    def journaled(self, key: str, number: int) -> bytes | None:
        """The ``value.json`` content journaled with attempt ``number`` of ``key``'s ``node_finished``
        (a small success's, :data:`~rho_notebook.runtime.script_attempts.STEP_VALUE_FIELD`), or None.

        Only read when a stored copy is missing or torn (the artifact writer had not written it
        when the owner or the machine stopped): the journal is read once, then remembered.
        """
        found = self._journaled
        if found is None:  # (built whole before it is kept: the read-ahead thread and the loop may both ask)
            found = {}
            try:
                records = read_journal(self.folder.events).events
            except (OSError, RhoError):
                records = []
            for record in records:
                value = record.get(STEP_VALUE_FIELD)
                if record.get("kind") == "node_finished" and isinstance(value, dict):
                    found[(str(record.get("node")), int(record.get("attempt", 0)))] = json_bytes(value)
            self._journaled = found
        return found.get((key, number))

    def clear(self) -> None:
        self.values.clear()
        self.lines.clear()
        self.offers.clear()
