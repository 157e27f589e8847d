"""How planning reports problems: every independent problem of a workflow at once, and Starlark
syntax errors with the few expected tokens that matter (still at file:line:column)."""

from __future__ import annotations

import re

import pytest

from rho_notebook.errors import Diagnostic, InvalidWorkflow
from tests.conftest import Project, star


def rejected(project: Project, text: str) -> list[Diagnostic]:
    project.write("wf.star", text)
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("wf.star", store=False)
    return caught.value.diagnostics()


def test_missing_timeout_does_not_hide_a_cycle(project: Project) -> None:
    found = rejected(
        project,
        star(
            """
            return workflow(name = "both", nodes = [
                command(name = "a", argv = ["true"], needs = ["b"], max_output_bytes = 100),
                command(name = "b", argv = ["true"], needs = ["a"], timeout_seconds = 5, max_output_bytes = 100),
            ])
            """
        ),
    )
    rules = sorted(d.rule for d in found)
    assert rules == ["graph.cycle", "node.timeout_seconds"], [d.render() for d in found]
    [timeout] = [d for d in found if d.rule == "node.timeout_seconds"]
    assert "command 'a' needs timeout_seconds" in timeout.message and timeout.line == 3


def test_every_missing_or_bad_budget_and_unknown_need_is_reported(project: Project) -> None:
    found = rejected(
        project,
        star(
            """
            return workflow(name = "many", nodes = [
                command(name = "a", argv = ["true"], needs = ["ghost"]),
                command(name = "b", argv = ["true"], timeout_seconds = 0, max_output_bytes = 100),
            ])
            """
        ),
    )
    rendered = [d.render() for d in found]
    assert sorted(d.rule for d in found) == [
        "node.max_output_bytes",
        "node.needs",
        "node.timeout_seconds",
        "node.timeout_seconds",
    ], rendered
    assert any("command 'b': timeout_seconds must be a positive integer, got 0" in r for r in rendered)


def _expected_tokens(message: str) -> list[str]:
    return re.findall(r'"((?:[^"\\]|\\.)*)"', message)


def test_syntax_error_shows_the_few_expected_tokens_that_matter(project: Project) -> None:
    [found] = rejected(project, "x = [1 2]\n")
    assert found.rule == "starlark.syntax" and (found.line, found.column) == (1, 8)
    assert "unexpected integer literal '2'" in found.message
    tokens = _expected_tokens(found.message)
    assert 1 <= len(tokens) <= 5 and {",", "]"} <= set(tokens), found.message
    assert found.render().startswith(f"{found.file}:1:8: error[starlark.syntax]")


def test_syntax_error_that_wants_an_expression_says_so(project: Project) -> None:
    [found] = rejected(project, "x = )\n")
    assert (found.line, found.column) == (1, 5)
    assert "unexpected symbol ')'" in found.message and "expected an expression" in found.message
    assert len(_expected_tokens(found.message)) <= 5, found.message


def test_short_expected_lists_are_kept(project: Project) -> None:
    [found] = rejected(project, "def build(inputs)\n    return 1\n")
    assert 'expected one of "->" or ":"' in found.message
