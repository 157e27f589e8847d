"""Pending approvals of a run, decided in the notebook: one card per request with exactly what is
being decided (an approval node's prompt, or a supervised launch's process facts), a comment box,
and Approve / Deny buttons. A human step's ``form`` request is not listed: it is answered with values
in the run's DAG widget (``_run.py``).

A click records the decision through the same path as ``rho-notebook approve`` (first decision
wins, recorded with who, when and the digest of the facts shown). The handle's listener runs on
the runner thread; it only schedules a refresh on the kernel's own thread.
"""

from __future__ import annotations

import copy
import html
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as w  # type: ignore[import-untyped]

from rho_notebook.errors import AlreadyDecided
from rho_notebook.service import ApprovalRequest, Service, describe_request
from rho_notebook.widgets._call import call

__all__ = ["ApprovalsPanel", "form_view"]


def form_view(request: ApprovalRequest, *, error: str | None = None) -> dict[str, Any]:
    """What the widget shows of a human step's pending form request: the question and the typed
    fields (``facts["form"]``), with the message of the last refused answer."""
    facts = request.facts
    view: dict[str, Any] = {
        "request_id": request.request_id,
        "node": request.node,
        "step": str(facts.get("step", request.node)),
        "prompt": str(facts.get("prompt", "")),
        "form": copy.deepcopy(facts.get("form") or {}),
    }
    if error:
        view["error"] = error
    return view


def _kernel_scheduler() -> Callable[[Callable[[], None]], None]:
    """Run a callback on the kernel's thread when there is a kernel, else right away."""
    try:
        from IPython import get_ipython

        kernel = getattr(get_ipython(), "kernel", None)
        loop = getattr(kernel, "io_loop", None)
    except ImportError:
        loop = None
    if loop is not None and hasattr(loop, "add_callback"):
        return loop.add_callback  # type: ignore[no-any-return]
    return lambda callback: callback()


class ApprovalsPanel:
    """An ipywidgets box listing a run's pending approvals, kept current from the run's events."""

    def __init__(self, handle: Any, *, service: Service) -> None:
        self.handle = handle
        self.service = service
        self.run_id: str = handle.run_id
        self.box = w.VBox(layout=w.Layout(display="none"))
        self.decided: list[dict[str, Any]] = []
        self._schedule = _kernel_scheduler()
        self._pending = threading.Event()
        self.refresh()
        handle.add_listener(self._listen)

    def _listen(self, event: dict[str, Any]) -> None:
        if (
            event.get("kind") in ("approval_requested", "approval_decided", "run_completed")
            and not self._pending.is_set()
        ):
            self._pending.set()
            self._schedule(self.refresh)

    def pending(self) -> list[ApprovalRequest]:
        """Pending approvals; a human step's form is answered in the DAG widget, not here."""
        return [r for r in call(self.service.pending_approvals(self.run_id)) if r.kind != "form"]

    def refresh(self) -> None:
        self._pending.clear()
        cards = [self._card(request) for request in self.pending()]
        self.box.children = tuple(cards)
        self.box.layout.display = "flex" if cards else "none"

    def _card(self, request: ApprovalRequest) -> w.Widget:
        title = "Approve this step?" if request.kind == "node" else "Approve this launch?"
        text = w.HTML(
            f"<b>{html.escape(title)}</b><pre style='white-space:pre-wrap'>{html.escape(describe_request(request))}</pre>"
        )
        comment = w.Text(placeholder="comment (recorded with the decision)", layout=w.Layout(width="60%"))
        approve = w.Button(description="Approve", button_style="success", icon="check")
        deny = w.Button(description="Deny", button_style="danger", icon="times")
        note = w.HTML()

        def decide(approved: bool) -> None:
            approve.disabled = deny.disabled = True
            try:
                standing = call(
                    self.service.decide(request, approve=approved, comment=comment.value or None, via="notebook")
                )
            except AlreadyDecided as err:  # someone else decided first: theirs stands
                note.value = html.escape(err.message)
                return
            except Exception as err:  # refused or failed: say so on the card; the request stays pending
                note.value = f"<span style='color:#b00'>{html.escape(getattr(err, 'message', None) or str(err))}</span>"
                approve.disabled = deny.disabled = False
                return
            self.decided.append(standing.model_dump())
            note.value = html.escape(f"{standing.decision} by {standing.by} at {standing.at}")

        approve.on_click(lambda _button: decide(True))
        deny.on_click(lambda _button: decide(False))
        card = w.VBox(
            [text, w.HBox([comment, approve, deny]), note],
            layout=w.Layout(border="1px solid #d0a000", padding="6px", margin="4px 0"),
        )
        card.request_id = request.request_id
        card.approve_button = approve
        card.deny_button = deny
        card.comment = comment
        return card
