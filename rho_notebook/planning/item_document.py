"""An item-graph document's text read as JSON-shaped data with the position of every value
(pyyaml's composer), and the :class:`GraphFinding` s that name a step and field by those
positions. :mod:`~rho_notebook.planning.itemgraph` lists the reading rules (``graph.yaml``,
``graph.yaml_alias``, ``graph.duplicate_key``, ``graph.float``, ``graph.integer``,
``limit.value_depth``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import yaml  # type: ignore[import-untyped]

from rho_notebook.errors import Diagnostic
from rho_notebook.model.schema import INT64_MAX, INT64_MIN
from rho_notebook.planning._findings import Finding

__all__ = ["Document", "GraphFinding", "Loader", "Path_", "control_character", "field_of", "subject_of"]

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

    def diagnostic(self) -> Diagnostic:
        return dataclasses.replace(super().diagnostic(), step=self.step, field=self.field)


# -- reading YAML with positions -------------------------------------------------------------------


class Loader(yaml.SafeLoader):  # type: ignore[misc]
    """SafeLoader reading only JSON-shaped scalars (see the module docstring)."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - pyyaml's class-level table


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), list("-+0123456789"))
Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?:\.[0-9]*)?[eE][-+]?[0-9]+|\.(?:inf|Inf|INF|nan|NaN|NAN))$"),
    list("-+0123456789."),
)
Loader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])

_FLOAT_TAG = "tag:yaml.org,2002:float"
_INT_TAG = "tag:yaml.org,2002:int"


class Document:
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
            step, field, subject = subject_of(self.data, path)
            self.add(path, rule, f"{subject}: {message}", step=step, field=field, key=key)


def control_character(err: yaml.reader.ReaderError, text: str, display: str) -> GraphFinding:
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


def field_of(path: Path_) -> str | None:
    """The field a path under ``steps[N]`` (or ``edges[N]``) names inside that step (or edge), as
    findings name it (``params.argv[1]``); None for the step itself."""
    return _dotted(path[2:]) or None


def subject_of(data: Any, path: Path_) -> tuple[str | None, str | None, str]:
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
