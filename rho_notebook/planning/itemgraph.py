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
    A step whose ``kind`` is missing or not one of the step kinds; an aggregate's inner ``step``
    whose kind is not one of :data:`~rho_notebook.model.itemgraph.INNER_KINDS`.
``graph.param``
    A parameter a step's kind does not take (each kind's parameters are its model's fields; an
    aggregate's inner command or model step takes no ``into``).
``graph.field``
    Any other shape problem: a missing or unknown field, a wrong type, a bad id, an inconsistent
    typed field, a model step without provider and model or agent, a bad condition.
``graph.loop_rounds``
    A loop edge without ``max_rounds``.
``graph.duplicate_id``
    Two steps with the same id.
``graph.into``
    An aggregate step whose ``into`` is the list it iterates over (``over``).
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
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any, get_args

import yaml  # type: ignore[import-untyped]
from pydantic import ValidationError

from rho_notebook.errors import InvalidWorkflow, MappingError, SourceError
from rho_notebook.model import spelling
from rho_notebook.model.item_edges import Edge
from rho_notebook.model.itemgraph import (
    GRAPH_SUFFIXES,
    INNER_KINDS,
    INNER_PARAMS_BY_KIND,
    PARAMS_BY_KIND,
    STEP_KINDS,
    AggregateStep,
    CommandStep,
    FieldDecl,
    InnerCommandParams,
    ItemGraph,
    Step,
    StepParams,
)
from rho_notebook.model.mapping import is_mapping, looks_like_mapping, parse_mapping
from rho_notebook.planning.code_args import Lookup, code_argument_problem, item_argv
from rho_notebook.planning.inputs import check_inputs
from rho_notebook.planning.item_document import Document, GraphFinding, Loader, Path_, control_character, subject_of
from rho_notebook.planning.item_rules import graph_rules
from rho_notebook.planning.item_size import budget_text, counted_too_many, size_findings
from rho_notebook.planning.resolve import Resolver
from rho_notebook.source.labels import read_regular_file_nofollow
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.workspace import find_workspace

__all__ = [
    "ITEM_BYTES_BUDGET",
    "GraphFinding",
    "command_argvs",
    "lint_graph",
    "lint_graph_file",
    "load_graph",
    "locate",
    "read_graph_file",
]

ITEM_BYTES_BUDGET = "item_bytes"
"""The planning limit capping the carried item (canonical JSON bytes)."""


# -- reading YAML with positions (the text is composed in planning/item_document.py) ---------------


def _read(text: str, display: str, *, max_depth: int) -> Document:
    document = Document(display, max_depth=max_depth)
    try:
        loader = Loader(text)  # its reader refuses control characters at once
    except yaml.reader.ReaderError as err:
        document.found.append(control_character(err, text, display))
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
        document.found.append(control_character(err, text, display))
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


def _check_mappings(document: Document) -> None:
    """The mapping rules, on the raw data (so they report even when other fields are wrong)."""
    data = document.data
    steps = data.get("steps")
    for number, step in enumerate(steps if isinstance(steps, list) else []):
        if not isinstance(step, dict) or not isinstance(step.get("params"), dict):
            continue
        inner = step["params"].get("step") if step.get("kind") == "aggregate" else None
        for kind, params, where in (
            (step.get("kind"), step["params"], ("steps", number, "params")),
            *_inner_params(inner, ("steps", number, "params", "step", "params")),
        ):
            _check_params(document, kind, params, where)
    edges = data.get("edges")
    for number, edge in enumerate(edges if isinstance(edges, list) else []):
        if isinstance(edge, dict) and isinstance(edge.get("when"), dict) and "value" in edge["when"]:
            for path, text in _strings(edge["when"]["value"], ("edges", number, "when", "value")):
                _check_string(document, path, text, mapped=False)


def _inner_params(inner: Any, where: Path_) -> list[tuple[Any, dict[str, Any], Path_]]:
    """An aggregate's inner step as (kind, params, path), when it is shaped as one."""
    if isinstance(inner, dict) and isinstance(inner.get("params"), dict):
        return [(inner.get("kind"), inner["params"], where)]
    return []


def _check_params(document: Document, kind: Any, params: dict[str, Any], where: Path_) -> None:
    """The mapping rules on one step's (or an aggregate's inner step's) raw params at ``where``;
    none for a kind that does not exist (its finding says so, and its params mean nothing yet)."""
    if kind not in (INNER_KINDS if len(where) > 3 else STEP_KINDS):
        return
    model = (INNER_PARAMS_BY_KIND if len(where) > 3 else PARAMS_BY_KIND).get(kind)
    mapped = model.mapped() if model is not None else ()
    for name, value in params.items():
        if (kind == "code" and name == "source") or (kind == "aggregate" and name == "step"):
            continue  # Starlark, or the inner step (checked on its own)
        for path, text in _strings(value, (*where, str(name))):
            literal_program = kind == "command" and name == "argv" and path[len(where) + 1 :] == (0,)
            _check_string(document, path, text, mapped=name in mapped and not literal_program)


