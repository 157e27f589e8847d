"""Plan-time checks that follow Rho: ``build`` runs before the entry module is frozen, and every
condition comparand is checked against what its reference can hold (a terminal state, the
referenced output schema, a 32-bit exit code), so a typo is an error and not a branch that is
silently never taken."""

from __future__ import annotations

import json

import pytest

from rho_notebook.errors import Diagnostic, InvalidWorkflow
from tests.conftest import Project, star

TERMINAL = ["success", "failure", "denial", "cancellation", "skipped", "blocked"]


def cmd(name: str, extra: str = "") -> str:
    tail = (", " + extra) if extra else ""
    return f'command(name = "{name}", argv = ["true"], timeout_seconds = 5, max_output_bytes = 100{tail})'


def two_nodes(a_extra: str, when: str) -> str:
    """Node ``a``, and node ``b`` that needs ``a`` and runs ``when``."""
    b = cmd("b", 'needs = ["a"], when = ' + when)
    return star(f'return workflow(name = "checks", nodes = [\n    {cmd("a", a_extra)},\n    {b},\n])')


def line_of(text: str, needle: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), start=1) if needle in line)


def rejected(project: Project, text: str) -> list[Diagnostic]:
    project.write("wf.star", text)
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("wf.star", store=False)
    return caught.value.diagnostics()


def accepted(project: Project, text: str) -> None:
    project.write("wf.star", text)
    project.plan("wf.star", store=False)


def only(found: list[Diagnostic], rule: str) -> Diagnostic:
    rendered = "\n".join(d.render() for d in found)
    matching = [d for d in found if d.rule == rule]
    assert len(matching) == 1 and len(found) == 1, rendered
    return matching[0]


# -- 8. build runs before the entry module is frozen ---------------------------------------------


def test_build_appends_to_a_module_level_list_of_the_entry_module(project: Project) -> None:
    """Rho's ``validates_inputs_and_builds_one_owned_graph``: the entry module is still mutable
    while ``build`` runs, so build may collect nodes in a module-level list."""
    project.write(
        "wf.star",
        """\
        NODES = []

        def build(inputs):
            NODES.append(command(name = inputs["name"], argv = ["true"], timeout_seconds = 5, max_output_bytes = 100))
            return workflow(name = "owned", nodes = NODES)

        WORKFLOW = define(inputs = {"name": input.string()}, build = build)
        """,
    )
    plan = project.plan("wf.star", {"name": "check"}, store=False)
    assert [node.name for node in plan.graph.nodes] == ["check"]
    assert plan.graph.input_values() == {"name": "check"}


def test_loaded_modules_stay_frozen_while_build_runs(project: Project) -> None:
    project.write("lib.star", "SHARED = []\n")
    text = 'load("//lib.star", "SHARED")\n' + star(
        f'SHARED.append({cmd("a")})\nreturn workflow(name = "frozen", nodes = SHARED)'
    )
    found = rejected(project, text)
    rendered = "\n".join(d.render() for d in found)
    assert "Immutable" in rendered, rendered
    assert found[0].file == "wf.star" and found[0].line == line_of(text, "SHARED.append"), rendered


def test_entry_without_workflow_is_still_reported(project: Project) -> None:
    found = rejected(project, "X = 1\n")
    assert "WORKFLOW" in found[0].message and found[0].rule == "starlark.error"


def test_workflow_that_is_not_define_is_still_reported(project: Project) -> None:
    found = rejected(project, "WORKFLOW = {}\n")
    assert "define(" in found[0].message


# -- 9. status comparands are terminal states -------------------------------------------------------


@pytest.mark.parametrize(
    ("when", "bad"),
    [
        ('condition.equals(status("a"), "succeeded")', '"succeeded"'),
        ('condition.is_one_of(status("a"), ["success", "failed"])', '"failed"'),
        ('condition.equals(status("a"), "running")', '"running"'),
        ('condition.not_(condition.equals(status("a"), "pending"))', '"pending"'),
        ('condition.equals(status("a"), 0)', "0"),
    ],
    ids=["equals-typo", "is-one-of-typo", "not-terminal", "nested", "not-a-string"],
)
def test_status_comparand_must_be_a_terminal_state(project: Project, when: str, bad: str) -> None:
    text = two_nodes("", when)
    found = only(rejected(project, text), "condition.status")
    assert found.file == "wf.star" and found.line == line_of(text, 'name = "b"'), found.render()
    assert "'b'" in found.message and "status('a')" in found.message and bad in found.message, found.message
    for state in TERMINAL:
        assert state in found.message, found.message


def test_every_terminal_state_is_accepted(project: Project) -> None:
    accepted(project, two_nodes("", f'condition.is_one_of(status("a"), {json.dumps(TERMINAL)})'))


# -- 10. comparands match the referenced schema ------------------------------------------------------

