"""The application service: the one way in for every front end.

Front ends (cli, notebook, widgets, server, mcp) import from here, from ``model``, ``views`` and
``errors``, and from nothing else of ours (docs/architecture.md; ``tests/unit/test_layers.py``
enforces it). The verbs are methods of :class:`Service`, a facade over one module per concept
(:mod:`.service` lists them); the answers' JSON shapes are in :mod:`rho_notebook.service.wire`;
the names below are the records and helpers the verbs take and return.

The face is loaded lazily (:func:`rho_notebook.lazy.lazy_face`): ``import
rho_notebook.service.paths`` imports only that module, and a name is imported the first time it is
asked for.
"""

from typing import TYPE_CHECKING

from rho_notebook.lazy import lazy_face

_FACE = {
    "ApprovalDecision": "core_names",
    "ApprovalRequest": "core_names",
    "BackgroundRunner": "background",
    "CancelResult": "core_names",
    "Consent": "requests",
    "DiffResult": "diff",
    "ExportResult": "export",
    "FlowCheck": "core_names",
    "GraphRef": "diff",
    "JournalRead": "core_names",
    "Limits": "core_names",
    "Listener": "run_handle",
    "Mode": "requests",
    "NodeAttempt": "reading",
    "NodeResult": "results",
    "NotebookSource": "cells",
    "OwnerOptions": "core_names",
    "PlanRequest": "core_names",
    "Responder": "starting",
    "ResumeRun": "requests",
    "RowCache": "listing",
    "RunFolder": "core_names",
    "RunFollower": "core_names",
    "RunHandle": "run_handle",
    "RunManifest": "core_names",
    "RunOutputs": "run_handle",
    "RunResult": "results",
    "RunsQuery": "listing",
    "Service": "service",
    "StartRun": "requests",
    "StateMirror": "run_handle",
    "StoreLayout": "core_names",
    "Stream": "reading",
    "TryPlan": "diff",
    "Via": "requests",
    "WorkflowEntry": "catalog",
    "WorkflowScan": "catalog",
    "Workspace": "core_names",
    "check_path": "paths",
    "default_runner": "background",
    "describe_request": "core_names",
    "entry_source": "sources",
    "find_workspace": "core_names",
    "load_limits": "core_names",
    "parse_input_args": "core_names",
    "wait_for": "background",
}
__getattr__, __dir__ = lazy_face(__name__, _FACE)
__all__ = [
    "ApprovalDecision",
    "ApprovalRequest",
    "BackgroundRunner",
    "CancelResult",
    "Consent",
    "DiffResult",
    "ExportResult",
    "FlowCheck",
    "GraphRef",
    "JournalRead",
    "Limits",
    "Listener",
    "Mode",
    "NodeAttempt",
    "NodeResult",
    "NotebookSource",
    "OwnerOptions",
    "PlanRequest",
    "Responder",
    "ResumeRun",
    "RowCache",
    "RunFolder",
    "RunFollower",
    "RunHandle",
    "RunManifest",
    "RunOutputs",
    "RunResult",
    "RunsQuery",
    "Service",
    "StartRun",
    "StateMirror",
    "StoreLayout",
    "Stream",
    "TryPlan",
    "Via",
    "WorkflowEntry",
    "WorkflowScan",
    "Workspace",
    "check_path",
    "default_runner",
    "describe_request",
    "entry_source",
    "find_workspace",
    "load_limits",
    "parse_input_args",
    "wait_for",
]

if TYPE_CHECKING:
    from rho_notebook.service.background import BackgroundRunner, default_runner, wait_for
    from rho_notebook.service.catalog import WorkflowEntry, WorkflowScan
    from rho_notebook.service.cells import NotebookSource
    from rho_notebook.service.core_names import (
        ApprovalDecision,
        ApprovalRequest,
        CancelResult,
        FlowCheck,
        JournalRead,
        Limits,
        OwnerOptions,
        PlanRequest,
        RunFolder,
        RunFollower,
        RunManifest,
        StoreLayout,
        Workspace,
        describe_request,
        find_workspace,
        load_limits,
        parse_input_args,
    )
    from rho_notebook.service.diff import DiffResult, GraphRef, TryPlan
    from rho_notebook.service.export import ExportResult
    from rho_notebook.service.listing import RowCache, RunsQuery
    from rho_notebook.service.paths import check_path
    from rho_notebook.service.reading import NodeAttempt, Stream
    from rho_notebook.service.requests import Consent, Mode, ResumeRun, StartRun, Via
    from rho_notebook.service.results import NodeResult, RunResult
    from rho_notebook.service.run_handle import Listener, RunHandle, RunOutputs, StateMirror
    from rho_notebook.service.service import Service
    from rho_notebook.service.sources import entry_source
    from rho_notebook.service.starting import Responder
