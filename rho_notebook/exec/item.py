"""The executor for item-graph steps (docs/graphs.md): one attempt of one step, item in, item out.

The step receives the item of the in-edge that delivered (a join: every delivered item merged,
:func:`~rho_notebook.model.itemrun.merge_join`; a step without in-edges: the first item, built from
the run's inputs), resolves its mappings against it, and its value is the item it passes on:

- ``set`` sets top-level fields, ``branch`` and ``output`` pass the item on, ``join`` merges;
- ``code`` replaces it with ``run(item)`` computed in a supervised Starlark worker;
- ``command`` runs the frozen executable (no shell) and adds its stdout, one JSON value, under
  ``into``;
- ``agent`` asks an agent of the frozen catalog and merges the answer's fields over the item;
  ``model`` asks for one completion and adds the text (or the typed answer) under ``into``;
- ``human`` asks a person to fill a form (an approval request of kind ``form``) and merges the
  answer over the item; the attempt waits without a process, and a resumed run waits again.

Every attempt leaves ``input.json`` (the item it received) and ``value.json`` (the item it passed
on); an item over the graph's ``item_bytes`` cap fails the step, naming both sizes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from rho_notebook.agents.completion import complete_once, select_provider
from rho_notebook.agents.provider import CompletionRequest, Message
from rho_notebook.agents.redact import Redactor
from rho_notebook.errors import ItemTooLarge, RhoError, UnavailableValue
from rho_notebook.exec._supervised import Ended, process_spec, supervise
from rho_notebook.exec.base import AttemptContext, AttemptResult
from rho_notebook.exec.command import frozen_process_facts
from rho_notebook.model.agent import agent_launch_facts
from rho_notebook.model.graph import AgentNode, Graph, ItemNode, Node
from rho_notebook.model.itemgraph import FieldDecl, check_item_size
from rho_notebook.model.itemrun import delivered_items, merge_join
from rho_notebook.model.mapping import RunContext, resolve
from rho_notebook.model.reference import Template
from rho_notebook.model.schema import (
    BoolSchema,
    EnumSchema,
    IntegerSchema,
    OptionalSchema,
    RecordSchema,
    Schema,
    StringSchema,
)
from rho_notebook.model.state import NodeState
from rho_notebook.store.files import atomic_write, json_bytes

__all__ = ["ItemExecutor", "answer_schema", "command_argv", "input_item", "item_launch_facts"]


class _StepCancelled(Exception):
    """The attempt was cancelled while its work ran in a task."""


class _StepFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_NODES: dict[int, tuple[Graph, dict[str, Node]]] = {}
"""id(graph) -> (graph, its nodes by name): a run's steps look their sources up by name."""
_NODES_KEPT = 16


def _nodes_of(graph: Graph) -> dict[str, Node]:
    cached = _NODES.get(id(graph))
    if cached is None or cached[0] is not graph:
        if len(_NODES) >= _NODES_KEPT:
            _NODES.clear()
        cached = (graph, {node.name: node for node in graph.nodes})
        _NODES[id(graph)] = cached
    return cached[1]


def input_item(node: ItemNode, graph: Graph, outputs: Any) -> dict[str, Any]:
    """The item ``node`` receives (see the module docstring)."""
    if not node.sources:
        return dict(graph.input_values())  # the first item: one field per declared input
    nodes = _nodes_of(graph)
    delivered = delivered_items(node, nodes, outputs)
    if node.step_kind == "join":
        return merge_join(delivered, nodes)
    if not delivered:
        msg = f"step {node.name!r} started but no in-edge delivered an item"
        raise UnavailableValue(msg)
    value = delivered[0][1]
    return dict(value) if isinstance(value, dict) else {"value": value}


def command_argv(node: ItemNode, item: Any, run: RunContext) -> tuple[str, ...]:
    """A command step's argv with its mappings resolved against ``item`` (values that are not
    text are passed as compact JSON)."""
    parts: list[str] = []
    for index, raw in enumerate(node.params["argv"]):
        value = raw if index == 0 else resolve(raw, item, run)
        parts.append(value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))
    return tuple(parts)


def item_launch_facts(node: ItemNode, graph: Graph, outputs: Any, run: RunContext) -> dict[str, Any]:
    """What a person or a hook decides on before a command or agent step starts: the exact
    process facts (as for a command node), or the agent and its resolved prompt."""
    item = input_item(node, graph, outputs)
    if node.step_kind == "command" and node.executable is not None:
        return frozen_process_facts(node.executable, command_argv(node, item, run), node.cwd)
    prompt = resolve(node.params.get("prompt", ""), item, run)
    facts: dict[str, Any] = {"step": node.step, "kind": node.step_kind}
    if node.agent is not None:
        facts.update(agent_launch_facts(graph.agent(node.agent), access=node.access, prompt=prompt))
    else:  # a model step with its own provider and model
        facts.update(
            access=node.access, provider=node.params.get("provider"), model=node.params.get("model"), prompt=prompt
        )
    return facts


