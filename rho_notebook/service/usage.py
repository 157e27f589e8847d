"""A run's ledger as readers show it: what each node, step group and the run spent, priced.

The journal is the one source (:mod:`rho_notebook.model.ledger` folds its ``model_called``
records into each attempt's tally). This module adds what a reader needs beyond the fold:

* **Runs written before the ledger** journaled no ``model_called``. Such an agent attempt counts
  what its ``usage.json`` says (one call per turn; read only when a store is at hand and only for
  agent attempts, so a command-only run reads no file), else the summary its ``node_finished``
  record carried (the same counts, in the journal); a model step's ``node_finished`` record carries
  its one call's tokens. An attempt with a tally never looks further: a tally is the truth.
* **Saved spend.** A reused node launched nothing, so it counts zero and shows in ``saved`` what
  its source attempt spent; a script or flow step answered from the journal on resume
  (``replayed``) likewise shows what the answering attempt spent, once per replay.
* **Roll-ups by key.** Script and flow steps roll up by their key's prefixes (a flow's module path
  ``team.research.writer#2`` -> ``team``, ``team.research``, ``team.research.writer``; a fork
  branch ``writer/f1.2#1`` -> ``writer/f1``, ``writer/f1.2``; a script step ``fetch:a.md`` ->
  ``fetch``), and a node's calls made with a ``key`` roll up by that key (``by_key``).
* **Prices** come from settings (``prices``), never from the run: a changed table re-prices old
  runs. They are read only when the run made a call, so reading a command-only run's status stays
  as light as it was (issue 31).

:func:`run_ledger` builds a :class:`RunLedger`; :meth:`RunLedger.rows` is what ``rho.usage(run)``
shows.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rho_notebook.errors import RhoError
from rho_notebook.model.ledger import Price, Usage, attempt_usage, tally_usage
from rho_notebook.model.tally import COUNTS, add_call, may_have_spent
from rho_notebook.store.layout import USAGE_FILE, StoreLayout, default_home

if TYPE_CHECKING:
    from rho_notebook.model.run_state import AttemptRecord, NodeRecord, RunState

__all__ = [
    "NodeLedger",
    "RunLedger",
    "UsageRow",
    "UsageTable",
    "add_usage",
    "attempt_tally",
    "key_prefixes",
    "add_view_spend",
    "cached_prices",
    "live_spend",
    "load_prices",
    "node_spend",
    "run_ledger",
]

UsageReader = Callable[[str, "AttemptRecord"], "Mapping[str, Any] | None"]
"""(node, attempt) -> the attempt's ``usage.json`` document, None when it has none."""

_FLOW_KEY = re.compile(
    r"(?P<path>[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:/(?P<branch>f[0-9]+(?:\.[0-9]+)*))?#[0-9]+"
)
_STEP_PREFIX = re.compile(r"^([^:\[]+)[:\[]")


@dataclass(frozen=True)
class NodeLedger:
    """One node (or script/flow step): its new spend over every attempt, retries included."""

    usage: Usage
    saved: Usage | None = None
    """A reused or replayed node: what it did not spend again (None: it saved nothing)."""
    by_key: dict[str, Usage] = field(default_factory=dict)
    """Its calls made with a ``key`` (an item graph's instance, a fork branch), by key."""


@dataclass(frozen=True)
class UsageRow:
    """One row of ``rho.usage(run)``: the run, a node, or a roll-up of steps by key prefix."""

    key: str
    """``run``, the node's name, or the key prefix of a group."""
    level: Literal["run", "node", "group"]
    usage: Usage
    saved: Usage | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"key": self.key, "level": self.level, **self.usage.to_json()}
        if self.saved is not None:
            data["saved"] = self.saved.to_json()
        return data


_COLUMNS = ("input_tokens", "output_tokens", "cached_tokens", "calls", "retries", "tool_calls")


