"""Text forms of frozen graph parts (conditions, templates and schemas as a workflow author writes
them) and of a node's line in a run's status.

One spelling everywhere a person reads a frozen graph (the magics' node lines, the DAG view's node
pane, the server's node answers): ``condition.equals(output("stats", ["verdict"]), "big")``, never
a private shorthand, so what is shown can be pasted back into a workflow.

The graph's model classes are imported by the functions that render them: a run's status lines
(:func:`node_status_line`, :func:`decision_lines`) need no pydantic model (issue 31).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rho_notebook.model.budget import is_budget_halt, resume_flags
from rho_notebook.model.run_state import NodeRecord, RunState
from rho_notebook.service.wire import shown_label, shown_state

if TYPE_CHECKING:
    from rho_notebook.model.condition import Condition
    from rho_notebook.model.reference import ExitCodeRef, OutputRef, StatusRef, Template
    from rho_notebook.model.schema import Schema

__all__ = [
    "condition_text",
    "template_text",
    "schema_text",
    "reference_text",
    "node_status_line",
    "node_status_lines",
    "provenance_text",
    "decision_lines",
    "output_text",
    "usage_text",
    "budget_lines",
    "cost_text",
    "OUTPUT_CHARS",
]

OUTPUT_CHARS = 400
"""At most this many characters of one output value in a status text (``result`` shows it whole)."""


def reference_text(ref: OutputRef | StatusRef | ExitCodeRef) -> str:
    """``output("node", ["path"])``, ``status("node")`` or ``exit_code("node")``."""
    from rho_notebook.model.reference import OutputRef, StatusRef

    if isinstance(ref, OutputRef):
        path = ", ".join(json.dumps(step) for step in ref.path)
        return f"output({json.dumps(ref.node)}, [{path}])"
    if isinstance(ref, StatusRef):
        return f"status({json.dumps(ref.node)})"
    return f"exit_code({json.dumps(ref.node)})"


def condition_text(cond: Condition) -> str:
    """The Starlark-like source form of a frozen condition."""
    from rho_notebook.model.condition import AllOf, AnyOf, Equals, IsOneOf, Not

    if isinstance(cond, Equals):
        return f"condition.equals({reference_text(cond.left)}, {json.dumps(cond.right)})"
    if isinstance(cond, IsOneOf):
        return f"condition.is_one_of({reference_text(cond.left)}, {json.dumps(list(cond.values))})"
    if isinstance(cond, AllOf):
        return "condition.all([" + ", ".join(condition_text(c) for c in cond.items) + "])"
    if isinstance(cond, AnyOf):
        return "condition.any([" + ", ".join(condition_text(c) for c in cond.items) + "])"
    if isinstance(cond, Not):
        return f"condition.not_({condition_text(cond.item)})"  # `not` is a keyword in starlark-rust
    return repr(cond)


def template_text(template: Template | str) -> str:
    """Literal text with references shown as ``{output("node", ["path"])}``."""
    if isinstance(template, str):
        return template
    return "".join(part if isinstance(part, str) else "{" + reference_text(part) + "}" for part in template.parts)


def schema_text(schema: Schema) -> str:
    """The schema constructor call that builds ``schema``."""
    from rho_notebook.model.schema import EnumSchema, ListSchema, OptionalSchema, RecordSchema, StdoutJsonSchema

    if isinstance(schema, EnumSchema):
        return f"enum_({json.dumps(list(schema.members))})"
    if isinstance(schema, ListSchema):
        return f"list({schema_text(schema.items)})"
    if isinstance(schema, OptionalSchema):
        return f"optional({schema_text(schema.inner)})"
    if isinstance(schema, StdoutJsonSchema):
        return f"stdout_json({schema_text(schema.inner)})"
    if isinstance(schema, RecordSchema):
        return "record({" + ", ".join(f"{json.dumps(k)}: {schema_text(v)}" for k, v in schema.fields) + "})"
    return f"{schema.kind}()"


def provenance_text(record: NodeRecord) -> str:
    """Where the latest attempt's result came from when it was not launched in this run:
    ``reused from run R (node N, attempt A)`` (unless the node's reason already names run R),
    and ``approval carried from run R by P`` for a launch whose approval was carried over; empty
    otherwise."""
    current = record.current
    if current is None:
        return ""
    parts = []
    source = current.reused_from
    if source and str(source["run_id"]) not in record.reason:  # the runner's message may say it already
        parts.append(f"reused from run {source['run_id']} (node {source['node']}, attempt {source['attempt']})")
    approval = current.approval
    if approval is not None and approval.get("via") == "carried":
        parts.append(f"approval {approval.get('comment') or 'carried'} by {approval.get('by') or 'unknown'}")
    return "; ".join(parts)


def output_text(value: Any, *, limit: int | None = OUTPUT_CHARS) -> str:
    """A JSON value on one line, cut with an ellipsis past ``limit`` characters (None: whole)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def run_output_line(result: Mapping[str, Any], *, limit: int | None = OUTPUT_CHARS) -> str | None:
    """The value the run emitted (``result["output"]``) on one line, named by what emitted it: a
    script's (or flow's) ``emit_output``, whose nodes are its steps, or else the run's (an item
    graph's output step); None when it emitted none."""
    if "output" not in result:
        return None
    by = "the script" if any("step" in node for node in result["nodes"].values()) else "the run"
    return f"output of {by}: {output_text(result['output'], limit=limit)}"


def silent_node_line(name: str, record: NodeRecord, *, stream: str) -> str:
    """Why ``logs`` of node ``name`` showed nothing (``stream``: ``stdout``, ``stderr`` or ``both``):
    whether it ran, and how it stands; one wording for the CLI and ``%workflow logs``."""
    why = "it has not run" if record.attempt == 0 else f"attempt {record.attempt}"
    where = "" if stream == "both" else f" to {stream}"
    return f"node {name} wrote nothing{where} ({why}; {record.state.value})"


def decision_lines(state: RunState, *, command: str = "rho-notebook resume") -> list[str]:
    """What ``status`` says of a script run that needs a decision: every halted step with why,
    and the exact command that goes on; empty for any other run."""
    if not state.halted:
        return []
    lines = ["needs a decision: the run stopped at these steps"]
    for halted in state.halted:
        lines.append(f"  {halted.get('step', '')}: {halted.get('why', '')}")
    if all(is_budget_halt(str(h.get("why", ""))) for h in state.halted):
        lines.append("raise the budget (a script run may also --decide STEP=skip) and resume with:")
    else:
        lines.append("decide (rerun: run the step once more; skip: go on with its stored result) and resume with:")
    lines.append(f"  {command} {state.run_id} {resume_flags(state.halted)}")
    return lines


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def cost_text(cost: float | None) -> str:
    """``$0.000064``; ``cost unknown`` when a model has no price (never shown as 0)."""
    return "cost unknown" if cost is None else f"${cost:.6f}"


def usage_text(usage: Mapping[str, Any]) -> str:
    """A ``usage`` object of the status JSON on one line: ``3 calls  36 in / 14 out tokens
    1 retry  1 tool call  $0.000064  12.3 s``, then what a reused or replayed node saved."""
    parts = [_plural(int(usage.get("calls", 0)), "call")]
    parts.append(f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens")
    for key, noun in (("cached_tokens", "cached"), ("reasoning_tokens", "reasoning")):
        if usage.get(key):
            parts.append(f"{usage[key]} {noun}")
    for key, noun in (("retries", "retry"), ("tool_calls", "tool call")):
        if usage.get(key):
            parts.append(_plural(int(usage[key]), noun).replace("retrys", "retries"))
    parts.append(cost_text(usage.get("cost_usd")))
    if usage.get("wall_seconds"):
        parts.append(f"{float(usage['wall_seconds']):.1f} s")
    saved = usage.get("saved")
    if isinstance(saved, Mapping):
        tokens = int(saved.get("input_tokens", 0)) + int(saved.get("output_tokens", 0))
        calls = _plural(int(saved.get("calls", 0)), "call")
        parts.append(f"(saved {calls}, {tokens} tokens, {cost_text(saved.get('cost_usd'))})")
    return "  ".join(parts)


def budget_lines(budgets: Sequence[Mapping[str, Any]]) -> list[str]:
    """``status``'s budgets (its JSON's ``budgets``), one line each: ``budget     run: tokens 36 of
    40, cost $0.000100 of $0.5, wall 600 s (set by run)``; empty when the run has none."""
    lines = []
    for budget in budgets:
        parts = []
        if budget.get("max_tokens") is not None:
            parts.append(f"tokens {budget.get('spent_tokens', 0)} of {budget['max_tokens']}")
        if budget.get("max_cost_usd") is not None:
            parts.append(f"cost {cost_text(budget.get('spent_cost_usd'))} of ${budget['max_cost_usd']:g}")
        if budget.get("max_wall_seconds") is not None:
            parts.append(f"wall {budget['max_wall_seconds']:g} s (of executed time)")
        scope = budget.get("node") or "run"
        lines.append(f"budget     {scope}: {', '.join(parts)} (set by {budget.get('source') or 'unknown'})")
    return lines


NAME_WIDTH, STATE_WIDTH, MAX_NAME_WIDTH = 24, 13, 40
"""The columns of :func:`node_status_line`: the least widths, and the most a long name widens its column to."""


def node_status_lines(rows: Sequence[tuple[str, NodeRecord, str, Mapping[str, Any] | None]]) -> list[str]:
    """The node lines of a run's status, one per ``(name, record, shown, usage)``, in columns as
    wide as their longest entry needs (a state label such as ``waiting for approval``, a name up
    to :data:`MAX_NAME_WIDTH` characters), so the attempts line up whatever the states are."""
    names = max((len(name) for name, *_ in rows), default=0)
    labels = max((len(shown_label(shown)) for _, _, shown, _ in rows), default=0)
    widths = (max(NAME_WIDTH, min(names, MAX_NAME_WIDTH)), max(STATE_WIDTH, labels))
    return [
        node_status_line(name, record, shown=shown, usage=usage, widths=widths) for name, record, shown, usage in rows
    ]


def node_status_line(
    name: str,
    record: NodeRecord,
    *,
    shown: str | None = None,
    usage: Mapping[str, Any] | None = None,
    widths: tuple[int, int] = (NAME_WIDTH, STATE_WIDTH),
) -> str:
    """One node of ``status``: name, state as the run has it (``shown``, default: what the
    record alone says: ``waiting for approval``, ``failure (handled)``; pass the status JSON's
    ``shown`` for ``failure (allowed)``), attempt, exit code, the Dask worker it ran on, UNCERTAIN,
    provenance, a script step's kind and replays, its model calls' ``usage`` (when it made or saved
    one), and reason; ``widths`` are the name's and the state's columns (:func:`node_status_lines`)."""
    code = record.exit_code()
    current = record.current
    extra = f"  exit {code}" if code is not None else ""
    worker = current.exit.get("worker") if current is not None and current.exit is not None else None
    if worker:
        extra += f"  on worker {worker}"
    if record.step is not None:
        extra += f"  {record.step.get('kind', 'step')} step"
        if record.replayed:
            extra += f"  replayed {record.replayed}x"
    note = "  UNCERTAIN" if current is not None and current.uncertain and not current.abandoned else ""
    provenance = provenance_text(record)
    source = f"  {provenance}" if provenance else ""
    reason = f"  ({record.reason})" if record.reason else ""
    if usage is not None and (usage.get("calls") or usage.get("saved")):
        extra += f"  [{usage_text({k: v for k, v in usage.items() if k != 'wall_seconds'})}]"
    label = shown_label(shown if shown is not None else shown_state(record))
    name_width, state_width = widths
    return f"  {name:<{name_width}} {label:<{state_width}} attempt {record.attempt}{extra}{note}{source}{reason}"