def answer_schema(fields: Mapping[str, Any]) -> Schema:
    """The record schema of an agent or model step's typed ``answer`` fields."""
    entries: list[tuple[str, Schema]] = []
    for name, raw in sorted(fields.items()):
        decl = FieldDecl.model_validate(raw)
        inner: Schema
        if decl.type == "string":
            inner = StringSchema()
        elif decl.type == "integer":
            inner = IntegerSchema()
        elif decl.type == "bool":
            inner = BoolSchema()
        else:
            inner = EnumSchema(members=decl.choices)
        entries.append((name, inner if decl.is_required else OptionalSchema(inner=inner)))
    return RecordSchema(fields=tuple(entries))


def _json_object(text: str, what: str) -> dict[str, Any]:
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`")
        body = body.split("\n", 1)[1] if "\n" in body else ""
    try:
        value = json.loads(body)
    except json.JSONDecodeError as err:
        msg = f"{what} is not one JSON object ({err})"
        raise _StepFailed(msg) from None
    if not isinstance(value, dict):
        msg = f"{what} is JSON but not an object (got {type(value).__name__}); its fields merge over the item"
        raise _StepFailed(msg)
    return value


class ItemExecutor:
    """Runs item-graph steps; agent and command steps go through the same executors (and
    supervision) as agent and command nodes."""

    def __init__(self, *, agents: Any, commands: Any, kill_grace_seconds: float = 2.0) -> None:
        self.agents = agents
        """The :class:`~rho_notebook.exec.agent.AgentExecutor` of the run."""
        self.commands = commands
        self.kill_grace_seconds = kill_grace_seconds

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        node, graph = ctx.node, ctx.graph
        if not isinstance(node, ItemNode) or graph is None or graph.items is None:
            msg = f"ItemExecutor cannot run a {ctx.node.kind} node outside an item graph"
            raise TypeError(msg)
        run = RunContext(run_id=ctx.run_id, **dict(ctx.run_fields))
        limit = graph.items.item_bytes
        try:
            item = input_item(node, graph, ctx.outputs)
        except UnavailableValue as err:
            return AttemptResult(state=NodeState.FAILURE, message=str(err))
        artifacts = {"input": "input.json"}
        ctx.write_later("input.json", json_bytes(item))
        try:
            result = await self._step(ctx, node, item, run)
        except _StepFailed as err:
            return AttemptResult(state=NodeState.FAILURE, message=err.message, artifacts=artifacts)
        except _StepCancelled:
            return AttemptResult(state=NodeState.CANCELLATION, message="cancelled", artifacts=artifacts)
        except TimeoutError:
            msg = f"timed out after {node.timeout_seconds} s"
            return AttemptResult(state=NodeState.FAILURE, message=msg, artifacts=artifacts)
        except RhoError as err:
            return AttemptResult(state=NodeState.FAILURE, message=err.message, artifacts=artifacts)
        result.artifacts = {**artifacts, **result.artifacts}
        if result.state is not NodeState.SUCCESS:
            return result
        try:
            check_item_size(result.value, step=node.name, limit=limit)
        except ItemTooLarge as err:
            return AttemptResult(
                state=NodeState.FAILURE, message=err.message, exit=result.exit, artifacts=result.artifacts
            )
        folder = await ctx.directory()
        await asyncio.to_thread(atomic_write, folder / "value.json", json_bytes(result.value))  # 0600, no-follow
        result.artifacts["value"] = "value.json"
        return result

    async def _step(self, ctx: AttemptContext, node: ItemNode, item: dict[str, Any], run: RunContext) -> AttemptResult:
        kind, params = node.step_kind, node.params
        if kind in ("branch", "output", "join"):
            return _passed(item)
        if kind == "set":
            changed = dict(item)
            for name, value in params["fields"].items():
                changed[name] = resolve(value, item, run)
            return _passed(changed)
        if kind == "code":
            from rho_notebook.source.code_step import run_code_step

            return _passed(await self._cancellable(ctx, run_code_step(params["source"], item, step=node.name)))
        if kind == "human":
            return await self._human(ctx, node, item, run)
        if kind == "command":
            return await self._command(ctx, node, item, run)
        if kind == "agent":
            return await self._agent(ctx, node, item, run)
        return await self._model(ctx, node, item, run)

    async def _cancellable(self, ctx: AttemptContext, work: Any) -> Any:
        task = asyncio.ensure_future(work)
        waiter = asyncio.ensure_future(ctx.cancel.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            raise _StepCancelled
        return task.result()

    # -- the kinds that wait or launch ----------------------------------------------------------------

    async def _human(self, ctx: AttemptContext, node: ItemNode, item: dict[str, Any], run: RunContext) -> AttemptResult:
        if ctx.request_approval is None:
            return AttemptResult(state=NodeState.FAILURE, message="human steps need an owner that can ask a person")
        question = resolve(node.params["question"], item, run)
        form = {name: _form_field(name, raw) for name, raw in node.params["fields"].items()}
        facts = {"node": node.name, "step": node.step, "prompt": question, "form": form}
        decided = await ctx.request_approval(facts, float(node.timeout_seconds))
        if decided == "cancelled":
            return AttemptResult(state=NodeState.CANCELLATION, message="cancelled while waiting for a person")
        if decided is None:
            return AttemptResult(state=NodeState.FAILURE, message=f"nobody answered within {node.timeout_seconds} s")
        if decided.decision != "approve" or decided.answer is None:
            return AttemptResult(
                state=NodeState.DENIAL,
                message=f"declined by {decided.by}" + (f": {decided.comment}" if decided.comment else ""),
            )
        answered = {**item, **decided.answer}
        return AttemptResult(
            state=NodeState.SUCCESS,
            value=answered,
            exit={"kind": "human", "by": decided.by, "at": decided.at, "via": decided.via},
        )

    async def _command(
        self, ctx: AttemptContext, node: ItemNode, item: dict[str, Any], run: RunContext
    ) -> AttemptResult:
        if node.executable is None:
            msg = f"command step {node.name!r} has no frozen executable"
            raise _StepFailed(msg)
        into = node.params["into"]
        argv = command_argv(node, item, run)
        spec = process_spec(ctx, node.executable, argv=argv, cwd=node.cwd, kill_grace_seconds=self.kill_grace_seconds)

        async def judge(ended: Ended) -> AttemptResult:
            if ended.result.exit_code != 0:
                return ended.failure(f"exited with code {ended.result.exit_code}")
            if ended.record["stdout_truncated"]:
                limit = node.max_output_bytes
                return ended.failure(f"stdout was truncated at max_output_bytes={limit}; its JSON could not be parsed")
            raw = bytes(ended.stdout.kept or b"")
            try:
                value = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                return ended.failure(f"stdout is not one JSON value ({err})")
            return ended.success({**item, into: value})

        return await supervise(ctx, spec, judge=judge)

    async def _agent(self, ctx: AttemptContext, node: ItemNode, item: dict[str, Any], run: RunContext) -> AttemptResult:
        params = node.params
        prompt = resolve(params["prompt"], item, run)
        fields = params.get("answer") or {}
        output = answer_schema(fields) if fields else None
        proxy = AgentNode(
            name=node.name,
            agent=node.agent or params["agent"],
            prompt=Template(parts=(prompt if isinstance(prompt, str) else json.dumps(prompt),)),
            access=node.access,
            timeout_seconds=node.timeout_seconds,
            max_output_bytes=node.max_output_bytes,
            output=output,
        )
        result: AttemptResult = await self.agents.execute(_with_node(ctx, proxy))
        if result.state is not NodeState.SUCCESS:
            return result
        if output is not None:
            answer = result.value
        else:
            folder = await ctx.directory()
            text = await asyncio.to_thread((folder / "answer.md").read_text)
            try:
                answer = _json_object(text, "the agent's answer")
            except _StepFailed as err:
                return AttemptResult(
                    state=NodeState.FAILURE, message=err.message, exit=result.exit, artifacts=result.artifacts
                )
        result.value = {**item, **answer}
        return result

    async def _model(self, ctx: AttemptContext, node: ItemNode, item: dict[str, Any], run: RunContext) -> AttemptResult:
        params = node.params
        prompt = resolve(params["prompt"], item, run)
        text = prompt if isinstance(prompt, str) else json.dumps(prompt)
        provider, model = params.get("provider"), params.get("model")
        if node.agent is not None and ctx.graph is not None:
            definition = ctx.graph.agent(node.agent)
            provider, model = definition.provider, definition.model
        settings = await self.agents.settings_for(ctx)
        selection = select_provider(settings, provider=provider, model=model)
        request = CompletionRequest(model=selection.model, system="", messages=(Message(role="user", content=text),))
        redactor = Redactor()
        completion = await self._cancellable(
            ctx,
            asyncio.wait_for(
                complete_once(
                    selection, request, environ=ctx.source_environ, redactor=redactor, transport=self.agents.transport
                ),
                timeout=node.timeout_seconds,
            ),
        )
        answer_text = redactor.text(completion.message.content)
        folder = await ctx.directory()
        await asyncio.to_thread(atomic_write, folder / "answer.txt", answer_text.encode())
        fields = params.get("answer") or {}
        value: Any = answer_text
        if fields:
            from rho_notebook.agents.answer import parse_typed_answer

            value = parse_typed_answer(answer_text, answer_schema(fields))
        return AttemptResult(
            state=NodeState.SUCCESS,
            value={**item, params["into"]: value},
            exit={"kind": "model", "provider": selection.provider, "model": selection.model},
            artifacts={"answer": "answer.txt"},
        )


def _form_field(name: str, raw: Any) -> dict[str, Any]:
    decl = FieldDecl.model_validate(raw)
    return {**decl.declaration(), "label": decl.label or name}


def _passed(item: Any) -> AttemptResult:
    return AttemptResult(state=NodeState.SUCCESS, value=item)


def _with_node(ctx: AttemptContext, node: Node) -> AttemptContext:
    return dataclasses.replace(ctx, node=node)
