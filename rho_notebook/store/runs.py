"""Runs on disk: runs/<RUN_ID>/{manifest.json, graph.json, state.json, events.jsonl,
journal.mark, mutation.lock, requests/, nodes/<NODE>/attempts/<N>/...}.

``<NODE>`` is the node's name as one folder (:func:`node_folder`): a flow's step key such as
``team.research.writer/f1#2`` holds a ``/``, which is written ``%2F`` so that every attempt
folder sits at the same depth (``%`` itself is written ``%25``). Starlark node names and script
step ids hold neither, so their folders are their names.

The run copies the frozen graph and the plan facts it needs, so deleting the plan never breaks
status or resume. The owner of a run holds an exclusive flock on mutation.lock for as long as it
executes; readers never take it.

Every file read or written below a run folder goes through :class:`RunFolder`, and every one of
its paths through :func:`~rho_notebook.store.files.check_entry` (from the runs folder down: no
symlink, no file where a folder belongs, no folder others can write) before it is opened without
following a link. ``requests/`` is checked each time :attr:`RunFolder.requests` is read, so cancel
requests, their acknowledgements and approval requests are never written through a planted link;
:meth:`RunFolder.damage` reports a fixed entry of the wrong kind (``requests`` or ``nodes`` a file
or a link) so that the run reads as damaged and no owner starts on it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from rho_notebook.errors import NotFound, StoreError
from rho_notebook.model.base import FrozenModel
from rho_notebook.model.graph import Graph
from rho_notebook.model.identity import FileIdentity
from rho_notebook.model.run_state import AttemptRecord
from rho_notebook.oshelpers import read_fd
from rho_notebook.store.files import (
    EntryKind,
    atomic_write,
    atomic_write_json,
    check_entry,
    check_no_symlink,
    fsync_dir,
    list_dir,
    open_regular,
    read_json,
    read_nofollow,
)
from rho_notebook.store.graphs import graph_file_bytes, load_graph, remember_graph
from rho_notebook.store.ids import match_id
from rho_notebook.store.journal import CHAINED, JournalWriter, Watermark, read_journal, write_watermark
from rho_notebook.store.layout import (
    ANSWER_PROSE_FILE,
    ANSWER_TEXT_FILE,
    EXIT_FILE,
    PROMPT_FILE,
    TRANSCRIPT_FILE,
    USAGE_FILE,
    VALUE_FILE,
    StoreLayout,
)
from rho_notebook.store.run_locks import OwnerLock

__all__ = ["RunManifest", "RunFolder", "RunStore", "RUN_FORMAT", "ATTEMPT_ARTIFACTS", "node_folder"]

ATTEMPT_ARTIFACTS = (
    "stdout",
    "stderr",
    EXIT_FILE,
    VALUE_FILE,
    ANSWER_PROSE_FILE,
    ANSWER_TEXT_FILE,
    PROMPT_FILE,
    TRANSCRIPT_FILE,
    USAGE_FILE,
)
"""The attempt files a result names: command streams and exit, the validated value, agent answers
(prose or raw JSON), transcripts and usage, and an approval node's rendered prompt."""

RUN_FORMAT = "rho-notebook/run/v1"


def node_folder(node: str) -> str:
    """The folder name of node (or step key) ``node`` under ``nodes/``: ``%`` as ``%25`` and ``/``
    as ``%2F``, so a step key never nests folders; any other name is unchanged. The other marks a
    script step id may hold (``. _ : @ -``, docs/scripts.md) stay as they are: each is an ordinary
    character of a POSIX file name, an id cannot start with ``.`` (so it is never ``.`` or ``..``),
    and a folder of an id valid before the wider grammar keeps its name."""
    if "/" not in node and "%" not in node:
        return node
    return node.replace("%", "%25").replace("/", "%2F")


