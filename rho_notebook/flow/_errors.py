"""The one error of the flow layer (it imports nothing of rho_notebook but the script shim, so it
cannot use :mod:`rho_notebook.errors`)."""

from __future__ import annotations

__all__ = ["FlowError"]


class FlowError(RuntimeError):
    """A flow cannot go on: no model backend outside a run, a model call that failed, an agent loop
    past its turn limit, a malformed workflow tree. The message says what to change."""
