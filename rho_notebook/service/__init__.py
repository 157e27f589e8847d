"""The application service: the one way in for every front end.

Front ends (cli, notebook, widgets, server, mcp) import from here, from ``model``, ``views`` and
``errors``, and from nothing else of ours (docs/architecture.md; ``tests/unit/test_layers.py``
enforces it). The verbs are methods of :class:`Service`; the answers' JSON shapes are in
:mod:`rho_notebook.service.wire`; the names below are the records and helpers the verbs take and
return.
"""

from rho_notebook.planning.flow import FlowCheck
from rho_notebook.planning.inputs import parse_input_args
from rho_notebook.planning.plan import PlanRequest
from rho_notebook.policy.approvals import ApprovalDecision, ApprovalRequest, describe_request
from rho_notebook.runtime.cancel import CancelResult
from rho_notebook.service.background import BackgroundRunner, Listener, RunHandle, RunOutputs, default_runner, wait_for
from rho_notebook.service.catalog import WorkflowEntry, WorkflowScan
from rho_notebook.service.cells import NotebookSource
from rho_notebook.service.diff import DiffResult, GraphRef, TryPlan
from rho_notebook.service.export import ExportResult
from rho_notebook.service.paths import check_path
from rho_notebook.service.requests import Consent, Mode, ResumeRun, RunsQuery, StartRun, Via
from rho_notebook.service.results import NodeResult, RunResult
from rho_notebook.service.service import NodeAttempt, Responder, RowCache, Service, Stream, entry_source
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.workspace import Workspace, find_workspace
from rho_notebook.store.journal import JournalRead
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import RunFolder, RunManifest

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
    "PlanRequest",
    "Responder",
    "ResumeRun",
    "RowCache",
    "RunFolder",
    "RunHandle",
    "RunManifest",
    "RunOutputs",
    "RunResult",
    "RunsQuery",
    "Service",
    "StartRun",
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
