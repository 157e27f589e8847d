"""What the DAG view shows, shared by widgets, server and CLI: node views, layout and text.

Built from the service's records; nothing here imports a front end's framework. The face below
names which module holds each public name; a name is imported on first use
(:func:`rho_notebook.lazy.lazy_face`), so ``import rho_notebook.views.text`` loads only that module.
"""

from __future__ import annotations

from rho_notebook.lazy import lazy_face

_FACE = {
    "DagView": "dag",
    "DagViewJson": "dag",
    "dag_view": "dag",
    "read_run_view": "dag",
    "PANE_BYTES": "artifacts",
    "StreamTail": "artifacts",
    "definition_of": "definition",
    "load_detail": "detail",
    "node_detail": "detail",
    "read_node_detail": "detail",
    "reused_source_dir": "detail",
    "step_detail": "detail",
    "TreeRow": "flowtree",
    "flow_rows": "flowtree",
    "flow_tree_html": "flowtree",
    "flow_tree_text": "flowtree",
    "Direction": "layout",
    "Layout": "layout",
    "NodeSpec": "layout",
    "PlacedEdge": "layout",
    "PlacedNode": "layout",
    "layered_layout": "layout",
    "layout_graph": "layout",
    "layout_of": "layout",
    "layout_steps": "layout",
    "specs_of": "layout",
    "step_specs": "layout",
    "cancel_text": "run_notes",
    "executor_text": "run_notes",
    "failure_reason": "run_notes",
    "next_step_lines": "run_notes",
    "status_head_lines": "run_notes",
    "latest_run": "runs",
    "run_choice_label": "runs",
    "run_show_text": "runs",
    "workflow_runs": "runs",
    "STATE_ORDER": "state",
    "node_view": "state",
    "node_views": "state",
    "run_times": "state",
    "run_view_of": "state",
    "OUTPUT_CHARS": "text",
    "condition_text": "text",
    "decision_lines": "text",
    "node_status_line": "text",
    "node_status_lines": "text",
    "output_text": "text",
    "provenance_text": "text",
    "reference_text": "text",
    "schema_text": "text",
    "template_text": "text",
    "RunTracker": "tracker",
}

__getattr__, __dir__ = lazy_face(__name__, _FACE)
__all__ = sorted(_FACE)
