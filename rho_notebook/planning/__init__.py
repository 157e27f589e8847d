"""Validation and planning: inputs, normalisation, graph rules, resolution, frozen plans.

Every authoring form (Starlark workflows, scripts, flows, item graphs) freezes its source into a
graph in its own module (``to_graph``); :mod:`~rho_notebook.planning.forms` chooses the form of a
request and :mod:`~rho_notebook.planning.seal` turns every form's graph into a plan. The face
below is loaded lazily: importing one planning module does not import the others. (A name that
is also a module, such as ``seal``, is not on the face: import it from its module.)
"""

from rho_notebook.lazy import lazy_face

__getattr__, __dir__ = lazy_face(
    __name__,
    {
        "FORMS": "forms",
        "FlowCheck": "flow",
        "Form": "forms",
        "FrozenGraph": "seal",
        "GraphFinding": "itemgraph",
        "PlanRequest": "request",
        "check_flow": "flow",
        "check_graph_steps": "item_plan",
        "convert_graph": "convert",
        "form_of": "forms",
        "graph_entry": "item_plan",
        "lint_graph": "itemgraph",
        "lint_graph_file": "itemgraph",
        "lint_script": "script_lint",
        "plan_request": "forms",
        "read_graph_file": "itemgraph",
        "script_entry": "script",
    },
)
__all__ = [
    "FORMS",
    "FlowCheck",
    "Form",
    "FrozenGraph",
    "GraphFinding",
    "PlanRequest",
    "check_flow",
    "check_graph_steps",
    "convert_graph",
    "form_of",
    "graph_entry",
    "lint_graph",
    "lint_graph_file",
    "lint_script",
    "plan_request",
    "read_graph_file",
    "script_entry",
]
