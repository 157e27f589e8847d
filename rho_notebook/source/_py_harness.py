"""The harness a Python node or a Python script runs in.

Node mode: import the frozen module, call the function, store its result. Run as
``INTERPRETER -I _rho_harness.py MODULES_DIR REQUEST_JSON RESULT_JSON`` by
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

Script mode (a script run, docs/scripts.md): ``INTERPRETER -I _rho_harness.py --script MODULES_DIR
REQUEST_JSON`` runs the frozen script as ``__main__``. The request is ``{"script": label,
"sys_path": [...], "site_dirs": [...], "package_dir": path or null}``, where ``label`` is the
script's ``//`` label (``//scripts/review.py`` runs ``MODULES_DIR/scripts/review.py``, the file
itself, so tracebacks name it). ``sys.path`` and the site directories are set as in node mode;
then, when no ``rho_notebook`` package can be found on that path and ``package_dir`` is given (the
folder holding the runner's own ``rho_notebook`` package), ``package_dir`` is appended, so that
``import rho_notebook.script`` works in an interpreter without rho_notebook installed (only the
standard-library ``rho_notebook.script`` is meant to be used from there). ``sys.argv`` is
``[script path]`` and stdout is line-buffered, so the script's log follows it live.

Exit codes: the script's own (``sys.exit(n)`` is respected, falling off the end is 0); 1 when it
raised (the traceback, from the script's first frame on, is on stderr); 3 when the harness was
called wrongly (bad arguments, a label outside MODULES_DIR).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import runpy
import site
import sys
import traceback
from typing import Any

__all__ = ["main", "run_script"]


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


def _script_path(modules_dir: str, label: object) -> str | None:
    """The materialised file of the script labelled ``label``; None when that is not a label."""
    if not isinstance(label, str) or not label.startswith("//") or not label.endswith(".py"):
        return None
    parts = label[2:].split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    return os.path.join(modules_dir, *parts)


def _print_script_traceback(err: BaseException, path: str) -> None:
    """The traceback of ``err`` from the script's first frame on (the harness and runpy frames
    above it are ours, not the author's)."""
    tb = err.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    if tb is None and not isinstance(err, SyntaxError):
        tb = err.__traceback__
    traceback.print_exception(type(err), err, tb)


def run_script(modules_dir: str, request_path: str) -> int:
    """Script mode: run the frozen script as ``__main__``; returns its exit code (see the module
    docstring). ``SystemExit`` raised by the script propagates."""
    with open(request_path, encoding="utf-8") as handle:
        request = json.load(handle)
    path = _script_path(modules_dir, request.get("script"))
    if path is None:
        print(
            f"_rho_harness.py --script: {request.get('script')!r} is not a script label like //name.py", file=sys.stderr
        )
        return 3
    sys.path[:] = [modules_dir, *request["sys_path"]]
    for folder in request["site_dirs"]:
        site.addsitedir(folder)
    package_dir = request.get("package_dir")
    if package_dir and importlib.util.find_spec("rho_notebook") is None:
        sys.path.append(package_dir)
    sys.argv[:] = [path]
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    try:
        runpy.run_path(path, run_name="__main__")
    except Exception as err:
        _print_script_traceback(err, path)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--script":
        return run_script(argv[2], argv[3])
    if len(argv) != 4:
        print(
            "usage: _rho_harness.py MODULES_DIR REQUEST_JSON RESULT_JSON | --script MODULES_DIR REQUEST_JSON",
            file=sys.stderr,
        )
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
