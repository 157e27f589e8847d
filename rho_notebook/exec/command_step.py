"""Preparing the command operation of a script's command step: its arguments checked, argv[0]
frozen, the code-argument rule applied, its digest inputs and launch facts.

A step's arguments ``{"argv", "cwd", "timeout_seconds", "max_output_bytes"}`` become a
:class:`~rho_notebook.exec.supervised.ProcessOperation`, the launch a command node makes. argv[0]
is resolved and frozen once per execution (:mod:`rho_notebook.exec.freeze`); an argv item
``{"step": KEY, "text": TEXT}`` is data taken from another step's output, and
:func:`~rho_notebook.planning.code_args.code_argument_problem` refuses it where an interpreter
reads its program or a wrapper the program it runs, as it refuses ``output()`` references in a
command node. Every refusal is a :class:`~rho_notebook.errors.StepInvalid` naming the step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from rho_notebook.errors import PlanError, StepInvalid
from rho_notebook.exec.command import command_facts
from rho_notebook.exec.freeze import Freeze, Freezes
from rho_notebook.exec.supervised import ProcessOperation
from rho_notebook.model.canonical import encode
from rho_notebook.model.identity import FileIdentity
from rho_notebook.planning.code_args import ArgvItem, code_argument_problem, step_datum
from rho_notebook.planning.resolve import Resolver, resolve_cwd_label
from rho_notebook.source.limits import Limits

__all__ = ["STEP_FORMAT", "CommandStepPreparer", "PreparedCommand", "StepBudgets", "step_digest"]

STEP_FORMAT = "rho-notebook/step/v1"
"""Part of every step digest's input: a change of what a digest covers changes this."""
_DIGEST_MEMO = 4096
"""Most prepared command steps remembered (the memo starts over when full)."""


def step_digest(key: str, inputs: dict[str, Any]) -> str:
    """``sha256:`` over the canonical encoding of a step's inputs (StepInvalid when they are not
    JSON-shaped data without floats)."""
    try:
        data = encode(inputs)
    except (TypeError, ValueError) as err:
        msg = f"step {key!r}: its arguments are not JSON-shaped data without floats ({err})"
        raise StepInvalid(msg) from None
    return "sha256:" + hashlib.sha256(data).hexdigest()


