"""The worker's process: limits applied before any source is read, then one request served (a
fresh worker, as the CLI runs it) or one request after another (a warm worker, ``--warm``).

A warm worker gives every request a new :class:`~.session.Session` (fresh Starlark globals,
modules and budget counts) and the same limits as a fresh worker: the address-space limit is the
process's, the CPU-time limit is re-armed before each request to the CPU time used so far plus the
request's budget. After a request that ran out of a budget the worker exits, so that nothing of an
overrun is carried into the next request; the parent replaces it.
"""

from __future__ import annotations

import math
import resource

import starlark as sl

from rho_notebook.source._starlark.channel import Channel
from rho_notebook.source._starlark.code import run_code
from rho_notebook.source._starlark.diagnose import diagnose
from rho_notebook.source._starlark.entry import evaluate_entry
from rho_notebook.source._starlark.pseudo_files import CODE, PRELUDE
from rho_notebook.source._starlark.session import Session
from rho_notebook.source._starlark.signals import Budget, RhoBuiltinError
from rho_notebook.source._starlark.usage import peak_address_space, stats

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

_EVALUATION_ERRORS = (sl.StarlarkError, RhoBuiltinError, Budget)


def serve(channel: Channel, request: dict[str, Any]) -> bool:
    """Answer one request with its terminal frame; False when a budget ran out (the worker must go).

    A workflow is evaluated in the fast mode first (:mod:`.crossing`); when that fails in a way
    only the fast mode can (Starlark refusing to encode an argument as JSON), it is evaluated again
    in the exact mode, within the same wall-time budget, and that answer stands.
    """
    code = request.get("op") == "code"
    session = Session(channel, request["limits"], fast=not code)
    try:
        try:
            _answer(session, request)
        except _EVALUATION_ERRORS as err:
            if not _fast_mode_failed(err, session):
                raise
            session.close()
            session = Session(channel, request["limits"], started=session.started)
            _answer(session, request)
    except _EVALUATION_ERRORS as err:
        channel.send({"op": "error", "diagnostic": _diagnostic(err, session, request), "stats": stats(session)})
        return not isinstance(session.last_error, Budget)
    except BaseException as err:  # MemoryError, or pyo3's PanicException("out of memory")
        if not isinstance(err, MemoryError) and "out of memory" not in str(err):
            raise
        channel.send(_out_of_memory(request["limits"], CODE if code else request["entry"], session))
        return False
    finally:
        session.close()
    return True


def _answer(session: Session, request: dict[str, Any]) -> None:
    if request.get("op") == "code":
        item = run_code(session, request["text"], request["item"], check=request.get("check") is True)
        session.channel.send({"op": "code_result", "item": item, "stats": stats(session)})
    else:
        evaluate_entry(session, request)


def _fast_mode_failed(err: BaseException, session: Session) -> bool:
    """Whether ``err`` may be the fast mode's own: a Starlark error raised in the prelude (where
    the fast constructors encode their arguments) that no builtin or budget explains."""
    return (
        session.fast
        and isinstance(err, sl.StarlarkError)
        and session.last_error is None
        and f"--> {PRELUDE}:" in str(err)
    )


def _diagnostic(err: BaseException, session: Session, request: dict[str, Any]) -> dict[str, Any]:
    code = request.get("op") == "code"
    found = diagnose(err, session)
    if code and not found["rule"].startswith(("limit.", "code.")):
        found["rule"] = "code.error"  # a Starlark error in the step's source
    if found["file"] is None and "budget" not in found:
        found["file"] = CODE if code else request["entry"]  # raised by the driver: the source's fault
    return found


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


def _apply_limits(limits: dict[str, int], *, warm: bool) -> None:
    """The address-space limit, and a CPU-time limit of the request's wall budget (rounded up, plus
    one second) from now. A fresh worker also lowers the hard CPU limit one second above; a warm
    one cannot (it could not raise it again for the next request), its parent's wall timer is the
    backstop."""
    address_space = limits["evaluator_address_space"]
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = max(1, (limits["evaluator_wall_ms"] + 999) // 1000 + 1)
    if not warm:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime) + cpu
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def main(*, warm: bool = False) -> None:
    """Serve one request, or (``warm``) requests until the parent closes the channel or a budget
    runs out."""
    channel = Channel()
    while True:
        request = channel.receive()
        _apply_limits(request["limits"], warm=warm)
        if not serve(channel, request) or not warm:
            return
