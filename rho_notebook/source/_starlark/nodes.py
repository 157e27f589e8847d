"""The node constructors (``agent``, ``command``, ``shell``, ``python``, ``approval``) and ``workflow``.

The prelude's ``command(**kwargs)`` and friends call ``_node(kind, call_stack(), kwargs)`` so that
diagnostics point at the user's call. What only one kind needs is checked in :mod:`.node_kinds`.
"""

from __future__ import annotations

import json
from functools import partial
from itertools import repeat

import starlark as sl

from rho_notebook.source._starlark.node_kinds import KIND_CHECKS, check_placement
from rho_notebook.source._starlark.tags import NAME_RE, is_tag, tag

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

    from rho_notebook.source._starlark.session import Session

COMMON = frozenset(
    {
        "name",
        "needs",
        "when",
        "allow_failure",
        "timeout_seconds",
        "max_output_bytes",
        "output",
        "placement",
        "resources",
    }
)
"""Arguments every node kind takes."""
SPECIFIC = {
    "agent": {"agent", "prompt", "access", "reuse", "budget"},
    "command": {"argv", "cwd"},
    "shell": {"executable", "arguments", "command", "cwd"},
    "approval": {"prompt"},
    "python": {"module", "function", "args", "cwd", "access", "reuse", "reuse_inputs"},
}
REQUIRED = {
    "agent": {"agent", "prompt"},
    "command": {"argv"},
    "shell": {"executable", "command"},
    "approval": {"prompt"},
    "python": {"module", "function"},
}
ALLOWED = {kind: COMMON | names | {"reuse"} for kind, names in SPECIFIC.items()}
"""Every argument a kind takes (``reuse`` is refused on the kinds that do not, by its own rule)."""
_WORKFLOW_ARGUMENTS = frozenset({"name", "nodes", "concurrency", "checkout"})
_CONCURRENCY_KEYS = ("total", "agent", "command", "checkout_readers")


def make_node(s: Session, kind: str, stack: str, kw: dict[str, Any]) -> dict[str, Any]:
    """The tagged node of one constructor call, after every check of its arguments.

    Every check is written ``if not ...: s.fail(...)`` rather than with ``s.need``, so that no
    message is formatted unless it is sent: this runs once per node of a workflow.
    """
    at = s.call_site(stack, kind)
    s.check_value(kw, f"{kind}()")
    where = _check_name(s, kind, kw, at)
    _check_reuse(s, kind, kw, where, at)
    # timeout_seconds and max_output_bytes (required, positive integers) are checked with the
    # graph rules (planning/normalize.py), so that a missing one does not hide other problems.
    missing = REQUIRED[kind] - kw.keys()
    if missing:
        s.fail("node.argument", f"{where} needs {', '.join(sorted(missing))}", at)
    needs = kw.get("needs", [])
    if not (isinstance(needs, list) and all(map(isinstance, needs, repeat(str)))):
        s.fail("node.needs", f"{where}: needs must be a list of node names{_needs_hint(needs)}", at)
    when = kw.get("when")
    if not (when is None or is_tag(when, "condition")):
        s.fail("node.when", f"{where}: when must be a condition (condition.equals(...), ...)", at)
    if not isinstance(kw.get("allow_failure", False), bool):
        s.fail("node.allow_failure", f"{where}: allow_failure must be True or False", at)
    out = kw.get("output")
    if out is not None:
        _check_output(s, kind, out, where, at)
    KIND_CHECKS[kind](s, kw, where, at)
    check_placement(s, kind, kw, where, at)
    if "cwd" in kw and not (isinstance(kw["cwd"], str) and kw["cwd"] != ""):
        s.fail("node.cwd", f"{where}: cwd must be a non-empty relative path string", at)
    return tag("node", kind=kind, at=at, **kw)


def _needs_hint(needs: Any) -> str:
    """How to write ``needs`` when it holds nodes themselves (``needs = [a]``), else nothing."""
    if not isinstance(needs, list) or not any(is_tag(item, "node") for item in needs):
        return ""
    names = [item.get("name") if is_tag(item, "node") else item for item in needs]
    if not all(isinstance(name, str) for name in names):
        return ""
    written = ", ".join(f'"{name}"' for name in names)
    return f", not the nodes themselves: write needs = [{written}]"