RECORD = (
    "output = schema.stdout_json(schema.record({"
    '"flag": schema.bool(), '
    '"decision": schema.enum_(["approve", "revise"]), '
    '"count": schema.integer(), '
    '"summary": schema.string(), '
    '"note": schema.optional(schema.string()), '
    '"files": schema.list(schema.string())'
    "}))"
)


@pytest.mark.parametrize(
    ("when", "path", "schema_text", "bad"),
    [
        ('condition.equals(output("a", ["flag"]), "true")', '["flag"]', "bool", '"true"'),
        (
            'condition.equals(output("a", ["decision"]), "maybe")',
            '["decision"]',
            'enum_(["approve", "revise"])',
            '"maybe"',
        ),
        ('condition.is_one_of(output("a", ["decision"]), ["approve", "nope"])', '["decision"]', "enum_", '"nope"'),
        ('condition.equals(output("a", ["count"]), "3")', '["count"]', "integer", '"3"'),
        ('condition.equals(output("a", ["count"]), True)', '["count"]', "integer", "true"),
        ('condition.equals(output("a", ["summary"]), 3)', '["summary"]', "string", "3"),
        ('condition.equals(output("a", ["files", 0]), None)', '["files", 0]', "string", "null"),
        ('condition.equals(output("a"), "x")', "[]", "record(", '"x"'),
    ],
    ids=[
        "bool-vs-string",
        "enum-outside",
        "is-one-of-enum",
        "int-vs-string",
        "int-vs-bool",
        "string-vs-int",
        "list-item",
        "whole-record",
    ],
)
def test_comparand_must_match_the_referenced_schema(
    project: Project, when: str, path: str, schema_text: str, bad: str
) -> None:
    text = two_nodes(RECORD, when)
    found = only(rejected(project, text), "condition.schema")
    assert found.file == "wf.star" and found.line == line_of(text, 'name = "b"'), found.render()
    for part in ("'b'", f"output('a', {path})", schema_text, bad):
        assert part in found.message, (part, found.message)


@pytest.mark.parametrize(
    "when",
    [
        'condition.equals(output("a", ["flag"]), True)',
        'condition.is_one_of(output("a", ["decision"]), ["approve", "revise"])',
        'condition.equals(output("a", ["count"]), -7)',
        'condition.equals(output("a", ["note"]), None)',
        'condition.equals(output("a", ["note"]), "x")',
        'condition.equals(output("a", ["files", 0]), "main.py")',
    ],
)
def test_comparand_that_matches_the_schema_is_accepted(project: Project, when: str) -> None:
    accepted(project, two_nodes(RECORD, when))


# -- 11. exit_code() comparands are 32-bit integers ------------------------------------------------


@pytest.mark.parametrize(
    ("when", "bad"),
    [
        ('condition.equals(exit_code("a"), 2147483648)', "2147483648"),
        ('condition.equals(exit_code("a"), -2147483649)', "-2147483649"),
        ('condition.is_one_of(exit_code("a"), [0, 4294967296])', "4294967296"),
        ('condition.equals(exit_code("a"), "0")', '"0"'),
        ('condition.equals(exit_code("a"), True)', "true"),
    ],
    ids=["above", "below", "is-one-of", "string", "bool"],
)
def test_exit_code_comparand_must_be_a_32_bit_integer(project: Project, when: str, bad: str) -> None:
    text = two_nodes("", when)
    found = only(rejected(project, text), "condition.exit_code")
    assert found.file == "wf.star" and found.line == line_of(text, 'name = "b"'), found.render()
    for part in ("'b'", "exit_code('a')", bad, "-2147483648", "2147483647"):
        assert part in found.message, (part, found.message)


def test_exit_code_bounds_are_accepted(project: Project) -> None:
    accepted(project, two_nodes("", 'condition.is_one_of(exit_code("a"), [-2147483648, 0, 2147483647])'))


# -- NUL bytes never reach a launch ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node", "field"),
    [
        ('command(name = "a", argv = ["echo", "x\\x00y"], timeout_seconds = 5, max_output_bytes = 100)', "argv[1]"),
        ('command(name = "a", argv = ["true"], cwd = "a\\x00b", timeout_seconds = 5, max_output_bytes = 100)', "cwd"),
        (
            'shell(name = "a", executable = "sh", command = "echo \\x00", timeout_seconds = 5, max_output_bytes = 100)',
            "command",
        ),
    ],
)
def test_a_nul_byte_is_refused_at_plan_time_naming_the_node_and_field(project: Project, node: str, field: str) -> None:
    found = rejected(project, star(f'return workflow(name = "nul", nodes = [{node}])'))
    nul = [d for d in found if d.rule == "node.nul"]
    assert len(nul) == 1, "\n".join(d.render() for d in found)
    assert "node 'a'" in nul[0].message and field in nul[0].message