class StepBudgets:
    """The planning limits a step's arguments must stay within (``source/limits.py``)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    def within(self, key: str, budget: str, measured: int) -> None:
        limit = self.limits.limit(budget)
        if measured > limit:
            msg = f"step {key!r}: budget {budget!r} exceeded: accepted limit {limit}, measured {measured}"
            raise StepInvalid(msg)

    def positive(self, key: str, args: Mapping[str, Any], name: str) -> int:
        """``args[name]``, a positive integer within its budget."""
        value = args[name]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            msg = f"step {key!r}: {name} must be a positive integer, got {value!r}"
            raise StepInvalid(msg)
        self.within(key, name, value)
        return value


@dataclass(frozen=True)
class PreparedCommand:
    """A command step ready to run."""

    operation: ProcessOperation
    digest: str
    inputs: dict[str, Any]
    """What the digest covers."""
    facts: dict[str, Any]
    """What a person or a hook approves (a command node's launch facts, plus the bounds)."""
    identities: Mapping[str, FileIdentity]
    """Identities of the frozen executable, interpreters and cwd, taken now."""


class CommandStepPreparer:
    """Prepares the command steps of one execution (it keeps their freezes and a memo).

    Parameters
    ----------
    workspace
        The canonical workspace root.
    search_path
        The PATH argv[0] is resolved on.
    script_cwd
        The script's working directory label (``//...``): the default and base of a step's cwd.
    identities
        The plan manifest's identities (used for a cwd the step's own freeze did not record).
    budgets
        The limits argv and the bounds stay within.
    """

    def __init__(
        self,
        *,
        workspace: Path,
        search_path: str,
        script_cwd: str,
        identities: Mapping[str, FileIdentity],
        budgets: StepBudgets,
    ) -> None:
        self.workspace = workspace
        self.search_path = search_path
        self.script_cwd = script_cwd
        self.identities = identities
        self.budgets = budgets
        self._freezes = Freezes(workspace)
        self._prepared: dict[tuple[Any, ...], tuple[Freeze, PreparedCommand, dict[str, FileIdentity]]] = {}
        """(argv, argv data refs, cwd, timeout, max_output) -> (the freeze, the step prepared with
        it, the cwd identity it saw)."""
        self._valid: dict[tuple[Any, ...], tuple[list[str], list[ArgvItem], int, int, str]] = {}
        """Plain arguments (:func:`_plain`) -> what :meth:`_checked` made of them."""

    def prepare(self, key: str, args: Mapping[str, Any], *, where: str, block: bool) -> PreparedCommand | None:
        """The step ``key`` with ``args`` (called at ``where``, ``FILE:LINE``) prepared; without
        ``block``, None when that needs blocking work (freezing argv[0]: resolving, hashing)."""
        texts, parts, timeout, max_output, relative = self._checked(key, args)
        resolver = Resolver(workspace=self.workspace, search_path=self.search_path)
        try:
            cwd = resolver.frozen_dir(relative, node=key)
            resolved = self._freezes.reused(texts[0], cwd=cwd)
            if resolved is None:
                if not block:
                    return None
                resolved = self._freezes.freeze(resolver, texts[0], cwd=cwd, node=key)
        except PlanError as err:
            raise StepInvalid(err.message.replace("node ", "step ", 1)) from None
        except OSError as err:
            msg = f"step {key!r}: cannot resolve {texts[0]!r} in {relative!r}: {err.strerror or err}"
            raise StepInvalid(msg) from None
        # the same arguments over the same reused freeze (and the same cwd) prepare the same step:
        # build it once, and give it this call's key
        refs = tuple(item["step"] if isinstance(item, dict) else None for item in args["argv"])
        memo_key = (tuple(texts), refs, cwd, timeout, max_output)
        memo = self._prepared.get(memo_key)
        if memo is not None and memo[0] is resolved and memo[2] == resolver.identities:
            known = memo[1]
            return PreparedCommand(
                _named(known.operation, key), known.digest, known.inputs, dict(known.facts), known.identities
            )
        executable = resolved.executable
        problem = code_argument_problem(
            parts,
            resolved=executable.file.path,
            lookup=partial(resolver.canonical_name, cwd_label=cwd),
            node=key,
            subject="step",
            where=where,
        )
        if problem is not None:
            raise StepInvalid(problem.message)
        operation = ProcessOperation(
            name=key,
            executable=executable,
            argv=tuple(texts),
            cwd=cwd,
            timeout_seconds=timeout,
            max_output_bytes=max_output,
        )
        inputs = {
            "format": STEP_FORMAT,
            "kind": "command",
            "argv": texts,
            "cwd": cwd,
            "executable": executable.model_dump(mode="json"),
            "timeout_seconds": timeout,
            "max_output_bytes": max_output,
        }
        facts = command_facts(operation)
        facts.update(timeout_seconds=timeout, max_output_bytes=max_output)
        prepared = PreparedCommand(
            operation=operation,
            digest=step_digest(key, inputs),
            inputs=inputs,
            facts=facts,
            identities={**self.identities, **resolver.identities, **resolved.identities},
        )
        if len(self._prepared) >= _DIGEST_MEMO:
            self._prepared.clear()
        self._prepared[memo_key] = (resolved, prepared, dict(resolver.identities))
        return PreparedCommand(operation, prepared.digest, inputs, dict(facts), prepared.identities)

    def _checked(self, key: str, args: Mapping[str, Any]) -> tuple[list[str], list[ArgvItem], int, int, str]:
        """(argv texts, argv as the code-argument rule sees it, timeout, max output, cwd relative to
        the workspace) of valid arguments; the same plain arguments are checked once per execution
        (a loop of steps sends the same ones)."""
        plain = _plain(args)
        known = self._valid.get(plain) if plain is not None else None
        if known is not None:
            return known
        texts, parts = self._argv(key, args)
        timeout = self.budgets.positive(key, args, "timeout_seconds")
        max_output = self.budgets.positive(key, args, "max_output_bytes")
        checked = (texts, parts, timeout, max_output, self._cwd_relative(key, args))
        if plain is not None:
            if len(self._valid) >= _DIGEST_MEMO:
                self._valid.clear()
            self._valid[plain] = checked
        return checked

    def _cwd_relative(self, key: str, args: Mapping[str, Any]) -> str:
        """The step's cwd as a path relative to the workspace root (what Resolver.frozen_dir takes)."""
        raw = args.get("cwd")
        base = self.script_cwd
        if raw is None:
            return base[2:] or "."
        if not isinstance(raw, str) or not raw or "\x00" in raw:
            msg = f"step {key!r}: cwd must be a non-empty path, got {raw!r}"
            raise StepInvalid(msg)
        if raw.startswith("//"):
            relative = raw[2:] or "."
        elif raw.startswith("/"):
            try:
                relative = Path(os.path.normpath(raw)).relative_to(self.workspace).as_posix()
            except ValueError:
                msg = f"step {key!r}: cwd {raw!r} is outside the workspace {self.workspace}; give a path inside it"
                raise StepInvalid(msg) from None
        else:
            relative = str(PurePosixPath(base[2:] or ".") / raw)
        if resolve_cwd_label(relative) is None:
            msg = f"step {key!r}: cwd {raw!r} leaves the workspace (no '..'); give a path inside it"
            raise StepInvalid(msg)
        return relative

    def _argv(self, key: str, args: Mapping[str, Any]) -> tuple[list[str], list[ArgvItem]]:
        """(texts, parts): the argv as launched, and as the code-argument rule sees it (step data
        as data)."""
        raw = args["argv"]
        if not isinstance(raw, list) or not raw:
            msg = f"step {key!r}: argv must be a non-empty list of strings"
            raise StepInvalid(msg)
        texts: list[str] = []
        parts: list[ArgvItem] = []
        for index, item in enumerate(raw):
            text, part = _argv_item(key, index, item)
            texts.append(text)
            parts.append(part)
        self.budgets.within(key, "argv_items", len(texts))
        self.budgets.within(key, "argv_bytes", sum(len(t.encode()) for t in texts))
        return texts, parts


def _plain(args: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A hashable copy of arguments made of plain values only (argv of strings, cwd None or a
    string, integer bounds), else None; equal copies check the same."""
    argv, cwd = args.get("argv"), args.get("cwd")
    timeout, max_output = args.get("timeout_seconds"), args.get("max_output_bytes")
    if type(argv) is not list or not all(type(item) is str for item in argv):
        return None
    if (cwd is not None and type(cwd) is not str) or type(timeout) is not int or type(max_output) is not int:
        return None
    return (tuple(argv), cwd, timeout, max_output)


def _named(operation: ProcessOperation, key: str) -> ProcessOperation:
    """``operation`` launched under ``key`` (its ``RHO_NODE``)."""
    return operation if operation.name == key else dataclasses.replace(operation, name=key)


def _argv_item(key: str, index: int, item: Any) -> tuple[str, ArgvItem]:
    """One argv item as launched and as the code-argument rule sees it."""
    part: ArgvItem
    if isinstance(item, str):
        text, part = item, item
    elif (
        isinstance(item, dict)
        and set(item) == {"step", "text"}
        and isinstance(item["step"], str)
        and isinstance(item["text"], str)
        and index > 0
    ):
        text, part = item["text"], step_datum(item["step"])
    else:
        what = "argv[0] must be literal text" if index == 0 else f"argv[{index}] is not a string"
        msg = f"step {key!r}: {what} (got {item!r})"
        raise StepInvalid(msg)
    if "\x00" in text:
        msg = f"step {key!r}: argv[{index}] contains a NUL byte, which no process can receive"
        raise StepInvalid(msg)
    return text, part