class RunManifest(FrozenModel):
    format: str = RUN_FORMAT
    run_id: str
    plan_id: str
    graph_digest: str
    workflow: str
    created_at: str
    workspace_root: str
    workspace_key: str
    identities: dict[str, FileIdentity]
    mode: str = "auto"
    """Permission mode chosen for this run."""
    origin: str = "cli"
    """Which front end created it (cli, notebook, server, mcp); ``via`` says how it was started."""
    initiator: str = ""
    """The OS account of the process that created the run, recorded once at creation (empty in
    manifests written before it was recorded)."""
    via: str = ""
    """How the run was started: ``cli``, ``terminal``, ``notebook``, ``server`` or ``mcp``; a
    manifest written before it was recorded reads its ``origin`` here."""
    client: str | None = None
    """Runs started through MCP: the client's name as the client reported it (never verified)."""
    journal_format: str = ""
    """``chained-v1``: journal records carry a hash chain and the folder keeps ``journal.mark``
    (:mod:`rho_notebook.store.journal`); empty for runs created before, read without either."""
    reuse: bool = True
    """False for ``run --no-reuse``: every node launches, none takes a stored success."""
    seed_from: str | None = None
    """``try``: the run whose successful attempts of ``seed_nodes`` this run takes instead of launching them."""
    seed_nodes: tuple[str, ...] = ()
    forked_from: dict[str, str] | None = Field(default=None, exclude_if=lambda value: value is None)
    """A fork (docs/fork.md): ``{"run", "node"}``, the run it was forked from and the node it
    starts at; set from the graph's fork record when the run is created. None for any other run."""
    executor: str = "local"
    """Where remotable attempts run (docs/distributed.md): ``local``, ``dask`` (a LocalCluster
    started by the owner) or ``dask=ADDRESS``; chosen at creation, kept by a resume that names no
    other. Not part of the graph digest."""

    @model_validator(mode="before")
    @classmethod
    def _via_from_origin(cls, data: Any) -> Any:
        """A manifest written before ``via`` was recorded: how it was started is its ``origin``."""
        if isinstance(data, dict) and not data.get("via"):
            return {**data, "via": data.get("origin", "cli")}
        return data

    @property
    def chained(self) -> bool:
        return self.journal_format == CHAINED


