"""The item-graph document (docs/graphs.md): a workflow written as steps joined by edges that carry
one JSON object, the *item*, from step to step. These pydantic models are the document's one
definition: the JSON Schema shipped in ``rho_notebook/schemas/graph.schema.json`` is generated
from :class:`ItemGraph` (``scripts/gen_graph_schema.py``).

Reading a document from text, with line:column for every problem and the graph-level rules
(edges to unknown steps, cycles, loops, several in-edges, mappings without ``=``), is
:mod:`rho_notebook.planning.itemgraph`; these models check the shape of each part only.

API for the runner (pure functions and frozen values; nothing here runs a step):

- :meth:`ItemGraph.step` / :meth:`ItemGraph.out_edges` / :meth:`ItemGraph.in_edges` /
  :meth:`ItemGraph.starts`: the graph's structure, out-edges in document order (a ``branch``
  takes the first whose condition holds; any other step sends the item down every edge whose
  condition holds).
- :meth:`Condition.holds`: an edge's ``when`` on an item (rules in its docstring).
- :func:`first_item`: the first item, built from the run's input values.
- :meth:`StepParams.mapped` names the parameters whose strings are mappings; resolve them with
  :func:`rho_notebook.model.mapping.resolve` right before the step runs.
- :func:`item_bytes` / :func:`check_item_size`: the item cap (the ``item_bytes`` planning limit,
  1 MiB by default); the runner fails a step whose output item is over it (:class:`ItemTooLarge`).
- :class:`FieldDecl` is one typed field: a graph input, a field of a ``human`` step's form, or a
  field of an ``agent`` step's typed answer. :meth:`FieldDecl.declaration` gives the dict
  :func:`rho_notebook.planning.inputs.check_inputs` takes.

How each step kind changes the item (the runner's contract): ``agent`` and ``human`` merge the
answer's fields over the item (the answer wins a clash); ``model`` and ``command`` add their
result under ``into``; ``code`` replaces the item with ``run(item)``; ``set`` returns the item with
the named top-level fields set; ``transform`` replaces the item with its ``fields`` resolved (the
other fields are dropped); ``branch`` and ``output`` pass it on unchanged; ``join`` merges the
items of the in-edges that delivered, in edge order, and adds each under its source step's id;
``aggregate`` runs its inner ``step`` once per element of the list at ``over`` (at most
``max_items``), with that element as the inner step's item, and adds the results, in element
order, as one list under ``into`` (an instance's result: a command's stdout value, a model's text
or typed answer, an agent's answer object, a code step's ``run(element)``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import ConfigDict, Field, field_validator, model_validator

from rho_notebook.errors import ItemTooLarge, MappingError
from rho_notebook.model.base import FrozenModel
from rho_notebook.model.budget import limit_problem
from rho_notebook.model.item_edges import Condition, Edge, Loop, StepId
from rho_notebook.model.mapping import parse_path
from rho_notebook.model.schema import INT64_MAX, INT64_MIN, Scalar

__all__ = [
    "GRAPH_SCHEMA_FILE",
    "GRAPH_SUFFIXES",
    "ITEM_GRAPH_FORMAT",
    "STEP_KINDS",
    "INNER_KINDS",
    "INNER_PARAMS_BY_KIND",
    "MAX_AGGREGATE_ITEMS",
    "AgentParams",
    "AgentStep",
    "AggregateParams",
    "AggregateStep",
    "BranchStep",
    "CodeParams",
    "CodeStep",
    "CommandParams",
    "CommandStep",
    "Condition",
    "Edge",
    "FieldDecl",
    "HumanParams",
    "HumanStep",
    "InnerCommandParams",
    "InnerModelParams",
    "InnerStep",
    "ItemGraph",
    "JoinStep",
    "Loop",
    "ModelParams",
    "ModelStep",
    "StepBudget",
    "NoParams",
    "OutputStep",
    "PARAMS_BY_KIND",
    "SetParams",
    "SetStep",
    "Step",
    "StepParams",
    "TransformParams",
    "TransformStep",
    "check_item_size",
    "first_item",
    "graph_json_schema",
    "is_graph_file",
    "item_bytes",
]

ITEM_GRAPH_FORMAT = "rho-notebook/item-graph/v1"

GRAPH_SCHEMA_FILE = Path(__file__).resolve().parents[1] / "schemas" / "graph.schema.json"
"""The committed JSON Schema of the document (generated from :class:`ItemGraph`)."""

GRAPH_SUFFIXES = (".graph.yaml", ".graph.yml", ".graph.json")
"""File names of item-graph documents end with one of these."""

STEP_KINDS = (
    "agent",
    "model",
    "command",
    "code",
    "set",
    "transform",
    "branch",
    "join",
    "human",
    "aggregate",
    "output",
)

INNER_KINDS = ("command", "agent", "model", "code")
"""The kinds an ``aggregate`` step runs once per element."""


class _Model(FrozenModel):
    """Field docstrings become descriptions in the JSON Schema (editors show them)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class FieldDecl(_Model):
    """One typed field, declared as a Starlark workflow declares an input: a graph input, a field
    of a human step's form, or a field of an agent step's answer."""

    type: Literal["string", "integer", "bool", "enum"]
    required: bool | None = None
    """Default: required unless a default is given."""
    default: Scalar = None
    choices: tuple[Scalar, ...] = ()
    """The allowed values of an ``enum``, in order (only, and always, for ``enum``)."""
    label: str | None = None
    """What a form shows for the field (default: its name)."""

    @model_validator(mode="after")
    def _consistent(self) -> FieldDecl:
        if self.type == "enum" and not self.choices:
            msg = "an enum needs a non-empty list of choices, e.g. {type: enum, choices: [a, b]}"
            raise ValueError(msg)
        if self.type != "enum" and self.choices:
            msg = f"choices belong to type enum, not {self.type}"
            raise ValueError(msg)
        if self.required and self.default is not None:
            msg = "a required field has no default; drop the default or set required: false"
            raise ValueError(msg)
        if self.default is not None and not _fits(self, self.default):
            wanted = f"one of {list(self.choices)!r}" if self.type == "enum" else f"of type {self.type}"
            msg = f"the default {self.default!r} must be {wanted}"
            raise ValueError(msg)
        return self

    @property
    def is_required(self) -> bool:
        return self.required if self.required is not None else self.default is None

    def declaration(self) -> dict[str, Any]:
        """``{"type", "required", "default", "choices"}``, the shape ``check_inputs`` takes."""
        return {
            "type": self.type,
            "required": self.is_required,
            "default": self.default,
            "choices": list(self.choices),
        }


