"""The service's verbs from a widget's threads, and the static views widgets add to their bundle.

The service's verbs are ``async``. A widget is driven from threads that are not running the
kernel's loop for it (button callbacks on the kernel's main thread, flushes on the pump thread,
run listeners on the runner thread), so it waits for a verb through the same bridge as the
notebook API, :func:`rho_notebook.service.wait_for` (re-exported here as :func:`call`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rho_notebook.service import wait_for as call

__all__ = ["call", "with_static_views", "StaticViews"]


def with_static_views(bundle: Any, static: Callable[[], Mapping[str, str]]) -> Any:
    """An ipywidgets mime bundle (``data`` or ``(data, metadata)``) with the widget's static
    views added (``text/html``, ``image/svg+xml``, ``text/plain``: what a saved notebook or
    nbconvert HTML shows without a kernel); None (nothing to display) stays None."""
    if bundle is None:
        return None
    data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
    return {**data, **static()}, metadata


class StaticViews:
    """A widget's static views in its mime bundle: a mixin named before the ipywidgets base
    (``class PlanCard(StaticViews, widgets.VBox)``), the widget defining ``_static_views``."""

    def _static_views(self) -> Mapping[str, str]:
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return with_static_views(super()._repr_mimebundle_(**kwargs), self._static_views)  # type: ignore[misc]
