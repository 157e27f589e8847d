"""Pure data and pure functions: the graph, schemas, conditions, states and digests. No I/O.

The face imports on first use (:func:`rho_notebook.lazy.lazy_face`): ``from rho_notebook.model
import RunState`` loads the run state and what it needs, not every model module. The journal's
record kinds are typed in :mod:`rho_notebook.model.events` and folded by
:mod:`rho_notebook.model.run_fold` into :mod:`rho_notebook.model.run_state`.
"""

from rho_notebook.lazy import lazy_face

_FACE = {
    # the graph a plan freezes, and the plan
    "Graph": "graph",
    "Node": "graph",
    "CommandNode": "graph",
    "ShellNode": "graph",
    "PythonNode": "graph",
    "AgentNode": "graph",
    "ApprovalNode": "graph",
    "ItemNode": "graph",
    "ItemGraph": "itemgraph",
    "AgentDefinition": "agent",
    "Plan": "plan",
    "PlanManifest": "plan",
    "FrozenModel": "base",
    "Schema": "schema",
    "validate_value": "schema",
    "Condition": "condition",
    "UNAVAILABLE": "condition",
    "Template": "reference",
    "OutputRef": "reference",
    "graph_digest": "canonical",
    # a run: states, journal records, and their fold
    "NodeState": "state",
    "Lifecycle": "state",
    "TERMINAL_STATES": "state",
    "EventKind": "events",
    "JournalEvent": "events",
    "LiveEvent": "events",
    "event": "events",
    "now_iso": "events",
    "describe_event": "progress",
    "RunState": "run_state",
    "NodeRecord": "run_state",
    "AttemptRecord": "run_state",
    "apply": "run_fold",
    "replay": "run_fold",
}
__getattr__, __dir__ = lazy_face(__name__, _FACE)
__all__ = sorted(_FACE)
