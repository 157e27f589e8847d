"""The supervised Starlark planning worker (a separate process; stdlib + starlark-pyo3 only).

Run as ``python -I _worker.py`` (one request, then exit: what the CLI starts for each plan) or
``python -I _worker.py --warm`` (requests one after another, each with fresh Starlark state; the
warm worker of long-lived processes, :mod:`rho_notebook.source.warm`). Every request ends with one
terminal frame (``result``, ``code_result``, ``error`` or ``done``). It speaks length-prefixed JSON
frames on stdin/stdout (its real stdout is moved to a private descriptor and fd 1 is pointed at
stderr, so nothing evaluated can write into the channel). It applies RLIMIT_AS and RLIMIT_CPU to itself before it reads any
source, asks the parent for every module it loads (the parent owns the filesystem and the label
rules), asks the parent to validate the declared inputs, calls ``build`` once, and returns the
raw tagged graph. As in Rho, every loaded module is frozen when its evaluation ends, but the entry
module is frozen only after ``build`` returns, so ``build`` may still change its globals. It never
touches the filesystem, the network, the clock as a value, the environment or randomness on
Starlark's behalf.

The same worker runs the ``code`` step of item graphs (docs/graphs.md): the source is evaluated on
its own (standard Starlark, none of the workflow builtins, no ``load``), the item is set as the
global ``item`` and ``run(item)`` is called once, under the same budgets; the dict it returns must
be a JSON object and becomes the new item.

The worker's code lives in the private package ``_starlark`` beside this file, one concept a module
(channel, session, builtins, diagnostics, ...), which imports only the standard library, starlark
and itself. ``-I`` puts neither this folder nor the project on ``sys.path``, and the package
``rho_notebook`` must not be imported (its ``__init__`` files would slow every planning run), so the
worker registers bare stand-ins for ``rho_notebook`` and ``rho_notebook.source`` that only say where
their folders are, then imports ``rho_notebook.source._starlark.serve`` through them.

Frames, parent -> worker:
    {"op": "evaluate", "entry": LABEL, "text": SRC, "limits": {...}}
    {"op": "code", "text": SRC, "item": {...}, "limits": {...}, "check"?: true}   (check: parse only)
    {"op": "source", "label": L, "text": SRC} | {"op": "source_error", "rule": R, "message": M}
    {"op": "inputs", "values": {...}} | {"op": "inputs_error", "diagnostics": [...]}
Frames, worker -> parent:
    {"op": "load", "label": L, "from": [file, line, col]}
    {"op": "declared", "inputs": {...}}
    {"op": "result", "graph": {...}, "stats": {...}}
    {"op": "code_result", "item": {...}, "stats": {...}}
    {"op": "error", "diagnostic": {...}, "stats": {...}}
"""

from __future__ import annotations

import importlib
import os
import sys

_PARENTS = ("rho_notebook", "rho_notebook.source")


def main() -> None:
    source = os.path.dirname(os.path.abspath(__file__))
    for name, folder in zip(_PARENTS, (os.path.dirname(source), source)):
        stand_in = type(sys)(name)
        stand_in.__path__ = [folder]  # a package whose __init__ never runs
        sys.modules[name] = stand_in
    importlib.import_module("rho_notebook.source._starlark.serve").main(warm="--warm" in sys.argv[1:])


if __name__ == "__main__":
    main()
