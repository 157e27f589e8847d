"""Loading the IPython extension: ``%load_ext rho_notebook``.

For every kernel, add it to an IPython profile (``ipython profile create`` then
``~/.ipython/profile_default/ipython_config.py``)::

    c.InteractiveShellApp.extensions = ["rho_notebook"]

Loading registers the magics (:mod:`rho_notebook.notebook.magics`) over one new
:class:`~rho_notebook.notebook.session.NotebookSession`, a completion matcher for ``%workflow``
lines and ``%%workflow`` headers, and for flows called outside a run the in-memory model backend
(:mod:`rho_notebook.notebook._flowbackend`) and the provider table ``.to(provider=...)`` is checked
against (read from settings at each check). Unloading removes exactly those (the backend and the
table only if they are still the ones installed). Nothing is started: the background runner
thread starts with the first plan, run or in-memory flow call.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from rho_notebook import flow
from rho_notebook.errors import RhoError
from rho_notebook.notebook._flowbackend import memory_backend
from rho_notebook.notebook.completion import CompletionSource, complete_line, newest_first
from rho_notebook.notebook.session import NotebookSession

__all__ = ["load_ipython_extension", "unload_ipython_extension", "current_session"]

_MAGIC_NAMES = {"line": ("workflow",), "cell": ("workflow", "star", "py", "script", "flow", "agent")}
_loaded: weakref.WeakKeyDictionary[Any, tuple[Any, Any, _FlowHooks]] = weakref.WeakKeyDictionary()
"""shell -> (magics, matcher, flow backend) of this extension (weak: a discarded shell takes its session along)."""
_shadowed: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""shell -> IPython's own ``%%script`` cell magic, which ``%%script NAME`` replaces until unloaded."""


@dataclass(frozen=True)
class _FlowHooks:
    """The flow backend and provider table loading installed, and those they replaced (given
    back on unload)."""

    backend: flow.Backend
    previous: flow.Backend | None
    providers: flow.ProviderSource
    previous_providers: flow.ProviderSource | None


def _install_flow_hooks(session: NotebookSession) -> _FlowHooks:
    backend = memory_backend(service=lambda: session.service, workspace=session.workspace)

    def providers() -> dict[str, str] | None:  # read at each check: settings may change meanwhile
        return session.service.provider_kinds(session.workspace())

    return _FlowHooks(
        backend=backend,
        previous=flow.use_backend(backend),
        providers=providers,
        previous_providers=flow.use_providers(providers),
    )


def _uninstall_flow_hooks(installed: _FlowHooks) -> None:
    current = flow.use_backend(installed.previous)
    if current is not installed.backend:  # someone installed another since: keep theirs
        flow.use_backend(current)
    table = flow.use_providers(installed.previous_providers)
    if table is not installed.providers:
        flow.use_providers(table)


def _completion_source(session: NotebookSession) -> CompletionSource:
    def plan_ids() -> list[str]:
        return newest_first(session.layout().plans)

    def run_ids() -> list[str]:
        mine = [handle.run_id for handle in reversed(session.runs())]
        return mine + newest_first(session.layout().runs)

    def nodes(run: str) -> list[str]:
        from rho_notebook.notebook.api import call

        try:
            return sorted(call(session.service.status(run)).nodes)
        except (RhoError, OSError):
            return []

    return CompletionSource(workflows=session.workflow_names, plan_ids=plan_ids, run_ids=run_ids, nodes=nodes)


def _magic_text(line: str) -> str | None:
    """The ``%workflow ...`` part of a line (also after ``name = ``), or None."""
    stripped = line.lstrip()
    if stripped.startswith("%"):
        return stripped
    at = line.find("%workflow")
    if at > 0 and line[:at].rstrip().endswith("="):
        return line[at:]
    return None


def _matcher(session: NotebookSession) -> Any:
    from IPython.core.completer import CompletionContext, SimpleCompletion, context_matcher

    source = _completion_source(session)

    @context_matcher(identifier="rho_notebook.workflow")  # type: ignore[untyped-decorator]
    def workflow_matcher(context: CompletionContext) -> dict[str, Any]:
        text = _magic_text(context.text_until_cursor)
        if text is None or (text.startswith("%%") and context.cursor_line != 0):
            return {"completions": [], "suppress": False}
        found = complete_line(text, source)
        if found is None:
            return {"completions": [], "suppress": False}
        return {
            "completions": [SimpleCompletion(name, type="workflow") for name in found.completions],
            "matched_fragment": found.fragment,
            "suppress": bool(found.completions),
            "ordered": True,
        }

    return workflow_matcher


def load_ipython_extension(ipython: Any) -> None:
    """Register the workflow magics and completions on ``ipython`` (idempotent)."""
    if ipython in _loaded:
        return
    from rho_notebook.notebook.magics import WorkflowMagics
    from rho_notebook.service.planning import use_warm_planner

    use_warm_planner()  # a kernel plans again and again: keep one planning worker warm
    session = NotebookSession()
    magics = WorkflowMagics(ipython, session=session)
    previous = ipython.magics_manager.magics["cell"].get("script")
    if previous is not None:
        _shadowed[ipython] = previous
    ipython.register_magics(magics)
    matcher = _matcher(session)
    completer = getattr(ipython, "Completer", None)
    if completer is not None:
        completer.custom_matchers.append(matcher)
    _loaded[ipython] = (magics, matcher, _install_flow_hooks(session))


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the magics and the matcher that :func:`load_ipython_extension` registered."""
    found = _loaded.pop(ipython, None)
    if found is None:
        return
    magics, matcher, installed = found
    magics.release()
    _uninstall_flow_hooks(installed)
    manager = ipython.magics_manager
    for kind, names in _MAGIC_NAMES.items():
        table = manager.magics[kind]
        for name in names:
            bound = table.get(name)
            if bound is not None and getattr(bound, "__self__", None) is magics:
                del table[name]
    manager.registry.pop(type(magics).__name__, None)
    previous = _shadowed.pop(ipython, None)
    if previous is not None and "script" not in manager.magics["cell"]:
        manager.magics["cell"]["script"] = previous
    completer = getattr(ipython, "Completer", None)
    if completer is not None and matcher in completer.custom_matchers:
        completer.custom_matchers.remove(matcher)


def current_session(ipython: Any = None) -> NotebookSession:
    """The session of the extension loaded in ``ipython`` (default: the running shell).

    Raises
    ------
    RuntimeError
        The extension is not loaded there (run ``%load_ext rho_notebook``).
    """
    if ipython is None:
        from IPython import get_ipython

        ipython = get_ipython()
    found = _loaded.get(ipython) if ipython is not None else None
    if found is None:
        msg = "the rho_notebook extension is not loaded in this shell; run %load_ext rho_notebook"
        raise RuntimeError(msg)
    session: NotebookSession = found[0].session
    return session
