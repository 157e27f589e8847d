"""The "fork from here" action in the widget's node pane (issue 35, docs/fork.md), on the kernel's side.

The front end's ``fork`` message (``_dag.py``) carries the node and the edited value (absent: the
node runs again); once the person confirmed it, the planned fork's plan ID and graph digest.
Consent works as for a run: a message without the digest only plans the fork (:meth:`Service.fork`:
the value is checked against the node's output schema before anything starts, a refusal names the
field) and the answer carries the digest the pane shows; a message with it starts exactly that
planned fork on this process's background runner, in an owner process of its own (``via="notebook"``).
Everything a refusal says (a :class:`~rho_notebook.errors.RhoError`) goes back to the pane.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rho_notebook.errors import RhoError
from rho_notebook.service import Consent, Service, StartRun, default_runner
from rho_notebook.service.fork import ForkPlan, create_fork_run
from rho_notebook.widgets._call import call

__all__ = ["ForkAction", "fork_reply", "lineage_text"]

_HINT = "confirm the digest shown in the node pane"


class ForkAction:
    """Plans and starts forks of one completed run for its widget's node pane."""

    def __init__(self, service: Service, run_id: str, *, start: Callable[[str], Any] | None = None) -> None:
        """``start(run_id)`` starts a created run (default: the background runner, in its own owner)."""
        self.service = service
        self.run_id = run_id
        self._start = start or (lambda created: default_runner().start_run(service, created))
        self.started: list[str] = []
        """The forks started from this pane, oldest first."""
        self._planned: dict[str, ForkPlan] = {}
        """The forks planned here, by plan ID: a start names the one whose digest was confirmed."""

    def __call__(self, content: dict[str, Any]) -> dict[str, Any]:
        node = content.get("node")
        if not isinstance(node, str) or not node:
            msg = "fork: the message names no node"
            raise ValueError(msg)
        digest, plan_id = content.get("graph_digest"), content.get("plan_id")
        if not isinstance(digest, str):
            return self._plan(node, content)
        planned = self._planned.get(plan_id) if isinstance(plan_id, str) else None
        if planned is None or planned.node != node:
            msg = f"fork: no fork of run {self.run_id} at {node!r} was planned here as plan {plan_id}; plan it again"
            raise ValueError(msg)
        request = StartRun(plan=planned.plan.plan_id, consent=Consent(digest=digest, hint=_HINT), origin="notebook")
        run_id = call(create_fork_run(self.service.layout, planned, request))
        self._start(run_id)
        self.started.append(run_id)
        message = f"forked from {self.run_id} at {node}; rho.show({run_id[:13]!r}) follows it"
        return {
            "plan_id": planned.plan.plan_id,
            "graph_digest": planned.plan.graph_digest,
            "run_id": run_id,
            "message": message,
        }

    def _plan(self, node: str, content: dict[str, Any]) -> dict[str, Any]:
        """Plan the fork (the edited value checked before anything starts) and keep it by plan ID:
        the person confirms that plan's digest, and exactly that plan starts."""
        edited = "value" in content
        value = content.get("value")
        planned = call(self.service.fork(self.run_id, at=node, value=value, edited=edited, via="notebook"))
        self._planned[planned.plan.plan_id] = planned
        return {
            "plan_id": planned.plan.plan_id,
            "graph_digest": planned.plan.graph_digest,
            "summary": planned.summary(),
        }


def fork_reply(on_fork: Callable[[dict[str, Any]], dict[str, Any]] | None, content: dict[str, Any]) -> dict[str, Any]:
    """The ``fork_answer`` message's body for one ``fork`` message: ``{"id", "answer"}``, or
    ``{"id", "error"}`` with the refusal's message (a widget without forks refuses too)."""
    reply: dict[str, Any] = {"id": str(content.get("id") or "")}
    if on_fork is None:
        reply["error"] = "this view cannot fork its run (a plan, or a view made without a service)"
        return reply
    try:
        reply["answer"] = on_fork(content)
    except (RhoError, ValueError) as err:
        reply["error"] = getattr(err, "message", None) or str(err)
    return reply


def lineage_text(row: Mapping[str, Any]) -> str | None:
    """The lineage "forked from RUN at NODE" of a ``runs`` row of a fork (its ``lineage``, nearest
    first: a fork of a fork reads "forked from RUN at NODE <- RUN at NODE"), else None."""
    found = row.get("lineage")
    links = [
        f"{link['run'][:13]} at {link['node']}"
        for link in (found if isinstance(found, list) else [])
        if isinstance(link, Mapping) and isinstance(link.get("run"), str) and isinstance(link.get("node"), str)
    ]
    return "forked from " + " \u2190 ".join(links) if links else None
