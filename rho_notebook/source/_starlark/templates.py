"""References to what a node produced (``output``, ``status``, ``exit_code``) and ``template``."""

from __future__ import annotations

import json

import starlark as sl

from rho_notebook.source._starlark.tags import NAME_RE, is_tag, tag

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

    from rho_notebook.source._starlark.session import Session


def node_name(s: Session, value: Any, fn: str) -> str:
    s.need(
        isinstance(value, str) and NAME_RE.match(value) is not None,
        "reference.node",
        f"{fn}() needs a node name matching [a-z][a-z0-9_-]{{0,62}}, got {json.dumps(value)}",
    )
    return str(value)


def output_reference(s: Session, node: Any, path: Any) -> dict[str, Any]:
    node = node_name(s, node, "output")
    path = [] if path is None else path
    s.need(
        isinstance(path, list),
        "reference.path",
        "output(node, path) path must be a list of field names and list indexes",
    )
    for step in path:
        s.need(
            isinstance(step, (str, int)) and not isinstance(step, bool),
            "reference.path",
            f"output() path steps must be strings or integers, got {json.dumps(step)}",
        )
    return tag("ref", ref="output", node=node, path=path)


def make_template(s: Session, parts: Any) -> dict[str, Any]:
    s.need(
        isinstance(parts, list),
        "template.parts",
        "template() needs a list of strings, values and output() references",
    )
    for p in parts:
        s.check_value(p, "template part")
        if isinstance(p, dict) and "__rho__" in p:
            s.need(
                is_tag(p, "ref") and p.get("ref") == "output",
                "template.part",
                "template() parts may be strings, scalars, lists, records, or output() references; status() and exit_code() belong in conditions",
            )
    return tag("template", parts=parts)


def install_builtins(module: sl.Module, s: Session) -> None:
    # Python names these callables in the TypeError of a call with wrong arguments, which becomes
    # the diagnostic's message: the closures keep the names the worker has always reported.
    def output_ref(node: Any = None, path: Any = None) -> dict[str, Any]:
        return output_reference(s, node, path)

    def template(parts: Any = None) -> dict[str, Any]:
        return make_template(s, parts)

    module.add_callable("output", output_ref)
    module.add_callable("status", lambda node=None: tag("ref", ref="status", node=node_name(s, node, "status")))
    module.add_callable(
        "exit_code", lambda node=None: tag("ref", ref="exit_code", node=node_name(s, node, "exit_code"))
    )
    module.add_callable("template", template)