def _fits(decl: FieldDecl, value: Any) -> bool:
    if decl.type == "string":
        return isinstance(value, str)
    if decl.type == "integer":
        return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX
    if decl.type == "bool":
        return isinstance(value, bool)
    return any(type(value) is type(c) and value == c for c in decl.choices)


# -- step parameters -------------------------------------------------------------------------------


class StepParams(_Model):
    """Base of every kind's parameters."""

    MAPPED: ClassVar[tuple[str, ...]] = ()
    """Parameters whose strings (at any depth) may be mappings; a mapping anywhere else is refused."""

    @classmethod
    def mapped(cls) -> tuple[str, ...]:
        return cls.MAPPED


class NoParams(StepParams):
    """``branch``, ``join`` and ``output`` take no parameters."""


class AgentParams(StepParams):
    """Ask an agent of the catalog; the answer's fields are merged over the item."""

    MAPPED: ClassVar[tuple[str, ...]] = ("prompt",)
    agent: str
    """An agent of the catalog (``.rho/agents``), by name."""
    prompt: str
    """The prompt; usually a mapping, e.g. ``"=Classify: {{ $json.text }}"``."""
    answer: dict[str, FieldDecl] = {}
    """Typed fields the answer must hold (empty: any JSON object)."""
    access: Literal["read_only", "mutating"] = "read_only"