class UsageTable(list[UsageRow]):
    """The rows of ``rho.usage(run)``: a plain list (no pandas) that a notebook shows as a table."""

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{name}</th>" for name in ("key", "level", *_COLUMNS, "wall_seconds", "cost_usd", "saved"))
        body = []
        for row in self:
            usage = row.usage
            cells = [html.escape(row.key), row.level, *(str(getattr(usage, name)) for name in _COLUMNS)]
            cells += [f"{usage.wall_seconds:.3f}", _cost_text(usage.cost_usd), _saved_text(row.saved)]
            body.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
        return f"<table class='rho-usage'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"

    def __str__(self) -> str:
        lines = [f"{'KEY':<32} {'CALLS':>5} {'IN':>9} {'OUT':>9} {'CACHED':>8} {'RETRY':>5} {'WALL s':>8}  COST"]
        for row in self:
            u = row.usage
            lines.append(
                f"{row.key:<32} {u.calls:>5} {u.input_tokens:>9} {u.output_tokens:>9} {u.cached_tokens:>8} "
                f"{u.retries:>5} {u.wall_seconds:>8.1f}  {_cost_text(u.cost_usd)}" + _saved_note(row.saved)
            )
        return "\n".join(lines)


def _cost_text(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.6f}"


def _saved_text(saved: Usage | None) -> str:
    return "" if saved is None else f"{saved.calls} calls, {saved.tokens} tokens, {_cost_text(saved.cost_usd)}"


def _saved_note(saved: Usage | None) -> str:
    return "" if saved is None else f"  (saved {_saved_text(saved)})"


@dataclass(frozen=True)
class RunLedger:
    """What a run spent: the run, each node, and the roll-ups of its steps by key prefix."""

    run: Usage
    nodes: dict[str, NodeLedger]
    groups: dict[str, Usage] = field(default_factory=dict)
    saved: Usage | None = None
    """What its reused and replayed nodes did not spend again."""

    @property
    def spent(self) -> bool:
        """Whether the run made (or saved) a model call: front ends show nothing otherwise, so a
        command-only run reads as it did before the ledger."""
        return self.run.calls > 0 or self.saved is not None

    def rows(self) -> UsageTable:
        """The run's row, then one per node, then one per group."""
        table = UsageTable([UsageRow(key="run", level="run", usage=self.run, saved=self.saved)])
        table.extend(UsageRow(key=name, level="node", usage=n.usage, saved=n.saved) for name, n in self.nodes.items())
        table.extend(UsageRow(key=key, level="group", usage=usage) for key, usage in self.groups.items())
        return table


def _usage_json(usage: Usage, saved: Usage | None, by_key: Mapping[str, Usage]) -> dict[str, Any]:
    data = usage.to_json()
    if saved is not None:
        data["saved"] = saved.to_json()
    if by_key:
        data["by_key"] = {key: sub.to_json() for key, sub in by_key.items()}
    return data


def add_usage(
    answer: Any, state: RunState, *, layout: StoreLayout | None = None, run_folder: Path | None = None
) -> None:
    """Give a ``status`` or ``result`` answer (``nodes`` by name) its ``usage`` objects: one per
    node and one for the run, when the run made or saved a model call (a command-only run's answer
    stays as it was). The ledger is :func:`run_ledger` of ``state`` with the store ``layout``, or
    the one holding ``run_folder`` (a run's folder). Its one caller,
    :func:`~rho_notebook.service.spend_view.add_spend`, has already looked whether the run may
    have spent (:func:`~rho_notebook.model.tally.may_have_spent`) before importing this module."""
    if layout is None and run_folder is not None:
        layout = StoreLayout(home=run_folder.parents[2])
    ledger = run_ledger(state, layout=layout)
    if not ledger.spent:
        return
    for name, entry in answer["nodes"].items():
        node = ledger.nodes.get(name)
        if node is not None:
            entry["usage"] = _usage_json(node.usage, node.saved, node.by_key)
    answer["usage"] = _usage_json(ledger.run, ledger.saved, ledger.groups)


# -- prices ------------------------------------------------------------------------------------------


def load_prices(home: Path | None = None) -> dict[str, Price]:
    """The ``prices`` table of the user settings in store home ``home`` (default: this process's),
    ``"provider/model"`` -> :class:`Price`; empty when none is set or the settings cannot be read
    (every cost then shows as unknown, never as 0; ``run`` names a broken settings file)."""
    from rho_notebook.agents.settings import load_prices as read  # pydantic: only for a run that called

    try:
        return read(default_home() if home is None else home)
    except (RhoError, OSError):
        return {}


