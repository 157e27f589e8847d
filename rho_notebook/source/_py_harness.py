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

Flow runs (docs/flows.md): when the request also has ``"flow": NAME``, the script is imported as a
module under its dotted name (never as ``__main__``), ``NAME`` is taken from it (a ``Workflow``
subclass, instantiated without arguments, or an instance), run on the initial session (one user
message: the ``prompt`` input, or the inputs as JSON text when there is no such input), and
``{"text": final.text(), "messages": final.to_json()}`` is the run's output (``emit_output``).

Compile mode: ``INTERPRETER -I _rho_harness.py --flow-compile MODULES_DIR REQUEST_JSON`` imports the
module in the same way and prints ``NAME``'s ``compile()`` manifest as one JSON line on stdout; no
model is called. Exit 1 when the module or ``compile()`` raised, 3 when called wrongly.
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

__all__ = ["compile_flow", "main", "run_script"]


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


def _module_name(label: str) -> str:
    """``//flows/review.py`` -> ``flows.review``; ``//pkg/__init__.py`` -> ``pkg``."""
    name = label[2:].removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def _flow_of(path: str, label: str, name: object) -> Any:
    """Import the flow module at ``path`` (as its dotted name) and give the workflow ``name``
    stands for: an instance of the ``Workflow`` subclass it names, or the instance it names."""
    from rho_notebook.flow import Workflow  # found once sys.path is set up

    if not isinstance(name, str) or not name.isidentifier():
        msg = f"the flow name must be a Python identifier defined by {label}, got {name!r}"
        raise ValueError(msg)
    module_name = _module_name(label)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        msg = f"{label} cannot be imported as module {module_name}"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    target = getattr(module, name, None)
    if isinstance(target, type) and issubclass(target, Workflow):
        return target()
    if isinstance(target, Workflow):
        return target
    defined = sorted(
        key
        for key, value in vars(module).items()
        if isinstance(value, Workflow)
        or (isinstance(value, type) and issubclass(value, Workflow) and value.__module__ == module_name)
    )
    found = "not defined" if target is None else f"a {type(target).__name__}"
    msg = f"{label}: {name} is {found}, not a Workflow subclass or instance (workflows defined there: {', '.join(defined) or 'none'})"
    raise LookupError(msg)


def _run_flow(path: str, label: str, name: str) -> None:
    """Flow mode: run workflow ``name`` of the module on the initial session and emit its output."""
    from rho_notebook.flow import Session, run_flow
    from rho_notebook.script import emit_output, get_inputs

    workflow = _flow_of(path, label, name)
    inputs = get_inputs()
    prompt = inputs.get("prompt")
    text = prompt if isinstance(prompt, str) else json.dumps(inputs, sort_keys=True)
    final = run_flow(workflow, Session.from_user_message(text), name=name)
    emit_output({"text": final.text(), "messages": final.to_json()})


def compile_flow(modules_dir: str, request_path: str) -> int:
    """Compile mode: print the manifest of the request's flow as one JSON line (module docstring)."""
    loaded = _prepare(modules_dir, request_path, mode="--flow-compile")
    if loaded is None:
        return 3
    request, path = loaded
    try:
        workflow = _flow_of(path, request["script"], request.get("flow"))
        manifest = workflow.compile(name=request.get("flow"))
        text = json.dumps(manifest, sort_keys=True, allow_nan=False)
    except Exception as err:
        _print_script_traceback(err, path)
        return 1
    sys.stdout.write(text + "\n")
    return 0


def _prepare(modules_dir: str, request_path: str, *, mode: str) -> tuple[dict[str, Any], str] | None:
    """The request and the script's file, with ``sys.path`` set up; None (said on stderr) when the
    request's label is not a script label."""
    with open(request_path, encoding="utf-8") as handle:
        request = json.load(handle)
    path = _script_path(modules_dir, request.get("script"))
    if path is None:
        print(
            f"_rho_harness.py {mode}: {request.get('script')!r} is not a script label like //name.py", file=sys.stderr
        )
        return None
    _set_path(modules_dir, request)
    return request, path


def _set_path(modules_dir: str, request: dict[str, Any]) -> None:
    sys.path[:] = [modules_dir, *request["sys_path"]]
    for folder in request["site_dirs"]:
        site.addsitedir(folder)
    package_dir = request.get("package_dir")
    if package_dir and importlib.util.find_spec("rho_notebook") is None:
        sys.path.append(package_dir)


def run_script(modules_dir: str, request_path: str) -> int:
    """Script mode: run the frozen script as ``__main__``; returns its exit code (see the module
    docstring). ``SystemExit`` raised by the script propagates."""
    loaded = _prepare(modules_dir, request_path, mode="--script")
    if loaded is None:
        return 3
    request, path = loaded
    sys.argv[:] = [path]
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    flow = request.get("flow")
    try:
        if flow is not None:
            _run_flow(path, request["script"], flow)
        else:
            runpy.run_path(path, run_name="__main__")
    except Exception as err:
        _print_script_traceback(err, path)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--script":
        return run_script(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "--flow-compile":
        return compile_flow(argv[2], argv[3])
    if len(argv) != 4:
        print(
            "usage: _rho_harness.py MODULES_DIR REQUEST_JSON RESULT_JSON | --script MODULES_DIR REQUEST_JSON"
            " | --flow-compile MODULES_DIR REQUEST_JSON",
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
