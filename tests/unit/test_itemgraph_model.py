"""The item-graph model's pure parts the runner uses (rho_notebook/model/itemgraph.py): edge
conditions on the item, the first item, typed fields and the item cap."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rho_notebook.errors import ItemTooLarge
from rho_notebook.model.itemgraph import Condition, FieldDecl, ItemGraph, check_item_size, first_item, item_bytes
from rho_notebook.planning.inputs import check_inputs

ITEM: dict[str, Any] = {"score": 70, "flag": True, "name": "ada", "none": None, "tags": ["a", "b"]}


@pytest.mark.parametrize(
    ("field", "op", "value", "holds"),
    [
        ("score", "eq", 70, True),
        ("score", "eq", "70", False),
        ("flag", "eq", 1, False),
        ("score", "ne", 71, True),
        ("missing", "ne", 1, True),
        ("missing", "eq", None, False),
        ("score", "gt", 69, True),
        ("score", "gte", 70, True),
        ("score", "lt", 70, False),
        ("score", "lte", 70, True),
        ("name", "gt", "abc", True),
        ("name", "gt", 1, False),
        ("flag", "gte", 0, False),
        ("missing", "gte", 0, False),
        ("name", "in", ["bob", "ada"], True),
        ("score", "in", ["70"], False),
        ("tags[1]", "eq", "b", True),
        ("tags", "eq", ["a", "b"], True),
    ],
)
def test_conditions(field: str, op: Any, value: Any, holds: bool) -> None:
    assert Condition(field=field, op=op, value=value).holds(ITEM) is holds


@pytest.mark.parametrize(("field", "holds"), [("score", True), ("none", False), ("missing", False)])
def test_exists_means_present_and_not_null(field: str, holds: bool) -> None:
    assert Condition(field=field, op="exists").holds(ITEM) is holds


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"field": "a", "op": "in", "value": 1}, "op 'in' compares with a list"),
        ({"field": "a", "op": "exists", "value": True}, "op 'exists' takes no value"),
        ({"field": "a", "op": "gt", "value": True}, "compares with an integer or a string"),
        ({"field": "a b", "op": "eq", "value": 1}, "cannot read the path"),
    ],
)
def test_conditions_refuse_values_that_cannot_compare(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Condition.model_validate(data)


def test_typed_fields_give_the_declaration_check_inputs_takes() -> None:
    declared = {
        "score": FieldDecl(type="integer"),
        "mode": FieldDecl(type="enum", choices=("fast", "full"), default="fast"),
    }
    as_inputs = {name: decl.declaration() for name, decl in declared.items()}
    assert as_inputs["score"] == {"type": "integer", "required": True, "default": None, "choices": []}
    assert check_inputs(as_inputs, {"score": 70}) == {"score": 70, "mode": "fast"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"type": "enum"}, "an enum needs a non-empty list of choices"),
        ({"type": "string", "choices": ["a"]}, "choices belong to type enum"),
        ({"type": "string", "required": True, "default": "a"}, "a required field has no default"),
        ({"type": "bool", "default": 1}, "the default 1 must be of type bool"),
    ],
)
def test_inconsistent_typed_fields(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        FieldDecl.model_validate(data)


def test_the_first_item_holds_one_field_per_input() -> None:
    graph = ItemGraph.model_validate(
        {"name": "g", "inputs": {"score": {"type": "integer"}}, "steps": [{"id": "done", "kind": "output"}]}
    )
    assert first_item(graph, {"score": 70}) == {"score": 70}


def test_the_item_cap_names_the_step_and_both_sizes() -> None:
    item = {"text": "x" * 100}
    assert item_bytes(item) == len('{"text":""}') + 100
    check_item_size(item, step="classify", limit=111)
    with pytest.raises(ItemTooLarge) as caught:
        check_item_size(item, step="classify", limit=110)
    assert (caught.value.step, caught.value.limit, caught.value.measured) == ("classify", 110, 111)
    assert caught.value.largest == (("text", 102),)
    assert str(caught.value).startswith(
        "step 'classify': the item is 111 bytes (canonical JSON), over the 'item_bytes' limit of 110 bytes; "
        "its largest fields: 'text' 102 bytes;"
    )


def test_the_document_round_trips_with_from_spelled_as_written() -> None:
    data = {
        "name": "g",
        "steps": [{"id": "a", "kind": "branch"}, {"id": "b", "kind": "output"}],
        "edges": [{"from": "a", "to": "b", "when": {"field": "x", "op": "exists"}}],
    }
    graph = ItemGraph.model_validate(data)
    document = graph.document()
    assert document["edges"][0]["from"] == "a"
    assert ItemGraph.model_validate(document) == graph
    assert graph.in_edges("b")[0].source == "a"
