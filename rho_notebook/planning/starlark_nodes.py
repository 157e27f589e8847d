"""Freezing the node drafts of a Starlark workflow: executables pinned, agents resolved, python
modules and the interpreter frozen, and the per-node planning limits measured (argv, templates).

One method per node kind; every problem is collected as a diagnostic located at the node, so
``validate`` reports all of them at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from rho_notebook.errors import Diagnostic, InvalidWorkflow, PlanError, SourceError
from rho_notebook.model.agent import AgentDefinition
from rho_notebook.model.graph import (
    AgentNode,
    ApprovalNode,
    ArgvPart,
    CommandNode,
    FrozenExecutable,
    Node,
    PythonArg,
    PythonModule,
    PythonNode,
    PythonRuntime,
    ShellNode,
)
from rho_notebook.model.reference import Template
from rho_notebook.planning.budgets import source_budget
from rho_notebook.planning.code_args import code_argument_problem
from rho_notebook.planning.frozen_agents import AgentResolver, frozen_agent, mutating_tools
from rho_notebook.planning.normalize import NodeDraft, is_output_ref, to_output_ref, to_template
from rho_notebook.planning.python import freeze_runtime, frozen_modules, reuse_input
from rho_notebook.planning.request import PlanRequest
from rho_notebook.planning.resolve import Resolver
from rho_notebook.source.limits import Limits
from rho_notebook.source.pymodules import ModuleIndex

__all__ = ["FrozenNodes", "freeze_nodes"]


@dataclass
class FrozenNodes:
    """What freezing the nodes produced."""

    nodes: list[Node]
    agents: dict[str, AgentDefinition]
    found: list[Diagnostic]
    python: PythonRuntime | None = None
    python_modules: tuple[PythonModule, ...] = ()


def _argv_part(raw: Any) -> ArgvPart:
    if isinstance(raw, str):
        return raw
    tmpl = to_template(raw)
    static = tmpl.static_text()
    return static if static is not None else tmpl


def _template_bytes(tmpl: Template) -> int:
    return sum(len(p.encode()) for p in tmpl.parts if isinstance(p, str))


def _common(draft: NodeDraft) -> dict[str, Any]:
    """The fields every node kind has."""
    raw = draft.raw
    return {
        "name": draft.name,
        "needs": draft.needs,
        "when": draft.when,
        "allow_failure": raw.get("allow_failure", False),
        "timeout_seconds": raw["timeout_seconds"],
        "max_output_bytes": raw["max_output_bytes"],
        "output": draft.output,
    }


def _placed(draft: NodeDraft) -> dict[str, Any]:
    """Command, shell and python nodes only (the worker refuses these options on the others)."""
    return {
        "placement": draft.raw.get("placement", "any"),
        "resources": tuple(sorted(draft.raw.get("resources", {}).items())),
    }


@dataclass
class _Freezer:
    """Freezes one draft at a time; diagnostics go to ``found``, agents are resolved once."""

    request: PlanRequest
    resolver: Resolver
    resolve_agent: AgentResolver
    limits: Limits
    index: ModuleIndex
    agents: dict[str, AgentDefinition] = field(default_factory=dict)
    found: list[Diagnostic] = field(default_factory=list)
    static_argv_ok: set[tuple[tuple[str, ...], str | None, str]] = field(default_factory=set)
    """(argv, resolved program, cwd) of the static argvs whose code-argument check passed."""
    kept: dict[str, CommandNode] = field(default_factory=dict)
    """Command nodes an earlier freezing of the same drafts under the same limits made, by name
    (:func:`freeze_nodes`' ``memo``)."""
    same: dict[tuple[int, int], bool] = field(default_factory=dict)
    """Whether a kept node's executable equals this freezing's, by the two objects' ids (the
    resolver gives one object per program and cwd, so this is asked once per program)."""

    def limit(self, draft: NodeDraft, budget: str, measured: int) -> None:
        if measured > self.limits.limit(budget):
            self.found.append(
                draft.diagnostic(
                    f"limit.{budget}",
                    f"planning budget '{budget}' exceeded: accepted limit {self.limits.limit(budget)}, measured {measured} (node {draft.name!r})",
                )
            )

    def __post_init__(self) -> None:
        self.kinds: dict[str, Callable[[NodeDraft], Node | None]] = {
            "agent": self.agent,
            "approval": self.approval,
            "command": self.command,
            "shell": self.shell,
            "python": self.python,
        }

    def freeze(self, draft: NodeDraft) -> Node | None:
        """The frozen node, or None when it is refused (its diagnostics are in ``found``)."""
        kind = self.kinds.get(draft.kind)
        if kind is None:
            return None
        try:
            return kind(draft)
        except InvalidWorkflow as err:
            self.found.extend(err.diagnostics())
        except PlanError as err:
            self.found.append(draft.diagnostic("resolve", err.message))
        return None

    def agent(self, draft: NodeDraft) -> Node | None:
        raw = draft.raw
        agent_id = raw["agent"]
        definition = frozen_agent(agent_id, self.agents, request=self.request, resolve_agent=self.resolve_agent)
        access = raw.get("access", "mutating")
        if access == "read_only" and not definition.is_read_only():
            why = (
                "claude-cli agents are always mutating"
                if definition.runtime == "claude-cli"
                else f"its tools include {', '.join(mutating_tools(definition))}"
            )
            self.found.append(
                draft.diagnostic(
                    "agent.access",
                    f'agent node {draft.name!r} asks for access = "read_only" but agent {agent_id!r} is not read-only: {why}',
                )
            )
            return None
        prompt = to_template(raw["prompt"])
        self.limit(draft, "template_bytes", _template_bytes(prompt) + len(definition.body.encode()))
        reuse = raw.get("reuse", False)
        budget = source_budget(raw.get("budget"), where=f"agent node {draft.name!r}: budget", rule="node.budget")
        return AgentNode(agent=agent_id, prompt=prompt, access=access, reuse=reuse, budget=budget, **_common(draft))

    def approval(self, draft: NodeDraft) -> Node:
        prompt = to_template(draft.raw["prompt"])
        self.limit(draft, "template_bytes", _template_bytes(prompt))
        return ApprovalNode(prompt=prompt, **_common(draft))

    def command(self, draft: NodeDraft) -> Node | None:
        raw, resolver = draft.raw, self.resolver
        cwd = resolver.frozen_dir(raw.get("cwd", "."), node=draft.name)
        kept = self.kept.get(draft.name)
        if kept is not None:  # its argv and their budgets depend on the draft and the limits alone
            argv = kept.argv
        else:
            argv = tuple(_argv_part(p) for p in raw["argv"])
            size = sum(len(p.encode()) if isinstance(p, str) else _template_bytes(p) for p in argv)
            self.limit(draft, "argv_bytes", size)
            self.limit(draft, "argv_items", len(argv))
        executable = resolver.executable(raw["argv"][0], cwd_label=cwd, node=draft.name)
        # An argv of static strings only has no data to become code: the outcome of its check is
        # the same for every node with this argv, program and cwd, so it is worked out once.
        static = all(type(part) is str for part in argv)
        key = (argv, executable.file.path, cwd)
        if static and key in self.static_argv_ok:
            problem = None
        else:
            problem = code_argument_problem(
                argv,
                resolved=executable.file.path,
                lookup=partial(resolver.canonical_name, cwd_label=cwd),
                node=draft.name,
            )
            if static and problem is None:
                self.static_argv_ok.add(key)  # type: ignore[arg-type]  # static: every part is a str
        if problem is not None:
            self.found.append(draft.diagnostic("argv.code", problem.message))
            return None
        if kept is not None and kept.cwd == cwd and self.same_executable(kept.executable, executable):
            return kept
        return CommandNode(argv=argv, cwd=cwd, executable=executable, **_common(draft), **_placed(draft))

    def same_executable(self, kept: FrozenExecutable, found: FrozenExecutable) -> bool:
        key = (id(kept), id(found))
        same = self.same.get(key)
        if same is None:
            same = self.same[key] = kept == found
        return same

    def shell(self, draft: NodeDraft) -> Node:
        raw = draft.raw
        cwd = self.resolver.frozen_dir(raw.get("cwd", "."), node=draft.name)
        arguments = tuple(raw.get("arguments", []))
        size = len(raw["command"].encode()) + sum(len(a.encode()) for a in arguments)
        self.limit(draft, "argv_bytes", size)
        executable = self.resolver.executable(raw["executable"], cwd_label=cwd, node=draft.name)
        return ShellNode(
            executable=executable,
            arguments=arguments,
            command=raw["command"],
            cwd=cwd,
            **_common(draft),
            **_placed(draft),
        )

    def python(self, draft: NodeDraft) -> Node | None:
        try:
            frozen = _python_node(draft, index=self.index, resolver=self.resolver)
        except SourceError as err:  # a module's syntax: said once, however many nodes import it
            self.found.extend(d for d in err.diagnostics() if d not in self.found)
            return None
        if isinstance(frozen, Diagnostic):
            self.found.append(frozen)
            return None
        return frozen


def _python_node(draft: NodeDraft, *, index: ModuleIndex, resolver: Resolver) -> PythonNode | Diagnostic:
    """A python node frozen, or the diagnostic that stops it; a module's syntax error, or a problem
    reading a module it imports, raises SourceError (located in that module, not at the node)."""
    raw = draft.raw
    cwd = resolver.frozen_dir(raw.get("cwd", "."), node=draft.name)
    label, function = raw["module"], raw["function"]
    try:
        module = index.module(label)
    except SourceError as err:
        problem = err.diagnostics()[0]
        if problem.rule == "python.syntax":
            raise
        return draft.diagnostic(problem.rule, f"node {draft.name!r}: module = {label!r}: {problem.message}")
    if not module.defines(function):
        return draft.diagnostic(
            "python.function",
            f"node {draft.name!r}: module {module.source.display} ({label}) defines no top-level {function!r}; "
            f"define it with def {function}(...) or fix function =",
        )
    args = tuple(
        PythonArg(name=name, ref=to_output_ref(value)) if is_output_ref(value) else PythonArg(name=name, value=value)
        for name, value in sorted(raw.get("args", {}).items())
    )
    reuse_inputs = tuple(
        reuse_input(path, workspace=resolver.workspace, node=draft.name) for path in raw.get("reuse_inputs", [])
    )
    return PythonNode(
        module=label,
        function=function,
        args=args,
        cwd=cwd,
        access=raw.get("access", "mutating"),
        modules=index.closure(label),
        reuse=raw.get("reuse", False),
        reuse_inputs=tuple(sorted({f.path: f for f in reuse_inputs}.values(), key=lambda f: f.path)),
        **_common(draft),
        **_placed(draft),
    )


def _with_runtime(frozen: FrozenNodes, drafts: list[NodeDraft], *, freezer: _Freezer) -> FrozenNodes:
    """``frozen`` with the interpreter and the modules its python nodes import (none: unchanged)."""
    python_nodes = [node for node in frozen.nodes if isinstance(node, PythonNode)]
    if not python_nodes or frozen.found:
        return frozen
    first = python_nodes[0].name
    try:
        runtime = freeze_runtime(freezer.request.python_interpreter, resolver=freezer.resolver, node=first)
    except PlanError as err:
        draft = next(d for d in drafts if d.name == first)
        found = [draft.diagnostic("python.interpreter", err.message)]
        return FrozenNodes(nodes=frozen.nodes, agents=frozen.agents, found=found)
    labels = {label for node in python_nodes for label in node.modules}
    frozen.python, frozen.python_modules = runtime, frozen_modules(freezer.index, labels)
    return frozen


def freeze_nodes(
    drafts: list[NodeDraft],
    *,
    request: PlanRequest,
    resolver: Resolver,
    resolve_agent: AgentResolver,
    limits: Limits,
    index: ModuleIndex,
    memo: dict[Any, Any] | None = None,
) -> FrozenNodes:
    """Every draft frozen in name order, with every diagnostic found; blocking (it hashes files
    and may ask a version manager about a shim): run it off the event loop.

    ``memo`` (the evaluation's, whose drafts these are) keeps the command nodes of the last
    freezing that found nothing wrong. Freezing the same drafts under the same limits again (a
    warm process's ``plan`` after ``validate``) still resolves every program and working directory
    and checks every code argument, and takes the kept node, the same object, where its working
    directory and executable came out equal: a command node is a function of its draft, the limits,
    its working directory and its executable. The graph's canonical bytes are then reused too
    (:func:`~rho_notebook.planning.seal.seal`).
    """
    key = ("command nodes", tuple(limits.as_dict().items()))
    kept: dict[str, CommandNode] = memo.get(key, {}) if memo is not None else {}
    freezer = _Freezer(
        request=request, resolver=resolver, resolve_agent=resolve_agent, limits=limits, index=index, kept=kept
    )
    nodes = [node for draft in sorted(drafts, key=lambda d: d.name) if (node := freezer.freeze(draft)) is not None]
    frozen = _with_runtime(
        FrozenNodes(nodes=nodes, agents=freezer.agents, found=freezer.found), drafts, freezer=freezer
    )
    if memo is not None and not frozen.found:
        memo[key] = {node.name: node for node in frozen.nodes if isinstance(node, CommandNode)}
    return frozen
