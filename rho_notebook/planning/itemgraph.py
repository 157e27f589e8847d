"""Reading and validating an item-graph document (``*.graph.yaml``, JSON too; docs/graphs.md)
before anything runs.

:func:`lint_graph` reads the text with pyyaml's composer, so every value keeps its line:column,
checks it against :class:`~rho_notebook.model.itemgraph.ItemGraph` and the graph rules below, and
returns :class:`GraphFinding` s (the shape of a script's lint findings, plus the ``step`` and
``field`` they concern). :func:`load_graph` returns the validated document or raises
:class:`~rho_notebook.errors.InvalidWorkflow` with every finding; :func:`lint_graph_file` reads a
file for ``validate FILE.graph.yaml`` (and checks ``--input`` values against the declared inputs).
None of them runs anything.

The YAML is read strictly, as JSON-shaped data: ``true``/``false`` are the only booleans (``yes``,
``no``, ``on``, ``off`` stay strings), integers are decimal, dates stay strings, and anchors,
aliases and duplicate keys are refused.

The rules (``rule``: what it refuses):

``graph.yaml``
    The text does not parse as YAML/JSON, or is not one mapping.
``graph.yaml_alias`` / ``graph.duplicate_key`` / ``graph.float`` / ``graph.integer``
    An anchor or alias; a key given twice in one mapping; a float (the plan's canonical encoding
    has none: use an integer or a string); an integer outside signed 64 bits.
``graph.kind``
    A step whose ``kind`` is missing or not one of the step kinds.
``graph.param``
    A parameter a step's kind does not take (each kind's parameters are its model's fields).
``graph.field``
    Any other shape problem: a missing or unknown field, a wrong type, a bad id, an inconsistent
    typed field, a model step without provider and model or agent, a bad condition.
``graph.loop_rounds``
    A loop edge without ``max_rounds``.
``graph.duplicate_id``
    Two steps with the same id.
``graph.edge_step``
    An edge from or to a step the document does not have.
``graph.cycle``
    A cycle that is not closed by a loop edge (cycles are allowed only through loop edges).
``graph.loop_back``
    A loop edge whose target does not lead back to its source (it closes no cycle).
``graph.in_edges``
    A step other than ``join`` with more than one in-edge (not counting loop edges) when two of
    them could deliver in the same run. Two in-edges are exclusive only when they depend on
    different out-edges of one ``branch`` step: every path from a start to each passes through
    that branch, leaving by different edges. Conditions (``when``) on the out-edges of other steps
    are not compared, since each such edge is taken on its own.
``graph.mapping_without_equals``
    A string holding ``{{ $...`` without the leading ``=``: it would be sent as literal text.
``graph.mapping_syntax``
    A mapping that does not parse (``{{`` unclosed, an expression outside the language).
``graph.mapping_field``
    A mapping in a parameter that takes none (only the parameters each kind lists in
    ``StepParams.MAPPED`` resolve mappings, and a command's program is always literal).
``argv.code``
    A command step's argv where a mapping (data: any argv string starting with ``=``) would become
    code or choose the program: an interpreter's ``-c``/``-e`` text or script (``[sh, -c,
    "={{ $json.c }}"]``), or the program a wrapper runs (``[env, "={{ $json.p }}"]``); the rule
    of :mod:`rho_notebook.planning.code_args`, by program name in :func:`lint_graph` (and so in
    ``convert``); :func:`lint_graph_file` (``validate``) and ``plan`` check the files the names
    resolve to as well.
``limit.node_count`` / ``limit.edge_count`` / ``limit.source_bytes`` / ``limit.value_depth``
    The named planning limits: steps, edges, the document's size and its nesting.

The carried item's cap is the ``item_bytes`` planning limit (:data:`ITEM_BYTES_BUDGET`, 1 MiB);
the runner enforces it on every step's output with
:func:`~rho_notebook.model.itemgraph.check_item_size`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]
from pydantic import ValidationError

from rho_notebook.errors import InvalidWorkflow, MappingError, SourceError
from rho_notebook.model.itemgraph import (
    GRAPH_SUFFIXES,
    PARAMS_BY_KIND,
    STEP_KINDS,
    CommandStep,
    Edge,
    FieldDecl,
    ItemGraph,
    StepParams,
)
from rho_notebook.model.mapping import is_mapping, looks_like_mapping, parse_mapping
from rho_notebook.model.schema import INT64_MAX, INT64_MIN
from rho_notebook.planning.code_args import Lookup, code_argument_problem, item_argv
from rho_notebook.planning.inputs import check_inputs
from rho_notebook.planning.item_size import counted_too_many, size_findings
from rho_notebook.planning.resolve import Resolver
from rho_notebook.planning.script import Finding
from rho_notebook.source.labels import read_regular_file_nofollow
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.workspace import find_workspace

__all__ = [
    "ITEM_BYTES_BUDGET",
    "GraphFinding",
    "lint_graph",
    "lint_graph_file",
    "load_graph",
    "locate",
    "read_graph_file",
]

ITEM_BYTES_BUDGET = "item_bytes"
"""The planning limit capping the carried item (canonical JSON bytes)."""

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class GraphFinding(Finding):
    """A finding of an item-graph document: a lint :class:`Finding` plus the step (by id, or
    ``#N`` for the N-th step when it has no usable id) and the field (a dotted path inside the
    step or edge, e.g. ``params.fields.label``) it concerns."""

    step: str | None = None
    field: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "step": self.step, "field": self.field}


# -- reading YAML with positions -------------------------------------------------------------------


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """SafeLoader reading only JSON-shaped scalars (see the module docstring)."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - pyyaml's class-level table


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), list("-+0123456789"))
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?:\.[0-9]*)?[eE][-+]?[0-9]+|\.(?:inf|Inf|INF|nan|NaN|NAN))$"),
    list("-+0123456789."),
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])

