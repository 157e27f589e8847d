"""The static manifest of a workflow tree: what :meth:`Workflow.compile` returns, without a model call.

The manifest is JSON data::

    {
      "format": "rho-flow-manifest/1",
      "root": "review_flow",                 # the key prefix (the flow's name in snake case)
      "modules": [                           # depth-first pre-order
        {"path": "review_flow", "class": "ReviewFlow", "description": "",
         "agents": ["writer"], "children": ["research"]}, ...],
      "agents": [                            # every AgentParam, in module order then by attribute
        {"path": "review_flow.writer", "module": "review_flow", "attribute": "writer",
         "agent": null, "system": "Write a first draft.",
         "provider": {"name": "local", "model": "m", "credential_ref": "settings:providers.local"},
         "definition_digest": "sha256:..."}, ...],
      "dynamic": [                           # every Selector: compile cannot know its choice
        {"path": "review_flow.route", "kind": "selector", "reason": "...",
         "candidates": [{"path": "review_flow.triage", "class": "Agent", "description": "..."}]}]
    }

``provider`` is a snapshot of the placement with the credential *reference* only (this layer reads
no settings and never sees a key): ``settings:providers.NAME`` is the credential the settings
give that provider (its ``api_key_env`` or auth profile), ``settings:default_provider`` the default
provider's; null for a catalog agent (``"agent": ID``), whose definition names its provider and
model (``name`` and ``model`` are null too: validate resolves them through the catalog). ``definition_digest`` is :meth:`AgentParam.digest`: sha256 of the canonical JSON of
``{"agent", "system"}``, so an edited prompt changes it and a new placement does not. A candidate
not registered in the tree has ``"path": null``.

:meth:`Workflow.compile` returns a :class:`CompiledWorkflow`, OpenRath's shape: ``.manifest`` (a
:class:`FlowManifest` with ``provider_models()`` and ``provider_kinds()``), ``.validate()``, use as a
context manager, and a call that runs the current workflow. It *is* also the JSON data above (a
``dict`` subclass), so code that reads ``workflow.compile()["agents"]`` or encodes it as JSON keeps
working. :func:`compile_manifest` still gives the plain dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rho_notebook.flow import keys
from rho_notebook.flow.module import AgentParam, Workflow
from rho_notebook.flow.presets import Selector
from rho_notebook.flow.providers import KINDS, known_providers
from rho_notebook.flow.session import Session

__all__ = ["MANIFEST_FORMAT", "AgentResource", "CompiledWorkflow", "DynamicNode", "FlowManifest", "compile_manifest"]

MANIFEST_FORMAT = "rho-flow-manifest/1"


def compile_manifest(workflow: Workflow, *, name: str | None = None) -> dict[str, Any]:
    """The manifest of ``workflow``'s tree, its paths prefixed by ``name`` (default: the class name),
    both in snake case as step keys have them."""
    if not isinstance(workflow, Workflow):
        msg = f"compile_manifest takes a Workflow, got {type(workflow).__name__}"
        raise TypeError(msg)
    root = keys.root_name(name if name is not None else type(workflow).__name__)
    named = workflow.named_modules()
    paths = {id(module): _join(root, path) for path, module in named}
    modules: list[dict[str, Any]] = []
    agents: list[dict[str, Any]] = []
    dynamic: list[dict[str, Any]] = []
    for path, module in named:
        where = _join(root, path)
        modules.append(
            {
                "path": where,
                "class": type(module).__name__,
                "description": module.description,
                "agents": [attribute for attribute, _ in module.named_agents()],
                "children": [attribute for attribute, _ in module.named_children()],
            }
        )
        agents.extend(_agent(where, attribute, param) for attribute, param in module.named_agents())
        if isinstance(module, Selector):
            dynamic.append(
                {
                    "path": where,
                    "kind": "selector",
                    "reason": "a Selector chooses its next workflow at run time from the model's answer",
                    "candidates": [
                        {"path": paths.get(id(c)), "class": type(c).__name__, "description": c.description}
                        for c in module.candidates
                    ],
                }
            )
    return {"format": MANIFEST_FORMAT, "root": root, "modules": modules, "agents": agents, "dynamic": dynamic}


def _agent(module: str, attribute: str, param: AgentParam) -> dict[str, Any]:
    reference: str | None
    if param.agent is not None:
        reference = None
    elif param.provider is not None:
        reference = f"settings:providers.{param.provider}"
    else:
        reference = "settings:default_provider"
    return {
        "path": f"{module}.{attribute}",
        "module": module,
        "attribute": attribute,
        "agent": param.agent,
        "system": param.system,
        "provider": {"name": param.provider, "model": param.model, "credential_ref": reference},
        "definition_digest": param.digest(),
    }


def _join(root: str, path: str) -> str:
    return f"{root}.{path}" if path else root


@dataclass(frozen=True)
class AgentResource:
    """One registered agent as compile saw it (OpenRath's ``AgentResource``)."""

    path: str
    """The agent's module path, its step keys' prefix (``review.writer``)."""
    agent: str | None
    """A catalog agent's id, or None for an inline prompt."""
    provider: str | None
    """The provider's name in settings; None: the default provider (or a catalog agent's own)."""
    model: str | None
    kind: str | None
    """The provider's kind from this process's provider table at compile time; None when unknown."""
    credential_ref: str | None
    definition_digest: str
    agent_session_id: str
    """The id of the AgentParam's ``agent_session``."""
    has_memory: bool = False
    """Always False: agents here keep no memory store between calls (the session is the memory)."""


@dataclass(frozen=True)
class DynamicNode:
    """A module whose runtime target compile cannot predict (OpenRath's ``DynamicNode``)."""

    path: str
    kind: str
    reason: str


class FlowManifest:
    """The compiled manifest: the JSON data (:attr:`data`) with OpenRath's accessors."""

    def __init__(self, data: Mapping[str, Any], *, resources: tuple[AgentResource, ...]) -> None:
        self.data = dict(data)
        self.root: str = str(data["root"])
        self.agents = resources
        self.dynamic = tuple(DynamicNode(str(d["path"]), str(d["kind"]), str(d["reason"])) for d in data["dynamic"])

    def provider_models(self) -> dict[str, str | None]:
        """``{agent path: model}``; None where settings' default model (or a catalog agent's
        definition) decides."""
        return {a.path: a.model for a in self.agents}

    def provider_kinds(self) -> dict[str, str | None]:
        """``{agent path: provider kind}`` from the provider table known at compile time; None where
        it is not known here (no table, the default provider, a catalog agent)."""
        return {a.path: a.kind for a in self.agents}

    def to_json(self) -> dict[str, Any]:
        """The manifest's JSON data (a copy)."""
        return dict(self.data)

    def __repr__(self) -> str:
        return f"FlowManifest(root={self.root!r}, agents={len(self.agents)}, dynamic={len(self.dynamic)})"


class CompiledWorkflow(dict[str, Any]):
    """A workflow compiled without a model call: ``workflow.compile()``.

    As a dict it is the manifest's JSON data (this module's docstring), as before; as OpenRath's
    ``CompiledWorkflow`` it has :attr:`manifest`, :meth:`validate`, use as a context manager, and
    calling it runs the current :attr:`workflow` (the manifest is a snapshot: recompile after
    changing the tree or a placement).
    """

    def __init__(self, workflow: Workflow, *, name: str | None = None) -> None:
        data = compile_manifest(workflow, name=name)
        super().__init__(data)
        self.workflow = workflow
        self.manifest = FlowManifest(data, resources=_resources(workflow, data))

    def validate(self) -> list[str]:
        """The problems this process can see offline, ``"PATH: what"``; empty when none.

        Intentionally narrow, as OpenRath's: each inline agent's provider must be in the process's
        provider table (:func:`~rho_notebook.flow.use_providers`) and of a known kind. Credentials,
        models and catalog agents need settings: ``rho-notebook validate FILE.py --flow NAME``
        checks them all. Without a provider table the one problem says so."""
        table = known_providers()
        if table is None:
            return [
                f"{self.manifest.root}: no provider table in this process, so providers cannot be checked here; "
                "install one with rho_notebook.flow.use_providers({name: kind}) or run "
                "`rho-notebook validate FILE.py --flow NAME`"
            ]
        problems = []
        known = ", ".join(sorted(table)) or "none"
        for agent in self.manifest.agents:
            if agent.agent is not None or agent.provider is None:
                continue
            kind = table.get(agent.provider)
            if kind is None:
                problems.append(
                    f"{agent.path}: provider {agent.provider!r} is not defined in settings (providers: {known})"
                )
            elif kind not in KINDS:
                problems.append(f"{agent.path}: provider kind {kind!r} is not known (known kinds: {', '.join(KINDS)})")
        return problems

    def __call__(self, session: Session) -> Session:
        """``workflow(session)`` on the current workflow."""
        return self.workflow(session)

    def __enter__(self) -> CompiledWorkflow:
        """``self``: there are no memory stores to acquire (agents keep none), so entering and
        leaving do nothing else."""
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        return None

    def __repr__(self) -> str:
        return f"CompiledWorkflow({type(self.workflow).__name__}, {self.manifest!r})"


def _resources(workflow: Workflow, data: Mapping[str, Any]) -> tuple[AgentResource, ...]:
    """The :class:`AgentResource` of every agent of ``data`` (the manifest of ``workflow``)."""
    params: dict[str, AgentParam] = {}
    root = str(data["root"])
    for path, module in workflow.named_modules():
        for attribute, param in module.named_agents():
            params.setdefault(f"{_join(root, path)}.{attribute}", param)
    table = known_providers() or {}
    found = []
    for item in data["agents"]:
        param = params[item["path"]]
        provider = item["provider"]
        found.append(
            AgentResource(
                path=item["path"],
                agent=item["agent"],
                provider=provider["name"],
                model=provider["model"],
                kind=None if provider["name"] is None else table.get(provider["name"]),
                credential_ref=provider["credential_ref"],
                definition_digest=item["definition_digest"],
                agent_session_id=param.agent_session.id,
            )
        )
    return tuple(found)
