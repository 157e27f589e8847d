"""Workflow modules in Python, OpenRath style, over the script tier: ``from rho_notebook.flow import ...``.

A :class:`Workflow` is a callable over :class:`Session` values; its :class:`AgentParam` leaves and
child workflows register by attribute assignment, and ``forward(session) -> Session`` holds the
orchestration in plain Python (sequence, ``fork()`` and thread pools, loops, :class:`Selector`
routing). The presets :class:`Agent`, :class:`Compressor`, :class:`Selector` and
:class:`EmptyWorkflow` wrap the functions :func:`run_session_loop`, :func:`run_session_compress`
and :func:`select_session`; :meth:`Workflow.compile` gives a :class:`CompiledWorkflow` (the static
manifest, :func:`compile_manifest`, without running a model). OpenRath's shapes run as its docs
show them: ``AgentParam(Session.from_agent_prompt(...), provider)``, ``param.agent_session``,
``run_session_loop(session, agent_session, agent_provider=...)``, ``Session.to("local")``,
``Selector(provider)``, ``param.to(provider="name")`` resolved against :func:`use_providers`.

Inside a run (``rho-notebook run FILE.py --flow NAME``, a ``%%flow`` cell) every model and tool
call is a journaled step of the script tier keyed by its module path, branch and call number
(``team.research.writer/f1#2``, :mod:`rho_notebook.flow.keys`), so a flow resumes, replays,
diverges and halts like any script run. Outside a run, calls go to the backend installed with
:func:`use_backend`. See docs/flows.md.

Like :mod:`rho_notebook.script`, this package imports only the standard library and the script
shim: it runs in the flow's own interpreter.
"""

from __future__ import annotations

from rho_notebook.flow._errors import FlowError
from rho_notebook.flow.backend import Backend, ModelCall, ModelReply, Tool, use_backend
from rho_notebook.flow.keys import KEY
from rho_notebook.flow.manifest import AgentResource, CompiledWorkflow, DynamicNode, FlowManifest, compile_manifest
from rho_notebook.flow.module import AgentParam, EmptyWorkflow, Workflow, run_flow
from rho_notebook.flow.presets import (
    Agent,
    Compressor,
    Selector,
    parse_selection,
    run_session_compress,
    run_session_loop,
    select_session,
)
from rho_notebook.flow.providers import PROVIDERS_VARIABLE, ProviderSource, use_providers
from rho_notebook.flow.session import Message, Session, ToolCall

__all__ = [
    "Workflow",
    "AgentParam",
    "Agent",
    "Compressor",
    "Selector",
    "EmptyWorkflow",
    "Session",
    "Message",
    "ToolCall",
    "Tool",
    "run_flow",
    "run_session_loop",
    "run_session_compress",
    "select_session",
    "parse_selection",
    "compile_manifest",
    "CompiledWorkflow",
    "FlowManifest",
    "AgentResource",
    "DynamicNode",
    "use_providers",
    "ProviderSource",
    "PROVIDERS_VARIABLE",
    "use_backend",
    "Backend",
    "ModelCall",
    "ModelReply",
    "FlowError",
    "KEY",
]
