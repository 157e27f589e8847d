"""The value checks of constructor arguments at the edges of their budgets (``value_depth``,
``string_bytes``, int64): what is within a budget passes and the first thing past it is refused
with that budget, however the worker shortcuts the check of plain values."""

from __future__ import annotations

import pytest

from rho_notebook.errors import InvalidWorkflow
from rho_notebook.source.limits import load_limits
from tests.conftest import Project, star


def _rule_of(project: Project, value_source: str) -> str:
    """The rule of the first diagnostic when ``extra = <value>`` is given to a command: past the
    value checks, an unknown argument is refused (``node.argument``)."""
    project.write(
        "wf.star",
        star(
            f"{value_source}\n"
            'return workflow(name = "w", nodes = [command(name = "a", argv = ["true"], timeout_seconds = 5, '
            "max_output_bytes = 10, extra = v)])"
        ),
    )
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("wf.star", store=False)
    return caught.value.diagnostics()[0].rule


def _nested(levels: int, leaf: str) -> str:
    return f"v = {leaf}\nfor i in range({levels}):\n    v = [v]"


@pytest.mark.parametrize("leaf", ["1", '"x"', "None", "True", "[]", "{}"])
def test_a_value_as_deep_as_the_budget_passes_and_one_level_more_is_refused(project: Project, leaf: str) -> None:
    depth = load_limits().limit("value_depth")  # the arguments are level 0, ``extra`` level 1
    assert _rule_of(project, _nested(depth - 1, leaf)) == "node.argument"
    if leaf in ("[]", "{}"):  # an empty container at the deepest level holds nothing deeper
        assert _rule_of(project, _nested(depth, leaf)) == "limit.value_depth"
        assert _rule_of(project, _nested(depth, f"[{leaf}]")) == "limit.value_depth"
    else:
        assert _rule_of(project, _nested(depth, leaf)) == "limit.value_depth"


def test_the_deep_value_may_sit_in_a_dict(project: Project) -> None:
    depth = load_limits().limit("value_depth")
    within = f'v = 1\nfor i in range({depth - 1}):\n    v = {{"k": v}}'
    past = f'v = 1\nfor i in range({depth}):\n    v = {{"k": v}}'
    assert _rule_of(project, within) == "node.argument"
    assert _rule_of(project, past) == "limit.value_depth"


def test_strings_are_measured_in_utf8_bytes(project: Project) -> None:
    limit = load_limits().limit("string_bytes")
    assert _rule_of(project, f'v = ["x" * {limit}]') == "node.argument"
    assert _rule_of(project, f'v = ["x" * {limit + 1}]') == "limit.string_bytes"
    # more characters than a quarter of the budget, fewer bytes than it: passes
    assert _rule_of(project, f'v = {{"k": "é" * {limit // 2}}}') == "node.argument"
    assert _rule_of(project, f'v = {{"k": "é" * {limit // 2 + 1}}}') == "limit.string_bytes"


def test_integers_are_signed_64_bit(project: Project) -> None:
    assert _rule_of(project, "v = [9223372036854775807, -9223372036854775807 - 1]") == "node.argument"
    assert _rule_of(project, "v = [1, 9223372036854775807 + 1]") == "value.int64"
    assert _rule_of(project, "v = {'k': -9223372036854775807 - 2}") == "value.int64"


def test_a_non_string_key_deep_in_a_value_is_refused(project: Project) -> None:
    assert _rule_of(project, "v = [{'a': [{1: 2}]}]") == "value.dict_key"