def _one_model_source(params: Any) -> Any:
    """A model call names ``agent``, or ``provider`` and ``model`` (model steps and an aggregate's
    inner model steps)."""
    if params.agent is not None and (params.provider is not None or params.model is not None):
        msg = "give either agent, or provider and model, not both"
        raise ValueError(msg)
    if params.agent is None and (params.provider is None or params.model is None):
        msg = "a model step names provider and model (from settings), or an agent"
        raise ValueError(msg)
    return params


class ModelParams(StepParams):
    """One completion; the text (or the typed answer) is added under ``into``."""

    MAPPED: ClassVar[tuple[str, ...]] = ("prompt",)
    provider: str | None = None
    """A provider from settings; give ``provider`` and ``model``, or ``agent``."""
    model: str | None = None
    agent: str | None = None
    """An agent of the catalog whose provider and model are used."""
    prompt: str
    into: str
    """The item field the result is added under."""
    answer: dict[str, FieldDecl] = {}
    """Typed fields of a JSON answer (empty: the answer is text)."""

    _one_source = model_validator(mode="after")(_one_model_source)


class CommandParams(StepParams):
    """A verified command; its stdout, one JSON value, is added under ``into``."""

    MAPPED: ClassVar[tuple[str, ...]] = ("argv",)
    argv: tuple[str, ...] = Field(min_length=1)
    """The program (a literal: it is resolved and pinned when planned) and its arguments (mappings
    allowed)."""
    into: str
    timeout_seconds: int = Field(default=600, ge=1)
    max_output_bytes: int = Field(default=1_048_576, ge=1)


class CodeParams(StepParams):
    """A deterministic Starlark function of the item: ``def run(item): return NEW_ITEM``, run in the
    planning sandbox (no network, clock or imports); its result replaces the item."""

    source: str = Field(min_length=1)


class SetParams(StepParams):
    """Set top-level fields of the item (mappings allowed); the other fields are kept."""

    MAPPED: ClassVar[tuple[str, ...]] = ("fields",)
    fields: dict[str, Any] = Field(min_length=1)


class HumanParams(StepParams):
    """Ask a person: a question and a form of typed fields; the run waits (costing nothing) and the
    answer is merged over the item."""

    MAPPED: ClassVar[tuple[str, ...]] = ("question",)
    question: str
    fields: dict[str, FieldDecl] = Field(min_length=1)


class TransformParams(StepParams):
    """Edit fields: the new item is exactly ``fields``, each resolved against the item (mappings
    allowed); the fields not named are dropped (``set`` keeps them)."""

    MAPPED: ClassVar[tuple[str, ...]] = ("fields",)
    fields: dict[str, Any] = Field(min_length=1)


class InnerCommandParams(StepParams):
    """An aggregate's inner command: a command step's params without ``into`` (the aggregate's
    ``into`` holds every instance's stdout value)."""

    MAPPED: ClassVar[tuple[str, ...]] = ("argv",)
    argv: tuple[str, ...] = Field(min_length=1)
    """The program (literal, pinned when planned) and its arguments (mappings of the element)."""
    timeout_seconds: int = Field(default=600, ge=1)
    """Per instance."""
    max_output_bytes: int = Field(default=1_048_576, ge=1)


class InnerModelParams(StepParams):
    """An aggregate's inner model call: a model step's params without ``into``."""

    MAPPED: ClassVar[tuple[str, ...]] = ("prompt",)
    provider: str | None = None
    model: str | None = None
    agent: str | None = None
    prompt: str
    answer: dict[str, FieldDecl] = {}

    _one_source = model_validator(mode="after")(_one_model_source)


class _Inner(_Model):
    """The step an aggregate runs once per element (its item is the element)."""


class InnerCommand(_Inner):
    kind: Literal["command"]
    params: InnerCommandParams


class InnerAgent(_Inner):
    kind: Literal["agent"]
    params: AgentParams


class InnerModel(_Inner):
    kind: Literal["model"]
    params: InnerModelParams


class InnerCode(_Inner):
    kind: Literal["code"]
    params: CodeParams