_FLOAT_TAG = "tag:yaml.org,2002:float"
_INT_TAG = "tag:yaml.org,2002:int"


class _Document:
    """The composed YAML tree: the data, and the position of every value and key by path."""

    def __init__(self, display: str, *, max_depth: int) -> None:
        self.display = display
        self.max_depth = max_depth
        self.values: dict[Path_, yaml.Node] = {}
        self.keys: dict[Path_, yaml.Node] = {}
        self.found: list[GraphFinding] = []
        self.data: Any = None
        self.pending: list[tuple[Path_, str, str, bool]] = []
        """Problems found while indexing, reported once the data names their step."""

    def where(self, path: Path_, *, key: bool = False) -> tuple[int, int]:
        """1-based line and column of the value (or its key) at ``path``, else of the nearest
        enclosing value."""
        for depth in range(len(path), -1, -1):
            node = (self.keys if key and depth == len(path) else self.values).get(path[:depth])
            if node is not None:
                return node.start_mark.line + 1, node.start_mark.column + 1
        return 1, 1

    def add(
        self,
        path: Path_,
        rule: str,
        message: str,
        *,
        step: str | None = None,
        field: str | None = None,
        key: bool = False,
    ) -> None:
        line, column = self.where(path, key=key)
        self.found.append(GraphFinding(rule, "error", message, self.display, line, column, step=step, field=field))

    def index(self, node: yaml.Node, path: Path_, seen: set[int]) -> None:
        """Record positions; refuse aliases (a node seen twice), duplicate keys, floats, integers
        outside int64 and nesting deeper than the ``value_depth`` limit."""
        if len(path) > self.max_depth:
            self.add(path, "limit.value_depth", f"the document nests deeper than {self.max_depth} levels")
            return
        if id(node) in seen:
            message = "anchors and aliases (&name, *name) are not supported; write the value out"
            self.add(path, "graph.yaml_alias", message, key=True)
            return
        seen.add(id(node))
        self.values[path] = node
        if isinstance(node, yaml.MappingNode):
            names: set[str] = set()
            for key_node, value_node in node.value:
                name = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.start_mark)
                child = (*path, name)
                self.keys[child] = key_node
                if name in names:
                    self.pending.append((child, "graph.duplicate_key", f"the key {name!r} is given twice", True))
                    continue
                names.add(name)
                self.index(value_node, child, seen)
        elif isinstance(node, yaml.SequenceNode):
            for number, value_node in enumerate(node.value):
                self.index(value_node, (*path, number), seen)
        elif node.tag == _FLOAT_TAG:
            message = f'{node.value} is a float; use an integer or a string ("{node.value}")'
            self.pending.append((path, "graph.float", message, False))
        elif node.tag == _INT_TAG and not INT64_MIN <= int(node.value) <= INT64_MAX:
            message = f"{node.value} is outside the signed 64-bit integer range; use a string"
            self.pending.append((path, "graph.integer", message, False))

    def report_pending(self) -> None:
        for path, rule, message, key in self.pending:
            step, field, subject = _subject(self.data, path)
            self.add(path, rule, f"{subject}: {message}", step=step, field=field, key=key)


