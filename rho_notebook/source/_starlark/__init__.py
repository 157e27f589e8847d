"""The modules of the Starlark planning worker (``_worker.py``), one concept each.

The worker runs as ``python -I _worker.py`` with the standard library and starlark-pyo3 only:
these modules import nothing else but each other, by their full names, which ``_worker.py``
resolves without running any ``rho_notebook`` ``__init__`` (see its docstring). Their exceptions
(:mod:`.signals`) never leave the worker's process.

- :mod:`.channel`: the length-prefixed JSON frames to the parent.
- :mod:`.session`: the evaluation state of one request (budgets, values, module loading).
- :mod:`.builtins`: the prelude and the builtins every module sees, installed from
  :mod:`.inputs`, :mod:`.schema`, :mod:`.templates` (references and templates),
  :mod:`.conditions` and :mod:`.nodes` (with :mod:`.node_kinds`).
- :mod:`.crossing`: the constructors, exact and fast (arguments and results as one JSON text).
- :mod:`.entry` and :mod:`.code`: what the worker does for a workflow and for a code step.
- :mod:`.diagnose`: worker errors as diagnostics with file:line:column.
- :mod:`.serve`: the request loop (one request, or one after another) and the process limits.
"""