@dataclass(frozen=True)
class RunFolder:
    path: Path
    _journaled: dict[Path, dict[tuple[str, int], Any]] = field(default_factory=dict, compare=False, repr=False)
    """Run folder -> (node folder, attempt) -> journaled ``step_value``: each journal read once."""

    @property
    def manifest(self) -> Path:
        return self.path / "manifest.json"

    @property
    def graph(self) -> Path:
        return self.path / "graph.json"

    @property
    def state(self) -> Path:
        return self.path / "state.json"

    @property
    def events(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def mark(self) -> Path:
        """The journal watermark of a chained run: last fsynced seq and hash."""
        return self.path / "journal.mark"

    @property
    def lock(self) -> Path:
        return self.path / "mutation.lock"

    @property
    def requests(self) -> Path:
        """``requests/`` (cancel and approval requests), checked each time it is asked for: a
        symlink there, or a file, raises :class:`~rho_notebook.errors.StoreError` instead of
        letting a request be written or read through it. It may not exist yet."""
        path = self.path / "requests"
        check_entry(path, below=self.path.parent, kind="dir")
        return path

    def damage(self) -> str | None:
        """Why the run folder's fixed entries cannot be used (``requests`` or ``nodes`` a symlink,
        a file or a folder others can write; ``state.json`` anything but a regular file, which the
        owner could never replace), or None. The journal's own damage is
        :func:`~rho_notebook.store.journal.check_journal`'s."""
        fixed: tuple[tuple[str, EntryKind], ...] = (("requests", "dir"), ("nodes", "dir"), ("state.json", "file"))
        for name, kind in fixed:
            try:
                check_entry(self.path / name, below=self.path.parent, kind=kind)
            except StoreError as err:
                return err.message
        return None

    @cached_property
    def _nodes(self) -> Path:
        return self.path / "nodes"

    def attempt_dir(self, node: str, attempt: int) -> Path:
        # one relative part below a kept nodes/ path: no re-parse of the run folder's path, and
        # a fifth less than joining four names (this is per launch; node_folder holds no "/")
        return self._nodes / f"{node_folder(node)}/attempts/{attempt}"

    def files_of(self, node: str, attempt: AttemptRecord) -> Path:
        """The folder holding an attempt's files: its own, or a reused attempt's source's (a reused
        attempt has no folder of its own)."""
        source = attempt.reused_from
        if source is None:
            return self.attempt_dir(node, attempt.number)
        folder = node_folder(source["node"])
        return Path(f"{self.path.parent}/{source['run_id']}/nodes/{folder}/attempts/{source['attempt']}")

    def read(self, path: Path) -> bytes | None:
        """The bytes of the file ``path`` in this run folder (or, for a reused attempt, a sibling
        run's), None when it does not exist.

        Raises
        ------
        StoreError
            It, or a folder on the way from the runs folder, is a symlink or of the wrong kind.
        """
        if check_entry(path, below=self.path.parent, kind="file") is None:
            return None
        try:
            return read_nofollow(path)
        except FileNotFoundError:
            return None

    def read_from(self, path: Path, offset: int, *, limit: int | None = None) -> bytes:
        """The bytes of the file ``path`` from ``offset`` (b"" while it does not exist), at most
        ``limit`` of them, checked as :meth:`read` checks it: for readers that follow a growing
        ``stdout`` or read a long one a piece at a time."""
        if check_entry(path, below=self.path.parent, kind="file") is None:
            return b""
        try:
            fd, _ = open_regular(path)
        except FileNotFoundError:
            return b""
        try:
            os.lseek(fd, offset, os.SEEK_SET)
            return read_fd(fd, limit=limit)
        finally:
            os.close(fd)

    def read_value(self, path: Path) -> tuple[bool, Any]:
        """(whether it exists, its value) of a JSON file such as an attempt's ``value.json``.

        Raises
        ------
        StoreError
            As :meth:`read`, or the file is not valid JSON (the store is damaged).
        """
        data = self.read(path)
        if data is None:  # none, or a copy of a journaled value lost in a machine crash
            journaled = self.journaled_step_value(path)
            return (False, None) if journaled is None else (True, journaled)
        try:
            return True, json.loads(data)
        except (ValueError, RecursionError) as err:
            journaled = self.journaled_step_value(path)
            if journaled is not None:
                return True, journaled
            msg = f"{path} is not valid JSON ({err}); the run store is damaged (the attempt's value cannot be read)"
            raise StoreError(msg) from None

    def journaled_step_value(self, path: Path) -> Any | None:
        """The value the ``node_finished`` record of the attempt whose ``value.json`` is ``path``
        holds (``step_value``), or None. A small value of a script step or a Python node is
        journaled with its end and its ``value.json`` written as a non-durable copy, which a
        machine crash can leave missing or torn (runtime/script_attempts.py, exec/python.py); the
        journal is read only then, once per run folder and instance."""
        attempt_folder = path.parent
        if path.name != VALUE_FILE or not attempt_folder.name.isdigit():
            return None
        run, folder, attempt = attempt_folder.parents[3], attempt_folder.parents[1].name, int(attempt_folder.name)
        values = self._journaled.get(run)
        if values is None:
            try:
                records = read_journal(run / "events.jsonl").events
            except StoreError:
                return None
            values = self._journaled[run] = {
                (node_folder(str(record.get("node"))), record.get("attempt", 0)): record["step_value"]
                for record in records
                if record.get("kind") == "node_finished" and "step_value" in record
            }  # a later record of the same attempt wins
        return values.get((folder, attempt))

    def output_values(self, attempts: Mapping[str, int]) -> dict[str, Any]:
        """Validated output values (``value.json``) of the given node -> attempt pairs (the
        succeeded ones); an attempt without a value (no output schema) is left out.

        Raises
        ------
        StoreError
            A value file is a symlink, not a regular file, or not valid JSON (the store is damaged).
        """
        return self.output_values_at({name: (self.path.name, name, attempt) for name, attempt in attempts.items()})

    def output_values_at(self, sources: Mapping[str, tuple[str, str, int]]) -> dict[str, Any]:
        """As :meth:`output_values` for node -> (run, node, attempt) sources: a reused attempt's
        value is read from the run it was reused from (a sibling folder of this run's)."""
        values: dict[str, Any] = {}
        runs = self.path.parent
        for name, (run_id, node, attempt) in sorted(sources.items()):
            found, value = self.read_value(
                Path(f"{runs}/{run_id}/nodes/{node_folder(node)}/attempts/{attempt}/value.json")
            )
            if found:
                values[name] = value
        return values

    def artifacts(self, node: str, attempt: AttemptRecord) -> dict[str, Path]:
        """The attempt's files that exist, keyed as ``result`` names them (``exit``, ``answer_md``);
        a reused attempt's are its source attempt's.

        Raises
        ------
        StoreError
            One of them, or a folder on the way, is a symlink or of the wrong kind.
        """
        folder = self.files_of(node, attempt)
        if check_entry(folder, below=self.path.parent, kind="dir") is None:
            return {}
        return {  # the folder is checked: each file is one lstat below it
            name.removesuffix(".json").replace(".", "_"): folder / name
            for name in ATTEMPT_ARTIFACTS
            if check_entry(folder / name, below=folder, kind="file") is not None
        }


def _fsync_file(path: Path) -> None:
    """fsync the regular file at ``path`` (opened without following a link)."""
    fd, _ = open_regular(path)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RunStore:
    def __init__(self, layout: StoreLayout) -> None:
        self.layout = layout

    def folder(self, run_id: str) -> RunFolder:
        folder = RunFolder(self.layout.run_dir(run_id))
        check_no_symlink(folder.path, below=self.layout.home)
        return folder

    def create(self, manifest: RunManifest, graph: Graph, *, records: Sequence[dict[str, Any]]) -> RunFolder:
        """Make the folder of a new run: its frozen ``graph``, its journal starting with
        ``records`` (``run_created``, ...) and, last, its ``manifest``, which names the run.

        graph.json, journal.mark and the journal are durable, and so are their folder entries,
        before the manifest is written (a chained run without a watermark is damaged): the
        journal's sync fsyncs it and its watermark, graph.json is fsynced, then their folder
        once, not once per file (a directory fsync per file was a fifth of a small run's fsyncs;
        a watermark fsynced at its creation, then again by the journal's first sync, another)."""
        if graph.fork is not None and manifest.forked_from is None:
            lineage = {"run": graph.fork.source_run, "node": graph.fork.node}
            manifest = manifest.model_copy(update={"forked_from": lineage})
        folder = self._new_folder(manifest.run_id)
        atomic_write(folder.graph, graph_file_bytes(graph), durable=False)
        remember_graph(folder.graph, graph, manifest.graph_digest)  # the plan's graph, verified already
        if manifest.chained:
            write_watermark(folder.mark, Watermark(seq=0, h=""), durable=False)
        journal = JournalWriter.open(folder.events, mark=folder.mark if manifest.chained else None)
        try:
            journal.append(records)
            journal.sync()
        finally:
            journal.close()
        _fsync_file(folder.graph)
        fsync_dir(folder.path)
        atomic_write_json(folder.manifest, manifest.model_dump(mode="json"))
        return folder

    def _new_folder(self, run_id: str) -> RunFolder:
        """The folder of a new run with its ``requests/`` and ``nodes/``. The runs folder is
        checked as every store folder is (:meth:`~rho_notebook.store.layout.StoreLayout.ensure`);
        below it, each folder is one ``mkdir`` (0700): a folder this call just made is private,
        so nothing of another user can sit in it. One that exists already (a run ID given by
        the caller and taken meanwhile, a folder planted by the same user) is checked as before."""
        folder = RunFolder(self.layout.ensure(self.layout.runs) / run_id)
        made = [folder.path, folder.path / "requests", folder.path / "nodes"]
        for index, path in enumerate(made):
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                for rest in made[index:]:
                    self.layout.ensure(rest)
                break
        return folder

    def ids(self) -> list[str]:
        """Every run ID, sorted (oldest first); the runs folder is checked first (no symlink on
        the way, not writable by others)."""
        names = list_dir(self.layout.runs, below=self.layout.home)
        return sorted(name for name in names if not name.startswith("."))

    def resolve(self, prefix: str) -> str:
        return match_id(prefix, self.ids(), what="run")

    def manifest(self, run_id: str) -> RunManifest:
        return self._manifest_in(self.folder(run_id), run_id, below=self.layout.home)

    def graph(self, run_id: str, *, expected_digest: str) -> Graph:
        return self._graph_in(self.folder(run_id), run_id, expected_digest=expected_digest, below=self.layout.home)

    def owned(self, run_id: str) -> tuple[RunFolder, RunManifest, Graph]:
        """What the owner of run ``run_id`` opens: its folder, its manifest and its frozen graph
        (checked against the manifest's digest), as :meth:`folder`, :meth:`manifest` and
        :meth:`graph` give them; the folder is checked from the store's home once, and each file
        below it (not each path again from the home: a sixth of what an owner did before its loop)."""
        folder = self.folder(run_id)
        manifest = self._manifest_in(folder, run_id, below=folder.path)
        graph = self._graph_in(folder, run_id, expected_digest=manifest.graph_digest, below=folder.path)
        return folder, manifest, graph

    def _manifest_in(self, folder: RunFolder, run_id: str, *, below: Path) -> RunManifest:
        check_no_symlink(folder.manifest, below=below)
        try:
            return RunManifest.model_validate(read_json(folder.manifest))
        except FileNotFoundError:
            msg = f"run {run_id} has no manifest.json; the run store entry is incomplete"
            raise NotFound(msg) from None

    def _graph_in(self, folder: RunFolder, run_id: str, *, expected_digest: str, below: Path) -> Graph:
        graph, digest = load_graph(folder.graph, below=below)
        if digest != expected_digest:
            msg = f"run {run_id}: graph.json digests to {digest}, not the confirmed {expected_digest}; refusing to use a modified graph"
            raise StoreError(msg)
        return graph

    def append_unowned(self, run_id: str, records: Callable[[], list[dict[str, Any]]]) -> bool:
        """Append what ``records()`` gives to the journal of run ``run_id`` durably, holding its
        owner lock so no owner runs it meanwhile (``records`` runs under the lock and may raise to
        append nothing). False, with nothing called or written, when a live process owns the run."""
        folder = self.folder(run_id)
        lock = OwnerLock(folder.lock)
        if not lock.try_acquire():
            return False
        try:
            chosen = records()
            if not chosen:
                return True
            journal = JournalWriter.open(folder.events, mark=folder.mark if self.manifest(run_id).chained else None)
            try:
                journal.append(chosen)
                journal.sync()
            finally:
                journal.close()
        finally:
            lock.release()
        return True

    def delete(self, run_id: str) -> None:
        folder = self.folder(run_id)
        shutil.rmtree(folder.path)