def _check_string(document: Document, path: Path_, text: str, *, mapped: bool) -> None:
    step, field, subject = subject_of(document.data, path)
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
    for number, step, raw_argv, at in command_argvs(graph):
        argv = item_argv(raw_argv)
        resolved = lookup(raw_argv[0]) if lookup is not None else None
        found = code_argument_problem(argv, resolved=resolved, lookup=lookup, node=step, subject="step")
        if found is not None and found.argument > 0:  # a mapping as argv[0] is graph.mapping_field
            where: Path_ = ("steps", number, *at, "argv", found.argument)
            field = ".".join(str(p) for p in at) + f".argv[{found.argument}]"
            add(where, "argv.code", found.message, step=step, field=field)


def command_argvs(graph: ItemGraph) -> Iterator[tuple[int, str, tuple[str, ...], Path_]]:
    """(step number, step id, argv, path of its params under the step) of every command the
    document runs: command steps and aggregates whose inner step is a command."""
    for number, step in enumerate(graph.steps):
        if isinstance(step, CommandStep):
            yield number, step.id, step.params.argv, ("params",)
        elif isinstance(step, AggregateStep) and isinstance(step.params.step.params, InnerCommandParams):
            yield number, step.id, step.params.step.params.argv, ("params", "step", "params")


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


