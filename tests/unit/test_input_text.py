"""``--input`` values and supplied inputs (issue 14, item 5): nothing but an InputError for any
text, a NUL byte or lone surrogate refused naming the input, deep nesting refused by the limit."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rho_notebook.errors import InputError
from rho_notebook.planning.inputs import check_inputs, parse_input_args
from rho_notebook.source.limits import load_limits

LIMITS = load_limits()
DECLARED = {"x": {"type": "string", "required": False, "default": "d", "choices": []}}


def rules(err: InputError) -> set[str]:
    return {found.rule for found in err.diagnostics()}


@pytest.mark.parametrize("depth", [65, 2_000, 200_000])
def test_deep_input_is_refused_by_the_limit(depth: int) -> None:
    with pytest.raises(InputError) as caught:
        parse_input_args(["x=" + "[" * depth + "]" * depth], limits=LIMITS)
    assert "limit.input_depth" in rules(caught.value)


def test_brackets_inside_strings_do_not_count() -> None:
    assert parse_input_args(['x="' + "[" * 500 + '"'], limits=LIMITS) == {"x": "[" * 500}


def test_undecodable_argument_is_an_input_error() -> None:
    raw = os.fsdecode(b'x="\xff"')  # what Python makes of --input $'x="\xff"'
    with pytest.raises(InputError) as caught:
        parse_input_args([raw], limits=LIMITS)
    assert rules(caught.value) == {"input.encoding"}


@pytest.mark.parametrize("value", ["a\x00b", ["ok", {"k": "\x00"}], {"\x00": 1}])
def test_nul_byte_is_refused_naming_the_input(value: Any) -> None:
    with pytest.raises(InputError) as caught:
        check_inputs(DECLARED, {"x": value}, file="wf.star")
    (found,) = caught.value.diagnostics()
    assert found.rule == "input.text"
    assert "'x'" in found.message and "NUL" in found.message


def test_nul_escape_on_the_command_line_is_refused_at_plan_time() -> None:
    supplied = parse_input_args(['x="a\\u0000b"'], limits=LIMITS)
    with pytest.raises(InputError) as caught:
        check_inputs(DECLARED, supplied)
    assert rules(caught.value) == {"input.text"}


def test_lone_surrogate_is_refused_naming_the_input() -> None:
    with pytest.raises(InputError) as caught:
        check_inputs(DECLARED, {"x": "a\ud800"})
    (found,) = caught.value.diagnostics()
    assert found.rule == "input.text" and "'x'" in found.message


text = st.one_of(st.text(max_size=60), st.binary(max_size=40).map(os.fsdecode))
shaped = st.one_of(
    text,
    st.builds(lambda key, raw: f"{key}={raw}", st.sampled_from(["x", "y", ""]), text),
    st.integers(min_value=0, max_value=3_000).map(lambda n: "x=" + "{" * n + "}" * n),
    st.integers(min_value=0, max_value=3_000).map(lambda n: "x=" + '{"a":' * n + "1" + "}" * n),
)


@settings(max_examples=300, deadline=None)
@given(args=st.lists(shaped, max_size=4))
def test_any_input_text_is_a_value_or_an_input_error(args: list[str]) -> None:
    try:
        supplied = parse_input_args(args, limits=LIMITS)
        check_inputs(DECLARED, supplied)
    except InputError as err:
        assert all(found.message for found in err.diagnostics())


def test_a_misspelled_choice_is_answered_with_the_one_meant() -> None:
    """An enum input (or a human step's enum field) given a near miss names the choice meant; a
    value like no choice, or not text, gets the list alone."""
    declared = {"mode": {"type": "enum", "choices": ["oncall", "backlog"]}}
    with pytest.raises(InputError) as near:
        check_inputs(declared, {"mode": "oncal"})
    (found,) = near.value.diagnostics()
    assert found.rule == "input.enum"
    assert found.message == (
        'input \'mode\' is "oncal", which is not one of ["oncall", "backlog"]; did you mean "oncall"?'
    )
    with pytest.raises(InputError) as far:
        check_inputs(declared, {"mode": "slow"}, noun="field")
    assert far.value.diagnostics()[0].message == 'field \'mode\' is "slow", which is not one of ["oncall", "backlog"]'
    with pytest.raises(InputError) as number:
        check_inputs(declared, {"mode": 3})
    assert "did you mean" not in number.value.diagnostics()[0].message
