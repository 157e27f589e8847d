"""The worker's process: limits applied before any source is read, one request served."""

from __future__ import annotations

import resource
from typing import Any

import starlark as sl

from rho_notebook.source._starlark.channel import Channel
from rho_notebook.source._starlark.code import run_code
from rho_notebook.source._starlark.diagnose import diagnose
from rho_notebook.source._starlark.entry import evaluate_entry
from rho_notebook.source._starlark.pseudo_files import CODE
from rho_notebook.source._starlark.session import Session
from rho_notebook.source._starlark.signals import Budget, RhoBuiltinError
from rho_notebook.source._starlark.usage import peak_address_space, stats


def serve(channel: Channel, request: dict[str, Any]) -> None:
    session = Session(channel, request["limits"])
    code = request.get("op") == "code"
    file = CODE if code else request["entry"]
    try:
        if code:
            item = run_code(session, request["text"], request["item"])
            channel.send({"op": "code_result", "item": item, "stats": stats(session)})
        else:
            evaluate_entry(session, request)
    except (sl.StarlarkError, RhoBuiltinError, Budget) as err:
        found = diagnose(err, session)
        if code and not found["rule"].startswith(("limit.", "code.")):
            found["rule"] = "code.error"  # a Starlark error in the step's source
        if found["file"] is None and "budget" not in found:
            found["file"] = file  # raised by the driver (WORKFLOW or run itself is wrong): the source's fault
        channel.send({"op": "error", "diagnostic": found, "stats": stats(session)})
    except BaseException as err:  # MemoryError, or pyo3's PanicException("out of memory")
        if not isinstance(err, MemoryError) and "out of memory" not in str(err):
            raise
        channel.send(_out_of_memory(request["limits"], file, session))


def _out_of_memory(limits: dict[str, int], file: str, session: Session) -> dict[str, Any]:
    limit = limits["evaluator_address_space"]
    in_use = peak_address_space()
    detail = f"an allocation failed with {in_use} bytes of address space in use (peak VmSize)"
    return {
        "op": "error",
        "diagnostic": {
            "rule": "limit.evaluator_address_space",
            "budget": "evaluator_address_space",
            "limit": limit,
            "measured": in_use,
            "message": detail,
            "file": file,
            "line": None,
            "column": None,
        },
        "stats": stats(session),
    }


def main() -> None:
    channel = Channel()
    request = channel.receive()
    limits = request["limits"]
    address_space = limits["evaluator_address_space"]
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = max(1, (limits["evaluator_wall_ms"] + 999) // 1000 + 1)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    serve(channel, request)