InnerStep = Annotated[Union[InnerCommand, InnerAgent, InnerModel, InnerCode], Field(discriminator="kind")]

INNER_PARAMS_BY_KIND: dict[str, type[StepParams]] = {
    "command": InnerCommandParams,
    "agent": AgentParams,
    "model": InnerModelParams,
    "code": CodeParams,
}
"""Each inner kind's parameters model (the mappings of ``params.step.params`` follow its MAPPED)."""

MAX_AGGREGATE_ITEMS = 1000


class AggregateParams(StepParams):
    """Run ``step`` once per element of the list at ``over`` and add the results, in element order,
    under ``into``; more than ``max_items`` elements fail the step."""

    over: str
    """A path to a list field of the item: ``files``, ``ticket.lines``."""
    max_items: int = Field(ge=1, le=MAX_AGGREGATE_ITEMS)
    """Required, at most 1000: a list with more elements fails the step, naming both numbers."""
    into: str
    """The item field the list of results is added under."""
    step: InnerStep
    """``{kind, params}``: a command (no ``into``), agent, model (no ``into``) or code step."""

    @field_validator("over")
    @classmethod
    def _path(cls, over: str) -> str:
        try:
            parse_path(over)
        except MappingError as err:
            raise ValueError(err.message) from None
        return over

    def into_clash(self) -> str | None:
        """Why ``into`` cannot be used (the rule ``graph.into``), or None."""
        path = parse_path(self.over)
        if path[:1] == (self.into,):
            return (
                f"into {self.into!r} holds the list the step iterates over (over: {self.over!r}); the results "
                "would replace it: name another field"
            )
        return None


# -- steps -----------------------------------------------------------------------------------------


class _Step(_Model):
    id: StepId
    """Unique in the document; names the step in the run's views and in ``answer RUN STEP``."""


class StepBudget(_Model):
    """An agent or model step's own spending limits, checked before each of its model calls
    beside the run's (docs/usage.md#budgets); raise one with ``resume RUN --raise-budget STEP:tokens=N``."""

    tokens: int | None = Field(default=None, ge=1)
    """Input plus output tokens over the step's attempts (a loop round's node, an aggregate's instances)."""
    cost: int | str | None = None
    """US dollars as a decimal string (``"0.25"``: documents hold no floats) or a whole number,
    priced with settings ``prices`` (every model the step calls needs a price)."""
    wall: int | None = Field(default=None, ge=1)
    """Seconds the run has executed, over all its executions."""

    @field_validator("cost")
    @classmethod
    def _dollars(cls, value: int | str | None) -> int | str | None:
        """A cost written as text (YAML and Starlark have no exact decimals) holds to the limit
        rule of every budget (:func:`~rho_notebook.model.budget.limit_problem`)."""
        if value is None:
            return value
        try:
            number: object = float(value)
        except ValueError:
            number = value  # no number: the rule says what to give
        if limit_problem("max_cost_usd", number) is not None:
            msg = f'cost {value!r}: give a number of US dollars above 0, e.g. "0.25"'
            raise ValueError(msg)
        return value


class AgentStep(_Step):
    kind: Literal["agent"]
    params: AgentParams
    budget: StepBudget | None = None


class ModelStep(_Step):
    kind: Literal["model"]
    params: ModelParams
    budget: StepBudget | None = None


class CommandStep(_Step):
    kind: Literal["command"]
    params: CommandParams


class CodeStep(_Step):
    kind: Literal["code"]
    params: CodeParams


class SetStep(_Step):
    kind: Literal["set"]
    params: SetParams


class TransformStep(_Step):
    kind: Literal["transform"]
    params: TransformParams


class AggregateStep(_Step):
    kind: Literal["aggregate"]
    params: AggregateParams


class BranchStep(_Step):
    kind: Literal["branch"]
    params: NoParams = NoParams()


class JoinStep(_Step):
    kind: Literal["join"]
    params: NoParams = NoParams()


class HumanStep(_Step):
    kind: Literal["human"]
    params: HumanParams