_PRICE_CACHE: dict[Path, tuple[tuple[int, int], dict[str, Price]]] = {}


def cached_prices(home: Path) -> dict[str, Price]:
    """:func:`load_prices`, read again only when ``settings.json`` changed (a live view asks at
    every update)."""
    try:
        info = (home / "settings.json").stat()
        stamp = (info.st_mtime_ns, info.st_size)
    except OSError:
        stamp = (0, 0)
    found = _PRICE_CACHE.get(home)
    if found is None or found[0] != stamp:
        found = (stamp, load_prices(home))
        _PRICE_CACHE[home] = found
    return found[1]


# -- tallies of old runs -----------------------------------------------------------------------------


def _old_tally(summary: Mapping[str, Any], *, turns: int) -> dict[str, Any] | None:
    """A tally of ``turns`` calls from an attempt's totals (``usage.json`` or its exit summary)."""
    retries = summary.get("retries")
    call = {
        "provider": summary.get("provider") or "",
        "model": summary.get("model") or "",
        "input_tokens": summary.get("input_tokens"),
        "output_tokens": summary.get("output_tokens"),
        "retries": len(retries) if isinstance(retries, list) else retries,
        "tool_calls": summary.get("tool_calls"),
    }
    if turns <= 0:
        return None
    tally = add_call(None, call)
    tally["calls"] = turns
    return tally


def _turns(summary: Mapping[str, Any]) -> int:
    turns = summary.get("turns")
    return turns if isinstance(turns, int) and not isinstance(turns, bool) else 0


def attempt_tally(node: str, attempt: AttemptRecord, read_usage: UsageReader | None = None) -> dict[str, Any] | None:
    """The tally of one attempt: its folded ``model_called`` records, else (a run written before
    them) its ``usage.json`` or its exit summary; None when it made no call."""
    if attempt.usage is not None:
        return attempt.usage
    if attempt.reused_from is not None or attempt.fork_copy is not None:  # a copy carries its source's exit
        return None
    exit_record = attempt.exit or {}
    kind = exit_record.get("kind")
    if kind == "agent":
        document = read_usage(node, attempt) if read_usage is not None else None
        summary = document if isinstance(document, Mapping) else exit_record
        return _old_tally(summary, turns=_turns(summary))
    if kind == "model" and "input_tokens" in exit_record:
        return _old_tally(exit_record, turns=1)
    return None


# -- the ledger --------------------------------------------------------------------------------------

_FORK_DEPTH = 32
"""How many forks of forks a taken copy's saving is followed through to the attempt that ran."""


@dataclass
class _Reader:
    prices: Mapping[str, Price] | None
    """None until the first call needs them (then read from ``home``'s settings)."""
    home: Path | None = None
    read_usage: UsageReader | None = None
    source_state: Callable[[str], RunState | None] | None = None

    def table(self) -> Mapping[str, Price]:
        if self.prices is None:
            self.prices = cached_prices(default_home() if self.home is None else self.home)
        return self.prices

    def attempt(self, node: str, attempt: AttemptRecord) -> Usage:
        if attempt.usage is not None:
            return attempt_usage(attempt, self.table())
        tally = attempt_tally(node, attempt, self.read_usage)
        if tally is None:
            return attempt_usage(attempt, {})
        return attempt_usage(replace(attempt, usage=tally), self.table())

    def node(self, name: str, record: NodeRecord) -> NodeLedger:
        total = _sum(self.attempt(name, a) for a in record.attempts)
        saved: Usage | None = None
        current = record.current
        if current is not None and current.fork_copy is not None:  # a fork's taken copy saved its source's spend
            once = self.taken(current.fork_copy)
            saved = _sum([once] * max(1, record.replayed)) if once is not None else None
        elif current is not None and current.reused_from is not None:
            saved = self.source(current.reused_from)
        elif record.replayed and current is not None:
            once = self.attempt(name, current)
            saved = _sum([once] * record.replayed) if once.calls else None
        by_key: dict[str, Usage] = {}
        for attempt in record.attempts:
            tally = attempt.usage or {}
            for key, sub in (tally.get("by_key") or {}).items():
                by_key[key] = by_key.get(key, Usage()).plus(tally_usage(sub, self.table()))
        return NodeLedger(usage=total, saved=saved, by_key=by_key)

    def taken(self, copy: Mapping[str, Any], *, depth: int = 0) -> Usage | None:
        """What a fork's taken copy saved: its source attempt's spend (an edited value: none)."""
        origin = copy.get("taken_from")
        if not isinstance(origin, Mapping):
            return None
        where = {"run_id": origin.get("run"), "node": origin.get("node"), "attempt": origin.get("attempt")}
        return self.source(where, depth=depth)

    def source(self, source: Mapping[str, Any], *, depth: int = 0) -> Usage | None:
        state = self.source_state(str(source.get("run_id"))) if self.source_state is not None else None
        record = state.nodes.get(str(source.get("node"))) if state is not None else None
        if record is None:
            return None
        found = next((a for a in record.attempts if a.number == source.get("attempt")), None)
        if found is not None and found.fork_copy is not None and depth < _FORK_DEPTH:  # a fork of a fork
            return self.taken(found.fork_copy, depth=depth + 1)
        if found is None or found.reused_from is not None:
            return None
        # the journal of the source run answers (this reader's usage.json files are this run's)
        usage = _Reader(prices=self.table()).attempt(str(source.get("node")), found)
        return usage if usage.calls else None


