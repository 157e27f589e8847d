"""The authoring forms and which one plans a request: the one registry that maps a
:class:`~rho_notebook.planning.request.PlanRequest` to its authoring module's ``to_graph``.

=============  ========================================  =====================================
form           a request is it when                       ``to_graph`` in
=============  ========================================  =====================================
flow           ``request.flow`` names a ``Workflow``      :mod:`~rho_notebook.planning.flow`
script         the entry is a ``.py`` module              :mod:`~rho_notebook.planning.script`
item graph     the entry is ``*.graph.yaml|yml|json``     :mod:`~rho_notebook.planning.item_plan`
Starlark       anything else (``.star``, a notebook)      :mod:`~rho_notebook.planning.plan`
=============  ========================================  =====================================

The first form that matches plans the request. A form's module is imported only when a request
of that form is planned, so planning a script never loads the Starlark evaluator or the YAML
reader. Every form's graph is sealed by :func:`~rho_notebook.planning.seal.seal`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from rho_notebook.model.itemgraph import is_graph_file
from rho_notebook.model.plan import Plan
from rho_notebook.planning.request import PlanRequest
from rho_notebook.planning.seal import ToGraph, plan_with

__all__ = ["FORMS", "Form", "form_of", "is_flow_request", "is_graph_request", "is_script_request", "plan_request"]


def is_flow_request(request: PlanRequest) -> bool:
    """Whether ``request`` plans a flow (``--flow NAME``: a script module's ``Workflow``)."""
    return request.flow is not None


def is_script_request(request: PlanRequest) -> bool:
    """Whether ``request`` plans a script (its entry is a ``.py`` module)."""
    return request.entry.label.endswith(".py")


def is_graph_request(request: PlanRequest) -> bool:
    """Whether the entry is an item-graph document (``*.graph.yaml``, ``.graph.yml``, ``.graph.json``)."""
    return is_graph_file(request.entry.label)


def _any_request(request: PlanRequest) -> bool:
    """The Starlark form takes every request no other form claims."""
    return True


@dataclass(frozen=True)
class Form:
    """One authoring form: its name, which requests are its own, and the module whose
    ``to_graph(request, *, limits)`` freezes them."""

    name: str
    claims: Callable[[PlanRequest], bool]
    module: str
    """The authoring module, imported on first use."""

    def to_graph(self) -> ToGraph:
        """The form's ``to_graph``."""
        to_graph: ToGraph = importlib.import_module(self.module).to_graph
        return to_graph


FORMS: tuple[Form, ...] = (
    Form("flow", is_flow_request, "rho_notebook.planning.flow"),
    Form("script", is_script_request, "rho_notebook.planning.script"),
    Form("item graph", is_graph_request, "rho_notebook.planning.item_plan"),
    Form("starlark", _any_request, "rho_notebook.planning.plan"),
)
"""Every form, in the order a request is matched against them."""


def form_of(request: PlanRequest) -> Form:
    """The form that plans ``request`` (the first of :data:`FORMS` that claims it)."""
    return next(form for form in FORMS if form.claims(request))


async def plan_request(request: PlanRequest, *, plan_id: str) -> Plan:
    """``request`` planned by its form and sealed, under the loaded planning limits; nothing is
    stored here (``validate`` passes ``plan_id="unsaved"``; ``plan`` a new ID, then stores it).

    Raises
    ------
    InvalidWorkflow
        With every diagnostic the form's planning found.
    """
    return await plan_with(form_of(request).to_graph())(request, plan_id=plan_id)