def _check_name(s: Session, kind: str, kw: dict[str, Any], at: list[Any]) -> str:
    """Refuse unknown arguments and a bad name; ``kind 'name'``, how messages name the node."""
    unknown = kw.keys() - ALLOWED[kind]
    if unknown:
        s.fail("node.argument", f"{kind}() got unknown argument(s): {', '.join(sorted(unknown))}", at)
    name = kw.get("name")
    if not isinstance(name, str):
        s.fail("node.name", f'{kind}() needs name = "..."', at)
    if NAME_RE.match(name) is None:
        s.fail(
            "node.name",
            f"node name {name!r} must start with a-z, use only a-z 0-9 _ -, and be at most 63 bytes",
            at,
        )
    return f"{kind} {name!r}"


def _check_reuse(s: Session, kind: str, kw: dict[str, Any], where: str, at: list[Any]) -> None:
    if "reuse" not in kw:
        return
    s.need(
        kind in ("agent", "python"),
        "node.reuse",
        f"{where}: reuse is for read-only agent and python nodes; "
        + (
            "approval nodes always ask a person"
            if kind == "approval"
            else f"{kind} nodes are mutating (as in Rho) and never reused"
        ),
        at,
    )
    s.need(isinstance(kw["reuse"], bool), "node.reuse", f"{where}: reuse must be True or False", at)


def _check_output(s: Session, kind: str, out: Any, where: str, at: list[Any]) -> None:
    s.need(is_tag(out, "schema"), "node.output", f"{where}: output must be a schema", at)
    if kind in ("command", "shell"):
        s.need(
            out.get("type") == "stdout_json",
            "node.output",
            f"{where}: a {kind} node's output schema must be wrapped in schema.stdout_json(...)",
            at,
        )
    elif kind == "approval":
        s.fail(
            "node.output",
            f"{where}: an approval node's output is always the record {{by, comment, at}}; do not declare output",
            at,
        )
    elif kind == "python":
        s.need(
            out.get("type") != "stdout_json",
            "node.output",
            f"{where}: schema.stdout_json() is for command and shell nodes; a python node's output is its function's return value, so give the schema itself",
            at,
        )
    else:
        s.need(
            out.get("type") != "stdout_json",
            "node.output",
            f"{where}: schema.stdout_json() is for command and shell nodes; give the agent the schema itself",
            at,
        )


def make_workflow(s: Session, stack: str, kw: dict[str, Any]) -> dict[str, Any]:
    """The tagged workflow of ``workflow(name = ..., nodes = [...], ...)``."""
    at = s.call_site(stack, "workflow")
    unknown = sorted(set(kw) - _WORKFLOW_ARGUMENTS)
    s.need(not unknown, "workflow.argument", f"workflow() got unknown argument(s): {', '.join(unknown)}", at)
    name = kw.get("name")
    s.need(
        isinstance(name, str) and NAME_RE.match(name) is not None,
        "workflow.name",
        f"workflow name {json.dumps(name)} must start with a-z, use only a-z 0-9 _ -, and be at most 63 bytes",
        at,
    )
    nodes = kw.get("nodes")
    s.need(isinstance(nodes, list), "workflow.nodes", "workflow(nodes=...) must be a list of nodes", at)
    for n in nodes or []:
        if not is_tag(n, "node"):  # not s.need: its message would be formatted for every node
            s.fail(
                "workflow.nodes",
                f"workflow nodes must be agent(), command(), shell(), python() or approval() values, got {json.dumps(n)[:80]}",
                at,
            )
    conc = kw.get("concurrency")
    if conc is not None:
        _check_concurrency(s, conc, at)
    s.need(
        kw.get("checkout", "exclusive") in ("exclusive", "shared"),
        "workflow.checkout",
        f'workflow {json.dumps(name)}: checkout must be "exclusive" or "shared", got {json.dumps(kw.get("checkout"))[:80]}',
        at,
    )
    return tag("workflow", at=at, **kw)


def _check_concurrency(s: Session, conc: Any, at: list[Any]) -> None:
    s.need(isinstance(conc, dict), "workflow.concurrency", "workflow(concurrency=...) must be a dictionary", at)
    for key, value in conc.items():
        s.need(
            key in _CONCURRENCY_KEYS,
            "workflow.concurrency",
            f"unknown concurrency key {key!r} (total, agent, command, checkout_readers)",
            at,
        )
        s.need(
            isinstance(value, int) and not isinstance(value, bool) and value > 0,
            "workflow.concurrency",
            f"concurrency {key} must be a positive integer",
            at,
        )


def install_builtins(module: sl.Module, s: Session) -> None:
    module.add_callable("_node", partial(make_node, s))
    module.add_callable("_workflow", partial(make_workflow, s))