def run_ledger(
    state: RunState,
    *,
    prices: Mapping[str, Price] | None = None,
    layout: StoreLayout | None = None,
) -> RunLedger:
    """The ledger of ``state``'s run. With ``layout`` (the run's store) an old run's agent attempts
    count their ``usage.json`` and a reused node shows what its source attempt spent; without it
    the journal alone answers. ``prices`` default to the settings of ``layout``'s home (else this
    process's), read only when the run made a call."""
    reader = _Reader(prices=prices, home=layout.home if layout is not None else None)
    if layout is not None:
        reader.read_usage = _usage_file_reader(layout, state.run_id)
        reader.source_state = _source_states(layout)
    return _build(state, reader)


def node_spend(
    name: str,
    record: NodeRecord,
    *,
    attempt_dir: Path | None = None,
    source_dir: Path | None = None,
    prices: Mapping[str, Price] | None = None,
) -> dict[str, Any] | None:
    """The ``usage`` object of one node as ``status`` has it (the node pane's ``spend``), from its
    record alone: ``attempt_dir`` (``<home>/workflows/runs/<run>/nodes/<node>/attempts/<n>``) finds
    an old attempt's ``usage.json`` and the settings' prices, ``source_dir`` (a reused attempt's
    source folder) what a reused node saved. None when the node made and saved no model call."""
    home = next((d.parents[6] for d in (attempt_dir, source_dir) if d is not None and len(d.parents) > 6), None)
    reader = _Reader(prices=prices, home=home)
    if attempt_dir is not None:
        attempts = attempt_dir.parent
        reader.read_usage = lambda node, attempt: _read_usage_file(attempts / str(attempt.number))
    if source_dir is not None and len(source_dir.parents) > 6:
        reader.source_state = _source_states(StoreLayout(home=source_dir.parents[6]))
    node = reader.node(name, record)
    if not node.usage.calls and node.saved is None:
        return None
    return _usage_json(node.usage, node.saved, node.by_key)


def live_spend(
    state: RunState, names: Iterable[str], *, home: Path
) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """For a live view, from the journal alone: the ``usage`` objects of nodes ``names`` that made
    or saved a call, and the run's (None while it has made and saved none), priced with the
    settings of store home ``home`` (read once the run made a call, again when they change)."""
    if not may_have_spent(state):  # a command-only run: no ledger to build at every update
        return {}, None
    ledger = _build(state, _Reader(prices=None, home=home))
    nodes = {}
    for name in names:
        node = ledger.nodes.get(name)
        if node is not None and (node.usage.calls or node.saved is not None):
            nodes[name] = _usage_json(node.usage, node.saved, node.by_key)
    return nodes, _usage_json(ledger.run, ledger.saved, {}) if ledger.spent else None


