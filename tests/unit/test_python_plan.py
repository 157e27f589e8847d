"""Python nodes at plan time: the ``python()`` builtin's shapes, reading modules by label and their
import closure (``ast``, never executed), the frozen interpreter and its environment, and the
plan-time rules of ``reuse``. Real Starlark, a real interpreter probe, no mocks."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from rho_notebook.errors import Diagnostic, InvalidWorkflow, SourceError
from rho_notebook.model.graph import PythonNode
from rho_notebook.model.plan import Plan
from rho_notebook.model.reference import OutputRef
from rho_notebook.source.labels import SourceText
from rho_notebook.source.pymodules import HARNESS_PATH, harness_sha256, module_name
from tests.conftest import Project, star

STATS = """\
import json


def stats(values, scale=1):
    return {"total": sum(values) * scale}
"""

RECORD = 'schema.record({"total": schema.integer()})'


def py(name: str, extra: str = "", *, module: str = "//nodes/stats.py", function: str = "stats") -> str:
    tail = (", " + extra) if extra else ""
    return (
        f'python(name = "{name}", module = "{module}", function = "{function}", '
        f"timeout_seconds = 10, max_output_bytes = 1000{tail})"
    )


def workflow(*nodes: str) -> str:
    listed = ",\n    ".join(nodes)
    return star(f'return workflow(name = "py", nodes = [\n    {listed},\n])')


def one_node(extra: str = 'args = {"values": [1, 2]}, output = ' + RECORD, **kw: str) -> str:
    return workflow(py("a", extra, **kw))


def planned(project: Project, text: str, *, python_interpreter: Path | None = None) -> Plan:
    project.write("wf.star", text)
    if python_interpreter is None:
        return project.plan("wf.star", store=False)
    service = project.service
    request = service.request_for(project.root / "wf.star", workspace=project.workspace)
    request = dataclasses.replace(request, python_interpreter=python_interpreter)
    return asyncio.run(service.validate(request))


def rejected(project: Project, text: str, **kw: Path) -> list[Diagnostic]:
    with pytest.raises(InvalidWorkflow) as caught:
        planned(project, text, **kw)
    return caught.value.diagnostics()


def only(found: list[Diagnostic], rule: str) -> Diagnostic:
    rendered = "\n".join(d.render() for d in found)
    matching = [d for d in found if d.rule == rule]
    assert len(matching) == 1 and len(found) == 1, rendered
    return matching[0]


def sha256_text(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


# -- module names --------------------------------------------------------------------------------


def test_module_names_follow_the_label_path() -> None:
    assert module_name("//nodes/calc.py") == "nodes.calc"
    assert module_name("//calc.py") == "calc"
    assert module_name("//pkg/__init__.py") == "pkg"
    assert module_name("//pkg/sub/__init__.py") == "pkg.sub"


@pytest.mark.parametrize(
    ("label", "says"),
    [
        ("//nodes/my-calc.py", "is not a Python identifier"),
        ("//class/calc.py", "is not a Python identifier"),
        ("//nodes/calc.star", "must name a .py file"),
        ("nodes/calc.py", "must start with //"),
        ("//nodes/../calc.py", "labels stay under the module root"),
        ("//__init__.py", "workspace root's __init__.py"),
    ],
)
def test_a_label_that_cannot_be_imported_is_refused(label: str, says: str) -> None:
    with pytest.raises(SourceError) as caught:
        module_name(label)
    assert says in caught.value.diagnostics()[0].message


def test_the_harness_digest_is_the_digest_of_its_file() -> None:
    assert harness_sha256() == "sha256:" + hashlib.sha256(HARNESS_PATH.read_bytes()).hexdigest()


# -- a valid node -----------------------------------------------------------------------------------


def test_a_python_node_freezes_its_module_interpreter_and_environment(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    plan = planned(project, one_node())
    graph = plan.graph
    node = graph.node("a")
    assert isinstance(node, PythonNode)
    assert (node.module, node.function, node.cwd, node.access) == ("//nodes/stats.py", "stats", "//", "mutating")
    assert [(arg.name, arg.value, arg.ref) for arg in node.args] == [("values", [1, 2], None)]
    assert node.modules == ("//nodes/stats.py",)
    [module] = graph.python_modules
    assert (module.label, module.name, module.text) == ("//nodes/stats.py", "nodes.stats", STATS)
    assert module.sha256 == sha256_text(STATS)

    runtime = graph.python
    assert runtime is not None
    real = os.path.realpath(sys.executable)
    assert runtime.interpreter.file.path == real
    assert runtime.interpreter.file.sha256 == "sha256:" + hashlib.sha256(Path(real).read_bytes()).hexdigest()
    assert runtime.version == platform.python_version()
    names = {name for name, _ in runtime.distributions}
    assert "pydantic" in names  # installed in the environment this test runs in
    assert list(runtime.distributions) == sorted(runtime.distributions)
    assert all(path for path in runtime.sys_path)
    assert set(runtime.site_dirs) <= set(runtime.sys_path)
    assert runtime.harness_sha256 == harness_sha256()

    # The module is a recorded source of the plan, and the launch checks the interpreter's identity.
    sources = {s.label: s.sha256 for s in plan.manifest.sources}
    assert sources["//nodes/stats.py"] == sha256_text(STATS)
    assert real in plan.manifest.identities
    authority = {(item.kind, item.value) for item in plan.manifest.authority}
    assert {("interpreter", real), ("directory", "//"), ("capability", "process")} <= authority


def test_args_with_an_output_reference_freeze_it_sorted_by_name(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    text = workflow(
        py("a", 'args = {"values": [1, 2]}, output = ' + RECORD),
        py(
            "b",
            'needs = ["a"], args = {"values": [1], "scale": output("a", ["total"]), "label": {"k": None}}',
        ),
    )
    node = planned(project, text).graph.node("b")
    assert isinstance(node, PythonNode)
    assert [arg.name for arg in node.args] == ["label", "scale", "values"]
    assert node.args[1].ref == OutputRef(node="a", path=("total",))
    assert node.args[0].value == {"k": None}
    assert node.references() == (OutputRef(node="a", path=("total",)),)


def test_a_different_interpreter_is_frozen_by_its_path(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    given = Path(sys.executable)
    graph = planned(project, one_node(), python_interpreter=given).graph
    assert graph.python is not None
    assert graph.python.interpreter.file.path == os.path.realpath(given)


def test_an_interpreter_that_is_not_there_is_named(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    missing = project.root.parent / "no-python" / "python3"
    found = only(rejected(project, one_node(), python_interpreter=missing), "python.interpreter")
    assert str(missing) in found.message and "'a'" in found.message


def test_an_interpreter_is_never_looked_up_on_path(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    found = only(rejected(project, one_node(), python_interpreter=Path("python3")), "python.interpreter")
    assert "absolute path" in found.message and "never looked up on PATH" in found.message


def test_an_interpreter_that_fails_its_probe_is_named(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    broken = project.write("bin/python3", "#!/bin/sh\necho broken >&2\nexit 3\n", mode=0o755)
    found = only(rejected(project, one_node(), python_interpreter=broken), "python.interpreter")
    assert str(broken) in found.message and "broken" in found.message


# -- the digest covers the modules --------------------------------------------------------------------


def test_a_change_to_the_module_changes_the_graph_digest(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    first = planned(project, one_node()).graph_digest
    assert planned(project, one_node()).graph_digest == first
    project.write("nodes/stats.py", STATS + "\n# edited\n")
    assert planned(project, one_node()).graph_digest != first


def test_a_module_imported_by_label_is_frozen_and_covered(project: Project) -> None:
    project.write("nodes/calc.py", "def double(x):\n    return 2 * x\n")
    project.write(
        "nodes/stats.py",
        "import os\nfrom nodes.calc import double\n\ndef stats(values):\n    return {'total': double(sum(values))}\n",
    )
    plan = planned(project, one_node())
    node = plan.graph.node("a")
    assert isinstance(node, PythonNode)
    assert node.modules == ("//nodes/calc.py", "//nodes/stats.py")
    assert [(m.label, m.name) for m in plan.graph.python_modules] == [
        ("//nodes/calc.py", "nodes.calc"),
        ("//nodes/stats.py", "nodes.stats"),
    ]
    assert "//nodes/calc.py" in {s.label for s in plan.manifest.sources}
    project.write("nodes/calc.py", "def double(x):\n    return x + x\n")
    assert planned(project, one_node()).graph_digest != plan.graph_digest


def test_relative_and_package_imports_are_followed(project: Project) -> None:
    project.write("pkg/__init__.py", "from .util import helper\n")
    project.write("pkg/util.py", "def helper():\n    return 1\n")
    project.write("pkg/stats.py", "from . import util\nfrom pkg import helper\n\ndef stats():\n    return 1\n")
    node = planned(project, one_node("", module="//pkg/stats.py")).graph.node("a")
    assert isinstance(node, PythonNode)
    assert node.modules == ("//pkg/__init__.py", "//pkg/stats.py", "//pkg/util.py")


def test_a_stdlib_import_is_not_frozen(project: Project) -> None:
    project.write("nodes/stats.py", "import json\nimport collections.abc\n" + STATS)
    graph = planned(project, one_node()).graph
    assert [m.label for m in graph.python_modules] == ["//nodes/stats.py"]


def test_an_overlay_module_shadows_the_file(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    project.write("wf.star", one_node())
    cell = "def stats(values):\n    return {'total': 0}\n"
    service = project.service
    request = service.request_for(project.root / "wf.star", workspace=project.workspace)
    overlay = {"//nodes/stats.py": SourceText(label="//nodes/stats.py", text=cell, display="cell [2]")}
    request = dataclasses.replace(request, overlay_sources=overlay)
    graph = asyncio.run(service.validate(request)).graph
    assert graph.python_module("//nodes/stats.py").text == cell


# -- module problems -------------------------------------------------------------------------------


def test_a_syntax_error_names_the_module_line_and_column(project: Project) -> None:
    project.write("nodes/stats.py", "def stats(values):\n    return (1,\n\nx = = 2\n")
    found = rejected(project, one_node())
    [problem] = found
    assert problem.rule == "python.syntax"
    assert problem.file == "nodes/stats.py"
    assert problem.line is not None and problem.line >= 2
    assert problem.column is not None


def test_a_syntax_error_in_an_imported_module_names_that_module(project: Project) -> None:
    project.write("nodes/calc.py", "def double(x)\n    return x\n")
    project.write("nodes/stats.py", "from nodes import calc\n" + STATS)
    problem = only(rejected(project, one_node()), "python.syntax")
    assert (problem.file, problem.line) == ("nodes/calc.py", 1)


def test_a_syntax_error_is_reported_once_for_every_node_that_imports_the_module(project: Project) -> None:
    project.write("nodes/stats.py", "def stats(:\n")
    text = workflow(py("a"), py("b"))
    only(rejected(project, text), "python.syntax")


def test_a_missing_function_names_module_and_function(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    found = only(rejected(project, one_node(function="totals")), "python.function")
    assert "nodes/stats.py" in found.message and "'totals'" in found.message


@pytest.mark.parametrize(
    "binding",
    [
        "def stats():\n    pass\n",
        "async def stats():\n    pass\n",
        "stats = len\n",
        "from json import dumps as stats\n",
        "try:\n    from json import dumps as stats\nexcept ImportError:\n    stats = None\n",
    ],
)
def test_a_top_level_binding_of_the_function_is_enough(project: Project, binding: str) -> None:
    project.write("nodes/stats.py", binding)
    planned(project, one_node(""))


def test_a_function_defined_only_inside_another_is_missing(project: Project) -> None:
    project.write("nodes/stats.py", "def outer():\n    def stats():\n        pass\n")
    only(rejected(project, one_node("")), "python.function")


def test_a_missing_module_is_named_with_its_node(project: Project) -> None:
    found = only(rejected(project, one_node()), "load.missing")
    assert "'a'" in found.message and "//nodes/stats.py" in found.message


def test_a_module_through_a_symlink_is_refused(project: Project) -> None:
    project.write("real/stats.py", STATS)
    (project.root / "nodes").symlink_to(project.root / "real")
    found = only(rejected(project, one_node()), "load.symlink")
    assert "symlink" in found.message


# -- builtin shapes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "rule", "says"),
    [
        ('args = {"values": status("b")}', "python.args", "status() and exit_code() belong in conditions"),
        ('args = {"values": [output("b")]}', "python.args", "cannot be nested"),
        ('args = {"values": template(["x"])}', "python.args", "literal value"),
        ('args = ["values"]', "python.args", "dictionary"),
        ('args = {"not-a-name": 1}', "python.args", "Python identifier"),
        ('access = "write"', "python.access", '"read_only" or "mutating"'),
        ('reuse_inputs = ["data/x.csv"]', "python.reuse_inputs", "workspace file labels"),
        ('reuse = "yes"', "node.reuse", "True or False"),
        ("output = schema.stdout_json(schema.integer())", "node.output", "function's return value"),
    ],
)
def test_python_arguments_are_checked(project: Project, extra: str, rule: str, says: str) -> None:
    project.write("nodes/stats.py", STATS)
    found = only(rejected(project, one_node(extra)), rule)
    assert says in found.message and "python 'a'" in found.message


@pytest.mark.parametrize(
    ("module", "function", "rule"),
    [
        ("nodes/stats.py", "stats", "python.module"),
        ("//nodes/stats.star", "stats", "python.module"),
        ("//nodes/stats.py", "not a name", "python.function"),
        ("//nodes/stats.py", "class", "python.function"),
    ],
)
def test_module_and_function_shapes(project: Project, module: str, function: str, rule: str) -> None:
    only(rejected(project, one_node("", module=module, function=function)), rule)


def test_module_and_function_are_required(project: Project) -> None:
    text = workflow('python(name = "a", timeout_seconds = 1, max_output_bytes = 1)')
    found = only(rejected(project, text), "node.argument")
    assert "function, module" in found.message


def test_an_arg_reading_a_node_that_is_not_an_ancestor_asks_for_needs(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    text = workflow(
        py("a", 'args = {"values": [1]}, output = ' + RECORD),
        py("b", 'args = {"values": output("a", ["total"])}'),
    )
    found = only(rejected(project, text), "reference.ancestor")
    assert "add it to needs" in found.message


def test_an_arg_reading_a_path_the_schema_lacks_is_refused(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    text = workflow(
        py("a", 'args = {"values": [1]}, output = ' + RECORD),
        py("b", 'needs = ["a"], args = {"values": output("a", ["count"])}'),
    )
    only(rejected(project, text), "reference.path")


def test_the_workflow_nodes_message_names_python(project: Project) -> None:
    found = only(rejected(project, star('return workflow(name = "py", nodes = [1])')), "workflow.nodes")
    assert "python()" in found.message


# -- reuse ---------------------------------------------------------------------------------------------


def test_reuse_on_a_mutating_python_node_is_an_error_naming_it(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    found = only(rejected(project, one_node('args = {"values": [1]}, reuse = True')), "node.reuse")
    assert "'a'" in found.message and '"mutating"' in found.message and "only read-only nodes" in found.message


def test_reuse_on_a_read_only_python_node_is_frozen(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    node = planned(project, one_node('args = {"values": [1]}, access = "read_only", reuse = True')).graph.node("a")
    assert isinstance(node, PythonNode)
    assert (node.access, node.reuse) == ("read_only", True)


@pytest.mark.parametrize("kind", ["command", "shell"])
def test_reuse_on_a_command_or_shell_node_is_refused(project: Project, kind: str) -> None:
    body = 'argv = ["true"]' if kind == "command" else 'executable = "/bin/sh", command = "true"'
    text = workflow(f'{kind}(name = "c", {body}, reuse = True, timeout_seconds = 1, max_output_bytes = 1)')
    found = only(rejected(project, text), "node.reuse")
    assert f"{kind} nodes are mutating (as in Rho) and never reused" in found.message


def test_reuse_on_an_approval_node_is_refused(project: Project) -> None:
    text = workflow('approval(name = "ok", prompt = "go?", reuse = True, timeout_seconds = 1, max_output_bytes = 1)')
    only(rejected(project, text), "node.reuse")


def test_reuse_on_agents_follows_access(project: Project) -> None:
    agent = 'agent(name = "r", agent = "reviewer", prompt = "look", timeout_seconds = 1, max_output_bytes = 1'
    node = planned(project, workflow(agent + ', access = "read_only", reuse = True)')).graph.node("r")
    assert node.kind == "agent" and node.reuse is True
    found = only(rejected(project, workflow(agent + ", reuse = True)")), "node.reuse")
    assert "'r'" in found.message


def test_reuse_inputs_are_frozen_by_content(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    project.write("data/x.csv", "a,b\n")
    text = one_node('args = {"values": [1]}, access = "read_only", reuse = True, reuse_inputs = ["//data/x.csv"]')
    plan = planned(project, text)
    node = plan.graph.node("a")
    assert isinstance(node, PythonNode)
    [frozen] = node.reuse_inputs
    assert (frozen.path, frozen.in_workspace, frozen.sha256) == ("//data/x.csv", True, sha256_text("a,b\n"))
    project.write("data/x.csv", "a,b\n1,2\n")
    assert planned(project, text).graph_digest != plan.graph_digest


def test_a_missing_or_linked_reuse_input_is_refused(project: Project) -> None:
    project.write("nodes/stats.py", STATS)
    text = one_node('args = {"values": [1]}, access = "read_only", reuse = True, reuse_inputs = ["//data/x.csv"]')
    found = only(rejected(project, text), "resolve")
    assert "//data/x.csv" in found.message and "does not exist" in found.message
    project.write("elsewhere.csv", "x\n")
    (project.root / "data").mkdir()
    (project.root / "data" / "x.csv").symlink_to(project.root / "elsewhere.csv")
    found = only(rejected(project, text), "resolve")
    assert "symlink" in found.message


# -- graphs without python nodes keep their encoding ------------------------------------------------------


def test_a_graph_without_python_nodes_has_no_python_fields(project: Project) -> None:
    text = star(
        'return workflow(name = "plain", nodes = [command(name = "a", argv = ["true"], timeout_seconds = 1, max_output_bytes = 1)])'
    )
    dumped = planned(project, text).graph.model_dump(mode="json")
    assert "python" not in dumped and "python_modules" not in dumped
    assert "reuse" not in dumped["nodes"][0]


# -- the environment is part of the graph ------------------------------------------------------------------


def test_a_venv_interpreter_reports_its_own_environment_and_a_new_distribution_is_a_new_plan(
    project: Project, tmp_path: Path
) -> None:
    """The interpreter is asked by the path it was given, so a virtual environment finds its
    ``pyvenv.cfg``; installing a distribution changes the graph digest, even within one process."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    project.write("nodes/stats.py", STATS)
    first = planned(project, one_node(), python_interpreter=python)
    runtime = first.graph.python
    assert runtime is not None
    [site_dir] = runtime.site_dirs
    assert Path(site_dir).is_relative_to(venv)
    assert ("rho-example-dist", "1.0") not in runtime.distributions

    info = Path(site_dir) / "rho_example_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rho_example.dist\nVersion: 1.0\n")
    second = planned(project, one_node(), python_interpreter=python)
    assert second.graph.python is not None
    assert ("rho-example-dist", "1.0") in second.graph.python.distributions
    assert second.graph_digest != first.graph_digest