def _model_findings(document: Document, err: ValidationError) -> None:
    data = document.data
    problems = err.errors()
    guesses, guessed = _guesses(problems)
    for problem in problems:
        loc: Path_ = tuple(problem["loc"])
        kind = problem["type"]
        if kind == "too_short" and any(len(p["loc"]) > len(loc) and p["loc"][: len(loc)] == loc for p in problems):
            continue  # the list is "empty" only because its items failed, reported on their own
        loc = _untagged(loc)
        if kind == "missing" and loc in guessed:
            continue  # misspelled, not missing: the unknown field's finding names it
        step, field, subject = subject_of(data, loc)
        message = _message(problem, loc)
        inner = loc[2:4] == ("params", "step")
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            raw = _raw_at(data, loc)
            shown = raw.get("kind") if isinstance(raw, dict) else None
            what = f"unknown {'inner ' if inner else ''}step kind {shown!r}" if shown is not None else "no kind"
            kinds = f"an aggregate runs {', '.join(INNER_KINDS)}" if inner else f"the kinds are {', '.join(STEP_KINDS)}"
            document.add(
                (*loc, "kind"), "graph.kind", f"{subject}: {what}; {kinds}", step=step, field=_dotted_field(loc, "kind")
            )
        elif kind == "extra_forbidden" and len(loc) in (4, 6) and loc[-2] == "params" and (len(loc) == 4 or inner):
            document.add(
                loc,
                "graph.param",
                f"step {step!r}: {_unknown_param(_raw_at(data, loc[:-2]), str(loc[-1]), inner=inner, meant=guesses.get(loc))}",
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
            step, field, subject = subject_of(data, loc[:-1])
            document.add(loc[:-1], "graph.field", f"{subject}: keys are text; quote the key", step=step, field=field)
        elif kind == "extra_forbidden":
            guess = f"; did you mean {guesses[loc]!r}?" if loc in guesses else _edge_hint(data, loc, step)
            document.add(loc, "graph.field", f"{subject}: unknown field{guess}", step=step, field=field, key=True)
        else:
            document.add(loc, "graph.field", f"{subject}: {message}", step=step, field=field)


def _message(problem: Any, loc: Path_) -> str:
    """pydantic's message of ``problem``, in the graph's words where pydantic's would puzzle."""
    kind = problem["type"]
    if kind == "missing" and loc[2:] == ("params", "max_items"):
        return "an aggregate step needs max_items (at most 1000), the most elements it takes"
    if kind == "too_short":  # "Tuple should have at least 1 item after validation"
        least, given = problem["ctx"]["min_length"], problem["ctx"]["actual_length"]
        if loc == ("steps",):
            return f"a graph needs at least one step (it has {given})"
        return f"give at least {least} {'entry' if least == 1 else 'entries'} (it has {given})"
    return str(problem["msg"]).removeprefix("Value error, ")


_BEFORE_WORDS = frozenset({"needs", "after", "depends_on", "from"})
"""Fields another system's step uses to name the steps that come before it."""
_EDGE_WORDS = _BEFORE_WORDS | {"to", "next", "then", "goto", "edges"}
"""Fields another system's step uses to name the steps around it; here edges are listed apart."""


def _edge_hint(data: Any, loc: Path_, step: str | None) -> str:
    """For a step field in :data:`_EDGE_WORDS` (``to: [ask]``), where edges are written instead."""
    if not (len(loc) == 3 and loc[0] == "steps" and loc[2] in _EDGE_WORDS and step is not None):
        return ""
    raw = _raw_at(data, loc)
    other = raw[0] if isinstance(raw, list) and raw else raw
    other = other if isinstance(other, str) else "OTHER"
    ends = f"{{from: {other}, to: {step}}}" if loc[2] in _BEFORE_WORDS else f"{{from: {step}, to: {other}}}"
    return f"; a step does not name its neighbours: list edges under the document's `edges:`, e.g. - {ends}"


_STEP_KEYS = tuple(sorted({name for model in get_args(get_args(Step)[0]) for name in model.model_fields}))
_EDGE_KEYS = tuple(field.alias or name for name, field in Edge.model_fields.items())


def _guesses(problems: list[Any]) -> tuple[dict[Path_, str], set[Path_]]:
    """For each unknown field (untagged path), the known one it most likely misspells: a required
    field missing beside it (close to it, or the only one missing where it is the only unknown:
    ``code:`` for a code step's ``source:``), or one of the keys its document, step or edge takes;
    and the paths of the missing fields so named, whose own finding would only repeat it (``too:``
    for ``to:``)."""
    missing: dict[Path_, list[str]] = {}
    unknown: Counter[Path_] = Counter()
    for problem in problems:
        loc = _untagged(tuple(problem["loc"]))
        if problem["type"] == "missing":
            missing.setdefault(loc[:-1], []).append(str(loc[-1]))
        elif problem["type"] == "extra_forbidden" and loc:
            unknown[loc[:-1]] += 1
    guesses: dict[Path_, str] = {}
    guessed: set[Path_] = set()
    for problem in problems:
        loc = _untagged(tuple(problem["loc"]))
        if problem["type"] != "extra_forbidden" or not loc:
            continue
        parent, name = loc[:-1], str(loc[-1])
        beside = missing.get(parent, [])
        only = beside if len(beside) == 1 and unknown[parent] == 1 else []
        found = spelling.meant(name, beside) or (only[0] if only else None) or spelling.meant(name, _keys_at(parent))
        if found:
            guesses[loc] = found
            if found in beside:
                guessed.add((*parent, found))
    return guesses, guessed


def _keys_at(parent: Path_) -> tuple[str, ...]:
    """The keys a document, a step or an edge takes (other mappings: none known here)."""
    if not parent:
        return tuple(ItemGraph.model_fields)
    if len(parent) == 2 and isinstance(parent[1], int):
        return {"steps": _STEP_KEYS, "edges": _EDGE_KEYS}.get(str(parent[0]), ())
    return ()


def _untagged(loc: Path_) -> Path_:
    """``loc`` without the discriminators' tags (a step's kind, an aggregate's inner kind)."""
    if len(loc) >= 3 and loc[0] == "steps" and isinstance(loc[1], int) and loc[2] in STEP_KINDS:
        loc = (*loc[:2], *loc[3:])
    if len(loc) >= 5 and loc[2:4] == ("params", "step") and loc[4] in INNER_KINDS:
        loc = (*loc[:4], *loc[5:])
    return loc


def _raw_at(data: Any, loc: Path_) -> Any:
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data


def _dotted_field(loc: Path_, last: str) -> str:
    return ".".join(str(p) for p in (*loc[2:], last))


def _unknown_param(raw: Any, name: str, *, inner: bool, meant: str | None = None) -> str:
    """The message of a parameter a step's (or an aggregate's inner step's) kind does not take
    (``meant``: the missing one it stands for, else the closest it takes)."""
    shown_kind = raw.get("kind") if isinstance(raw, dict) else None
    model = (INNER_PARAMS_BY_KIND if inner else PARAMS_BY_KIND).get(shown_kind) if isinstance(shown_kind, str) else None
    allowed = ", ".join(model.model_fields) if model is not None else ""
    takes = f"its params are {allowed}" if allowed else "it takes no params"
    if inner and name == "into":
        return f"an aggregate's inner {shown_kind} step has no into: the aggregate's into holds every result; {takes}"
    close = meant or (spelling.meant(name, model.model_fields) if model is not None else None)
    guess = f" (did you mean {close!r}?)" if close else ""
    return f"unknown param {name!r} for {'an inner' if inner else 'a'} {shown_kind} step{guess}; {takes}"


# -- graph rules -----------------------------------------------------------------------------------


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
        finding = GraphFinding("limit.source_bytes", "error", budget_text("source_bytes", limits, size), display, 1, 1)
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
            graph_rules(document, graph, limits)
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