class OutputStep(_Step):
    kind: Literal["output"]
    params: NoParams = NoParams()


Step = Annotated[
    Union[
        AgentStep,
        ModelStep,
        CommandStep,
        CodeStep,
        SetStep,
        TransformStep,
        BranchStep,
        JoinStep,
        HumanStep,
        AggregateStep,
        OutputStep,
    ],
    Field(discriminator="kind"),
]

PARAMS_BY_KIND: dict[str, type[StepParams]] = {
    "agent": AgentParams,
    "model": ModelParams,
    "command": CommandParams,
    "code": CodeParams,
    "set": SetParams,
    "transform": TransformParams,
    "branch": NoParams,
    "join": NoParams,
    "human": HumanParams,
    "aggregate": AggregateParams,
    "output": NoParams,
}
"""Each step kind's parameters model."""


# -- the document ----------------------------------------------------------------------------------


class ItemGraph(FrozenModel):
    """An item-graph document: ``name``, typed ``inputs``, ``steps`` and ``edges``."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=True,
        title="rho-notebook item graph",
        json_schema_extra={
            "description": "A workflow as steps joined by edges carrying one JSON item (docs/graphs.md)"
        },
    )

    name: StepId
    """The workflow's name (the same grammar as a Starlark workflow's)."""
    inputs: dict[str, FieldDecl] = {}
    """The first item holds one field per input."""
    steps: tuple[Step, ...] = Field(min_length=1)
    edges: tuple[Edge, ...] = ()

    def step(self, step_id: str) -> Step:
        for step in self.steps:
            if step.id == step_id:
                return step
        msg = f"no step {step_id!r} in graph {self.name!r}"
        raise KeyError(msg)

    def out_edges(self, step_id: str) -> tuple[Edge, ...]:
        """The step's out-edges in document order."""
        return tuple(e for e in self.edges if e.source == step_id)

    def in_edges(self, step_id: str) -> tuple[Edge, ...]:
        """The step's in-edges in document order (a join merges in this order)."""
        return tuple(e for e in self.edges if e.to == step_id)

    def starts(self) -> tuple[str, ...]:
        """Steps without in-edges, in document order: each receives the first item."""
        targets = {e.to for e in self.edges}
        return tuple(s.id for s in self.steps if s.id not in targets)

    def document(self) -> dict[str, Any]:
        """The document as JSON data with every default filled in (``from`` spelled as written), for
        freezing into a plan."""
        return self.model_dump(mode="json", by_alias=True)


def is_graph_file(name: str) -> bool:
    """Whether a file name is an item-graph document's (``*.graph.yaml``, ``.graph.yml``, ``.graph.json``)."""
    return name.endswith(GRAPH_SUFFIXES)


def first_item(graph: ItemGraph, values: dict[str, Any]) -> dict[str, Any]:
    """The first item: one field per declared input, from the checked input ``values``."""
    return {name: values.get(name) for name in graph.inputs}


def item_bytes(item: Any) -> int:
    """The size the item cap measures: canonical JSON (sorted keys, no spaces, UTF-8)."""
    text = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8"))


def check_item_size(item: Any, *, step: str, limit: int) -> None:
    """Raise :class:`ItemTooLarge` when the item is over ``limit``, naming ``step``, both sizes and
    the item's three largest top-level fields (each value measured as :func:`item_bytes` measures
    the item; ties by name), so the message says what to move out of the item. Nothing is dropped:
    Manykind drops carried input when over its budget, we fail loud (docs/graphs.md)."""
    measured = item_bytes(item)
    if measured > limit:
        sizes = [(str(name), item_bytes(value)) for name, value in item.items()] if isinstance(item, dict) else []
        largest = tuple(sorted(sizes, key=lambda field: (-field[1], field[0]))[:3])
        raise ItemTooLarge(step=step, limit=limit, measured=measured, largest=largest)


def graph_json_schema() -> dict[str, Any]:
    """The document's JSON Schema (draft 2020-12), generated from :class:`ItemGraph`."""
    schema = ItemGraph.model_json_schema(by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
    }
