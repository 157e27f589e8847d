"""The executor for item-graph steps (docs/graphs.md): one attempt of one step, item in, item out.

Each step kind builds the operation of its kind and runs it: :mod:`~rho_notebook.exec.passes`
(set, branch, join, output), :mod:`~rho_notebook.exec.code`, :mod:`~rho_notebook.exec.human`,
:mod:`~rho_notebook.exec.command`, :mod:`~rho_notebook.exec.agent` and
:mod:`~rho_notebook.exec.model`, the same operations nodes and script steps run.

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

from rho_notebook.errors import ItemTooLarge, RhoError, UnavailableValue, UnlistableAggregate
from rho_notebook.exec.base import JOURNALED_VALUE_BYTES, AttemptContext, AttemptResult
from rho_notebook.exec.code import CodeOperation, run_code
from rho_notebook.exec.command import frozen_process_facts, run_command
from rho_notebook.exec.human import HumanOperation, ask_person, form_field
from rho_notebook.exec.passes import PASSING_KINDS, passed_item
from rho_notebook.exec.supervised import Ended, ProcessOperation
from rho_notebook.model.agent import agent_launch_facts
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.events import EventKind, event, now_iso
from rho_notebook.model.graph import Graph, ItemNode, Node
from rho_notebook.model.itemgraph import FieldDecl, check_item_size, item_bytes
from rho_notebook.model.itemrun import InstanceLog, delivered_items, instance_key, merge_join
from rho_notebook.model.mapping import MISSING, RunContext, lookup, parse_path, resolve
from rho_notebook.model.reference import Template
from rho_notebook.model.schema import (
    BoolSchema,
    EnumSchema,
    IntegerSchema,
    OptionalSchema,
    RecordSchema,
    Schema,
    StringSchema,
    validate_value,
)
from rho_notebook.model.state import NodeState
from rho_notebook.store.artifacts import AttemptFiles
from rho_notebook.store.files import atomic_write, ensure_private_dir, json_bytes
from rho_notebook.store.layout import ANSWER_PROSE_FILE, INPUT_FILE, VALUE_FILE

__all__ = [
    "ItemExecutor",
    "aggregate_elements",
    "answer_schema",
    "edited_item_problem",
    "command_argv",
    "inner_node",
    "input_item",
    "instance_item",
    "item_launch_facts",
]


class _StepFailed(Exception):
    """The step's result is unusable; ``str(err)`` says why (the attempt fails with it)."""


def _is_instance(node: ItemNode) -> bool:
    """Whether ``node`` is an aggregate's instance ``STEP[i]`` (its result is not merged into an
    item: the aggregate adds it to the list under ``into``)."""
    return node.name.endswith("]")


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
    process facts (as for a command node), or the agent and its resolved prompt. An aggregate's
    are every instance's, in element order (one decision covers the step's instances).

    Raises
    ------
    UnavailableValue
        No in-edge delivered the step's item.
    UnlistableAggregate
        An aggregate's list cannot be iterated: the attempt fails before the gate, as it would
        once admitted, and nobody is asked to approve no instance at all.
    """
    item = input_item(node, graph, outputs)
    if node.step_kind != "aggregate":
        return _launch_facts(node, item, graph, run)
    inner = inner_node(node)
    elements = aggregate_elements(node, item)
    instances = [_launch_facts(inner, instance_item(inner, e), graph, run) for e in elements]
    return {"step": node.step, "kind": "aggregate", "over": node.params["over"], "instances": instances}


def _launch_facts(node: ItemNode, item: Any, graph: Graph, run: RunContext) -> dict[str, Any]:
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


def inner_node(node: ItemNode) -> ItemNode:
    """The node an aggregate runs per element: its inner step's kind and params, with the
    aggregate's frozen executable, working directory and agent (they are the inner step's)."""
    inner = node.params["step"]
    return node.model_copy(update={"step_kind": inner["kind"], "params": inner["params"]})


def instance_item(inner: ItemNode, element: Any) -> Any:
    """An instance's item: the element (a code step's must be an object: any other element is
    given as ``{"value": element}``, as a step's item is when an edge delivers a non-object)."""
    if inner.step_kind == "code" and not isinstance(element, dict):
        return {"value": element}
    return element


