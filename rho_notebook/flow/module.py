"""Workflow modules: :class:`Workflow`, its :class:`AgentParam` leaves, and :class:`EmptyWorkflow`.

As in OpenRath (and PyTorch's ``Module``), a workflow is a callable over sessions whose tree is
built by attribute assignment: assigning an :class:`AgentParam` registers an agent leaf, assigning
a :class:`Workflow` registers a child; ``del`` or assigning something else removes the entry. The
tree is what :meth:`Workflow.modules`, ``repr`` and :meth:`Workflow.compile` show and what step
keys are built from (:mod:`rho_notebook.flow.keys`); what runs, and in which order, is only what
``forward`` says.

:func:`run_flow` calls a root workflow under a name (``--flow NAME``); ``workflow(session)`` on a
session that is not inside a running flow does the same with the class name in snake case.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from rho_notebook.flow import keys
from rho_notebook.flow._errors import FlowError
from rho_notebook.flow.backend import in_run
from rho_notebook.flow.providers import resolve_provider
from rho_notebook.flow.session import Session

if TYPE_CHECKING:
    from rho_notebook.flow.manifest import CompiledWorkflow

__all__ = ["AgentParam", "Workflow", "EmptyWorkflow", "run_flow"]


class AgentParam:
    """One agent of a workflow: a definition (a catalog agent or an inline system prompt) and its
    placement (provider and model).

    Parameters
    ----------
    agent
        The id of an agent in the workspace's catalog (``rho-notebook agents``); its calls are agent
        steps inside a run, on the provider and model its definition names (so it takes no
        ``provider``/``model`` here, and :meth:`Workflow.to` passes it by). Or, as in OpenRath,
        an agent session (``Session.from_agent_prompt("...")``): its system messages are the
        inline prompt. Give ``agent`` or ``system``, not both.
    provider
        A provider's name in settings; None: the settings' default provider.
    system
        An inline system prompt; its calls are model steps.
    model
        A model name or ``@alias``; None: the settings' default model.
    """

    def __init__(
        self,
        agent: str | Session | None = None,
        provider: str | None = None,
        *,
        system: str | None = None,
        model: str | None = None,
    ) -> None:
        if isinstance(agent, Session):
            if system is not None:
                msg = "AgentParam takes an agent session or system='...', not both"
                raise ValueError(msg)
            system = _prompt_of(agent)
            agent = None
        if (agent is None) == (system is None):
            msg = "AgentParam takes a catalog agent id (AgentParam('reviewer')) or an inline prompt (system='...'), exactly one"
            raise ValueError(msg)
        for name, value in (("agent", agent), ("system", system), ("provider", provider), ("model", model)):
            if value is not None and (not isinstance(value, str) or not value):
                msg = f"AgentParam {name}= must be non-empty text or None, got {value!r:.60}"
                if name == "provider":
                    msg += " (a provider is the name of a provider in settings, e.g. 'local'; credentials stay in settings)"
                raise TypeError(msg)
        if agent is not None and (provider is not None or model is not None):
            msg = f"catalog agent {agent!r} runs on the provider and model its definition names; drop provider=/model= or set them in its definition file"
            raise ValueError(msg)
        self.agent = agent
        self.system = system
        self.provider = provider
        self.model = model
        self._session: Session | None = None

    @property
    def agent_session(self) -> Session:
        """The agent's own session (OpenRath's ``agent_param.agent_session``): the system prompt of
        an inline agent, nothing for a catalog agent. The same session every time; passed to
        :func:`~rho_notebook.flow.run_session_loop` it stands for this AgentParam, so the call has
        the same step key and digest as ``run_session_loop(session, param)``."""
        held = None if self._session is None else "\n\n".join(m.content for m in self._session.messages) or None
        if self._session is None or held != self.system:
            prompt = Session() if self.system is None else Session.from_agent_prompt(self.system)
            self._session = prompt.owned_by(self)
        return self._session

    def to(self, provider: str | None = None, *, model: str | None = None) -> AgentParam:
        """Place this agent on ``provider`` and/or ``model`` (what is None stays); ``self``, for chaining.

        The provider is a name in settings, resolved now, as OpenRath's ``to(provider="main")``
        reads its configuration during ``.to``: when the process knows its providers
        (:func:`~rho_notebook.flow.use_providers`, or the host's table in a flow subprocess), an
        unknown name raises :class:`~rho_notebook.flow.FlowError` here, naming the known ones;
        otherwise ``validate`` checks it before the run. A catalog agent cannot be placed (its
        definition places it): ValueError."""
        if self.agent is not None and (provider is not None or model is not None):
            msg = f"catalog agent {self.agent!r} runs on the provider and model its definition names; place it there"
            raise ValueError(msg)
        if provider is not None:
            name = _name(provider, "to(provider=...)")
            self.provider = resolve_provider(name, where=f"{self!r}.to(provider={name!r})")
        if model is not None:
            self.model = _name(model, "to(model=...)")
        return self

    def definition(self) -> dict[str, Any]:
        """What the agent is, without its placement: ``{"agent": ID | None, "system": TEXT | None}``."""
        return {"agent": self.agent, "system": self.system}

    def digest(self) -> str:
        """``sha256:`` of the canonical JSON (sorted keys, no spaces, UTF-8) of :meth:`definition`."""
        data = json.dumps(self.definition(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()

    def __repr__(self) -> str:
        what = f"agent={self.agent!r}" if self.agent is not None else f"system={_short(self.system or '')!r}"
        placed = "".join(f", {n}={v!r}" for n, v in (("provider", self.provider), ("model", self.model)) if v)
        return f"AgentParam({what}{placed})"


class Workflow:
    """A module over sessions: ``forward(session) -> Session``, with registered agents and children.

    Subclasses define :meth:`forward` and assign their :class:`AgentParam` leaves and child
    workflows as attributes (calling ``super().__init__()`` is good practice; registration works
    without it). ``description`` is routing text a :class:`~rho_notebook.flow.Selector` shows.
    """

    description: str = ""

    def __init__(self, *, description: str | None = None) -> None:
        self._registry()
        if description is not None:
            self.description = description

    def _registry(self) -> tuple[dict[str, AgentParam], dict[str, Workflow]]:
        found = self.__dict__.get("_agents")
        if found is None:
            object.__setattr__(self, "_agents", {})
            object.__setattr__(self, "_children", {})
        agents: dict[str, AgentParam] = self.__dict__["_agents"]
        children: dict[str, Workflow] = self.__dict__["_children"]
        return agents, children

    def __setattr__(self, name: str, value: Any) -> None:
        agents, children = self._registry()
        if isinstance(value, AgentParam):
            children.pop(name, None)
            agents[name] = value
        elif isinstance(value, Workflow):
            agents.pop(name, None)
            children[name] = value
        else:
            agents.pop(name, None)
            children.pop(name, None)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        object.__delattr__(self, name)
        agents, children = self._registry()
        agents.pop(name, None)
        children.pop(name, None)

    # -- the tree -------------------------------------------------------------------------------

    def named_agents(self) -> tuple[tuple[str, AgentParam], ...]:
        """This node's own AgentParams, ``(attribute, param)`` sorted by attribute name."""
        return tuple(sorted(self._registry()[0].items()))

    def named_children(self) -> tuple[tuple[str, Workflow], ...]:
        """This node's direct child workflows, ``(attribute, child)`` in assignment order."""
        return tuple(self._registry()[1].items())

    def named_modules(self) -> list[tuple[str, Workflow]]:
        """This workflow (path ``""``) and every descendant, ``(dotted path, module)``, depth-first
        pre-order (children in assignment order); a module reachable twice is listed once, first."""
        found: list[tuple[str, Workflow]] = []
        seen: set[int] = set()

        def visit(path: str, module: Workflow) -> None:
            if id(module) in seen:
                return
            seen.add(id(module))
            found.append((path, module))
            for name, child in module.named_children():
                visit(f"{path}.{name}" if path else name, child)

        visit("", self)
        return found

    def modules(self) -> list[Workflow]:
        """This workflow followed by all descendants, depth-first pre-order."""
        return [module for _, module in self.named_modules()]

    def to(self, provider: str | None = None, *, model: str | None = None) -> Workflow:
        """Place this node's own inline agents (not its children's: iterate :meth:`modules` for the
        tree; catalog agents keep their definition's placement); ``self``. The provider is
        resolved now, as :meth:`AgentParam.to` does, even when this node has no agents."""
        if provider is not None:
            name = _name(provider, "to(provider=...)")
            resolve_provider(name, where=f"{type(self).__name__}.to(provider={name!r})")
        for _, param in self.named_agents():
            if param.agent is None:
                param.to(provider, model=model)
        return self

    def compile(self, *, name: str | None = None) -> CompiledWorkflow:
        """This tree compiled without a model call: a :class:`~rho_notebook.flow.CompiledWorkflow`,
        which is also the manifest's JSON data as a dict (:func:`rho_notebook.flow.compile_manifest`)."""
        from rho_notebook.flow.manifest import CompiledWorkflow

        return CompiledWorkflow(self, name=name)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}("]
        for name, param in self.named_agents():
            lines.append(f"  ({name}): {param!r}")
        for name, child in self.named_children():
            nested = repr(child).splitlines()
            lines.append(f"  ({name}): {nested[0]}")
            lines.extend(f"  {line}" for line in nested[1:])
        if len(lines) == 1:
            return f"{type(self).__name__}()"
        lines.append(")")
        return "\n".join(lines)

    # -- running --------------------------------------------------------------------------------

    def forward(self, session: Session) -> Session:
        """The workflow's logic; subclasses define it."""
        msg = f"{type(self).__name__} defines no forward(session); a Workflow subclass must"
        raise NotImplementedError(msg)

    def __call__(self, session: Session) -> Session:
        """``forward(session)``; called on a session outside any running flow it is a root call
        (:func:`run_flow` under the class name in snake case)."""
        if not isinstance(session, Session):
            msg = f"{type(self).__name__}(...) takes a Session, got {type(session).__name__}"
            raise TypeError(msg)
        if keys.inside_flow(session):
            return self.forward(session)
        return run_flow(self, session)


class EmptyWorkflow(Workflow):
    """The identity workflow: no match from a :class:`~rho_notebook.flow.Selector`, or a finished loop."""

    def forward(self, session: Session) -> Session:
        return session


def run_flow(workflow: Workflow, session: Session, *, name: str | None = None) -> Session:
    """Call ``workflow`` as the root of a flow: a new key book named ``name`` (default: the class
    name in snake case; inside a run a name used before in this process gets ``_2``, ...).

    Returns
    -------
    Session
        What ``forward`` returned.
    """
    if not isinstance(workflow, Workflow):
        msg = f"run_flow takes a Workflow, got {type(workflow).__name__}"
        raise TypeError(msg)
    if not isinstance(session, Session):
        msg = f"run_flow takes a Session, got {type(session).__name__}"
        raise TypeError(msg)
    root = keys.root_name(name if name is not None else type(workflow).__name__)
    with keys.rooted(workflow, name=root, unique=in_run) as book:
        bound = session.bound_to(book)
        result = workflow.forward(bound)
    if result is bound:
        return session  # an identity flow gives back the very session it was given
    if not isinstance(result, Session):
        msg = f"{type(workflow).__name__}.forward returned {type(result).__name__}, not a Session"
        raise FlowError(msg)
    return result


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        msg = f"{where} must be a non-empty name, got {value!r:.60}"
        if not isinstance(value, str) and value is not None:
            msg += " (a provider is the name of a provider in settings, e.g. 'local'; credentials stay in settings)"
        raise TypeError(msg)
    return value


def _prompt_of(session: Session) -> str:
    """The inline prompt an agent session holds: its system messages, joined by blank lines."""
    roles = {m.role for m in session.messages}
    if not session.messages or roles != {"system"}:
        msg = (
            "an agent session holds only the agent's prompt as system messages "
            f"(Session.from_agent_prompt('...')); this one has roles {sorted(roles) or 'none'}"
        )
        raise ValueError(msg)
    return "\n\n".join(m.content for m in session.messages)


def _short(text: str, limit: int = 40) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
