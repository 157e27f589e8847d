"""The harness a Python node runs in: import the frozen module, call the function, store its result.

Run as ``INTERPRETER -I _rho_harness.py MODULES_DIR REQUEST_JSON RESULT_JSON`` by
:mod:`rho_notebook.exec.python`, which copies this file into the run's ``python/`` folder after
checking its digest against the one frozen in the plan. Standard library only: it runs in the
node's interpreter, whatever that environment holds.

The request is ``{"module": dotted name, "function": name, "args": {...}, "sys_path": [...],
"site_dirs": [...]}``. ``sys.path`` becomes ``[MODULES_DIR, *sys_path]`` (the frozen modules first,
then the interpreter's own path as recorded at plan time), and every site directory is added with
``site.addsitedir`` so its ``.pth`` files work: launched through ``/proc/self/fd/N``, a virtual
environment's interpreter cannot find its ``pyvenv.cfg`` itself.

Exit codes: 0, the JSON-encoded return value is in RESULT_JSON (written atomically); 1, the module,
the function or the call raised (traceback on stderr); 2, the return value is not JSON-encodable
(one line on stderr naming its type); 3, the harness was called wrongly. What the user's code
prints goes to the node's stdout and stderr logs.
"""

from __future__ import annotations

import importlib
import json
import os
import site
import sys
import traceback
from typing import Any

__all__ = ["main"]


def _write_atomically(path: str, text: str) -> None:
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _call(request: dict[str, Any]) -> Any:
    module = importlib.import_module(request["module"])
    function = getattr(module, request["function"], None)
    if not callable(function):
        msg = f"module {request['module']} has no function {request['function']!r}"
        raise AttributeError(msg)
    return function(**request["args"])


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: _rho_harness.py MODULES_DIR REQUEST_JSON RESULT_JSON", file=sys.stderr)
        return 3
    modules_dir, request_path, result_path = argv[1:]
    with open(request_path, encoding="utf-8") as handle:
        request = json.load(handle)
    sys.path[:] = [modules_dir, *request["sys_path"]]
    for folder in request["site_dirs"]:
        site.addsitedir(folder)
    try:
        result = _call(request)
    except Exception:
        traceback.print_exc()
        return 1
    try:
        text = json.dumps(result, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as err:
        kind = type(result).__qualname__
        if type(result).__module__ != "builtins":
            kind = f"{type(result).__module__}.{kind}"
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"the return value of {request['function']}() is not JSON-encodable: {kind} ({detail})", file=sys.stderr)
        return 2
    _write_atomically(result_path, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
