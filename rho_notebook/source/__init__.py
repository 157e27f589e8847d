"""Starlark evaluation in a supervised worker: labels, module loading, limits, diagnostics.

The face below names which module holds each public name; a name is imported on first use
(:func:`rho_notebook.lazy.lazy_face`), so ``import rho_notebook.source.labels`` loads only that
module. The worker itself (``_worker.py`` and the ``_starlark`` package) runs in its own process
and is never imported here; :mod:`.workers` starts it and :mod:`.warm` keeps one between requests
in a long-lived process.
"""

from __future__ import annotations

from rho_notebook.lazy import lazy_face

_FACE = {
    "Evaluation": "evaluate",
    "InputChecker": "evaluate",
    "WORKER_PATH": "workers",
    "WorkerChannel": "evaluate",
    "evaluate_source": "evaluate",
    "talk_to_worker": "evaluate",
    "check_code_steps": "code_step",
    "run_code_step": "code_step",
    "FileSourceReader": "labels",
    "SourceReader": "labels",
    "SourceText": "labels",
    "check_label": "labels",
    "label_for_path": "labels",
    "read_regular_file_nofollow": "labels",
    "Limits": "limits",
    "RECEIPT_PATH": "limits",
    "WORKER_BUDGETS": "limits",
    "load_limits": "limits",
    "HARNESS_PATH": "pymodules",
    "ModuleIndex": "pymodules",
    "PythonSource": "pymodules",
    "check_module_label": "pymodules",
    "harness_sha256": "pymodules",
    "module_name": "pymodules",
    "raised_in_modules": "pymodules",
    "WorkerPool": "warm",
    "use_warm_workers": "warm",
    "warm_pool": "warm",
    "Workspace": "workspace",
    "find_workspace": "workspace",
}

__getattr__, __dir__ = lazy_face(__name__, _FACE)
__all__ = sorted(_FACE)