def _read(text: str, display: str, *, max_depth: int) -> _Document:
    document = _Document(display, max_depth=max_depth)
    try:
        loader = _Loader(text)  # its reader refuses control characters at once
    except yaml.reader.ReaderError as err:
        document.found.append(_control_character(err, text, display))
        return document
    try:
        root = loader.get_single_node()
        if root is None:
            document.add((), "graph.yaml", "the document is empty; it needs name, steps and edges")
            return document
        document.index(root, (), set())
        if not document.found:  # no aliases: constructing cannot multiply the data
            document.data = loader.construct_document(root)
        document.report_pending()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        problem = " ".join(p for p in (err.context, err.problem) if p)
        document.found.append(GraphFinding("graph.yaml", "error", f"not valid YAML: {problem}", display, line, column))
    except yaml.reader.ReaderError as err:
        document.found.append(_control_character(err, text, display))
    except RecursionError:
        document.add((), "limit.value_depth", "the document nests too deeply to read")
    except yaml.YAMLError as err:
        document.add((), "graph.yaml", f"the document cannot be read: {err}")
    finally:
        loader.dispose()
    if document.data is not None and not isinstance(document.data, dict):
        document.add((), "graph.yaml", "the document must be a mapping with name, inputs, steps and edges")
        document.data = None
    elif document.data is None and not document.found:  # `~`, `null`, a bare `---`: YAML's null
        document.add((), "graph.yaml", "the document is empty; it needs name, steps and edges")
    return document


def _control_character(err: yaml.reader.ReaderError, text: str, display: str) -> GraphFinding:
    """A character YAML does not allow in a document (NUL, other C0 and C1 controls), located."""
    position = min(max(int(err.position), 0), len(text))
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    code = err.character if isinstance(err.character, int) else ord(str(err.character)[:1] or "\0")
    message = (
        f"not valid YAML: the control character U+{code:04X} is not allowed in a document; write it as an "
        f'escape inside a double-quoted string (e.g. "\\x{code:02x}") or remove it'
    )
    return GraphFinding("graph.yaml", "error", message, display, line, column)


# -- naming steps and fields -----------------------------------------------------------------------


def _step_name(data: Any, number: int) -> str:
    steps = data.get("steps") if isinstance(data, dict) else None
    if isinstance(steps, list) and number < len(steps) and isinstance(steps[number], dict):
        found = steps[number].get("id")
        if isinstance(found, str) and found:
            return found
    return f"#{number + 1}"


