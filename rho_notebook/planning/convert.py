"""``convert FILE.graph.yaml``: an item graph written out as the equivalent Starlark workflow
(docs/graphs.md, "Graduating to Starlark: convert"), so a graph can graduate to code.

Only graphs made of ``agent``, ``command``, ``branch`` and ``output`` steps, without loop edges,
convert. Every other case is refused (:class:`~rho_notebook.errors.NotConvertible`, each
diagnostic naming the step, edge or input with its line:column) rather than written as a workflow
that would behave differently. How the parts map:

- Each ``agent`` and ``command`` step becomes a node of the same name. ``branch`` and ``output``
  steps pass the item on unchanged and become no node. A node ``needs`` the nearest agent or
  command steps before it.
- The carried item is followed symbolically: a field comes from an input (``inputs["x"]``, fixed
  when the workflow is planned), from a typed answer field of an agent step
  (``output("step", ["field"])``; the answer's fields become the node's ``schema.record``), or from
  a command's ``into`` (its stdout has no schema in the graph, so nothing can read it in Starlark).
- A mapping in a prompt or argv item becomes a string or ``template([...])``; a missing field
  spliced into text is dropped (it resolves to empty text). Refused: ``$runId``, ``$run.*``, the
  whole item, a field of a scalar, a whole-value mapping of a non-string (it keeps its type), an
  optional answer field or an enum holding ``None`` (empty text in a graph, ``null`` in a
  template), a field a command produced, a field an agent without declared answer fields may
  have replaced, and a field that differs by the path taken.
- An edge's ``when`` becomes a node condition on an agent's answer field: ``eq`` ``equals``,
  ``ne`` ``not_(equals)``, ``in`` ``is_one_of``; on an enum or bool field every op becomes
  ``is_one_of`` the members it holds for. A branch takes its first passing edge, so a later edge
  also carries ``not_`` of the earlier ones. A node's condition is every edge condition on the
  paths to it (``all``; ``any`` over the paths, when it is reached by several exclusive ones).
  Refused: a condition on an input or a command's output, ``gt``/``gte``/``lt``/``lte`` on an
  integer or string field, a value the field can never hold, and a step whose out-edges all have
  conditions (it can stall; Starlark has no stalled outcome).
- The document is validated first (:func:`~rho_notebook.planning.itemgraph.load_graph`), so a
  command step whose mapping would become code or choose the program (``argv.code``,
  :mod:`~rho_notebook.planning.code_args`) is refused before anything is written: a converted
  command node never carries data where the Starlark planner refuses it (data stays after a
  static program, as ``output(...)``; inputs become ``inputs[...]``, which Starlark treats as
  static plan content).
- Agent steps carry no bounds in a graph; their nodes get :data:`AGENT_TIMEOUT_SECONDS` and
  :data:`AGENT_MAX_OUTPUT_BYTES`. The result is deterministic and ends in a newline.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.errors import Diagnostic, NotConvertible
from rho_notebook.model.itemgraph import AgentStep, CommandStep, Condition, Edge, FieldDecl, ItemGraph, Step
from rho_notebook.model.mapping import Ref, Text, parse_mapping, parse_path
from rho_notebook.planning.itemgraph import load_graph, locate

__all__ = ["AGENT_MAX_OUTPUT_BYTES", "AGENT_TIMEOUT_SECONDS", "CONVERTIBLE_KINDS", "convert_graph"]

CONVERTIBLE_KINDS = ("agent", "command", "branch", "output")
AGENT_TIMEOUT_SECONDS = 3600
"""``timeout_seconds`` of a converted agent node (a graph's agent step names none)."""
AGENT_MAX_OUTPUT_BYTES = 1_048_576
"""``max_output_bytes`` of a converted agent node (the item cap's default)."""

Path_ = tuple[str | int, ...]


class _NoStarlarkEquivalent(Exception):
    """A part of the graph (a step, an edge, an input) with no faithful Starlark equivalent: where
    it is and why (collected into :class:`NotConvertible`)."""

    def __init__(self, where: Path_, rule: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.rule = rule
        self.message = message


# -- where an item field comes from ----------------------------------------------------------------


@dataclass(frozen=True)
class _Input:
    name: str
    decl: FieldDecl


@dataclass(frozen=True)
class _Answer:
    step: str
    name: str
    decl: FieldDecl


@dataclass(frozen=True)
class _CommandResult:
    step: str


@dataclass(frozen=True)
class _Differs:
    """The field comes from different places depending on the path taken."""


_Source = _Input | _Answer | _CommandResult | _Differs


@dataclass(frozen=True)
class _Item:
    fields: dict[str, _Source]
    open: str | None = None
    """An agent step without declared answer fields: its answer may have replaced any field."""


@dataclass
class _Arrival:
    """The paths reaching a step: their guards (tuples of edge numbers), item and latest nodes."""

    guards: set[tuple[int, ...]] = field(default_factory=set)
    items: list[_Item] = field(default_factory=list)
    last: set[str] = field(default_factory=set)


# -- Starlark text ---------------------------------------------------------------------------------


def _literal(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    msg = f"no Starlark literal for {value!r}"
    raise TypeError(msg)


def _output_ref(answer: _Answer) -> str:
    return f"output({_literal(answer.step)}, [{_literal(answer.name)}])"


def _schema(decl: FieldDecl) -> str:
    inner = {
        "string": "schema.string()",
        "integer": "schema.integer()",
        "bool": "schema.bool()",
        "enum": f"schema.enum_({_literal(list(decl.choices))})",
    }[decl.type]
    return inner if decl.is_required else f"schema.optional({inner})"


def _input_decl(decl: FieldDecl) -> str:
    args = [_literal(list(decl.choices))] if decl.type == "enum" else []
    if decl.default is not None:
        args.append(f"default = {_literal(decl.default)}")
    return f"input.{decl.type}({', '.join(args)})"


def _fits(decl: FieldDecl, value: Any) -> bool:
    if decl.type == "string":
        return isinstance(value, str)
    return decl.type == "integer" and isinstance(value, int) and not isinstance(value, bool)


def _is_text(decl: FieldDecl) -> bool:
    return decl.type == "string" or (decl.type == "enum" and all(isinstance(c, str) for c in decl.choices))


# -- the conversion --------------------------------------------------------------------------------


class _Converter:
    def __init__(self, graph: ItemGraph) -> None:
        self.graph = graph
        self.number = {step.id: n for n, step in enumerate(graph.steps)}
        self.edge_number = {id(edge): n for n, edge in enumerate(graph.edges)}
        self.edge_condition: dict[int, str | None] = {}
        """The rendered condition of taking edge N (None: always), set when its source is reached."""
        self.dead: set[int] = set()
        """Edges a branch never takes (an earlier edge of it always passes)."""
        self.nodes: list[str] = []

    # -- checks before walking ---------------------------------------------------------------------

    def structure(self) -> list[_NoStarlarkEquivalent]:
        found: list[_NoStarlarkEquivalent] = []
        for n, step in enumerate(self.graph.steps):
            if step.kind not in CONVERTIBLE_KINDS:
                found.append(
                    _NoStarlarkEquivalent(
                        ("steps", n, "kind"),
                        "convert.step_kind",
                        f"step {step.id!r} is {_a(step.kind)} step; convert handles only agent, command, branch and "
                        f"output steps ({_a(step.kind)} step has no Starlark node), so keep this graph as a document",
                    )
                )
        for n, edge in enumerate(self.graph.edges):
            if edge.loop is not None:
                found.append(
                    _NoStarlarkEquivalent(
                        ("edges", n, "loop"),
                        "convert.loop",
                        f"edge {n + 1} ({edge.source} -> {edge.to}) is a loop edge; a Starlark workflow is a DAG "
                        "and cannot run steps again, so a graph with loops does not convert",
                    )
                )
        for name, decl in self.graph.inputs.items():
            if not decl.is_required and decl.default is None:
                found.append(
                    _NoStarlarkEquivalent(
                        ("inputs", name),
                        "convert.input",
                        f"input {name!r} is optional without a default; a Starlark input without a default is "
                        "required, so give it a default",
                    )
                )
        for step in self.graph.steps:
            out = self.graph.out_edges(step.id)
            if out and all(e.when is not None for e in out):
                n = self.edge_number[id(out[0])]
                found.append(
                    _NoStarlarkEquivalent(
                        ("edges", n, "when"),
                        "convert.stall",
                        f"step {step.id!r}: every out-edge has a condition, so the run stalls when none passes; "
                        "Starlark has no stalled outcome: drop the when of its last out-edge to convert it",
                    )
                )
        return found

    # -- walking the graph -------------------------------------------------------------------------

    def walk(self) -> None:
        arrivals = {step.id: _Arrival() for step in self.graph.steps}
        for start in self.graph.starts():
            first = {name: _Input(name, decl) for name, decl in self.graph.inputs.items()}
            arrivals[start].guards.add(())
            arrivals[start].items.append(_Item(dict(first)))
        for step in self._order():
            here = arrivals[step.id]
            if not here.items:
                continue  # reached only through edges a branch never takes
            item = _merge(here.items)
            guards = _simplify(
                here.guards,
                self.graph,
                edge_number=self.edge_number,
                dead=self.dead,
                conditions=self.edge_condition,
            )
            last = here.last
            if isinstance(step, AgentStep | CommandStep):
                self.nodes.append(self._node(step, item, guards=guards, needs=sorted(last)))
                item = _after(step, item)
                last = {step.id}
            self._leave(step, item, guards=here.guards, last=last, arrivals=arrivals)

    def _order(self) -> list[Step]:
        waiting = {s.id: len(self.graph.in_edges(s.id)) for s in self.graph.steps}
        ready = [s for s in self.graph.steps if waiting[s.id] == 0]
        order: list[Step] = []
        while ready:
            step = ready.pop(0)
            order.append(step)
            for edge in self.graph.out_edges(step.id):
                waiting[edge.to] -= 1
                if waiting[edge.to] == 0:
                    ready.append(self.graph.step(edge.to))
        return order

    def _leave(
        self,
        step: Step,
        item: _Item,
        *,
        guards: set[tuple[int, ...]],
        last: set[str],
        arrivals: dict[str, _Arrival],
    ) -> None:
        earlier: list[str] = []
        always_taken = False
        for edge in self.graph.out_edges(step.id):
            n = self.edge_number[id(edge)]
            if always_taken:
                self.dead.add(n)
                continue
            test = self._condition(edge, n, item)
            if step.kind == "branch":
                parts = [f"condition.not_({c})" for c in earlier] + ([test] if test is not None else [])
                if test is not None:
                    earlier.append(test)
                else:
                    always_taken = True
                self.edge_condition[n] = _conjunction(parts)
            else:
                self.edge_condition[n] = test
            atom = (n,) if self.edge_condition[n] is not None else ()
            target = arrivals[edge.to]
            target.guards.update(g + atom for g in guards)
            target.items.append(item)
            target.last.update(last)

    def _condition(self, edge: Edge, n: int, item: _Item) -> str | None:
        when = edge.when
        if when is None:
            return None
        where: Path_ = ("edges", n, "when", "field")
        subject = f"edge {n + 1} ({edge.source} -> {edge.to})"
        path = parse_path(when.field)
        source = self._source(item, path, where=where, subject=f"{subject}: the condition", rule="convert.condition")
        if isinstance(source, _Input):
            msg = (
                f"{subject}: the condition reads input {source.name!r}, which is fixed when the workflow is "
                "planned; Starlark conditions read node outputs (output(), status(), exit_code()) only"
            )
            raise _NoStarlarkEquivalent(where, "convert.condition", msg)
        if source is None:
            msg = f"{subject}: the condition reads {when.field!r}, which no step before it sets"
            raise _NoStarlarkEquivalent(where, "convert.condition", msg)
        if source.decl.type in ("enum", "bool"):
            return _member_condition(when, source, n=n, subject=subject)
        return _scalar_condition(when, source, n=n, subject=subject)

    def _source(
        self, item: _Item, path: Path_, *, where: Path_, subject: str, rule: str = "convert.mapping"
    ) -> _Answer | _Input | None:
        """Where the field at ``path`` comes from: an input, an agent's answer field, or None
        (no step sets it: it resolves to empty)."""
        shown = ".".join(str(p) for p in path) or "$json"
        if not path or not isinstance(path[0], str):
            msg = f"{subject} reads {shown!r}; only a top-level field of the item converts"
            raise _NoStarlarkEquivalent(where, rule, msg)
        if item.open is not None:
            msg = (
                f"{subject} reads {shown!r}, but agent step {item.open!r} before it declares no answer fields, so "
                "its answer may replace any field; declare its answer: {...} to convert"
            )
            raise _NoStarlarkEquivalent(where, rule, msg)
        source = item.fields.get(path[0])
        if source is None:
            return None
        if len(path) > 1:
            msg = f"{subject} reads {shown!r}, but {path[0]!r} is a scalar ({_type_of(source)}) without fields"
            raise _NoStarlarkEquivalent(where, rule, msg)
        if isinstance(source, _CommandResult):
            msg = (
                f"{subject} reads {shown!r}, the stdout of command step {source.step!r}; a graph command has no "
                "output schema, so Starlark cannot read it"
            )
            raise _NoStarlarkEquivalent(where, rule, msg)
        if isinstance(source, _Differs):
            msg = f"{subject} reads {shown!r}, which comes from different steps depending on the branch taken"
            raise _NoStarlarkEquivalent(where, rule, msg)
        if isinstance(source, _Answer) and not source.decl.is_required:
            msg = (
                f"{subject} reads {shown!r}, an optional answer field of {source.step!r}; when absent a graph keeps "
                "the earlier value or empty text, which Starlark cannot express: make the field required"
            )
            raise _NoStarlarkEquivalent(where, rule, msg)
        if None in source.decl.choices:
            msg = f"{subject} reads {shown!r}, an enum with a None member (empty text in a graph, null in Starlark)"
            raise _NoStarlarkEquivalent(where, rule, msg)
        return source

    def _text(self, value: str, item: _Item, *, where: Path_, subject: str) -> str:
        """A prompt or argv item as a Starlark string, ``inputs[...]``, ``output(...)`` or template."""
        if not value.startswith("="):
            return _literal(value)
        mapping = parse_mapping(value)
        parts: list[str] = []
        for part in mapping.parts:
            if isinstance(part, Text):
                parts.append(_literal(part.text))
                continue
            parts += self._place(part, item, where=where, subject=subject, whole=mapping.whole)
        if mapping.whole and len(parts) == 1:
            return parts[0]
        if all(p.startswith('"') for p in parts):
            return _literal("".join(json.loads(p) for p in parts))
        return f"template([{', '.join(parts)}])"

    def _place(self, ref: Ref, item: _Item, *, where: Path_, subject: str, whole: bool) -> list[str]:
        if ref.root != "json":
            msg = f"{subject} reads {{{{ {ref.source} }}}}; a Starlark workflow has no run ID or run fields"
            raise _NoStarlarkEquivalent(where, "convert.mapping", msg)
        source = self._source(item, ref.path, where=where, subject=subject)
        if source is None:
            if whole:
                msg = f"{subject} is {{{{ {ref.source} }}}}, which no step before it sets (it would be null)"
                raise _NoStarlarkEquivalent(where, "convert.mapping", msg)
            return []  # a missing field spliced into text is empty text
        if whole and not _is_text(source.decl):
            msg = (
                f"{subject} is the whole value {{{{ {ref.source} }}}}, which keeps its type ({source.decl.type}); "
                'the Starlark field is text: write it inside text, e.g. "=n={{ $json.x }}"'
            )
            raise _NoStarlarkEquivalent(where, "convert.mapping", msg)
        if isinstance(source, _Input):
            return [f"inputs[{_literal(source.name)}]"]
        return [_output_ref(source)]

    def _node(self, step: AgentStep | CommandStep, item: _Item, *, guards: list[list[int]], needs: list[str]) -> str:
        n = self.number[step.id]
        lines = [f"name = {_literal(step.id)}"]
        if isinstance(step, AgentStep):
            p = step.params
            where: Path_ = ("steps", n, "params", "prompt")
            prompt = self._text(p.prompt, item, where=where, subject=f"step {step.id!r}, field 'params.prompt'")
            lines += [f"agent = {_literal(p.agent)}", f"access = {_literal(p.access)}", f"prompt = {prompt}"]
            if p.answer:
                fields = ", ".join(f"{_literal(k)}: {_schema(d)}" for k, d in sorted(p.answer.items()))
                lines.append(f"output = schema.record({{{fields}}})")
            bounds = (AGENT_TIMEOUT_SECONDS, AGENT_MAX_OUTPUT_BYTES)
        else:
            c = step.params
            argv = [_literal(c.argv[0])]
            for index, arg in enumerate(c.argv[1:], start=1):
                where = ("steps", n, "params", "argv", index)
                argv.append(
                    self._text(arg, item, where=where, subject=f"step {step.id!r}, field 'params.argv[{index}]'")
                )
            lines.append(f"argv = [{', '.join(argv)}]")
            bounds = (c.timeout_seconds, c.max_output_bytes)
        if needs:
            lines.append(f"needs = {_literal(needs)}")
        when = self._guard(guards)
        if when is not None:
            lines.append(f"when = {when}")
        lines += [f"timeout_seconds = {bounds[0]}", f"max_output_bytes = {bounds[1]}"]
        body = "".join(f"                {line},\n" for line in lines)
        return f"            {step.kind}(\n{body}            ),\n"

    def _guard(self, guards: list[list[int]]) -> str | None:
        if not guards or any(not g for g in guards):
            return None
        alternatives = [_conjunction([c for n in g if (c := self.edge_condition[n]) is not None]) for g in guards]
        shown = [a for a in alternatives if a is not None]
        if len(shown) < len(alternatives):
            return None
        return shown[0] if len(shown) == 1 else f"condition.any([{', '.join(shown)}])"


def _member_condition(when: Condition, source: _Answer, *, n: int, subject: str) -> str | None:
    """An enum or bool answer field: every op becomes ``is_one_of`` the members it holds for."""
    ref, decl = _output_ref(source), source.decl
    members = list(decl.choices) if decl.type == "enum" else [True, False]
    holding = [m for m in members if when.holds({source.name: m})]
    if not holding:
        msg = f"{subject}: the condition never holds for {when.field!r} ({_schema(decl)}); fix its value"
        raise _NoStarlarkEquivalent(("edges", n, "when"), "convert.condition", msg)
    if len(holding) == len(members) and decl.is_required:
        return None
    if len(holding) == 1:
        return f"condition.equals({ref}, {_literal(holding[0])})"
    return f"condition.is_one_of({ref}, {_literal(holding)})"


def _scalar_condition(when: Condition, source: _Answer, *, n: int, subject: str) -> str | None:
    """A scalar answer field: ``eq``, ``ne`` and ``in`` convert; an order comparison does not."""
    ref, decl = _output_ref(source), source.decl
    if when.op == "exists":
        return None  # a required answer field of a scalar type is always present and not null
    if when.op == "in" and not when.value:
        msg = f"{subject}: the condition never holds ({when.field!r} is in no member of an empty list)"
        raise _NoStarlarkEquivalent(("edges", n, "when", "value"), "convert.condition", msg)
    if when.op in ("gt", "gte", "lt", "lte"):
        msg = (
            f"{subject}: op {when.op!r} on {when.field!r} ({decl.type}) has no Starlark condition; conditions "
            "test equality only (equals, is_one_of): declare the answer field as an enum to branch on it"
        )
        raise _NoStarlarkEquivalent(("edges", n, "when", "op"), "convert.condition", msg)
    values = when.value if when.op == "in" else [when.value]
    for value in values:
        if not _fits(decl, value):
            msg = f"{subject}: {when.field!r} is a {decl.type}, so it never equals {value!r}; fix the value"
            raise _NoStarlarkEquivalent(("edges", n, "when", "value"), "convert.condition", msg)
    if when.op == "in":
        return f"condition.is_one_of({ref}, {_literal(values)})"
    test = f"condition.equals({ref}, {_literal(when.value)})"
    return test if when.op == "eq" else f"condition.not_({test})"


def _type_of(source: _Source) -> str:
    return source.decl.type if isinstance(source, _Input | _Answer) else "value"


def _conjunction(parts: Sequence[str]) -> str | None:
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else f"condition.all([{', '.join(parts)}])"


def _after(step: AgentStep | CommandStep, item: _Item) -> _Item:
    """The item after the step: an agent's answer merged over it, a command's stdout under into."""
    if isinstance(step, CommandStep):
        return _Item({**item.fields, step.params.into: _CommandResult(step.id)}, item.open)
    if not step.params.answer:
        return _Item(dict(item.fields), step.id)
    answered = {name: _Answer(step.id, name, decl) for name, decl in step.params.answer.items()}
    return _Item({**item.fields, **answered}, item.open)


def _merge(items: list[_Item]) -> _Item:
    """The item at a step reached by several (exclusive) paths: a field is known only when every
    path gives it the same source."""
    names = sorted({name for item in items for name in item.fields})
    fields: dict[str, _Source] = {}
    for name in names:
        sources = {item.fields.get(name) for item in items}
        only = next(iter(sources))
        fields[name] = only if len(sources) == 1 and only is not None else _Differs()
    opened = sorted({item.open for item in items if item.open is not None})
    return _Item(fields, opened[0] if opened else None)


def _simplify(
    guards: set[tuple[int, ...]],
    graph: ItemGraph,
    *,
    edge_number: dict[int, int],
    dead: set[int],
    conditions: dict[int, str | None],
) -> list[list[int]]:
    """Alternatives that cover every live out-edge of one branch after the same prefix collapse to
    the prefix (a branch that cannot stall always takes one of them). Taking an edge adds its
    number to a path's guard only when the edge has a condition (``conditions``)."""
    current = set(guards)
    changed = True
    while changed:
        changed = False
        for guard in sorted(current):
            if not guard:
                continue
            prefix, last = guard[:-1], guard[-1]
            branch = graph.edges[last].source
            if graph.step(branch).kind != "branch":
                continue
            live = [edge_number[id(e)] for e in graph.out_edges(branch) if edge_number[id(e)] not in dead]
            wanted = {(*prefix, e) if conditions.get(e) is not None else prefix for e in live}
            if wanted <= current:
                current -= wanted
                current.add(prefix)
                changed = True
                break
    return [list(g) for g in sorted(current)]


def _render(graph: ItemGraph, nodes: list[str], display: str) -> str:
    inputs = "".join(f"        {_literal(k)}: {_input_decl(d)},\n" for k, d in graph.inputs.items())
    listed = f"[\n{''.join(nodes)}        ]" if nodes else "[]"
    return (
        f"# Converted from {display} by `rho-notebook convert` (docs/graphs.md).\n\n"
        "def build(inputs):\n"
        "    return workflow(\n"
        f"        name = {_literal(graph.name)},\n"
        f"        nodes = {listed},\n"
        "    )\n\n"
        "WORKFLOW = define(\n"
        f"    inputs = {{\n{inputs}    }},\n"
        "    build = build,\n"
        ")\n"
    )


def convert_graph(text: str, *, display: str) -> str:
    """The Starlark workflow equivalent to the item-graph document ``text`` (rules in the module
    docstring); ``display`` names the file in diagnostics.

    Raises
    ------
    InvalidWorkflow
        The document does not validate.
    NotConvertible
        It validates but has no faithful Starlark equivalent; one diagnostic per refusal found.
    """
    graph = load_graph(text, display=display)
    converter = _Converter(graph)
    found = converter.structure()
    if not found:
        try:
            converter.walk()
        except _NoStarlarkEquivalent as refused:
            found.append(refused)
    if found:
        where = locate(text, display=display)
        diagnostics = []
        for problem in found:
            line, column = where(problem.where)
            diagnostics.append(Diagnostic(problem.rule, problem.message, display, line, column))
        raise NotConvertible(diagnostics)
    return _render(graph, converter.nodes, display)


def _a(word: str) -> str:
    """``word`` with its indefinite article: ``a set``, ``an aggregate``."""
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"
