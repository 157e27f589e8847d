"""The negative corpus: every rule of source, inputs, graph and resolution, each rejected with its
rule named, a message that says what is wrong, a location where there is one, and nothing stored."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest

from rho_notebook.errors import InvalidWorkflow
from tests.conftest import Project, star

CMD = 'command(name = "{name}", argv = ["true"], timeout_seconds = 5, max_output_bytes = 100{extra})'


def cmd(name: str, extra: str = "") -> str:
    return CMD.format(name=name, extra=(", " + extra) if extra else "")


NEEDS_NODES = "a = " + cmd("a") + '\nreturn workflow(name = "neg", nodes = [a, ' + cmd("b", 'needs = [a, "c"]') + "])"


def nodes(*items: str) -> str:
    return star('return workflow(name = "neg", nodes = [\n    ' + ",\n    ".join(items) + ",\n])")


@dataclass
class Case:
    id: str
    files: dict[str, str]
    rule: str
    message: str
    inputs: dict[str, object] = field(default_factory=dict)
    entry: str = "wf.star"
    line: int | None = None


CASES = [
    # --- source and values -------------------------------------------------------------------
    Case("syntax-error", {"wf.star": "def build(inputs)\n    return 1\n"}, "starlark.syntax", "Parse error", line=1),
    Case(
        "build-body-as-module",
        {"wf.star": 'return workflow(name = "w", nodes = [])\n'},
        "starlark.error",
        "put the nodes and the return in `def build(inputs):` and end with `WORKFLOW = define(build = build)`",
        line=1,
    ),
    Case(
        "undeclared-input",
        {"wf.star": star('return workflow(name = "w", nodes = [' + cmd("a", "env = {'WHO': inputs['who']}") + "])")},
        "starlark.error",
        "Key `\"who\"` was not found; the workflow declares no input 'who': declare it in "
        'define(inputs = {"who": input.string()}, build = build)',
        line=2,
    ),
    Case(
        "float-literal",
        {"wf.star": star('x = 1.5\nreturn workflow(name = "a", nodes = [])')},
        "value.float",
        "float literal 1.5",
        line=2,
    ),
    Case(
        "float-computed",
        {"wf.star": nodes(cmd("a", "timeout_seconds = 3 / 2").replace("timeout_seconds = 5, ", ""))},
        "value.float",
        "floats are not supported",
    ),
    Case(
        "float-builtin",
        {"wf.star": nodes('command(name = "a", argv = ["true"], timeout_seconds = float(1), max_output_bytes = 1)')},
        "value.float",
        "float() is not supported",
    ),
    Case(
        "int-literal-too-wide",
        {"wf.star": star('x = 99999999999999999999\nreturn workflow(name = "a", nodes = [])')},
        "value.int64",
        "outside signed 64-bit",
        line=2,
    ),
    Case(
        "int-computed-too-wide",
        {"wf.star": nodes(cmd("a", "timeout_seconds = 9223372036854775807 + 1").replace("timeout_seconds = 5, ", ""))},
        "value.int64",
        "outside signed 64-bit",
    ),
    Case(
        "function-as-value",
        {"wf.star": star('return workflow(name = "a", nodes = [], concurrency = {"total": build})')},
        "value.type",
        "function cannot be used",
    ),
    Case("no-workflow-export", {"wf.star": "X = 1\n"}, "starlark.error", "WORKFLOW"),
    Case("workflow-not-define", {"wf.star": "WORKFLOW = {}\n"}, "starlark.error", "define("),
    Case("build-returns-wrong", {"wf.star": star("return 1")}, "define.build", "must return workflow("),
    Case(
        "define-unknown-arg",
        {
            "wf.star": "def build(i):\n    return workflow(name='a', nodes=[])\nWORKFLOW = define(build = build, extra = 1)\n"
        },
        "define.argument",
        "extra",
    ),
    Case(
        "define-build-not-function", {"wf.star": "WORKFLOW = define(build = 1)\n"}, "define.build", "must be a function"
    ),
    Case("undefined-name", {"wf.star": star("return workflow(name = 'a', nodes = [nope])")}, "starlark.error", "nope"),
    Case("fail-called", {"wf.star": star('fail("author says no")')}, "starlark.error", "author says no"),
    # --- module loading ----------------------------------------------------------------------------
    Case("load-missing", {"wf.star": 'load("//lib/none.star", "x")\n'}, "load.missing", "no such file", line=1),
    Case("load-not-star", {"wf.star": 'load("//lib/x.bzl", "x")\n'}, "load.label", ".star"),
    Case("load-dotdot", {"wf.star": 'load("//lib/../x.star", "x")\n'}, "load.label", "'..'"),
    Case("load-relative", {"wf.star": 'load("lib/x.star", "x")\n'}, "load.label", "must start with //"),
    Case("load-absolute", {"wf.star": 'load("/etc/x.star", "x")\n'}, "load.label", "absolute path"),
    Case("load-empty-part", {"wf.star": 'load("//lib//x.star", "x")\n'}, "load.label", "empty path part"),
    Case("load-backslash", {"wf.star": 'load("//lib\\\\x.star", "x")\n'}, "load.label", "backslash"),
    Case("load-platform-prefix", {"wf.star": 'load("C:/x.star", "x")\n'}, "load.label", "platform prefix"),
    Case(
        "load-cycle",
        {
            "wf.star": 'load("//a.star", "x")\n',
            "a.star": 'load("//b.star", "y")\nx = 1\n',
            "b.star": 'load("//a.star", "x")\ny = 1\n',
        },
        "load.cycle",
        "import cycle",
    ),
    Case(
        "load-missing-symbol", {"wf.star": 'load("//a.star", "nope")\n', "a.star": "x = 1\n"}, "starlark.error", "nope"
    ),
    # --- inputs --------------------------------------------------------------------------------------
    Case(
        "input-missing",
        {
            "wf.star": "def build(i):\n    return workflow(name='a', nodes=[])\nWORKFLOW = define(inputs = {'t': input.string()}, build = build)\n"
        },
        "input.missing",
        "'t'",
    ),
    Case(
        "input-unknown",
        {"wf.star": star("return workflow(name='a', nodes=[])")},
        "input.unknown",
        "'zzz'",
        inputs={"zzz": 1},
    ),
    Case(
        "input-wrong-type",
        {
            "wf.star": "def build(i):\n    return workflow(name='a', nodes=[])\nWORKFLOW = define(inputs = {'n': input.integer(default = 1)}, build = build)\n"
        },
        "input.type",
        "must be an integer",
        inputs={"n": "x"},
    ),
    Case(
        "input-bool-not-int",
        {
            "wf.star": "def build(i):\n    return workflow(name='a', nodes=[])\nWORKFLOW = define(inputs = {'n': input.integer(default = 1)}, build = build)\n"
        },
        "input.type",
        "integer",
        inputs={"n": True},
    ),
    Case(
        "input-out-of-enum",
        {
            "wf.star": "def build(i):\n    return workflow(name='a', nodes=[])\nWORKFLOW = define(inputs = {'m': input.enum(['a', 'b'])}, build = build)\n"
        },
        "input.enum",
        "not one of",
        inputs={"m": "c"},
    ),
    Case(
        "input-bad-default",
        {
            "wf.star": "def build(i):\n    return workflow(name='a', nodes=[])\nWORKFLOW = define(inputs = {'n': input.integer(default = 'x')}, build = build)\n"
        },
        "input.default",
        "must be an integer",
    ),
    Case(
        "input-bad-name",
        {
            "wf.star": "def build(i):\n    return workflow(name='a', nodes=[])\nWORKFLOW = define(inputs = {'Bad': input.string()}, build = build)\n"
        },
        "input.name",
        "'Bad'",
    ),
    Case(
        "input-not-declared-with-input",
        {
            "wf.star": "def build(i):\n    return workflow(name='a', nodes=[])\nWORKFLOW = define(inputs = {'a': 1}, build = build)\n"
        },
        "define.inputs",
        "input.string",
    ),
    # --- node fields ---------------------------------------------------------------------------------
    Case("name-grammar", {"wf.star": nodes(cmd("Bad"))}, "node.name", "must start with a-z"),
    Case("name-too-long", {"wf.star": nodes(cmd("a" * 64))}, "node.name", "at most 63"),
    Case(
        "workflow-name-grammar",
        {"wf.star": star("return workflow(name = '9x', nodes = [])")},
        "workflow.name",
        "must start with a-z",
    ),
    Case(
        "missing-timeout",
        {"wf.star": nodes('command(name = "a", argv = ["true"], max_output_bytes = 1)')},
        "node.timeout_seconds",
        "needs timeout_seconds",
    ),
    Case(
        "missing-max-output",
        {"wf.star": nodes('command(name = "a", argv = ["true"], timeout_seconds = 1)')},
        "node.max_output_bytes",
        "needs max_output_bytes",
    ),
    Case(
        "zero-timeout",
        {"wf.star": nodes(cmd("a").replace("timeout_seconds = 5", "timeout_seconds = 0"))},
        "node.timeout_seconds",
        "positive integer",
    ),
    Case("unknown-node-arg", {"wf.star": nodes(cmd("a", "retries = 3"))}, "node.argument", "retries"),
    Case(
        "argv-empty",
        {"wf.star": nodes('command(name = "a", argv = [], timeout_seconds = 1, max_output_bytes = 1)')},
        "command.argv",
        "non-empty",
    ),
    Case(
        "argv0-from-output",
        {
            "wf.star": nodes(
                cmd("a", "output = schema.stdout_json(schema.string())"),
                'command(name = "b", argv = [output("a")], needs = ["a"], timeout_seconds = 1, max_output_bytes = 1)',
            )
        },
        "command.argv",
        "argv[0] must be a literal",
    ),
    Case(
        "argv-int",
        {"wf.star": nodes('command(name = "a", argv = ["echo", 3], timeout_seconds = 1, max_output_bytes = 1)')},
        "command.argv",
        "str()",
    ),
    Case(
        "shell-dynamic-command",
        {
            "wf.star": nodes(
                cmd("a", "output = schema.stdout_json(schema.string())"),
                'shell(name = "b", executable = "sh", command = output("a"), needs = ["a"], timeout_seconds = 1, max_output_bytes = 1)',
            )
        },
        "shell.command",
        "static text",
    ),
    Case(
        "command-output-not-stdout-json",
        {"wf.star": nodes(cmd("a", "output = schema.string()"))},
        "node.output",
        "stdout_json",
    ),
    Case(
        "agent-output-stdout-json",
        {
            "wf.star": nodes(
                'agent(name = "a", agent = "default", prompt = "hi", output = schema.stdout_json(schema.string()), timeout_seconds = 1, max_output_bytes = 1)'
            )
        },
        "node.output",
        "for command and shell",
    ),
    Case(
        "bad-access",
        {
            "wf.star": nodes(
                'agent(name = "a", agent = "default", prompt = "hi", access = "write", timeout_seconds = 1, max_output_bytes = 1)'
            )
        },
        "agent.access",
        "read_only",
    ),
    Case(
        "read-only-agent-with-write-tools",
        {
            "wf.star": nodes(
                'agent(name = "a", agent = "worker", prompt = "hi", access = "read_only", timeout_seconds = 1, max_output_bytes = 1)'
            )
        },
        "agent.access",
        "not read-only",
    ),
    Case(
        "unknown-agent",
        {
            "wf.star": nodes(
                'agent(name = "a", agent = "nobody", prompt = "hi", timeout_seconds = 1, max_output_bytes = 1)'
            )
        },
        "agent.unknown",
        "nobody",
    ),
    Case(
        "bad-agent-file",
        {
            "agents/broken.md": "---\ndescription: x\ncolour: red\n---\n",
            "wf.star": nodes(
                'agent(name = "a", agent = "broken", prompt = "hi", timeout_seconds = 1, max_output_bytes = 1)'
            ),
        },
        "agent.",
        "colour",
    ),
    # --- schemas -------------------------------------------------------------------------------------------
    Case(
        "enum-non-scalar",
        {"wf.star": nodes(cmd("a", "output = schema.stdout_json(schema.enum_([[1]]))"))},
        "schema.enum",
        "scalars",
    ),
    Case(
        "enum-duplicate",
        {"wf.star": nodes(cmd("a", 'output = schema.stdout_json(schema.enum_(["x", "x"]))'))},
        "schema.enum",
        "twice",
    ),
    Case(
        "schema-not-schema",
        {"wf.star": nodes(cmd("a", "output = schema.stdout_json(schema.list(1))"))},
        "schema.argument",
        "must be a schema",
    ),
    Case(
        "stdout-json-nested",
        {"wf.star": nodes(cmd("a", "output = schema.stdout_json(schema.list(schema.stdout_json(schema.string())))"))},
        "schema.stdout_json",
        "cannot wrap",
    ),
    Case(
        "schema-depth",
        {
            "wf.star": star(
                's = schema.string()\nfor _ in range(40):\n    s = schema.list(s)\nreturn workflow(name = "a", nodes = [command(name = "a", argv = ["true"], output = schema.stdout_json(s), timeout_seconds = 1, max_output_bytes = 1)])'
            )
        },
        "limit.schema_depth",
        "schema_depth",
    ),
    # --- graph rules -------------------------------------------------------------------------------------------
    Case("duplicate-name", {"wf.star": nodes(cmd("a"), cmd("a"))}, "node.duplicate", "used twice"),
    Case("needs-unknown", {"wf.star": nodes(cmd("a", 'needs = ["ghost"]'))}, "node.needs", "'ghost'"),
    Case("needs-self", {"wf.star": nodes(cmd("a", 'needs = ["a"]'))}, "node.needs", "needs itself"),
    Case(  # the node value itself, where its name belongs: the message writes the names
        "needs-nodes",
        {"wf.star": star(NEEDS_NODES)},
        "node.needs",
        'needs must be a list of node names, not the nodes themselves: write needs = ["a", "c"]',
    ),
    Case(
        "cycle",
        {"wf.star": nodes(cmd("a", 'needs = ["c"]'), cmd("b", 'needs = ["a"]'), cmd("c", 'needs = ["b"]'))},
        "graph.cycle",
        "a -> c -> b -> a",
    ),
    Case(
        "ref-not-ancestor",
        {
            "wf.star": nodes(
                cmd("a", "output = schema.stdout_json(schema.string())"),
                cmd("b", 'when = condition.equals(output("a"), "x")'),
            )
        },
        "reference.ancestor",
        "not one of its ancestors",
    ),
    Case(
        "ref-unknown-node",
        {"wf.star": nodes(cmd("b", 'when = condition.equals(status("zz"), "success")'))},
        "reference.unknown",
        "'zz'",
    ),
    Case(
        "ref-output-without-schema",
        {"wf.star": nodes(cmd("a"), cmd("b", 'needs = ["a"], when = condition.equals(output("a"), "x")'))},
        "reference.output",
        "without an output schema",
    ),
    Case(
        "ref-bad-path",
        {
            "wf.star": nodes(
                cmd("a", 'output = schema.stdout_json(schema.record({"x": schema.string()}))'),
                cmd("b", 'needs = ["a"], when = condition.equals(output("a", ["y"]), "x")'),
            )
        },
        "reference.path",
        "does not exist",
    ),
    Case(
        "exit-code-of-agent",
        {
            "wf.star": nodes(
                'agent(name = "a", agent = "default", prompt = "p", timeout_seconds = 1, max_output_bytes = 1)',
                cmd("b", 'needs = ["a"], when = condition.equals(exit_code("a"), 0)'),
            )
        },
        "reference.exit_code",
        "only command and shell",
    ),
    Case(
        "condition-not-a-ref",
        {"wf.star": nodes(cmd("b", 'when = condition.equals("x", "x")'))},
        "condition.operand",
        "reference",
    ),
    Case(
        "condition-non-scalar",
        {"wf.star": nodes(cmd("a"), cmd("b", 'needs = ["a"], when = condition.equals(status("a"), ["x"])'))},
        "condition.value",
        "scalars",
    ),
    Case("when-not-condition", {"wf.star": nodes(cmd("b", "when = True"))}, "node.when", "must be a condition"),
    Case(
        "template-status-part",
        {
            "wf.star": nodes(
                cmd("a"),
                'agent(name = "b", agent = "default", needs = ["a"], prompt = template([status("a")]), timeout_seconds = 1, max_output_bytes = 1)',
            )
        },
        "template.part",
        "conditions",
    ),
    Case(
        "condition-depth",
        {
            "wf.star": star(
                'c = condition.equals(status("a"), "success")\nfor _ in range(40):\n    c = condition.not_(c)\nreturn workflow(name = "x", nodes = [command(name = "a", argv = ["true"], timeout_seconds = 1, max_output_bytes = 1), command(name = "b", argv = ["true"], needs = ["a"], when = c, timeout_seconds = 1, max_output_bytes = 1)])'
            )
        },
        "limit.condition_depth",
        "condition_depth",
    ),
    # --- resolution ----------------------------------------------------------------------------------------------
    Case(
        "executable-missing",
        {
            "wf.star": nodes(
                'command(name = "a", argv = ["no-such-program-xyz"], timeout_seconds = 1, max_output_bytes = 1)'
            )
        },
        "resolve",
        "not found on PATH",
    ),
    Case(
        "executable-not-executable",
        {
            "tool.sh": "echo hi\n",
            "wf.star": nodes('command(name = "a", argv = ["./tool.sh"], timeout_seconds = 1, max_output_bytes = 1)'),
        },
        "resolve",
        "not executable",
    ),
    Case("cwd-escape", {"wf.star": nodes(cmd("a", 'cwd = "../"'))}, "resolve", "inside the workspace"),
    Case("cwd-missing", {"wf.star": nodes(cmd("a", 'cwd = "nope"'))}, "resolve", "does not exist"),
    Case(
        "timeout-over-budget",
        {"wf.star": nodes(cmd("a").replace("timeout_seconds = 5", "timeout_seconds = 99999999"))},
        "limit.timeout_seconds",
        "timeout_seconds",
    ),
    Case(
        "too-many-nodes",
        {
            "wf.star": star(
                'return workflow(name = "a", nodes = [command(name = "n%d" % i, argv = ["true"], timeout_seconds = 1, max_output_bytes = 1) for i in range(2001)])'
            )
        },
        "limit.node_count",
        "node_count",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rejected(project: Project, case: Case) -> None:
    for relative, text in case.files.items():
        project.write(relative, text)
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan(case.entry, case.inputs)
    found = caught.value.diagnostics()
    rendered = "\n".join(d.render() for d in found)
    assert any(d.rule.startswith(case.rule) for d in found), rendered
    assert case.message in rendered, rendered
    if case.line is not None:
        assert any(d.line == case.line for d in found), rendered
    assert project.stored_plans() == []


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


def test_symlinked_module_rejected(project: Project) -> None:
    project.write("real/lib.star", "x = 1\n")
    os.symlink(project.root / "real", project.root / "linked")
    project.write("wf.star", 'load("//linked/lib.star", "x")\n')
    with pytest.raises(InvalidWorkflow, match="symlink"):
        project.plan("wf.star")
    assert project.stored_plans() == []


def test_symlinked_entry_rejected(project: Project) -> None:
    project.write("real.star", star("return workflow(name = 'a', nodes = [])"))
    os.symlink(project.root / "real.star", project.root / "wf.star")
    with pytest.raises(InvalidWorkflow, match="symlink"):
        project.plan("wf.star")


def test_entry_outside_workspace_rejected(project: Project, tmp_path) -> None:
    outside = tmp_path / "elsewhere.star"
    outside.write_text(star("return workflow(name = 'a', nodes = [])"))
    with pytest.raises(InvalidWorkflow, match="outside the workspace"):
        project.plan(str(outside))


def test_every_problem_reported_at_once(project: Project) -> None:
    project.write("wf.star", nodes(cmd("a", 'needs = ["x"]'), cmd("b", 'needs = ["y"]')))
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("wf.star")
    assert len(caught.value.diagnostics()) == 2


@pytest.mark.parametrize(
    ("typed", "hint"),
    [
        ("node", "did you mean one of the node constructors `agent`, `command`, `shell`, `approval`, `python`?"),
        ("input_string", "did you mean `input.string`?"),
        ("schema_integer", "did you mean `schema.integer`?"),
        ("cond_any", "did you mean `condition.any`?"),
        ("command_json", "did you mean `command`?"),
    ],
)
def test_a_name_close_to_a_private_builtin_is_pointed_at_its_public_form(
    project: Project, typed: str, hint: str
) -> None:
    """Starlark suggests the closest name in scope; the prelude's private builtins (``_node``,
    ``_input_string``) are in scope, but a person should be told what to write."""
    project.write("wf.star", star(f"x = {typed}\nreturn workflow(name = 'a', nodes = [])"))
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("wf.star")
    (found,) = caught.value.diagnostics()
    assert found.rule == "starlark.error" and found.line == 2
    assert found.message == f"Variable `{typed}` not found, {hint}"


def test_a_name_close_to_a_private_name_of_the_persons_own_keeps_its_hint(project: Project) -> None:
    project.write("wf.star", "_helper = 1\n" + star("return workflow(name = 'a', nodes = [helper])"))
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("wf.star")
    assert "did you mean `_helper`?" in caught.value.diagnostics()[0].message


def test_a_missing_key_of_another_dict_gets_no_input_hint(project: Project) -> None:
    project.write("wf.star", star('d = {}\nx = d["who"]\nreturn workflow(name = "w", nodes = [])'))
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("wf.star")
    [found] = caught.value.diagnostics()
    assert found.message == 'Key `"who"` was not found' and found.line == 3


@pytest.mark.parametrize(
    ("module", "rule", "message", "line"),
    [
        ("X = 1\ndef f(:\n    return 1\n", "starlark.syntax", "Parse error: unexpected symbol ':' here", 2),
        ("def f():\n    fail('boom')\n\nX = f()\n", "starlark.error", "fail: boom", 2),
        ("def f():\n    return {}['k']\n\nX = f()\n", "starlark.error", 'Key `"k"` was not found', 2),
    ],
)
def test_starlark_s_own_error_in_a_loaded_module_names_that_module(
    project: Project, module: str, rule: str, message: str, line: int
) -> None:
    """Not the load statement of the module that loads it, nor a traceback for a message."""
    project.write("lib/a.star", module)
    project.write("wf.star", 'load("//lib/a.star", "X")\n' + star('return workflow(name = "w", nodes = [])'))
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("wf.star")
    [found] = caught.value.diagnostics()
    assert (found.rule, found.file, found.line) == (rule, "lib/a.star", line), found.render()
    assert found.message.startswith(message) and "Traceback" not in found.message, found.render()
