"""Model semantics: condition evaluation, schema validation and paths, workflow outcome, rendering."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from pydantic import ValidationError

from rho_notebook.model.condition import (
    UNAVAILABLE,
    AllOf,
    AnyOf,
    Condition,
    Equals,
    IsOneOf,
    Not,
    condition_depth,
    condition_references,
    evaluate,
)
from rho_notebook.model.reference import ExitCodeRef, OutputRef, Reference, StatusRef, Template, render_value
from rho_notebook.model.schema import (
    INT64_MAX,
    INT64_MIN,
    BoolSchema,
    EnumSchema,
    IntegerSchema,
    ListSchema,
    NullSchema,
    OptionalSchema,
    RecordSchema,
    StdoutJsonSchema,
    StringSchema,
    schema_at_path,
    schema_depth,
    validate_value,
    value_schema,
)
from rho_notebook.model.state import TERMINAL_STATES, NodeState, Outcome, workflow_outcome

S = NodeState

# --------------------------------------------------------------------------- condition truth tables

# Three leaves whose value is fixed by the lookup below: t is True, f is False, u is unavailable.
VALUES = {"t": "success", "f": "failure"}


def lookup(ref: Reference) -> object:
    return VALUES.get(ref.node, UNAVAILABLE)


def leaf(v: bool | None) -> Condition:
    node = {True: "t", False: "f", None: "u"}[v]
    return Equals(left=StatusRef(node=node), right="success")


TV = (True, False, None)


def k_and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def k_or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


@pytest.mark.parametrize("v", TV)
def test_leaves(v: bool | None) -> None:
    assert evaluate(leaf(v), lookup) is v


@pytest.mark.parametrize(("a", "b"), list(itertools.product(TV, TV)))
def test_all_truth_table(a: bool | None, b: bool | None) -> None:
    assert evaluate(AllOf(items=(leaf(a), leaf(b))), lookup) is k_and(a, b)


@pytest.mark.parametrize(("a", "b"), list(itertools.product(TV, TV)))
def test_any_truth_table(a: bool | None, b: bool | None) -> None:
    assert evaluate(AnyOf(items=(leaf(a), leaf(b))), lookup) is k_or(a, b)


@pytest.mark.parametrize(("v", "expected"), [(True, False), (False, True), (None, None)])
def test_not_truth_table(v: bool | None, expected: bool | None) -> None:
    assert evaluate(Not(item=leaf(v)), lookup) is expected


@pytest.mark.parametrize("values", list(itertools.product(TV, repeat=3)))
def test_three_item_all_and_any(values: tuple[bool | None, ...]) -> None:
    items = tuple(leaf(v) for v in values)
    a, b, c = values
    assert evaluate(AllOf(items=items), lookup) is k_and(k_and(a, b), c)
    assert evaluate(AnyOf(items=items), lookup) is k_or(k_or(a, b), c)


def test_single_item_combinators_are_identity() -> None:
    for v in TV:
        assert evaluate(AllOf(items=(leaf(v),)), lookup) is v
        assert evaluate(AnyOf(items=(leaf(v),)), lookup) is v


def test_empty_all_is_true_and_empty_any_is_false() -> None:
    assert evaluate(AllOf(items=()), lookup) is True
    assert evaluate(AnyOf(items=()), lookup) is False


def test_short_circuit_is_order_independent() -> None:
    assert evaluate(AllOf(items=(leaf(None), leaf(False))), lookup) is False
    assert evaluate(AllOf(items=(leaf(False), leaf(None))), lookup) is False
    assert evaluate(AnyOf(items=(leaf(None), leaf(True))), lookup) is True
    assert evaluate(AnyOf(items=(leaf(True), leaf(None))), lookup) is True


def test_nested_conditions() -> None:
    # not(all(t, any(u, f))) == not(all(t, u)) == not(u) == u
    cond = Not(item=AllOf(items=(leaf(True), AnyOf(items=(leaf(None), leaf(False))))))
    assert evaluate(cond, lookup) is None
    # any(not(f), u) == True
    assert evaluate(AnyOf(items=(Not(item=leaf(False)), leaf(None))), lookup) is True
    # double negation
    for v in TV:
        assert evaluate(Not(item=Not(item=leaf(v))), lookup) is v


def test_evaluate_returns_real_booleans() -> None:
    assert type(evaluate(leaf(True), lookup)) is bool
    assert type(evaluate(Not(item=leaf(True)), lookup)) is bool


# --------------------------------------------------------------------------- equals / is_one_of strictness


def const(value: object) -> Any:
    return lambda ref: value


@pytest.mark.parametrize(
    ("value", "right", "expected"),
    [
        (True, True, True),
        (False, False, True),
        (1, 1, True),
        (0, 0, True),
        ("a", "a", True),
        (None, None, True),
        (True, 1, False),
        (1, True, False),
        (0, False, False),
        (False, 0, False),
        (None, False, False),
        (None, 0, False),
        (None, "", False),
        ("", None, False),
        ("1", 1, False),
        (1, "1", False),
        ("true", True, False),
        (1.0, 1, False),  # not JSON integer data, never equal to an integer
        ([1], 1, False),
        ({"a": 1}, "a", False),
        (2, 1, False),
        ("A", "a", False),
    ],
)
def test_equals_is_type_strict(value: object, right: Any, expected: bool) -> None:
    cond = Equals(left=OutputRef(node="a", path=("x",)), right=right)
    assert evaluate(cond, const(value)) is expected


@pytest.mark.parametrize(
    ("value", "values", "expected"),
    [
        (True, (1, "true"), False),
        (1, (True, "1"), False),
        (0, (False, None), False),
        (False, (0, None), False),
        (None, (0, False, ""), False),
        (1, (True, 1), True),
        (True, (1, True), True),
        (None, (None,), True),
        ("b", ("a", "b"), True),
        ("c", ("a", "b"), False),
        ("a", (), False),
    ],
)
def test_is_one_of_is_type_strict(value: object, values: tuple[Any, ...], expected: bool) -> None:
    cond = IsOneOf(left=OutputRef(node="a"), values=values)
    assert evaluate(cond, const(value)) is expected


def test_unavailable_operand_is_unavailable_for_equals_and_is_one_of() -> None:
    assert evaluate(Equals(left=ExitCodeRef(node="a"), right=0), const(UNAVAILABLE)) is None
    assert evaluate(IsOneOf(left=StatusRef(node="a"), values=("success",)), const(UNAVAILABLE)) is None
    assert evaluate(IsOneOf(left=StatusRef(node="a"), values=()), const(UNAVAILABLE)) is None


def test_condition_scalars_keep_their_json_type() -> None:
    """Pydantic must not coerce 1 <-> True when a condition is built or loaded from JSON."""
    for right in (True, False, 0, 1, None, "1"):
        built = Equals(left=ExitCodeRef(node="a"), right=right)
        assert type(built.right) is type(right) and built.right == right
        loaded = Equals.model_validate_json(built.model_dump_json())
        assert type(loaded.right) is type(right) and loaded.right == right
    loaded_set = IsOneOf.model_validate_json(
        '{"kind":"is_one_of","left":{"kind":"status","node":"a"},"values":[true,1,0,false,null,"x"]}'
    )
    assert [type(v) for v in loaded_set.values] == [bool, int, int, bool, type(None), str]


def test_lookup_is_called_with_the_reference() -> None:
    seen: list[Reference] = []

    def record(ref: Reference) -> object:
        seen.append(ref)
        return 0

    refs = [OutputRef(node="a", path=("x", 1)), StatusRef(node="b"), ExitCodeRef(node="c")]
    evaluate(AllOf(items=tuple(Equals(left=r, right=0) for r in refs)), record)
    assert seen == refs


def test_condition_references_and_depth() -> None:
    a, b, c = OutputRef(node="a", path=("x",)), StatusRef(node="b"), ExitCodeRef(node="c")
    cond = AllOf(
        items=(
            Equals(left=a, right=1),
            Not(item=AnyOf(items=(IsOneOf(left=b, values=("success",)), Equals(left=c, right=0)))),
        )
    )
    assert condition_references(cond) == [a, b, c]
    assert condition_depth(Equals(left=a, right=1)) == 1
    assert condition_depth(cond) == 4
    assert condition_depth(AllOf(items=())) == 1


def test_conditions_reject_extra_fields_and_are_frozen() -> None:
    with pytest.raises(ValidationError):
        Equals.model_validate({"kind": "equals", "left": {"kind": "status", "node": "a"}, "right": 1, "extra": 2})
    cond = Equals(left=StatusRef(node="a"), right="success")
    with pytest.raises(ValidationError):
        cond.right = "failure"  # type: ignore[misc]


def test_condition_operand_cannot_be_a_float() -> None:
    with pytest.raises(ValidationError):
        Equals.model_validate_json('{"kind":"equals","left":{"kind":"status","node":"a"},"right":1.5}')


# --------------------------------------------------------------------------- validate_value

NULL, BOOL, INT, STR = NullSchema(), BoolSchema(), IntegerSchema(), StringSchema()


def rec(**fields: Any) -> RecordSchema:
    return RecordSchema(fields=tuple(sorted(fields.items())))


def opt(inner: Any) -> OptionalSchema:
    return OptionalSchema(inner=inner)


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        (NULL, [None], [0, False, "", [], {}]),
        (BOOL, [True, False], [0, 1, None, "true", [], {}]),
        (INT, [0, -1, 7, INT64_MIN, INT64_MAX], [True, False, None, "1", 1.0, 1.5, [], {}]),
        (STR, ["", "x", "ü"], [None, 0, True, [], {}, b"x"]),
        (ListSchema(items=INT), [[], [1, 2]], [None, 1, "[1]", {}, (1,), [True], [1, "2"]]),
        (opt(INT), [None, 0, 5], ["5", True, [], {}]),
        (rec(a=INT), [{"a": 1}], [None, [], {"a": True}, {}, {"a": 1, "b": 2}]),
    ],
    ids=["null", "bool", "integer", "string", "list", "optional", "record"],
)
def test_validate_value_per_kind(schema: Any, good: list[Any], bad: list[Any]) -> None:
    for value in good:
        assert validate_value(schema, value) == [], value
    for value in bad:
        assert validate_value(schema, value) != [], value


@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        (NULL, 0, "$: expected null, got integer"),
        (BOOL, 1, "$: expected bool, got integer"),
        (BOOL, None, "$: expected bool, got null"),
        (INT, True, "$: expected integer, got bool"),
        (INT, "1", "$: expected integer, got string"),
        (INT, 1.0, "$: expected integer, got float"),
        (STR, [], "$: expected string, got list"),
        (STR, {}, "$: expected string, got record"),
        (ListSchema(items=STR), "x", "$: expected list, got string"),
        (rec(a=INT), [], "$: expected record, got list"),
    ],
)
def test_type_mismatch_messages(schema: Any, value: Any, message: str) -> None:
    assert validate_value(schema, value) == [message]


def test_int64_bounds() -> None:
    assert validate_value(INT, INT64_MAX) == []
    assert validate_value(INT, INT64_MIN) == []
    assert INT64_MAX == 2**63 - 1 and INT64_MIN == -(2**63)
    assert validate_value(INT, INT64_MAX + 1) == [f"$: integer {INT64_MAX + 1} is outside signed 64-bit range"]
    assert validate_value(INT, INT64_MIN - 1) == [f"$: integer {INT64_MIN - 1} is outside signed 64-bit range"]
    assert validate_value(ListSchema(items=INT), [0, 2**64]) == [
        f"$[1]: integer {2**64} is outside signed 64-bit range"
    ]


def test_enum_members_are_type_strict() -> None:
    schema = EnumSchema(members=("approve", 1, True, None))
    for ok in ("approve", 1, True, None):
        assert validate_value(schema, ok) == [], ok
    assert validate_value(EnumSchema(members=(1,)), True) == ["$: true is not one of [1]"]
    assert validate_value(EnumSchema(members=(True,)), 1) == ["$: 1 is not one of [true]"]
    assert validate_value(EnumSchema(members=(0,)), False) == ["$: false is not one of [0]"]
    assert validate_value(EnumSchema(members=(False,)), 0) == ["$: 0 is not one of [false]"]
    assert validate_value(EnumSchema(members=(None,)), 0) == ["$: 0 is not one of [null]"]
    assert validate_value(EnumSchema(members=("1",)), 1) == ['$: 1 is not one of ["1"]']
    assert validate_value(EnumSchema(members=("approve", "revise")), "reject") == [
        '$: "reject" is not one of ["approve", "revise"]'
    ]
    assert validate_value(EnumSchema(members=("a",)), ["a"]) != []
    assert validate_value(EnumSchema(members=()), None) != []


def test_enum_members_keep_declaration_order_in_message() -> None:
    assert validate_value(EnumSchema(members=("z", "a", 3)), "q") == ['$: "q" is not one of ["z", "a", 3]']


def test_record_optional_fields_may_be_absent_or_null() -> None:
    schema = rec(name=STR, note=opt(STR), count=opt(INT))
    assert validate_value(schema, {"name": "x"}) == []
    assert validate_value(schema, {"name": "x", "note": None, "count": None}) == []
    assert validate_value(schema, {"name": "x", "note": "n", "count": 3}) == []
    assert validate_value(schema, {"name": "x", "note": 3}) == ["$.note: expected string, got integer"]
    assert validate_value(schema, {"name": None}) == ["$.name: expected string, got null"]


def test_record_required_fields_missing_and_extra_fields() -> None:
    schema = rec(a=INT, b=STR, c=opt(BOOL))
    assert validate_value(schema, {}) == ["$: missing field 'a'", "$: missing field 'b'"]
    assert validate_value(schema, {"a": 1, "b": "x", "z": 1, "y": 2}) == [
        "$: unexpected field 'y'",
        "$: unexpected field 'z'",
    ]
    problems = validate_value(schema, {"b": 1, "extra": None})
    assert sorted(problems) == sorted(
        ["$: unexpected field 'extra'", "$: missing field 'a'", "$.b: expected string, got integer"]
    )


def test_required_null_field_must_be_present() -> None:
    schema = rec(a=NULL)
    assert validate_value(schema, {"a": None}) == []
    assert validate_value(schema, {}) == ["$: missing field 'a'"]


def test_empty_record_accepts_only_empty_object() -> None:
    assert validate_value(rec(), {}) == []
    assert validate_value(rec(), {"a": 1}) == ["$: unexpected field 'a'"]


def test_nested_paths_in_messages() -> None:
    schema = rec(
        items=ListSchema(items=rec(name=STR, tags=ListSchema(items=STR), score=opt(INT))),
        meta=rec(ok=BOOL),
    )
    value = {
        "items": [
            {"name": "a", "tags": ["x"]},
            {"name": 2, "tags": ["x", 3], "score": "high"},
            {"tags": [], "bonus": 1},
        ],
        "meta": {"ok": "yes"},
    }
    assert sorted(validate_value(schema, value)) == sorted(
        [
            "$.items[1].name: expected string, got integer",
            "$.items[1].tags[1]: expected string, got integer",
            "$.items[1].score: expected integer, got string",
            "$.items[2]: unexpected field 'bonus'",
            "$.items[2]: missing field 'name'",
            "$.meta.ok: expected bool, got string",
        ]
    )


def test_list_of_optionals_and_optional_list() -> None:
    assert validate_value(ListSchema(items=opt(INT)), [1, None, 2]) == []
    assert validate_value(ListSchema(items=opt(INT)), [1, "x"]) == ["$[1]: expected integer, got string"]
    assert validate_value(opt(ListSchema(items=INT)), None) == []
    assert validate_value(opt(ListSchema(items=INT)), [None]) == ["$[0]: expected integer, got null"]


def test_stdout_json_is_unwrapped_for_validation() -> None:
    schema = StdoutJsonSchema(inner=rec(passed=BOOL))
    assert validate_value(schema, {"passed": True}) == []
    assert validate_value(schema, {"passed": 1}) == ["$.passed: expected bool, got integer"]
    assert value_schema(schema) == rec(passed=BOOL)
    assert value_schema(INT) == INT


def test_custom_where_prefix() -> None:
    assert validate_value(INT, "x", where="output") == ["output: expected integer, got string"]


def test_every_problem_is_reported_not_just_the_first() -> None:
    assert validate_value(ListSchema(items=INT), ["a", "b", "c"]) == [
        "$[0]: expected integer, got string",
        "$[1]: expected integer, got string",
        "$[2]: expected integer, got string",
    ]


def test_schemas_round_trip_through_json_and_reject_extras() -> None:
    schema = StdoutJsonSchema(inner=rec(a=ListSchema(items=opt(EnumSchema(members=(None, True, 1, "x")))), b=STR))
    loaded = StdoutJsonSchema.model_validate_json(schema.model_dump_json())
    assert loaded == schema
    members = loaded.inner.fields[0][1].items.inner.members  # type: ignore[union-attr]
    assert [type(m) for m in members] == [type(None), bool, int, str]
    with pytest.raises(ValidationError):
        IntegerSchema.model_validate({"kind": "integer", "minimum": 0})


# --------------------------------------------------------------------------- schema_at_path and depth

DEEP = StdoutJsonSchema(
    inner=rec(
        decision=EnumSchema(members=("approve", "revise")),
        items=ListSchema(items=rec(name=STR, tags=opt(ListSchema(items=STR)))),
        meta=opt(rec(count=INT)),
    )
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ((), DEEP.inner),
        (("decision",), EnumSchema(members=("approve", "revise"))),
        (("items",), ListSchema(items=rec(name=STR, tags=opt(ListSchema(items=STR))))),
        (("items", 0), rec(name=STR, tags=opt(ListSchema(items=STR)))),
        (("items", 3, "name"), STR),
        (("items", 0, "tags"), opt(ListSchema(items=STR))),  # the final optional is kept
        (("items", 0, "tags", 2), STR),  # optional is looked through on the way
        (("meta",), opt(rec(count=INT))),
        (("meta", "count"), INT),
        (("missing",), None),
        (("items", "name"), None),  # a field name on a list
        (("decision", 0), None),  # cannot step into a scalar
        (("meta", 0), None),  # an index on a record
        (("items", True), None),  # bool is not an index
        (("items", 0, "name", "x"), None),
    ],
)
def test_schema_at_path(path: tuple[Any, ...], expected: Any) -> None:
    assert schema_at_path(DEEP, path) == expected


def test_schema_at_path_on_scalar_root() -> None:
    assert schema_at_path(INT, ()) == INT
    assert schema_at_path(INT, ("x",)) is None
    assert schema_at_path(opt(rec(a=INT)), ("a",)) == INT


def test_schema_depth() -> None:
    assert schema_depth(INT) == 1
    assert schema_depth(EnumSchema(members=(1,))) == 1
    assert schema_depth(ListSchema(items=INT)) == 2
    assert schema_depth(opt(INT)) == 2
    assert schema_depth(rec()) == 1
    assert schema_depth(rec(a=INT, b=ListSchema(items=opt(STR)))) == 4
    assert schema_depth(DEEP) == 1 + 1 + 1 + 1 + 1 + 1 + 1  # stdout_json/record/list/record/optional/list/string


def test_record_field_lookup() -> None:
    schema = rec(a=INT, b=STR)
    assert schema.field("a") == INT and schema.field("b") == STR and schema.field("c") is None


# --------------------------------------------------------------------------- workflow_outcome


def outcome(*states: NodeState | tuple[NodeState, bool]) -> Outcome:
    return workflow_outcome([(s, False) if isinstance(s, NodeState) else s for s in states])


def test_empty_and_all_success() -> None:
    assert workflow_outcome([]) is Outcome.SUCCESS
    assert outcome(S.SUCCESS, S.SUCCESS) is Outcome.SUCCESS


def test_skipped_counts_as_success() -> None:
    assert outcome(S.SKIPPED) is Outcome.SUCCESS
    assert outcome(S.SUCCESS, S.SKIPPED, S.SKIPPED) is Outcome.SUCCESS


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (S.SUCCESS, Outcome.SUCCESS),
        (S.SKIPPED, Outcome.SUCCESS),
        (S.FAILURE, Outcome.FAILURE),
        (S.DENIAL, Outcome.DENIAL),
        (S.CANCELLATION, Outcome.CANCELLATION),
        (S.BLOCKED, Outcome.BLOCKED),
    ],
)
def test_single_node_outcome(state: NodeState, expected: Outcome) -> None:
    assert outcome(state) is expected
    assert outcome(S.SUCCESS, state, S.SKIPPED) is expected


PRECEDENCE = [S.CANCELLATION, S.DENIAL, S.FAILURE, S.BLOCKED]
TO_OUTCOME = {
    S.CANCELLATION: Outcome.CANCELLATION,
    S.DENIAL: Outcome.DENIAL,
    S.FAILURE: Outcome.FAILURE,
    S.BLOCKED: Outcome.BLOCKED,
}


@pytest.mark.parametrize("subset", [c for r in range(1, 5) for c in itertools.combinations(PRECEDENCE, r)])
def test_precedence_cancellation_denial_failure_blocked(subset: tuple[NodeState, ...]) -> None:
    winner = min(subset, key=PRECEDENCE.index)
    for order in itertools.permutations(subset):
        assert outcome(S.SUCCESS, *order, S.SKIPPED) is TO_OUTCOME[winner]


@pytest.mark.parametrize("state", [S.FAILURE, S.DENIAL, S.BLOCKED, S.SKIPPED, S.SUCCESS])
def test_allow_failure_nodes_are_ignored(state: NodeState) -> None:
    assert outcome((state, True)) is Outcome.SUCCESS
    assert outcome(S.SUCCESS, (state, True)) is Outcome.SUCCESS


def test_allow_failure_node_does_not_hide_other_nodes() -> None:
    assert outcome((S.DENIAL, True), S.FAILURE) is Outcome.FAILURE
    assert outcome((S.FAILURE, True), S.BLOCKED) is Outcome.BLOCKED
    assert outcome((S.DENIAL, True), (S.FAILURE, True), S.BLOCKED) is Outcome.BLOCKED


def test_cancellation_of_allow_failure_node_still_wins() -> None:
    assert outcome((S.CANCELLATION, True)) is Outcome.CANCELLATION
    assert outcome(S.DENIAL, S.FAILURE, (S.CANCELLATION, True)) is Outcome.CANCELLATION


def test_same_state_allowed_and_not_allowed() -> None:
    assert outcome((S.FAILURE, True), (S.FAILURE, False)) is Outcome.FAILURE


def test_workflow_outcome_accepts_any_iterable_once() -> None:
    assert workflow_outcome(iter([(S.FAILURE, False), (S.CANCELLATION, True)])) is Outcome.CANCELLATION


def test_outcome_and_state_values() -> None:
    assert {o.value for o in Outcome} == {"success", "failure", "denial", "cancellation", "stalled", "blocked"}
    assert {s.value for s in NodeState} == {
        "pending",
        "ready",
        "running",
        "success",
        "failure",
        "denial",
        "cancellation",
        "skipped",
        "blocked",
    }
    assert TERMINAL_STATES == {S.SUCCESS, S.FAILURE, S.DENIAL, S.CANCELLATION, S.SKIPPED, S.BLOCKED}
    assert all(s.terminal for s in TERMINAL_STATES)
    assert not any(s.terminal for s in (S.PENDING, S.READY, S.RUNNING))


# --------------------------------------------------------------------------- render_value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text", "plain text"),
        ("", ""),
        ('quote " and \\ backslash\nnewline', 'quote " and \\ backslash\nnewline'),  # strings raw, unquoted
        ("héllo ✓", "héllo ✓"),
        ("null", "null"),
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-12, "-12"),
        (INT64_MAX, str(INT64_MAX)),
        ([], "[]"),
        ([1, "a", None, True], '[1,"a",null,true]'),
        ({}, "{}"),
        ({"b": 1, "a": 2}, '{"a":2,"b":1}'),
        ({"z": {"y": [1, {"b": 0, "a": 1}]}, "a": "x"}, '{"a":"x","z":{"y":[1,{"a":1,"b":0}]}}'),
        (["héllo"], '["héllo"]'),  # non-ASCII kept, not \u-escaped
        ({"k": "line\nbreak"}, '{"k":"line\\nbreak"}'),  # strings inside JSON are JSON-escaped
    ],
)
def test_render_value(value: Any, text: str) -> None:
    assert render_value(value) == text


def test_render_value_of_non_string_is_parseable_json() -> None:
    value = {"b": [1, 2, {"d": None, "c": False}], "a": "x"}
    text = render_value(value)
    assert json.loads(text) == value
    assert " " not in text


def test_template_references_and_static_text() -> None:
    ref = OutputRef(node="inspect", path=("summary",))
    template = Template(parts=("Summary: ", ref, "."))
    assert template.references() == (ref,)
    assert template.static_text() is None
    assert Template(parts=("a", "b")).static_text() == "ab"
    assert Template(parts=()).static_text() == ""
