"""Where everything lives under RHO_NOTEBOOK_HOME (default ~/.rho-notebook; never Rho's ~/.rho).

workflows/checkout-locks/<WORKSPACE_KEY>.lock
workflows/plans/<PLAN_ID>/{manifest.json, graph.json, sources/<DIGEST>.star}
workflows/runs/<RUN_ID>/{manifest.json, graph.json, state.json, events.jsonl, mutation.lock,
                         nodes/<NODE_ID>/attempts/<N>/...}
agents/*.md            the user agent catalog
settings.json          user settings
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rho_notebook.errors import StoreError
from rho_notebook.store.files import (
    EntryKind,
    check_entry,
    check_no_symlink,
    check_store_root,
    ensure_private_dir,
    list_dir,
)

__all__ = [
    "StoreLayout",
    "default_home",
    "run_folder_damage",
    "VALUE_FILE",
    "ANSWER_TEXT_FILE",
    "ANSWER_PROSE_FILE",
    "PROMPT_FILE",
    "RESULT_FILE",
    "USAGE_FILE",
    "EXIT_FILE",
    "TRANSCRIPT_FILE",
    "STDOUT_FILE",
    "STDERR_FILE",
    "COMPLETION_FILE",
    "REQUEST_FILE",
    "INPUT_FILE",
    "ANSWER_VALUE_FILE",
    "SYSTEM_PROMPT_FILE",
    "SERVED_ARTIFACTS",
]

# -- the files inside an attempt folder (nodes/<NODE_ID>/attempts/<N>/); the store owns these names --

VALUE_FILE = "value.json"
"""The attempt's validated output value, canonical JSON."""
ANSWER_TEXT_FILE = "answer.txt"
"""An agent's or model's raw final answer (the text a JSON value was parsed from)."""
ANSWER_PROSE_FILE = "answer.md"
"""An agent's prose answer (no schema)."""
PROMPT_FILE = "prompt.md"
"""An agent's rendered prompt, or an approval node's rendered question."""
RESULT_FILE = "result.json"
"""A script or item step's result record."""
USAGE_FILE = "usage.json"
"""An agent or model call's token usage, timing and failure kind."""
EXIT_FILE = "exit.json"
"""A command's exit record."""
TRANSCRIPT_FILE = "transcript.json"
"""An agent's message transcript."""
STDOUT_FILE = "stdout"
"""A process's retained standard output."""
STDERR_FILE = "stderr"
"""A process's retained standard error."""
COMPLETION_FILE = "completion.json"
"""A model call's completion record (messages, answer, tokens)."""
REQUEST_FILE = "request.json"
"""A Python node's (or a script's) request to its harness: module, function, arguments."""
INPUT_FILE = "input.json"
"""An item step's input item."""
ANSWER_VALUE_FILE = "answer-value.json"
"""A script agent step's typed answer, when its value.json holds the step's result record."""
SYSTEM_PROMPT_FILE = "system-prompt.txt"
"""An agent's rendered system prompt."""

SERVED_ARTIFACTS: dict[str, tuple[str, ...]] = {
    STDOUT_FILE: (STDOUT_FILE,),
    STDERR_FILE: (STDERR_FILE,),
    EXIT_FILE: (EXIT_FILE,),
    "exit": (EXIT_FILE,),
    VALUE_FILE: (VALUE_FILE,),
    "value": (VALUE_FILE,),
    ANSWER_PROSE_FILE: (ANSWER_PROSE_FILE,),
    ANSWER_TEXT_FILE: (ANSWER_TEXT_FILE,),
    "answer": (ANSWER_PROSE_FILE, ANSWER_TEXT_FILE),
    PROMPT_FILE: (PROMPT_FILE,),
    "prompt": (PROMPT_FILE,),
    TRANSCRIPT_FILE: (TRANSCRIPT_FILE,),
    "transcript": (TRANSCRIPT_FILE,),
    USAGE_FILE: (USAGE_FILE,),
    "usage": (USAGE_FILE,),
    SYSTEM_PROMPT_FILE: (SYSTEM_PROMPT_FILE,),
    "system_prompt": (SYSTEM_PROMPT_FILE,),
}
"""Attempt files a front end may read by name (file names and the short keys results use) ->
candidate files, first existing wins (the REST API's artifact route)."""


def default_home() -> Path:
    configured = os.environ.get("RHO_NOTEBOOK_HOME")
    if configured:
        return Path(configured).expanduser().absolute()
    return Path.home() / ".rho-notebook"


@dataclass(frozen=True)
class StoreLayout:
    home: Path

    @classmethod
    def default(cls) -> StoreLayout:
        """The store at ``$RHO_NOTEBOOK_HOME`` (or ``~/.rho-notebook``), refused when another user
        could write it (:func:`~rho_notebook.store.files.check_store_root`)."""
        home = default_home()
        check_store_root(home)
        return cls(home=home)

    @property
    def workflows(self) -> Path:
        return self.home / "workflows"

    @property
    def plans(self) -> Path:
        return self.workflows / "plans"

    @property
    def runs(self) -> Path:
        return self.workflows / "runs"

    @property
    def checkout_locks(self) -> Path:
        return self.workflows / "checkout-locks"

    @property
    def reuse_index(self) -> Path:
        """reuse/<key[:2]>/<key>.json: where a successful reusable attempt is (store/reuse.py)."""
        return self.workflows / "reuse"

    @property
    def plan_index(self) -> Path:
        """plan-index/<workspace key>/<graph digest>/<sources digest>: one plan per graph."""
        return self.workflows / "plan-index"

    @property
    def carried_approvals(self) -> Path:
        """carried-approvals/<workspace key>/<facts digest>.json: launch approvals that carry over."""
        return self.workflows / "carried-approvals"

    @property
    def agents(self) -> Path:
        return self.home / "agents"

    @property
    def settings(self) -> Path:
        return self.home / "settings.json"

    def plan_dir(self, plan_id: str) -> Path:
        return self.plans / plan_id

    def run_dir(self, run_id: str) -> Path:
        return self.runs / run_id

    def checked_run_dir(self, run_id: str) -> Path:
        """:meth:`run_dir`, refused (StoreError) when it or a folder on the way from the store's
        home is a symlink or writable by others (as :meth:`RunStore.folder
        <rho_notebook.store.runs.RunStore.folder>` refuses it)."""
        path = self.run_dir(run_id)
        check_no_symlink(path, below=self.home)
        return path

    def run_ids(self) -> list[str]:
        """Every run ID, sorted (oldest first), the runs folder checked first (no symlink on the
        way, not writable by others): :meth:`RunStore.ids <rho_notebook.store.runs.RunStore.ids>`
        without the run store's models, for the CLI's read verbs."""
        return sorted(name for name in list_dir(self.runs, below=self.home) if not name.startswith("."))

    def ensure(self, path: Path) -> Path:
        return ensure_private_dir(path, below=self.home)


def run_folder_damage(folder: Path) -> str | None:
    """Why run folder ``folder``'s fixed entries cannot be used (``requests`` or ``nodes`` a
    symlink, a file or a folder others can write; ``state.json`` anything but a regular file, which
    the owner could never replace), or None: :meth:`RunFolder.damage
    <rho_notebook.store.runs.RunFolder.damage>`, for readers that do not load the run store."""
    fixed: tuple[tuple[str, EntryKind], ...] = (("requests", "dir"), ("nodes", "dir"), ("state.json", "file"))
    for name, kind in fixed:
        try:
            check_entry(folder / name, below=folder.parent, kind=kind)
        except StoreError as err:
            return err.message
    return None
