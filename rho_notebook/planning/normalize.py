"""Turning the worker's raw tagged values into model objects, and the graph rules.

Graph rules: unique node names, needs that exist, no cycles, references and conditions that point
to ancestors only, output paths that exist in the referenced node's schema, exit_code() only of
command and shell nodes, condition and schema depth, node and edge counts, ``reuse = True`` only
on read-only nodes. A python node's ``output()`` arguments are references like any other.

Condition comparands are checked against what their reference can hold, as Rho does: a
``status()`` against the terminal states (a condition sees a state only once the node finished),
an ``output()`` against the schema at its path (Rho's ``validate_condition_schemas``), an
``exit_code()`` against the signed 32-bit range (Rho's ``json_i32``). A comparand that can never
match is an error, not a branch that is silently never taken.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rho_notebook.errors import Diagnostic
from rho_notebook.model.condition import (
    AllOf,
    AnyOf,
    Condition,
    Equals,
    IsOneOf,
    Not,
    condition_depth,
    condition_references,
)
from rho_notebook.model.reference import ExitCodeRef, OutputRef, Reference, StatusRef, Template, render_value
from rho_notebook.model.schema import (
    BoolSchema,
    EnumSchema,
    IntegerSchema,
    ListSchema,
    NullSchema,
    OptionalSchema,
    RecordSchema,
    Scalar,
    Schema,
    StdoutJsonSchema,
    StringSchema,
    schema_at_path,
    schema_depth,
    validate_value,
)
from rho_notebook.model.state import TERMINAL_STATES, NodeState
from rho_notebook.source.limits import Limits

APPROVAL_OUTPUT = RecordSchema(
    fields=(("at", StringSchema()), ("by", StringSchema()), ("comment", OptionalSchema(inner=StringSchema())))
)
"""The output record of every approval node: who decided, their comment, and when."""

__all__ = [
    "APPROVAL_OUTPUT",
    "NodeDraft",
    "to_schema",
    "to_condition",
    "to_template",
    "to_output_ref",
    "is_output_ref",
    "drafts_of",
    "check_graph",
    "describe_schema",
    "STATUS_VALUES",
    "EXIT_CODE_MIN",
    "EXIT_CODE_MAX",
]

STATUS_VALUES = tuple(state.value for state in NodeState if state in TERMINAL_STATES)
"""The states a ``status()`` comparand may name: the terminal ones, in declaration order. A
condition reads a status only after that node finished, so pending, ready and running never match."""

EXIT_CODE_MIN = -(2**31)
EXIT_CODE_MAX = 2**31 - 1
"""``exit_code()`` comparands are signed 32-bit integers, as in Rho."""


@dataclass
class NodeDraft:
    """A node as declared, before executables and agents are resolved."""

    kind: str
    name: str
    raw: dict[str, Any]
    at: tuple[str | None, int | None, int | None]
    needs: tuple[str, ...] = ()
    when: Condition | None = None
    output: Schema | None = None
    templates: list[Template] = field(default_factory=list)
    values: list[OutputRef] = field(default_factory=list)
    """References whose whole value a node receives (a python node's args)."""

    def diagnostic(self, rule: str, message: str) -> Diagnostic:
        return Diagnostic(rule=rule, message=message, file=self.at[0], line=self.at[1], column=self.at[2])

    def references(self) -> list[Reference]:
        refs: list[Reference] = []
        if self.when is not None:
            refs.extend(condition_references(self.when))
        for tmpl in self.templates:
            refs.extend(tmpl.references())
        refs.extend(self.values)
        return refs


def to_schema(raw: dict[str, Any]) -> Schema:
    kind = raw["type"]
    simple: dict[str, Schema] = {
        "null": NullSchema(),
        "bool": BoolSchema(),
        "integer": IntegerSchema(),
        "string": StringSchema(),
    }
    if kind in simple:
        return simple[kind]
    if kind == "enum":
        return EnumSchema(members=tuple(raw["members"]))
    if kind == "list":
        return ListSchema(items=to_schema(raw["inner"]))
    if kind == "optional":
        return OptionalSchema(inner=to_schema(raw["inner"]))
    if kind == "stdout_json":
        return StdoutJsonSchema(inner=to_schema(raw["inner"]))
    if kind == "record":
        return RecordSchema(fields=tuple((k, to_schema(v)) for k, v in sorted(raw["fields"].items())))
    msg = f"unknown schema type {kind!r}"
    raise ValueError(msg)


def is_output_ref(raw: Any) -> bool:
    """Whether a raw tagged value is an ``output()`` reference."""
    return isinstance(raw, dict) and raw.get("__rho__") == "ref" and raw.get("ref") == "output"


def to_output_ref(raw: dict[str, Any]) -> OutputRef:
    """The model of a raw ``output()`` reference."""
    return OutputRef(node=raw["node"], path=tuple(raw.get("path", ())))


def _to_ref(raw: dict[str, Any]) -> Reference:
    if raw["ref"] == "output":
        return OutputRef(node=raw["node"], path=tuple(raw.get("path", ())))
    if raw["ref"] == "status":
        return StatusRef(node=raw["node"])
    return ExitCodeRef(node=raw["node"])


def to_condition(raw: dict[str, Any]) -> Condition:
    op = raw["op"]
    if op == "equals":
        return Equals(left=_to_ref(raw["left"]), right=raw["right"])
    if op == "is_one_of":
        return IsOneOf(left=_to_ref(raw["left"]), values=tuple(raw["values"]))
    if op == "all":
        return AllOf(items=tuple(to_condition(c) for c in raw["items"]))
    if op == "any":
        return AnyOf(items=tuple(to_condition(c) for c in raw["items"]))
    if op == "not":
        return Not(item=to_condition(raw["item"]))
    msg = f"unknown condition {op!r}"
    raise ValueError(msg)


def to_template(raw: Any) -> Template:
    """A template from a string, an output reference, or template([...]); adjacent text merged."""
    if isinstance(raw, str):
        items: list[Any] = [raw]
    elif isinstance(raw, dict) and raw.get("__rho__") == "ref":
        items = [raw]
    else:
        items = list(raw["parts"])
    parts: list[str | OutputRef] = []
    for item in items:
        if isinstance(item, dict) and item.get("__rho__") == "ref":
            ref = _to_ref(item)
            if not isinstance(ref, OutputRef):
                msg = "only output() references can be interpolated"
                raise ValueError(msg)
            parts.append(ref)
            continue
        text = render_value(item)
        if parts and isinstance(parts[-1], str):
            parts[-1] = parts[-1] + text
        else:
            parts.append(text)
    return Template(parts=tuple(p for p in parts if p != ""))


def drafts_of(raw_nodes: list[dict[str, Any]]) -> list[NodeDraft]:
    drafts = []
    for raw in raw_nodes:
        at = raw.get("at") or [None, None, None]
        draft = NodeDraft(kind=raw["kind"], name=raw["name"], raw=raw, at=(at[0], at[1], at[2]))
        draft.needs = tuple(sorted(set(raw.get("needs", []))))
        if raw.get("when") is not None:
            draft.when = to_condition(raw["when"])
        if raw.get("output") is not None:
            draft.output = to_schema(raw["output"])
        if raw["kind"] in ("agent", "approval"):
            draft.templates.append(to_template(raw["prompt"]))
        if raw["kind"] == "approval":
            draft.output = APPROVAL_OUTPUT
        if raw["kind"] == "command":
            for part in raw["argv"][1:]:
                if not isinstance(part, str):
                    draft.templates.append(to_template(part))
        if raw["kind"] == "python":
            draft.values.extend(
                to_output_ref(value) for _, value in sorted(raw.get("args", {}).items()) if is_output_ref(value)
            )
        drafts.append(draft)
    return drafts


def _is_ancestor(drafts: dict[str, NodeDraft], node: str, candidate: str) -> bool:
    """Whether ``candidate`` is reachable from ``node`` through needs (graph known acyclic)."""
    stack = list(drafts[node].needs)
    seen: set[str] = set()
    while stack:
        current = stack.pop()
        if current == candidate:
            return True
        if current in seen or current not in drafts:
            continue
        seen.add(current)
        stack.extend(drafts[current].needs)
    return False


def _topological(drafts: dict[str, NodeDraft]) -> list[str]:
    indegree: dict[str, int] = {}
    children: dict[str, list[str]] = {name: [] for name in drafts}
    for name, draft in drafts.items():
        count = 0
        for need in draft.needs:
            if need in children and need != name:  # a node that needs itself is reported as such
                count += 1
                children[need].append(name)
        indegree[name] = count
    ready = sorted(n for n, d in indegree.items() if d == 0)
    order: list[str] = []
    while ready:
        name = ready.pop()
        order.append(name)
        for child in children[name]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    return order


def _cycle(drafts: dict[str, NodeDraft], ordered: set[str]) -> list[str]:
    """One cycle among the nodes not in the topological order, for the message."""
    remaining = {n for n in drafts if n not in ordered}
    start = min(remaining)
    path = [start]
    seen = {start: 0}
    current = start
    while True:
        nxt = min(n for n in drafts[current].needs if n in remaining and n != current)
        if nxt in seen:
            return [*path[seen[nxt] :], nxt]
        seen[nxt] = len(path)
        path.append(nxt)
        current = nxt


def _budget_problem(draft: NodeDraft, field_name: str) -> Diagnostic | None:
    """``timeout_seconds`` / ``max_output_bytes``: required, a positive integer (no default)."""
    value = draft.raw.get(field_name)
    if type(value) is int and value > 0:  # the common case, without formatting a message
        return None
    where = f"{draft.kind} {draft.name!r}"
    if field_name not in draft.raw:
        return draft.diagnostic(
            f"node.{field_name}", f"{where} needs {field_name} (a positive integer); there is no default"
        )
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return draft.diagnostic(
            f"node.{field_name}", f"{where}: {field_name} must be a positive integer, got {json.dumps(value)}"
        )
    return None


def _reuse_problem(draft: NodeDraft) -> Diagnostic | None:
    """``reuse = True`` is for read-only nodes only (the worker refuses it on other kinds)."""
    if draft.raw.get("reuse") is not True:
        return None
    access = draft.raw.get("access", "mutating")
    if access == "read_only":
        return None
    return draft.diagnostic(
        "node.reuse",
        f'node {draft.name!r} has reuse = True but access is "{access}"; only read-only nodes are reused '
        '(declare access = "read_only" if it changes nothing, or drop reuse)',
    )


def _may_hold_nul(raw: dict[str, Any]) -> bool:
    """False when no text :func:`_nul_problems` reads can hold a NUL byte: every argv or argument
    a plain string without one, and so are cwd and command where given (most nodes of a graph)."""
    for key in ("argv", "arguments"):
        for part in raw.get(key) or ():
            if type(part) is not str or "\x00" in part:
                return True
    for key in ("cwd", "command"):
        value = raw.get(key)
        if value is not None and (type(value) is not str or "\x00" in value):
            return True
    return False


def _nul_problems(draft: NodeDraft) -> list[Diagnostic]:
    """A NUL byte in a command's argv, cwd or environment text, or in shell source, cannot reach
    a process (the operating system ends a C string there): refuse it at plan time, not at launch."""
    raw = draft.raw
    if not _may_hold_nul(raw):
        return []
    texts: list[tuple[str | tuple[str, int], Any]] = []  # where: a name, or (a list's name, index)
    if draft.kind == "command":
        texts += [(("argv", index), part) for index, part in enumerate(raw.get("argv", []))]
    if draft.kind == "shell":
        texts.append(("command", raw.get("command")))
        texts += [(("arguments", index), part) for index, part in enumerate(raw.get("arguments", []) or [])]
    texts.append(("cwd", raw.get("cwd")))
    found = []
    for at, value in texts:
        if isinstance(value, dict):  # a template: its literal parts
            value = "".join(part for part in value.get("parts", []) if isinstance(part, str))
        if isinstance(value, str) and "\x00" in value:
            where = at if isinstance(at, str) else f"{at[0]}[{at[1]}]"
            found.append(
                draft.diagnostic(
                    "node.nul",
                    f"node {draft.name!r}: {where} contains a NUL byte, which no process can receive; remove it",
                )
            )
    return found


_At = tuple[str | None, int | None, int | None]


def _over(budget: str, limits: Limits, measured: int, suffix: str = "") -> str | None:
    """The message of a planning budget exceeded by ``measured``, or None."""
    if measured <= limits.limit(budget):
        return None
    return f"planning budget '{budget}' exceeded: accepted limit {limits.limit(budget)}, measured {measured}{suffix}"


def _at_workflow(workflow_at: _At, rule: str, message: str) -> Diagnostic:
    return Diagnostic(rule=rule, message=message, file=workflow_at[0], line=workflow_at[1], column=workflow_at[2])


def _count_problems(drafts: list[NodeDraft], *, limits: Limits, workflow_at: _At) -> list[Diagnostic]:
    """``node_count`` and ``edge_count`` (each need is one edge), located at the workflow."""
    found: list[Diagnostic] = []
    for budget, measured in (("node_count", len(drafts)), ("edge_count", sum(len(d.needs) for d in drafts))):
        message = _over(budget, limits, measured)
        if message is not None:
            found.append(_at_workflow(workflow_at, f"limit.{budget}", message))
    return found


def _by_name(drafts: list[NodeDraft]) -> tuple[dict[str, NodeDraft], list[Diagnostic]]:
    """The drafts by name (the first of each name) and a ``node.duplicate`` for every other."""
    by_name: dict[str, NodeDraft] = {}
    found: list[Diagnostic] = []
    for draft in drafts:
        if draft.name in by_name:
            first = by_name[draft.name]
            found.append(
                draft.diagnostic(
                    "node.duplicate", f"node name {draft.name!r} is used twice (first at {first.at[0]}:{first.at[1]})"
                )
            )
            continue
        by_name[draft.name] = draft
    return by_name, found


def _needs_problems(draft: NodeDraft, by_name: dict[str, NodeDraft]) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for need in draft.needs:
        if need == draft.name:
            found.append(draft.diagnostic("node.needs", f"node {draft.name!r} needs itself"))
        elif need not in by_name:
            found.append(
                draft.diagnostic(
                    "node.needs", f"node {draft.name!r} needs {need!r}, which is not a node of this workflow"
                )
            )
    return found


def _node_limit_problems(draft: NodeDraft, *, limits: Limits) -> list[Diagnostic]:
    """The node's condition and schema budgets, then its timeout and output budgets."""
    found: list[Diagnostic] = []

    def over(budget: str, measured: int, suffix: str = "") -> None:
        message = _over(budget, limits, measured, suffix)
        if message is not None:
            found.append(draft.diagnostic(f"limit.{budget}", message))

    if draft.when is not None:
        over("condition_depth", condition_depth(draft.when))
    if draft.output is not None:
        over("schema_depth", schema_depth(draft.output))
        over("schema_bytes", len(draft.output.model_dump_json()))
    for budget in ("timeout_seconds", "max_output_bytes"):
        problem = _budget_problem(draft, budget)
        if problem is not None:
            found.append(problem)
        elif draft.raw[budget] > limits.limit(budget):  # the message only when it is sent
            over(budget, draft.raw[budget], f" (node {draft.name!r})")
    return found


def _cycle_problem(by_name: dict[str, NodeDraft]) -> list[Diagnostic]:
    ordered = _topological(by_name)
    if len(ordered) == len(by_name):
        return []
    cycle = _cycle(by_name, set(ordered))
    first = by_name[cycle[0]]
    return [first.diagnostic("graph.cycle", f"the needs form a cycle: {' -> '.join(cycle)}; a workflow is a DAG")]


def _reference_problem(draft: NodeDraft, ref: Reference, by_name: dict[str, NodeDraft]) -> Diagnostic | None:
    """What is wrong with one reference of ``draft`` (unknown node, not an ancestor, no exit code,
    no output schema, no such path), or None."""
    target = by_name.get(ref.node)
    if target is None:
        return draft.diagnostic(
            "reference.unknown", f"node {draft.name!r} refers to {ref.node!r}, which is not a node of this workflow"
        )
    if not _is_ancestor(by_name, draft.name, ref.node):
        return draft.diagnostic(
            "reference.ancestor",
            f"node {draft.name!r} refers to {ref.node!r}, which is not one of its ancestors; add it to needs",
        )
    if isinstance(ref, ExitCodeRef) and target.kind not in ("command", "shell"):
        return draft.diagnostic(
            "reference.exit_code",
            f"exit_code({ref.node!r}): {ref.node!r} is a {target.kind} node; only command and shell nodes have exit codes",
        )
    if isinstance(ref, OutputRef) and target.output is None:
        return draft.diagnostic(
            "reference.output",
            f"output({ref.node!r}) reads a node without an output schema; prose cannot be read by conditions or templates (give {ref.node!r} an output schema)",
        )
    if isinstance(ref, OutputRef) and target.output is not None and schema_at_path(target.output, ref.path) is None:
        return draft.diagnostic(
            "reference.path",
            f"output({ref.node!r}, {json.dumps(list(ref.path))}): the path does not exist in {ref.node!r}'s output schema",
        )
    return None


def _total_output_problem(drafts: list[NodeDraft], *, limits: Limits, workflow_at: _At) -> list[Diagnostic]:
    total = sum(d.raw["max_output_bytes"] for d in drafts if _budget_problem(d, "max_output_bytes") is None) * 2
    message = _over("total_output_bytes", limits, total, " (stdout and stderr of every node)")
    return [] if message is None else [_at_workflow(workflow_at, "limit.total_output_bytes", message)]


def check_graph(drafts: list[NodeDraft], *, limits: Limits, workflow_at: _At) -> list[Diagnostic]:
    """Every graph-rule violation, in node order."""
    found = _count_problems(drafts, limits=limits, workflow_at=workflow_at)
    for draft in drafts:
        found.extend(_nul_problems(draft))
        reuse = _reuse_problem(draft)
        if reuse is not None:
            found.append(reuse)
    by_name, duplicates = _by_name(drafts)
    found.extend(duplicates)
    for draft in drafts:
        found.extend(_needs_problems(draft, by_name))
        found.extend(_node_limit_problems(draft, limits=limits))
    # Every check below stands on its own: a problem found above (a missing timeout, an unknown
    # need, a budget) does not hide a cycle or a bad reference in the same graph.
    found.extend(_cycle_problem(by_name))
    for draft in drafts:
        found.extend(p for ref in draft.references() if (p := _reference_problem(draft, ref, by_name)) is not None)
        if draft.when is not None:
            found.extend(_comparand_problems(draft, draft.when, by_name))
    found.extend(_total_output_problem(drafts, limits=limits, workflow_at=workflow_at))
    return found


def _show(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def describe_schema(schema: Schema, limit: int = 200) -> str:
    """A schema in source-like notation for diagnostics, e.g. ``enum_(["approve", "revise"])``."""
    text = _describe(schema)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(schema: Schema) -> str:
    if isinstance(schema, EnumSchema):
        return f"enum_([{', '.join(_show(m) for m in schema.members)}])"
    if isinstance(schema, ListSchema):
        return f"list({_describe(schema.items)})"
    if isinstance(schema, (OptionalSchema, StdoutJsonSchema)):
        return f"{schema.kind}({_describe(schema.inner)})"
    if isinstance(schema, RecordSchema):
        return "record({" + ", ".join(f"{_show(name)}: {_describe(sub)}" for name, sub in schema.fields) + "})"
    return schema.kind


def _comparand_problems(draft: NodeDraft, cond: Condition, by_name: dict[str, NodeDraft]) -> list[Diagnostic]:
    """Each comparand of ``cond`` that its reference can never equal, one diagnostic per value.

    References that are wrong themselves (unknown node, no schema, bad path, exit_code of an agent)
    are reported by the reference rules and skipped here.
    """
    if isinstance(cond, (AllOf, AnyOf)):
        return [d for item in cond.items for d in _comparand_problems(draft, item, by_name)]
    if isinstance(cond, Not):
        return _comparand_problems(draft, cond.item, by_name)
    values: tuple[Scalar, ...] = (cond.right,) if isinstance(cond, Equals) else cond.values
    ref = cond.left
    target = by_name.get(ref.node)
    if target is None:
        return []
    if isinstance(ref, StatusRef):
        return [_status_problem(draft, ref, value) for value in values if not _is_status(value)]
    if isinstance(ref, ExitCodeRef):
        if target.kind not in ("command", "shell"):
            return []
        return [_exit_code_problem(draft, ref, value) for value in values if not _is_exit_code(value)]
    return _schema_problems(draft, ref, target, values)


_COMPARES = "node {name!r}: condition compares"


def _is_status(value: Scalar) -> bool:
    return isinstance(value, str) and value in STATUS_VALUES


def _status_problem(draft: NodeDraft, ref: StatusRef, value: Scalar) -> Diagnostic:
    where = _COMPARES.format(name=draft.name)
    return draft.diagnostic(
        "condition.status",
        f"{where} status({ref.node!r}) with {_show(value)}, which is not a terminal state; a condition reads status({ref.node!r}) only after {ref.node!r} finished (never pending, ready or running), so compare with one of: {', '.join(STATUS_VALUES)}",
    )


def _is_exit_code(value: Scalar) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and EXIT_CODE_MIN <= value <= EXIT_CODE_MAX


def _exit_code_problem(draft: NodeDraft, ref: ExitCodeRef, value: Scalar) -> Diagnostic:
    where = _COMPARES.format(name=draft.name)
    return draft.diagnostic(
        "condition.exit_code",
        f"{where} exit_code({ref.node!r}) with {_show(value)}; an exit code is a signed 32-bit integer ({EXIT_CODE_MIN}..{EXIT_CODE_MAX}), so it can never match",
    )


def _schema_problems(
    draft: NodeDraft, ref: OutputRef, target: NodeDraft, values: tuple[Scalar, ...]
) -> list[Diagnostic]:
    """Each value the output schema at ``ref``'s path does not allow."""
    schema = schema_at_path(target.output, ref.path) if target.output is not None else None
    if schema is None:
        return []
    where = _COMPARES.format(name=draft.name)
    reference = f"output({ref.node!r}, {json.dumps(list(ref.path))})"
    found: list[Diagnostic] = []
    for value in values:
        problems = validate_value(schema, value, where="")
        if problems:
            why = "; ".join(p.removeprefix(": ") for p in problems)
            found.append(
                draft.diagnostic(
                    "condition.schema",
                    f"{where} {reference} with {_show(value)}, which its schema {describe_schema(schema)} does not allow ({why}), so it can never match",
                )
            )
    return found