def add_view_spend(nodes: Mapping[str, Any], run: Any, state: RunState, *, home: Path) -> None:
    """Give a DAG view's node views and run view (dicts, changed in place) their ``usage`` objects
    (:func:`live_spend`: the nodes that made or saved a call; the run once it did)."""
    spent, total = live_spend(state, nodes, home=home)
    for name, usage in spent.items():
        nodes[name]["usage"] = usage
    if total is not None and isinstance(run, dict):
        run["usage"] = total


def _build(state: RunState, reader: _Reader) -> RunLedger:
    from rho_notebook.service.wire import node_order  # wire imports this module lazily

    nodes = {name: reader.node(name, state.nodes[name]) for name in node_order(state)}
    total = _sum(n.usage for n in nodes.values())
    counts = {name: getattr(total, name) for name in COUNTS}
    run = Usage(**counts, wall_seconds=_span(state), cost_usd=total.cost_usd)
    saved = [n.saved for n in nodes.values() if n.saved is not None]
    groups: dict[str, Usage] = {}
    for name, node in nodes.items():
        if state.nodes[name].step is None:
            continue
        for prefix in key_prefixes(name):
            groups[prefix] = groups.get(prefix, Usage()).plus(node.usage)
    return RunLedger(run=run, nodes=nodes, groups=dict(sorted(groups.items())), saved=_sum(saved) if saved else None)


def key_prefixes(key: str) -> list[str]:
    """The groups a script or flow step's key rolls up into, shortest first, the key itself left
    out: a flow key's module path and each dotted prefix of it, and its fork branch and each of
    the branch's parents; a script step id's name before ``:`` or ``[``."""
    match = _FLOW_KEY.fullmatch(key)
    if match is None:
        found = _STEP_PREFIX.match(key)
        return [found.group(1)] if found is not None else []
    parts = match.group("path").split(".")
    prefixes = [".".join(parts[: i + 1]) for i in range(len(parts))]
    branch = match.group("branch")
    if branch:
        steps = branch.split(".")
        prefixes += [f"{match.group('path')}/{'.'.join(steps[: i + 1])}" for i in range(len(steps))]
    return prefixes


def _span(state: RunState) -> float:
    """From the first launch to the last end (nodes run side by side: their times do not add)."""
    starts = [a.started_at for n in state.nodes.values() for a in n.attempts if a.started_at]
    ends = [a.ended_at for n in state.nodes.values() for a in n.attempts if a.ended_at]
    if not starts or not ends:
        return 0.0
    try:
        return max(0.0, (datetime.fromisoformat(max(ends)) - datetime.fromisoformat(min(starts))).total_seconds())
    except ValueError:
        return 0.0


def _sum(usages: Iterable[Usage]) -> Usage:
    """The sum (:meth:`Usage.plus` of them all, built once: a 750-node run's status sums often)."""
    items = list(usages)
    if len(items) == 1:
        return items[0]
    counts = {name: sum(getattr(u, name) for u in items) for name in COUNTS}
    costs = [u.cost_usd for u in items]
    cost = None if None in costs else sum(c for c in costs if c is not None)
    return Usage(**counts, wall_seconds=sum(u.wall_seconds for u in items), cost_usd=cost)


def _read_usage_file(folder: Path) -> Mapping[str, Any] | None:
    from rho_notebook.store.files import read_json  # no symlink is followed

    try:
        document = read_json(folder / USAGE_FILE)
    except (OSError, RhoError):
        return None
    return document if isinstance(document, dict) else None


def _usage_file_reader(layout: StoreLayout, run_id: str) -> UsageReader:
    def read(node: str, attempt: AttemptRecord) -> Mapping[str, Any] | None:
        from rho_notebook.store.runs import node_folder  # only for a run that has agent attempts

        folder = layout.checked_run_dir(run_id) / "nodes" / node_folder(node) / "attempts" / str(attempt.number)
        return _read_usage_file(folder)

    return read


def _source_states(layout: StoreLayout) -> Callable[[str], RunState | None]:
    cache: dict[str, RunState | None] = {}

    def load(run_id: str) -> RunState | None:
        if run_id not in cache:
            from rho_notebook.runtime.status import load_state

            try:
                cache[run_id] = load_state(layout, run_id)
            except (OSError, RhoError):
                cache[run_id] = None
        return cache[run_id]

    return load
