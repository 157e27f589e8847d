"""What each kind of node needs beyond the arguments every node shares (see :mod:`.nodes`).

Each check takes the node's keyword arguments, ``where`` (``kind 'name'`` for messages) and ``at``
(the call site) and fails with the kind's rule.
"""

from __future__ import annotations

import json
import keyword

from rho_notebook.source._starlark.tags import has_tag, is_tag

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from rho_notebook.source._starlark.session import Session

    KindCheck = Callable[[Session, dict[str, Any], str, list[Any]], None]
_ACCESS = ("read_only", "mutating")


def check_approval(s: Session, kw: dict[str, Any], where: str, at: list[Any]) -> None:
    s.need(
        is_tag(kw["prompt"], "template") or isinstance(kw["prompt"], str),
        "approval.prompt",
        f"{where}: prompt must be a template([...]) or a string",
        at,
    )


def check_agent(s: Session, kw: dict[str, Any], where: str, at: list[Any]) -> None:
    s.need(
        isinstance(kw["agent"], str) and kw["agent"] != "",
        "agent.id",
        f"{where}: agent must name an agent definition",
        at,
    )
    s.need(
        is_tag(kw["prompt"], "template") or isinstance(kw["prompt"], str),
        "agent.prompt",
        f"{where}: prompt must be a template([...]) or a string",
        at,
    )
    s.need(
        kw.get("access", "mutating") in _ACCESS,
        "agent.access",
        f'{where}: access must be "read_only" or "mutating"',
        at,
    )


def check_command(s: Session, kw: dict[str, Any], where: str, at: list[Any]) -> None:
    argv = kw["argv"]
    if not (isinstance(argv, list) and argv):  # not s.need: its message would be formatted for every node
        s.fail("command.argv", f"{where}: argv must be a non-empty list", at)
    if not (isinstance(argv[0], str) and argv[0] != ""):
        s.fail(
            "command.argv",
            f"{where}: argv[0] must be a literal executable name or path; it cannot come from an output",
            at,
        )
    for i, part in enumerate(argv):
        ok = isinstance(part, str) or is_tag(part, "template") or (is_tag(part, "ref") and part.get("ref") == "output")
        if not ok:  # not s.need: its message would be formatted for every part
            s.fail(
                "command.argv",
                f"{where}: argv[{i}] must be a string, an output() reference or a template, got {json.dumps(part)[:80]}; convert numbers with str()",
                at,
            )


def check_shell(s: Session, kw: dict[str, Any], where: str, at: list[Any]) -> None:
    s.need(
        isinstance(kw["executable"], str) and kw["executable"] != "",
        "shell.executable",
        f"{where}: executable must be a non-empty string",
        at,
    )
    s.need(
        isinstance(kw["command"], str),
        "shell.command",
        f"{where}: command must be static text (a string); outputs cannot change shell source",
        at,
    )
    args = kw.get("arguments", [])
    s.need(
        isinstance(args, list) and all(isinstance(a, str) for a in args),
        "shell.arguments",
        f"{where}: arguments must be a list of static strings",
        at,
    )


def check_python(s: Session, kw: dict[str, Any], where: str, at: list[Any]) -> None:
    module = kw["module"]
    s.need(
        isinstance(module, str) and module.startswith("//") and module.endswith(".py"),
        "python.module",
        f'{where}: module must be the label of a Python module, such as "//nodes/stats.py", got {json.dumps(module)[:80]}',
        at,
    )
    function = kw["function"]
    s.need(
        isinstance(function, str) and function.isidentifier() and not keyword.iskeyword(function),
        "python.function",
        f"{where}: function must name a function of the module (a Python identifier), got {json.dumps(function)[:80]}",
        at,
    )
    _check_python_args(s, kw.get("args", {}), function, where, at)
    s.need(
        kw.get("access", "mutating") in _ACCESS,
        "python.access",
        f'{where}: access must be "read_only" or "mutating"',
        at,
    )
    inputs = kw.get("reuse_inputs", [])
    s.need(
        isinstance(inputs, list)
        and all(isinstance(label, str) and label.startswith("//") and label != "//" for label in inputs),
        "python.reuse_inputs",
        f'{where}: reuse_inputs must be a list of workspace file labels, such as ["//data/x.csv"]',
        at,
    )


def _check_python_args(s: Session, args: Any, function: str, where: str, at: list[Any]) -> None:
    s.need(
        isinstance(args, dict),
        "python.args",
        f"{where}: args must be a dictionary of argument name to value or output() reference",
        at,
    )
    for key, value in args.items():
        s.need(
            key.isidentifier() and not keyword.iskeyword(key),
            "python.args",
            f"{where}: args key {key!r} must be a Python identifier (a keyword argument of {function})",
            at,
        )
        if is_tag(value, "ref"):
            s.need(
                value.get("ref") == "output",
                "python.args",
                f"{where}: args[{key!r}] may be an output() reference; status() and exit_code() belong in conditions",
                at,
            )
            continue
        s.need(
            not has_tag(value),
            "python.args",
            f"{where}: args[{key!r}] must be a literal value (None, bool, int, string, list, dict) or an output() reference; references cannot be nested inside lists, dicts or templates",
            at,
        )


KIND_CHECKS: dict[str, KindCheck] = {
    "approval": check_approval,
    "agent": check_agent,
    "command": check_command,
    "shell": check_shell,
    "python": check_python,
}
"""The check of each node kind, by kind."""


def check_placement(s: Session, kind: str, kw: dict[str, Any], where: str, at: list[Any]) -> None:
    """``placement`` and ``resources`` (docs/distributed.md): agent and approval nodes run with
    the run owner, so only ``placement = "local"`` is accepted on them, and no resources."""
    remotable = kind in ("command", "shell", "python")
    if "placement" in kw:
        placement = kw["placement"]
        s.need(
            placement in ("local", "any"),
            "node.placement",
            f'{where}: placement must be "local" or "any", got {json.dumps(placement)[:80]}',
            at,
        )
        s.need(
            remotable or placement == "local",
            "node.placement",
            f'{where}: placement = "any" is for command, shell and python nodes; {kind} nodes always run '
            'with the run owner (drop placement or write placement = "local")',
            at,
        )
    if "resources" in kw:
        s.need(
            remotable,
            "node.resources",
            f"{where}: resources are for command, shell and python nodes; {kind} nodes always run with the run owner",
            at,
        )
        _check_resources(s, kw["resources"], where, at)


def _check_resources(s: Session, resources: Any, where: str, at: list[Any]) -> None:
    s.need(
        isinstance(resources, dict),
        "node.resources",
        f'{where}: resources must be a dictionary of resource name to amount, such as {{"GPU": 1}}',
        at,
    )
    for key, amount in resources.items():  # not s.need: its messages would be formatted for every key
        if not (isinstance(key, str) and key != ""):
            s.fail(
                "node.resources",
                f"{where}: resources keys must be non-empty resource names (strings), got {json.dumps(key)[:80]}",
                at,
            )
        if not (isinstance(amount, int) and not isinstance(amount, bool) and amount > 0):
            s.fail(
                "node.resources",
                f"{where}: resources[{json.dumps(key)}] must be a positive integer, got {json.dumps(amount)[:80]}",
                at,
            )
