"""A workflow request: evaluate the entry module, have the parent check the declared inputs, call
``build`` and send the raw tagged graph.

The driver runs inside the entry module, before it is frozen, so that ``build`` sees the entry
module's globals still mutable (Rho calls build, then freezes); loaded modules are frozen already.
"""

from __future__ import annotations

import json

import starlark as sl

from rho_notebook.source._starlark.tags import is_tag
from rho_notebook.source._starlark.usage import stats

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

    from rho_notebook.source._starlark.session import Session

INPUTS_GLOBAL = "_rho_build_inputs"
DECLARED_SOURCE = """
WORKFLOW["inputs"] if type(WORKFLOW) == "dict" and WORKFLOW.get("__rho__") == "define" else fail(
    "WORKFLOW must be the value of define(inputs = ..., build = ...)")
"""
BUILD_SOURCE = f'_rho_budgeted(WORKFLOW["build"]({INPUTS_GLOBAL}), WORKFLOW)'
RESULT_GLOBAL = "_rho_build_result"
FAST_BUILD_SOURCE = f"{RESULT_GLOBAL} = {BUILD_SOURCE}\n_rho_json({RESULT_GLOBAL})"
"""The fast mode's driver: build's result as one JSON text, or None when it is not JSON-exact."""
_NO_WORKFLOW = "Variable `WORKFLOW` not found"


def evaluate_entry(session: Session, request: dict[str, Any]) -> None:
    """Evaluate the entry module, have the parent check the declared inputs, call ``build``."""
    channel = session.channel
    entry = request["entry"]
    module = session.eval_unfrozen(entry, request["text"])
    try:
        declared = session.run_in(module, DECLARED_SOURCE)
    except sl.StarlarkError as err:
        if _NO_WORKFLOW not in str(err):
            raise
        session.fail(
            "starlark.error",
            "Module has no symbol `WORKFLOW`; the entry module must set WORKFLOW = define(...)",
            [entry, None, None],
        )
    channel.send({"op": "declared", "inputs": declared})
    reply = channel.receive()
    if reply["op"] == "inputs_error":
        channel.send({"op": "done"})
        return
    module[INPUTS_GLOBAL] = reply["values"]
    result, text = _build(session, module)
    module.freeze()  # as in Rho: the entry module is frozen once build has returned
    session.check_value(result, "build() result")
    if not is_tag(result, "workflow"):
        session.fail("define.build", "build(inputs) must return workflow(name = ..., nodes = [...])", [entry, 1, 1])
    if text is None:
        channel.send({"op": "result", "graph": result, "stats": stats(session)})
        return
    # The JSON text the graph came from is sent as it is: encoding the decoded graph again would
    # give the parent the same value, a few milliseconds later.
    channel.send_text(f'{{"op":"result","graph":{text},"stats":{json.dumps(stats(session))}}}')


def _build(session: Session, module: sl.Module) -> tuple[Any, str | None]:
    """What ``build`` returned, converted to Python (in the fast mode through one JSON text, which
    is returned too; None in the exact mode or when that text is not exact)."""
    if not session.fast:
        return session.run_in(module, BUILD_SOURCE), None
    text = session.run_in(module, FAST_BUILD_SOURCE)
    if text is None:
        return session.run_in(module, RESULT_GLOBAL), None
    return json.loads(text), text