def aggregate_elements(node: ItemNode, item: Any) -> list[Any]:
    """The list an aggregate iterates over (``over``), checked against ``max_items``.

    Raises
    ------
    UnlistableAggregate
        The field is missing or not a list, or it has more than ``max_items`` elements.
    """
    over, limit = node.params["over"], node.params["max_items"]
    found = lookup(item, parse_path(over))
    if found is MISSING or not isinstance(found, list):
        shown = "missing from" if found is MISSING else f"a {type(found).__name__} in"
        msg = (
            f"aggregate step {node.name!r}: over {over!r} is {shown} the item it receives, not a list; "
            "put the list there in an earlier step or point over at the field that holds it"
        )
        raise UnlistableAggregate(msg)
    if len(found) > limit:
        msg = (
            f"aggregate step {node.name!r}: the list at {over!r} has {len(found)} elements, more than max_items "
            f"{limit}; raise max_items (at most 1000) or shorten the list"
        )
        raise UnlistableAggregate(msg)
    return found


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


def edited_item_problem(graph: Graph, name: str, value: Any) -> tuple[str, str | None] | None:
    """Why ``value`` cannot stand as the item step ``name`` passed on, as (message, field); None
    when it can, or when ``name`` is no item step (a fork's other checks apply then).

    A fork at an item step with a person's value takes that value as the step's item: the next
    steps receive it and a ``branch`` chooses its out-edge on it (:func:`~rho_notebook.model.itemrun.chosen_routes`),
    as on an item the step computed. So it is checked as the step's own result would be: a JSON
    object within the graph's item cap, carrying what the step adds: an agent's typed answer
    fields and a human step's form fields (merged over the item), a model or command step's
    ``into`` field (typed when the model step declares answer fields), an aggregate's list.
    """
    node = _nodes_of(graph).get(name)
    if not isinstance(node, ItemNode):
        return None
    where = f"the item for step {node.name!r}"
    if not isinstance(value, dict):
        return f"{where} must be a JSON object (the item the step passes on), not {type(value).__name__}", None
    limit = graph.items.item_bytes if graph.items is not None else None
    if limit is not None and item_bytes(value) > limit:
        return f"{where} is {item_bytes(value)} bytes, over the graph's item cap of {limit} bytes", None
    kind, params = node.acting_kind, node.acting_params
    into = node.params.get("into")
    if into is not None and into not in value:
        return f"{where} lacks field {into!r}, where step {node.step!r} puts its result", str(into)
    fields = params.get("fields") if kind == "human" else params.get("answer")
    problems: list[str] = []
    if node.step_kind == "aggregate" and not isinstance(value[into], list):
        problems = [f"$.{into}: expected list, got {type(value[into]).__name__}"]
    elif node.step_kind != "aggregate" and kind in ("agent", "human") and fields:
        problems = validate_value(answer_schema(fields), {k: v for k, v in value.items() if k in fields})
    elif node.step_kind != "aggregate" and kind == "model" and into is not None:
        schema = answer_schema(fields) if fields else StringSchema()
        problems = validate_value(schema, value[into], where=f"$.{into}")
    if not problems:
        return None
    field = problems[0].split(":", 1)[0].removeprefix("$").removeprefix(".")
    return f"{where} does not fit step {node.step!r}: {problems[0]}", field or None


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
    """Runs item-graph steps through the operations of their kinds (the same operations, and
    supervision, as nodes of those kinds)."""

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
        artifacts = {"input": INPUT_FILE}
        ctx.write_later(INPUT_FILE, json_bytes(item))
        try:
            result = await self._step(ctx, node, item, run)
        except _StepFailed as err:
            return AttemptResult(state=NodeState.FAILURE, message=str(err), artifacts=artifacts)
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
        data = json_bytes(result.value)
        if result.value is not None and len(data) <= JOURNALED_VALUE_BYTES:
            ctx.write_later(VALUE_FILE, data)  # a copy: the value is journaled with node_finished
            result.journal_value = True
        else:
            folder = await ctx.directory()
            await asyncio.to_thread(atomic_write, folder / VALUE_FILE, data)  # 0600, no-follow
        result.artifacts["value"] = VALUE_FILE
        return result

    async def _step(self, ctx: AttemptContext, node: ItemNode, item: Any, run: RunContext) -> AttemptResult:
        kind, params = node.step_kind, node.params
        if kind in PASSING_KINDS:
            return AttemptResult(state=NodeState.SUCCESS, value=passed_item(kind, params, item, run))
        if kind == "code":
            changed = await run_code(CodeOperation(step=node.name, source=params["source"]), item, cancel=ctx.cancel)
            if changed is None:
                return AttemptResult(state=NodeState.CANCELLATION, message="cancelled")
            return AttemptResult(state=NodeState.SUCCESS, value=changed)
        if kind == "aggregate":
            return await self._aggregate(ctx, node, item, run)
        if kind == "human":
            return await self._human(ctx, node, item, run)
        if kind == "command":
            return await self._command(ctx, node, item, run)
        if kind == "agent":
            return await self._agent(ctx, node, item, run)
        return await self._model(ctx, node, item, run)

    # -- aggregate: the inner step once per element -------------------------------------------------

    async def _aggregate(
        self, ctx: AttemptContext, node: ItemNode, item: dict[str, Any], run: RunContext
    ) -> AttemptResult:
        """Run the inner step once per element, in element order, each an instance ``STEP[i]``
        journaled before it starts (fsynced when it has effects outside the run) and when it ends;
        instances that succeeded in an earlier attempt are taken from the journal, not run again.
        The first instance that does not succeed ends the step with its state; a list it cannot
        iterate fails it (the gate, when it needed the launch facts, failed it first)."""
        try:
            elements = aggregate_elements(node, item)
        except UnlistableAggregate as err:
            return AttemptResult(state=NodeState.FAILURE, message=str(err))
        log = ctx.instances or InstanceLog()
        inner = inner_node(node)
        into, limit = node.params["into"], ctx.graph.items.item_bytes if ctx.graph and ctx.graph.items else 1 << 62
        base = item_bytes({**item, into: []})
        carried = base + sum(item_bytes(value) + 1 for value in log.done.values())
        results: list[Any] = []
        for index, element in enumerate(elements):
            if index in log.done:
                results.append(log.done[index])
                continue
            key = instance_key(node.name, index)
            launched = event(
                EventKind.INSTANCE_LAUNCHED, ctx.run_id, node=node.name, attempt=ctx.attempt, instance=index
            )
            log.write(launched, durable=not inner.pure)
            result = await self._instance(ctx, inner.model_copy(update={"name": key}), index, element, run)
            if result.state is NodeState.SUCCESS:
                carried += item_bytes(result.value) + 1
                if carried > limit:  # a lower bound of the item's size: stop before journaling more
                    over = ItemTooLarge(
                        step=node.name, limit=limit, measured=carried, largest=((into, carried - base),)
                    )
                    result = AttemptResult(state=NodeState.FAILURE, message=over.message, exit=result.exit)
            success = result.state is NodeState.SUCCESS
            finished = {**launched, "kind": EventKind.INSTANCE_FINISHED.value, "at": now_iso()}
            finished.update(
                state=result.state.value, message=result.message, **({"value": result.value} if success else {})
            )
            log.write(finished, durable=False)
            if not success:
                shown = f"instance {key} (element {index} of {len(elements)}) ended in {result.state.value}"
                return AttemptResult(state=result.state, message=f"{shown}: {result.message}", exit=result.exit)
            results.append(result.value)
        taken = sum(1 for index in range(len(elements)) if index in log.done)
        message = f"{len(elements)} instances succeeded" + (f" ({taken} taken from the journal)" if taken else "")
        return AttemptResult(state=NodeState.SUCCESS, message=message, value={**item, into: results})

    async def _instance(
        self, ctx: AttemptContext, inner: ItemNode, index: int, element: Any, run: RunContext
    ) -> AttemptResult:
        """One instance, with its own folder ``instances/INDEX`` in the aggregate's attempt folder
        (its stdout, stderr, answer and ``input.json``)."""
        folder = await ctx.directory()
        own = folder / "instances" / str(index)
        await asyncio.to_thread(ensure_private_dir, own, below=folder)
        item = instance_item(inner, element)
        atomic_write(own / INPUT_FILE, json_bytes(item), durable=False)
        sub = dataclasses.replace(ctx, node=inner, files=AttemptFiles.made(own), instances=None)
        try:
            return await self._step(sub, inner, item, run)
        except _StepFailed as err:
            return AttemptResult(state=NodeState.FAILURE, message=str(err))
        except RhoError as err:
            return AttemptResult(state=NodeState.FAILURE, message=err.message)

    # -- the kinds that wait or launch ----------------------------------------------------------------

    async def _human(self, ctx: AttemptContext, node: ItemNode, item: dict[str, Any], run: RunContext) -> AttemptResult:
        op = HumanOperation(
            name=node.name,
            step=node.step,
            question=resolve(node.params["question"], item, run),
            form={name: form_field(name, raw) for name, raw in node.params["fields"].items()},
            timeout_seconds=node.timeout_seconds,
        )
        result = await ask_person(op, ctx.request_approval)
        if result.state is NodeState.SUCCESS:
            result.value = {**item, **result.value}
        return result

    async def _command(self, ctx: AttemptContext, node: ItemNode, item: Any, run: RunContext) -> AttemptResult:
        if node.executable is None:
            msg = f"command step {node.name!r} has no frozen executable"
            raise _StepFailed(msg)
        into = node.params.get("into")  # None: an aggregate's instance (its result is the value)
        op = ProcessOperation(
            name=node.name,
            executable=node.executable,
            argv=command_argv(node, item, run),
            cwd=node.cwd,
            timeout_seconds=node.timeout_seconds,
            max_output_bytes=node.max_output_bytes,
        )

        async def judge(ended: Ended) -> AttemptResult:
            if ended.result.exit_code != 0:
                return ended.failure(f"exited with code {ended.result.exit_code}")
            if ended.record["stdout_truncated"]:
                limit = op.max_output_bytes
                return ended.failure(f"stdout was truncated at max_output_bytes={limit}; its JSON could not be parsed")
            raw = bytes(ended.stdout.kept or b"")
            try:
                value = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                return ended.failure(f"stdout is not one JSON value ({err})")
            return ended.success(value if into is None else {**item, into: value})

        return await run_command(ctx, op, judge=judge, kill_grace_seconds=self.kill_grace_seconds)

    async def _agent(self, ctx: AttemptContext, node: ItemNode, item: Any, run: RunContext) -> AttemptResult:
        from rho_notebook.exec.agent import AgentOperation  # the agents layer loads when an agent step runs
        from rho_notebook.exec.model import KeyedCalls

        if _is_instance(node) and ctx.model_calls is not None:  # an instance's calls, keyed STEP[i]
            ctx = dataclasses.replace(ctx, model_calls=KeyedCalls(ctx.model_calls, node.name))
        params = node.params
        prompt = resolve(params["prompt"], item, run)
        fields = params.get("answer") or {}
        output = answer_schema(fields) if fields else None
        op = AgentOperation(
            name=node.name,
            agent=node.agent or params["agent"],
            prompt=Template(parts=(prompt if isinstance(prompt, str) else json.dumps(prompt),)),
            access=node.access,
            timeout_seconds=node.timeout_seconds,
            max_output_bytes=node.max_output_bytes,
            output=output,
        )
        result: AttemptResult = await self.agents.run(ctx, op)
        if result.state is not NodeState.SUCCESS:
            return result
        if output is not None:
            answer = result.value
        else:
            folder = await ctx.directory()
            text = await asyncio.to_thread((folder / ANSWER_PROSE_FILE).read_text)
            try:
                answer = _json_object(text, "the agent's answer")
            except _StepFailed as err:
                return AttemptResult(
                    state=NodeState.FAILURE, message=str(err), exit=result.exit, artifacts=result.artifacts
                )
        result.value = answer if _is_instance(node) else {**item, **answer}
        return result

    async def _model(self, ctx: AttemptContext, node: ItemNode, item: Any, run: RunContext) -> AttemptResult:
        from rho_notebook.exec.model import model_call, run_model  # loaded when a model step runs

        params = node.params
        prompt = resolve(params["prompt"], item, run)
        text = prompt if isinstance(prompt, str) else json.dumps(prompt)
        provider, model = params.get("provider"), params.get("model")
        if node.agent is not None and ctx.graph is not None:
            definition = ctx.graph.agent(node.agent)
            provider, model = definition.provider, definition.model
        fields = params.get("answer") or {}
        settings = await self.agents.settings_for(ctx)
        call = model_call(
            settings,
            messages=[{"role": "user", "content": text}],
            provider=provider,
            model=model,
            output=answer_schema(fields) if fields else None,
            subject=f"step {node.name!r}: ",
        )
        outcome = await run_model(
            call,
            folder=await ctx.directory(),
            environ=ctx.source_environ,
            cancel=ctx.cancel,
            transport=self.agents.transport,
            timeout_seconds=node.timeout_seconds,
            calls=ctx.model_calls,
            key=node.name if _is_instance(node) else None,
        )
        answered = outcome.value if fields else outcome.text
        value = answered if _is_instance(node) else {**item, params["into"]: answered}
        return AttemptResult(
            state=outcome.state,
            message=outcome.message,
            value=value if outcome.state is NodeState.SUCCESS else UNAVAILABLE,
            exit=outcome.exit,
            artifacts=outcome.artifacts,
        )
