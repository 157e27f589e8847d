"""The modules :class:`~rho_notebook.service.service.Service` delegates to, each imported the first
time a verb uses it (:class:`rho_notebook.lazy.LazyModule`).

The facade names every verb, so importing it must not import every verb's dependencies: ``status``
reads a journal and a frozen graph, and has no use for the planner, the run's owner, the agents'
model clients or the notebook exporter (issue 31; ``tests/unit/test_cli_imports.py`` checks the
CLI's read verbs). The facade calls ``parts.planning.plan(...)``; type checkers see the modules
themselves.
"""

from typing import TYPE_CHECKING

from rho_notebook.lazy import lazy_modules

if TYPE_CHECKING:
    from rho_notebook.planning import flow
    from rho_notebook.policy import plan_approval
    from rho_notebook.runtime import cancel, detached, follow, owner, status
    from rho_notebook.service import (
        catalog,
        completion,
        diff,
        export,
        glance,
        listing,
        maintenance,
        mcp_rules,
        paths,
        planning,
        reading,
        record,
        sources,
        starting,
        wire,
    )
    from rho_notebook.service import decisions as deciding
    from rho_notebook.store import plans, run_locks, runs
else:
    (flow,) = lazy_modules("rho_notebook.planning", "flow")
    (plan_approval,) = lazy_modules("rho_notebook.policy", "plan_approval")
    cancel, detached, follow, owner, status = lazy_modules(
        "rho_notebook.runtime", "cancel detached follow owner status"
    )
    catalog, completion, deciding, diff, export = lazy_modules(
        "rho_notebook.service", "catalog completion decisions diff export"
    )
    listing, maintenance, mcp_rules, paths, planning = lazy_modules(
        "rho_notebook.service", "listing maintenance mcp_rules paths planning"
    )
    reading, record, sources, starting, wire = lazy_modules(
        "rho_notebook.service", "reading record sources starting wire"
    )
    (glance,) = lazy_modules("rho_notebook.service", "glance")
    plans, run_locks, runs = lazy_modules("rho_notebook.store", "plans run_locks runs")

__all__ = [
    "cancel",
    "catalog",
    "completion",
    "deciding",
    "detached",
    "diff",
    "export",
    "flow",
    "follow",
    "glance",
    "listing",
    "maintenance",
    "mcp_rules",
    "owner",
    "paths",
    "plan_approval",
    "planning",
    "plans",
    "reading",
    "record",
    "run_locks",
    "runs",
    "sources",
    "starting",
    "status",
    "wire",
]
