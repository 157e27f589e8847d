"""Flow plans (docs/flows.md): compiling a flow module's workflow into its manifest, and checking
that manifest before anything runs.

:func:`compile_flow` runs the frozen interpreter on the plan's frozen modules with the harness's
``--flow-compile`` mode: the flow module is imported (its top-level code runs, as it will in the
run), the workflow is instantiated and its ``compile()`` manifest printed as JSON. No model is
called. :func:`check_manifest` then checks what the run will need, offline:

``flow.provider`` (error)
    An agent's provider is not defined in settings, or it names none and settings set no
    ``default_provider``.
``flow.provider_kind`` (error)
    A provider's kind (its settings ``type``, or the kind written in the flow) is not one this
    installation speaks (``openai``, ``anthropic``).
``flow.credential`` (error)
    The credential reference (an environment variable name, directly or through an auth profile)
    is not a variable name, names an auth profile settings do not define, or is not set in this
    environment. Only the name is ever read from the manifest; the value is never stored.
``flow.model`` (error)
    An agent names no model and settings set no ``default_model``.
``flow.agent`` (error)
    An agent id is not found in the agent catalog (the flow's ``agents/`` folder, the project's
    ``.rho/agents``, the user's agents, the built-ins).

Every finding's message starts with the module path of the agent it is about
(``support.router: ...``), so the author knows which attribute to fix.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from rho_notebook.agents.catalog import resolve_agent
from rho_notebook.agents.settings import AgentSettings, ProviderSettings, load_settings
from rho_notebook.errors import Diagnostic, InvalidWorkflow
from rho_notebook.flow import PROVIDERS_VARIABLE
from rho_notebook.model.graph import Graph
from rho_notebook.planning._findings import Finding
from rho_notebook.planning.request import PlanRequest
from rho_notebook.planning.script import FLOW_INPUTS, freeze_script, parse_inputs_declaration
from rho_notebook.planning.seal import FrozenGraph
from rho_notebook.source.limits import Limits, load_limits
from rho_notebook.source.pymodules import HARNESS_PATH, raised_in_modules

__all__ = [
    "COMPILE_TIMEOUT_S",
    "FlowCheck",
    "check_flow",
    "check_manifest",
    "compile_flow",
    "manifest_agents",
    "to_graph",
]

COMPILE_TIMEOUT_S = 60.0
"""How long importing the flow module and compiling its workflow may take."""

_KINDS = ("openai", "anthropic")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PACKAGE_DIR = Path(__file__).resolve().parents[2]
"""The folder holding this ``rho_notebook`` package (appended to the flow interpreter's path when it has none)."""
_COMPILE_ENV = {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}


@dataclass(frozen=True)
class FlowCheck:
    """What ``validate FILE.py --flow NAME`` shows: the compiled manifest and its findings."""

    flow: str
    manifest: dict[str, Any]
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")


def _write_modules(folder: Path, graph: Graph) -> None:
    for module in graph.python_modules:
        path = folder.joinpath(*PurePosixPath(module.label.removeprefix("//")).parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(module.text, encoding="utf-8")


def compile_flow(
    graph: Graph, *, display: str, cwd: Path, providers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The ``compile()`` manifest of the flow ``graph.script.flow``, computed by the graph's frozen
    interpreter in a subprocess (``_py_harness.py --flow-compile``) from the frozen modules.
    ``providers`` (settings' ``{name: type}``) goes to the subprocess as ``$RHO_FLOW_PROVIDERS``, so
    a ``.to(provider=NAME)`` in the module fails where it is written (docs/flows.md).

    Raises
    ------
    InvalidWorkflow
        ``flow.compile``: the module or ``compile()`` raised (the traceback's last lines are in
        the message), the name is not a workflow, or the answer is not a JSON manifest.
    """
    spec, runtime = graph.script, graph.python
    if spec is None or spec.flow is None or runtime is None:
        msg = f"workflow {graph.name!r} is not a flow plan; plan it with --flow NAME"
        raise InvalidWorkflow([Diagnostic(rule="flow.compile", message=msg, file=display)])
    with tempfile.TemporaryDirectory(prefix="rho-flow-compile-") as tmp:
        folder = Path(tmp)
        modules = folder / "modules"
        modules.mkdir()
        _write_modules(modules, graph)
        harness = folder / "_rho_harness.py"
        shutil.copyfile(HARNESS_PATH, harness)
        request = {
            "script": spec.module,
            "flow": spec.flow,
            "sys_path": list(runtime.sys_path),
            "site_dirs": list(runtime.site_dirs),
            "package_dir": str(_PACKAGE_DIR),
        }
        (folder / "request.json").write_text(json.dumps(request), encoding="utf-8")
        argv = [
            runtime.interpreter.file.path,
            "-I",
            str(harness),
            "--flow-compile",
            str(modules),
            str(folder / "request.json"),
        ]
        try:
            done = subprocess.run(
                argv,
                env=_COMPILE_ENV
                if providers is None
                else {**_COMPILE_ENV, PROVIDERS_VARIABLE: json.dumps(dict(providers), sort_keys=True)},
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=COMPILE_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            msg = f"compiling flow {spec.flow} did not finish within {COMPILE_TIMEOUT_S:.0f} s (does the module's top-level code wait for something?)"
            raise InvalidWorkflow([Diagnostic(rule="flow.compile", message=msg, file=display)]) from None
        except OSError as err:
            msg = f"the interpreter {argv[0]} could not be started to compile flow {spec.flow}: {err.strerror or err}"
            raise InvalidWorkflow([Diagnostic(rule="flow.compile", message=msg, file=display)]) from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        refusal = _harness_refusal(lines, spec.module, spec.flow)
        tail, frames = (refusal, []) if refusal else raised_in_modules(lines, modules)
        inner = frames[-1] if frames else None
        where = "" if inner is None or inner[0] == spec.module else f" (raised at {inner[0]}:{inner[1]})"
        msg = f"flow {spec.flow} of {spec.module} does not compile (exit {done.returncode}): {tail}{where}"
        at = next((line for label, line in reversed(frames) if label == spec.module), None)
        raise InvalidWorkflow([Diagnostic(rule="flow.compile", message=msg, file=display, line=at)])
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        manifest = json.loads(lines[-1]) if lines else None
    except ValueError:
        manifest = None
    if not isinstance(manifest, dict):
        shown = done.stdout[-200:].decode("utf-8", "replace")
        msg = f"compiling flow {spec.flow} gave no JSON manifest (its last output: {shown!r})"
        raise InvalidWorkflow([Diagnostic(rule="flow.compile", message=msg, file=display)])
    return manifest


def _harness_refusal(lines: list[str], module: str, flow: str) -> str | None:
    """The harness's own refusal of the flow's name (its ``LookupError: //m.py: NAME is ...``),
    without the harness's traceback above it: the frames are ours, not the author's. (The
    harness is frozen in plans by digest, so its wording stays as it is: tests/cli/test_old_store.py.)"""
    last = lines[-1] if lines else ""
    prefix = f"LookupError: {module}: {flow} is "
    return last.removeprefix("LookupError: ") if last.startswith(prefix) else None


def manifest_agents(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The agent resources of a manifest, each a dict with at least ``path``."""
    agents = manifest.get("agents")
    if not isinstance(agents, list):
        return []
    return [a for a in agents if isinstance(a, dict) and isinstance(a.get("path"), str)]


def _placement(agent: Mapping[str, Any]) -> tuple[str | None, str | None, str | None, str | None]:
    """(provider name, kind, model, credential reference) of an agent resource as the flow wrote
    them; None where it leaves them to settings. ``provider`` is the manifest's snapshot
    ``{"name", "model", "credential_ref"}`` (a kind, when a flow writes one, is ``kind``)."""
    provider = agent.get("provider")
    if isinstance(provider, str):
        return provider, None, None, None
    if not isinstance(provider, Mapping):
        return None, None, None, None

    def text(key: str) -> str | None:
        value = provider.get(key)
        return value if isinstance(value, str) and value else None

    return text("name"), text("kind"), text("model"), text("credential_ref")


def _credential_problems(
    reference: str | None, entry: ProviderSettings | None, *, settings: AgentSettings, environ: Mapping[str, str]
) -> list[str]:
    """What keeps the credential reference from resolving offline: ``env:NAME`` names a variable
    directly; ``settings:...`` (or none) is the provider's ``api_key_env`` or auth profile."""
    if reference is not None and not reference.startswith(("settings:", "env:")):
        return [f"credential reference {reference!r} is neither settings:... nor env:NAME"]
    variable = None
    if reference is not None and reference.startswith("env:"):
        variable = reference.removeprefix("env:")
    elif entry is not None:
        variable = entry.api_key_env
        if variable is None and entry.auth_profile is not None:
            profile = settings.auth_profiles.get(entry.auth_profile)
            if profile is None:
                return [f"auth profile {entry.auth_profile!r} is not defined in settings ({settings.where()})"]
            variable = profile.api_key_env
    if variable is None:
        return []  # a provider without a key (a local server)
    if _ENV_NAME.fullmatch(variable) is None:
        return [f"credential reference {variable!r} is not an environment variable name"]
    if not environ.get(variable):
        return [f"credential environment variable {variable} is not set; set it before running the flow"]
    return []


def _attribute_lines(source: str | None, flow: str | None) -> tuple[dict[str, tuple[int, int]], tuple[int, int]]:
    """(line, column) of the first ``X.NAME = ...`` (``self.writer = AgentParam(...)``) of each
    NAME in ``source``: where a flow places the module at that attribute path; and of the
    top-level class or assignment named ``flow`` ((1, 1) when there is none, or the text does not
    parse: it was compiled, so it does)."""
    try:
        tree = ast.parse(source or "")
    except SyntaxError:
        return {}, (1, 1)
    found: dict[str, tuple[int, int]] = {}
    for node in ast.walk(tree):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Attribute):
                at = (target.lineno, target.col_offset + 1)
                found[target.attr] = min(found.get(target.attr, at), at)
    defined = next(
        (
            (node.lineno, node.col_offset + 1)
            for node in tree.body
            if (isinstance(node, ast.ClassDef) and node.name == flow)
            or (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == flow for t in node.targets))
            or (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == flow)
        ),
        (1, 1),
    )
    return found, defined


def check_manifest(
    manifest: Mapping[str, Any],
    *,
    settings: AgentSettings,
    environ: Mapping[str, str],
    display: str,
    workflow_dir: Path | None,
    workspace: Path,
    user_home: Path,
    overlay_agents: Mapping[str, tuple[str, str]] | None = None,
    source: str | None = None,
    flow: str | None = None,
) -> list[Finding]:
    """Every finding of the rules in this module's docstring, in manifest order; each at the line
    of ``source`` (the flow module's text) that assigns the agent's attribute, else at the
    top-level definition of ``flow`` (a preset instance's agent), else at line 1."""
    found: list[Finding] = []
    assigned, defined = _attribute_lines(source, flow)

    def add(rule: str, path: str, message: str) -> None:
        attributes = path.split(".")[1:]  # the root's name is no attribute
        line, column = next((assigned[a] for a in reversed(attributes) if a in assigned), defined)
        found.append(
            Finding(rule=rule, severity="error", message=f"{path}: {message}", file=display, line=line, column=column)
        )

    where = settings.where()
    for agent in manifest_agents(manifest):
        path = agent["path"]
        name, kind, model, reference = _placement(agent)
        chosen = name or settings.default_provider
        entry = None if chosen is None else settings.providers.get(chosen)
        if chosen is None:
            add("flow.provider", path, f"names no provider and settings set no default_provider ({where})")
        elif entry is None:
            known = ", ".join(sorted(settings.providers)) or "none"
            add("flow.provider", path, f"provider {chosen!r} is not defined in settings (providers: {known}; {where})")
        kind = kind or (None if entry is None else entry.type)
        if kind is not None and kind not in _KINDS:
            add("flow.provider_kind", path, f"provider kind {kind!r} is not known (known kinds: {', '.join(_KINDS)})")
        for problem in _credential_problems(reference, entry, settings=settings, environ=environ):
            add("flow.credential", path, problem)
        if model is None and settings.default_model is None and not agent.get("agent"):
            add("flow.model", path, f"names no model and settings set no default_model ({where}); pass model=")
        agent_id = agent.get("agent")
        if isinstance(agent_id, str) and agent_id:
            try:
                resolve_agent(
                    agent_id,
                    workflow_dir=workflow_dir,
                    workspace=workspace,
                    user_home=user_home,
                    overlay=overlay_agents,
                )
            except InvalidWorkflow as err:
                said = Diagnostic.inline_all(err.diagnostics())
                add("flow.agent", path, f"agent {agent_id!r} is not in the agent catalog: {said}")
    return found


async def _compiled(request: PlanRequest, limits: Limits) -> tuple[FrozenGraph, dict[str, Any], list[Finding]]:
    frozen = await freeze_script(request, limits=limits)
    display = request.entry.display
    settings = await asyncio.to_thread(
        load_settings, request.user_home, request.workspace.root, trusted=request.workspace_trusted
    )
    manifest = await asyncio.to_thread(
        compile_flow, frozen.graph, display=display, cwd=request.workspace.root, providers=settings.provider_kinds()
    )

    def check() -> list[Finding]:
        return check_manifest(
            manifest,
            settings=settings,
            environ=os.environ,
            display=display,
            workflow_dir=request.workflow_dir,
            workspace=request.workspace.root,
            user_home=request.user_home,
            overlay_agents=request.overlay_agents,
            source=request.entry.text,
            flow=request.flow,
        )

    return frozen, manifest, await asyncio.to_thread(check)


async def check_flow(request: PlanRequest, *, limits: Limits | None = None) -> FlowCheck:
    """``validate FILE.py --flow NAME``: freeze and compile the flow and check its manifest; the
    findings are returned, not raised.

    Raises
    ------
    InvalidWorkflow
        The module does not lint, plan or compile (see :func:`to_graph`).
    """
    if request.flow is None:
        msg = "check_flow needs a flow request (request.flow names the Workflow)"
        raise ValueError(msg)
    _, manifest, findings = await _compiled(_with_placeholders(request), limits or load_limits())
    return FlowCheck(flow=request.flow, manifest=manifest, findings=tuple(findings))


_PLACEHOLDERS: dict[str, Any] = {"string": "", "integer": 0, "bool": False, "path": "."}


def _with_placeholders(request: PlanRequest) -> PlanRequest:
    """``request`` with a placeholder for every required input it does not give: ``validate``
    checks the flow, and the inputs only when they are given (as ``validate SCRIPT.py`` does)."""
    entry = request.entry
    declared = parse_inputs_declaration(entry.text, entry.label, display=entry.display) or FLOW_INPUTS
    filled = dict(request.inputs)
    for key, decl in declared.items():
        if key not in filled and decl["required"]:
            filled[key] = decl["choices"][0] if decl["type"] == "enum" else _PLACEHOLDERS[decl["type"]]
    return dataclasses.replace(request, inputs=filled)


async def to_graph(request: PlanRequest, *, limits: Limits) -> FrozenGraph:
    """Freeze the flow module ``request.entry`` with ``ScriptSpec.flow = request.flow``, compile its
    workflow and check the manifest (kept in ``PlanManifest.flow``); nothing is stored here.

    Raises
    ------
    InvalidWorkflow
        Everything :func:`~rho_notebook.planning.script.to_graph` raises; ``flow.name`` when the
        module does not define the name; ``flow.compile`` when it does not compile; and every
        error finding of :func:`check_manifest`.
    """
    frozen, manifest, findings = await _compiled(request, limits)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise InvalidWorkflow([f.diagnostic() for f in errors])
    return dataclasses.replace(frozen, flow=manifest)
