"""The module-tree widget of a flow: its compiled manifest (modules, agents, selectors) as a tree.

An ``ipywidgets.HTML`` whose value is :func:`rho_notebook.views.flowtree.flow_tree_html`: nothing in
it changes after it is shown (the manifest is a compile-time snapshot), so it needs no front-end
module of its own. A saved notebook or nbconvert HTML shows the same HTML without a kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped]

from rho_notebook.views.flowtree import flow_tree_html, flow_tree_text
from rho_notebook.widgets._call import StaticViews

__all__ = ["FlowTree"]


class FlowTree(StaticViews, widgets.HTML):  # type: ignore[misc]
    """A flow's module tree: each module with its agents (provider, model, definition digest), and
    each selector with the candidates it chooses among at run time."""

    def __init__(self, manifest: Mapping[str, Any]) -> None:
        self.manifest = dict(manifest)
        super().__init__(value=flow_tree_html(self.manifest))

    def _static_views(self) -> dict[str, str]:
        return {"text/html": self.value, "text/plain": flow_tree_text(self.manifest)}