def _dotted(parts: Path_) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _subject(data: Any, path: Path_) -> tuple[str | None, str | None, str]:
    """(step, field, prefix) for a path: the step a path under ``steps[N]`` or ``edges[N]``
    concerns (an edge's ``from``), the field inside it, and how a message starts."""
    if len(path) >= 2 and path[0] == "steps" and isinstance(path[1], int):
        step = _step_name(data, path[1])
        field = _dotted(path[2:]) or None
        return step, field, f"step {step!r}" + (f", field {field!r}" if field else "")
    if len(path) >= 2 and path[0] == "edges" and isinstance(path[1], int):
        edges = data.get("edges") if isinstance(data, dict) else None
        edge = edges[path[1]] if isinstance(edges, list) and path[1] < len(edges) else None
        source = edge.get("from") if isinstance(edge, dict) else None
        target = edge.get("to") if isinstance(edge, dict) else None
        field = _dotted(path[2:]) or None
        shown = f"edge {path[1] + 1} ({source} -> {target})"
        return (source if isinstance(source, str) else None), field, shown + (f", field {field!r}" if field else "")
    field = _dotted(path) or None
    return None, field, f"field {field!r}" if field else "the document"


# -- mappings --------------------------------------------------------------------------------------


def _strings(value: Any, path: Path_) -> Iterator[tuple[Path_, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _strings(child, (*path, str(key)))
    elif isinstance(value, list):
        for number, child in enumerate(value):
            yield from _strings(child, (*path, number))


def _params_model(kind: Any) -> type[StepParams] | None:
    return PARAMS_BY_KIND.get(kind) if isinstance(kind, str) else None


def _check_mappings(document: _Document) -> None:
    """The mapping rules, on the raw data (so they report even when other fields are wrong)."""
    data = document.data
    steps = data.get("steps")
    for number, step in enumerate(steps if isinstance(steps, list) else []):
        if not isinstance(step, dict) or not isinstance(step.get("params"), dict):
            continue
        params_model = _params_model(step.get("kind"))
        mapped = params_model.mapped() if params_model is not None else ()
        for name, value in step["params"].items():
            if step.get("kind") == "code" and name == "source":
                continue
            for path, text in _strings(value, ("steps", number, "params", str(name))):
                literal_program = step.get("kind") == "command" and path[4:] == (0,)
                _check_string(document, path, text, mapped=name in mapped and not literal_program)
    edges = data.get("edges")
    for number, edge in enumerate(edges if isinstance(edges, list) else []):
        if isinstance(edge, dict) and isinstance(edge.get("when"), dict) and "value" in edge["when"]:
            for path, text in _strings(edge["when"]["value"], ("edges", number, "when", "value")):
                _check_string(document, path, text, mapped=False)


def _check_string(document: _Document, path: Path_, text: str, *, mapped: bool) -> None:
    step, field, subject = _subject(document.data, path)
    if looks_like_mapping(text):
        if mapped:
            message = (
                f"{subject}: {text!r} holds {{{{ $... }}}} but does not start with '=', so it would be sent as "
                f"literal text; write it as a mapping: {'=' + text!r}"
            )
        else:
            message = f"{subject}: {text!r} holds {{{{ $... }}}}, but this field takes no mappings; write a literal"
        document.add(path, "graph.mapping_without_equals", message, step=step, field=field)
        return
    if not is_mapping(text):
        return
    if not mapped:
        message = (
            f"{subject}: {text!r} starts with '=', a mapping, but this field takes no mappings; write a literal "
            "(a literal text starting with '=' is only possible in fields that take mappings, as '==...')"
        )
        document.add(path, "graph.mapping_field", message, step=step, field=field)
        return
    try:
        parse_mapping(text)
    except MappingError as err:
        document.add(path, "graph.mapping_syntax", f"{subject}: {err.message}", step=step, field=field)


def _code_arguments(graph: ItemGraph, add: Callable[..., None], *, lookup: Lookup | None = None) -> None:
    """``argv.code`` (module docstring): by program name, or with ``lookup`` against the files the
    names resolve to (``add(path, rule, message, step=, field=)`` reports one)."""
    for number, step in enumerate(graph.steps):
        if isinstance(step, CommandStep):
            argv = item_argv(step.params.argv)
            resolved = lookup(step.params.argv[0]) if lookup is not None else None
            found = code_argument_problem(argv, resolved=resolved, lookup=lookup, node=step.id, subject="step")
            if found is not None and found.argument > 0:  # a mapping as argv[0] is graph.mapping_field
                where: Path_ = ("steps", number, "params", "argv", found.argument)
                add(where, "argv.code", found.message, step=step.id, field=f"params.argv[{found.argument}]")


def _resolved_code_arguments(graph: ItemGraph, text: str, *, path: Path, display: str) -> list[GraphFinding]:
    """``argv.code`` against the files the programs resolve to now, as ``plan`` checks them (the
    document's workspace and folder, this process's ``PATH``): ``validate`` accepts no argv that
    ``plan`` refuses (a symlink to an interpreter under another name)."""
    folder = path.resolve().parent
    root = find_workspace(folder).root
    cwd = "//" + folder.relative_to(root).as_posix() if folder != root else "//"
    resolver = Resolver(workspace=root, search_path=os.environ.get("PATH", os.defpath))
    where = locate(text, display=display)
    found: list[GraphFinding] = []

    def add(at: Path_, rule: str, message: str, *, step: str, field: str) -> None:
        found.append(GraphFinding(rule, "error", message, display, *where(at), step=step, field=field))

    _code_arguments(graph, add, lookup=partial(resolver.canonical_name, cwd_label=cwd))
    return found


# -- the model's errors ----------------------------------------------------------------------------


def _model_findings(document: _Document, err: ValidationError) -> None:
    data = document.data
    problems = err.errors()
    for problem in problems:
        loc: Path_ = tuple(problem["loc"])
        kind = problem["type"]
        if kind == "too_short" and any(len(p["loc"]) > len(loc) and p["loc"][: len(loc)] == loc for p in problems):
            continue  # the list is "empty" only because its items failed, reported on their own
        if len(loc) >= 3 and loc[0] == "steps" and isinstance(loc[1], int) and loc[2] in STEP_KINDS:
            loc = (*loc[:2], *loc[3:])  # drop the discriminator's tag
        step, field, subject = _subject(data, loc)
        message = str(problem["msg"]).removeprefix("Value error, ")
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            raw = data["steps"][loc[1]]
            shown = raw.get("kind") if isinstance(raw, dict) else None
            what = f"unknown step kind {shown!r}" if shown is not None else "no kind"
            document.add(
                (*loc, "kind"),
                "graph.kind",
                f"{subject}: {what}; the kinds are {', '.join(STEP_KINDS)}",
                step=step,
                field="kind",
            )
        elif kind == "extra_forbidden" and len(loc) == 4 and loc[2] == "params":
            params_model = _params_model(data["steps"][loc[1]].get("kind"))
            allowed = ", ".join(params_model.model_fields) if params_model is not None else ""
            takes = f"its params are {allowed}" if allowed else "it takes no params"
            shown_kind = data["steps"][loc[1]].get("kind")
            document.add(
                loc,
                "graph.param",
                f"step {step!r}: unknown param {loc[3]!r} for a {shown_kind} step; {takes}",
                step=step,
                field=field,
                key=True,
            )
        elif kind == "missing" and len(loc) == 4 and loc[0] == "edges" and loc[2:] == ("loop", "max_rounds"):
            document.add(
                loc,
                "graph.loop_rounds",
                f"{subject.removesuffix(', field ' + repr(field))}: a loop edge needs max_rounds, the total "
                "number of rounds, e.g. loop: {max_rounds: 3}",
                step=step,
                field=field,
            )
        elif loc[-1:] == ("[key]",):
            step, field, subject = _subject(data, loc[:-1])
            document.add(loc[:-1], "graph.field", f"{subject}: keys are text; quote the key", step=step, field=field)
        elif kind == "extra_forbidden":
            document.add(loc, "graph.field", f"{subject}: unknown field", step=step, field=field, key=True)
        else:
            document.add(loc, "graph.field", f"{subject}: {message}", step=step, field=field)


# -- graph rules -----------------------------------------------------------------------------------


def _graph_rules(document: _Document, graph: ItemGraph, limits: Limits) -> None:
    ids: dict[str, int] = {}
    for number, step in enumerate(graph.steps):
        if step.id in ids:
            document.add(
                ("steps", number, "id"),
                "graph.duplicate_id",
                f"step {step.id!r}: the id is used by step {ids[step.id] + 1} too; step ids must be unique",
                step=step.id,
                field="id",
            )
        else:
            ids[step.id] = number
    if len(graph.steps) > limits.limit("node_count"):
        document.add(("steps",), "limit.node_count", _limit_text("node_count", limits, len(graph.steps)))
    if len(graph.edges) > limits.limit("edge_count"):
        document.add(("edges",), "limit.edge_count", _limit_text("edge_count", limits, len(graph.edges)))
    known = True
    for number, edge in enumerate(graph.edges):
        for end, name in (("from", edge.source), ("to", edge.to)):
            if name not in ids:
                known = False
                document.add(
                    ("edges", number, end),
                    "graph.edge_step",
                    f"edge {number + 1} ({edge.source} -> {edge.to}): {end} names {name!r}, which is not a step; "
                    f"the steps are {', '.join(ids)}",
                    step=edge.source,
                    field=end,
                )
    if known and not _cycles(document, graph):
        _in_edges(document, graph)


def _limit_text(budget: str, limits: Limits, measured: int) -> str:
    return f"planning budget '{budget}' exceeded: accepted limit {limits.limit(budget)}, measured {measured}"


def _forward(graph: ItemGraph) -> dict[str, list[tuple[int, Edge]]]:
    out: dict[str, list[tuple[int, Edge]]] = {s.id: [] for s in graph.steps}
    for number, edge in enumerate(graph.edges):
        if edge.loop is None:
            out[edge.source].append((number, edge))
    return out


def _cycles(document: _Document, graph: ItemGraph) -> bool:
    """Report a cycle of non-loop edges and loop edges that close none; True when any was found."""
    out = _forward(graph)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in (s.id for s in graph.steps):
        if state.get(start):
            continue
        state[start] = 1
        stack: list[tuple[str, Iterator[tuple[int, Edge]]]] = [(start, iter(out[start]))]
        while stack:
            node, edges = stack[-1]
            following = next(edges, None)
            if following is None:
                state[node] = 2
                stack.pop()
                continue
            number, edge = following
            if state.get(edge.to) == 1:
                path = [name for name, _ in stack]
                circle = [*path[path.index(edge.to) :], edge.to]
                document.add(
                    ("edges", number),
                    "graph.cycle",
                    f"edge {number + 1} ({edge.source} -> {edge.to}) closes the cycle {' -> '.join(circle)}; a cycle "
                    "is allowed only through a loop edge: add loop: {max_rounds: N} to the edge that goes back",
                    step=edge.source,
                    field="loop",
                )
                return True
            if not state.get(edge.to):
                state[edge.to] = 1
                stack.append((edge.to, iter(out[edge.to])))
    found = False
    for number, edge in enumerate(graph.edges):
        if edge.loop is not None and not _reaches(out, edge.to, edge.source):
            document.add(
                ("edges", number, "loop"),
                "graph.loop_back",
                f"edge {number + 1} ({edge.source} -> {edge.to}) is a loop edge, but {edge.to!r} does not lead to "
                f"{edge.source!r}; a loop edge goes back to an earlier step (drop loop: for a forward edge)",
                step=edge.source,
                field="loop",
            )
            found = True
    return found


def _reaches(out: dict[str, list[tuple[int, Edge]]], source: str, target: str) -> bool:
    seen = {source}
    todo = [source]
    while todo:
        node = todo.pop()
        if node == target:
            return True
        for _, edge in out[node]:
            if edge.to not in seen:
                seen.add(edge.to)
                todo.append(edge.to)
    return False


def _in_edges(document: _Document, graph: ItemGraph) -> None:
    """The several-in-edges rule (module docstring): guards are the branch choices every path to
    a step (or through an edge) takes, as (branch id, edge number)."""
    out = _forward(graph)
    incoming: dict[str, list[tuple[int, Edge]]] = {s.id: [] for s in graph.steps}
    for number, edge in enumerate(graph.edges):
        if edge.loop is None:
            incoming[edge.to].append((number, edge))
    kinds = {s.id: s.kind for s in graph.steps}
    guards: dict[str, frozenset[tuple[str, int]]] = {}
    order = _topological(graph, out, incoming)

    def through(number: int, edge: Edge) -> frozenset[tuple[str, int]]:
        mine = guards[edge.source]
        return mine | {(edge.source, number)} if kinds[edge.source] == "branch" else mine

    for step in order:
        arriving = [through(n, e) for n, e in incoming[step]]
        guards[step] = frozenset.intersection(*arriving) if arriving else frozenset()
        if kinds[step] == "join" or len(arriving) < 2:
            continue
        pairs = [(i, j) for i in range(len(arriving)) for j in range(i + 1, len(arriving))]
        clash = next(((i, j) for i, j in pairs if not _exclusive(arriving[i], arriving[j])), None)
        if clash is None:
            continue
        (first_number, first), (second_number, second) = incoming[step][clash[0]], incoming[step][clash[1]]
        document.add(
            ("edges", second_number, "to"),
            "graph.in_edges",
            f"step {step!r} has in-edges from {first.source!r} (edge {first_number + 1}) and {second.source!r} "
            f"(edge {second_number + 1}) that can both deliver in one run; only a join step merges items: put a "
            "join step before it, or make them exclusive outcomes of one branch step",
            step=step,
            field="in-edges",
        )


def _exclusive(a: frozenset[tuple[str, int]], b: frozenset[tuple[str, int]]) -> bool:
    chosen = dict(a)
    return any(branch in chosen and chosen[branch] != number for branch, number in b)


def _topological(
    graph: ItemGraph, out: dict[str, list[tuple[int, Edge]]], incoming: dict[str, list[tuple[int, Edge]]]
) -> list[str]:
    waiting = {s.id: len(incoming[s.id]) for s in graph.steps}
    ready = [s.id for s in graph.steps if waiting[s.id] == 0]
    order: list[str] = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for _, edge in out[node]:
            waiting[edge.to] -= 1
            if waiting[edge.to] == 0:
                ready.append(edge.to)
    return order


# -- entry points ----------------------------------------------------------------------------------


def locate(text: str, *, display: str) -> Callable[[Path_], tuple[int, int]]:
    """Where each part of a document's text is: ``locate(text, display=...)(("steps", 0, "id"))``
    is the 1-based (line, column) of that value, or of the nearest value enclosing it."""
    return _read(text, display, max_depth=load_limits().limit("value_depth")).where


def lint_graph(text: str, *, display: str, limits: Limits | None = None) -> tuple[ItemGraph | None, list[GraphFinding]]:
    """Validate an item-graph document's text: the document (None while any finding is an
    error) and every finding of the rules in this module's docstring, sorted by position.
    ``display`` names the file in findings. Nothing is run and nothing is stored."""
    limits = limits or load_limits()
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.limit("source_bytes"):
        finding = GraphFinding("limit.source_bytes", "error", _limit_text("source_bytes", limits, size), display, 1, 1)
        return None, [finding]
    counted = counted_too_many(text, limits)  # before the document is built: bounded time and memory
    if counted:
        return None, [GraphFinding(rule, "error", message, display, line, col) for rule, message, line, col in counted]
    document = _read(text, display, max_depth=limits.limit("value_depth"))
    graph: ItemGraph | None = None
    if document.data is not None:
        _check_mappings(document)
        try:
            graph = ItemGraph.model_validate(document.data)
        except ValidationError as err:
            _model_findings(document, err)
        if graph is not None:
            _graph_rules(document, graph, limits)
            _code_arguments(graph, document.add)
        if graph is not None and not document.found:  # what planning would build, measured first
            for path, rule, message in size_findings(graph, limits):
                document.add(path, rule, message)
    found = sorted(document.found, key=lambda f: (f.line, f.column, f.rule))
    return (None if found else graph), found


def load_graph(text: str, *, display: str, limits: Limits | None = None) -> ItemGraph:
    """The validated document.

    Raises
    ------
    InvalidWorkflow
        With one diagnostic (``file:line:column``) per finding of :func:`lint_graph`.
    """
    graph, found = lint_graph(text, display=display, limits=limits)
    if graph is None:
        raise InvalidWorkflow([f.diagnostic() for f in found])
    return graph


def read_graph_file(path: Path, *, display: str, limits: Limits | None = None) -> bytes:
    """The bytes of the document at ``path``, read as ``plan`` reads an entry (the no-follow reader
    of :mod:`rho_notebook.source.labels`): from the workspace holding its folder down, no symlink
    on the way, a regular file only (a FIFO or a device is refused, never read), and refused past
    the ``source_bytes`` limit before it is read whole. ``validate`` and ``convert`` read with it.

    Raises
    ------
    SourceError
        ``graph.read``: the file is missing, a symlink, not a regular file, or cannot be read.
    LimitError
        ``limit.source_bytes``: the file is larger than the limit.
    """
    limits = limits or load_limits()
    suffix = next((s for s in GRAPH_SUFFIXES if path.name.endswith(s)), GRAPH_SUFFIXES[0])
    try:
        folder = Path(os.path.realpath(path.absolute().parent))
        root = find_workspace(folder).root
        parts = list((folder / path.name).relative_to(root).parts)
        return read_regular_file_nofollow(
            root, parts, shown=display, suffix=suffix, max_bytes=limits.limit("source_bytes")
        )
    except SourceError as err:  # the reader's message names the file first: "FILE: why"
        raise SourceError(f"cannot read {err.diagnostics()[0].message}", rule="graph.read", file=display) from None
    except (OSError, ValueError) as err:  # a name the file system cannot hold, met finding the workspace
        msg = f"cannot read {display}: {getattr(err, 'strerror', None) or err}"
        raise SourceError(msg, rule="graph.read", file=display) from None


def lint_graph_file(
    path: Path, *, display: str, inputs: Mapping[str, Any] | None = None, limits: Limits | None = None
) -> list[GraphFinding]:
    """``validate FILE.graph.yaml``: the findings of :func:`lint_graph` for the file at ``path``,
    and ``argv.code`` against the files its command programs resolve to (as ``plan`` checks
    them); with ``inputs``, a valid document's declared inputs are checked against them too.

    Raises
    ------
    SourceError
        The file cannot be read (:func:`read_graph_file`).
    LimitError
        The file is larger than the ``source_bytes`` limit.
    InputError
        ``inputs`` do not fit the document's declared inputs.
    """
    raw = read_graph_file(path, display=display, limits=limits)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        finding = GraphFinding("graph.yaml", "error", f"the file is not UTF-8 text ({err.reason})", display, 1, 1)
        return [finding]
    graph, found = lint_graph(text, display=display, limits=limits)
    if graph is not None:
        found = _resolved_code_arguments(graph, text, path=path, display=display)
    if graph is not None and not found and inputs is not None:
        check_inputs(_declarations(graph.inputs), inputs, file=display)
    return found


def _declarations(inputs: Mapping[str, FieldDecl]) -> dict[str, dict[str, Any]]:
    return {name: decl.declaration() for name, decl in inputs.items()}
