"""Script plans (planning/script.py): a ``.py`` script frozen into a plan with no nodes and a
ScriptSpec, its digest covering the script and the workspace modules it imports, and its inputs
checked against ``INPUTS`` before anything is stored. Real files, a real interpreter probe; the
script is never imported."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rho_notebook.errors import InputError, InvalidWorkflow, SourceError
from rho_notebook.model.plan import Plan
from rho_notebook.planning.inputs import SCRIPT_INPUT_BYTES
from rho_notebook.planning.script import lint_script, parse_inputs_declaration
from rho_notebook.source.workspace import Workspace
from tests.conftest import Project

SCRIPT = """\
from rho_notebook.script import emit_output, get_inputs, run_command
from lib.helpers import shout

INPUTS = {
    "target": {"type": "path", "required": True},
    "count": {"type": "integer", "required": False, "default": 3},
    "mode": {"type": "enum", "choices": ["fast", "full"], "default": "fast"},
    "note": {"type": "string", "default": "hi"},
    "loud": {"type": "bool", "default": False},
}

inputs = get_inputs()
done = run_command(argv=["echo", inputs["target"]], step_id="echo")
emit_output(shout(done.output))
"""

HELPERS = "def shout(text):\n    return text.upper()\n"

MARKER = """\
import pathlib
pathlib.Path("IMPORTED").write_text("the script ran at plan time")
INPUTS = {}
"""


def write_script(project: Project, text: str = SCRIPT, *, name: str = "scripts/review.py") -> Path:
    project.write("lib/__init__.py", "")
    project.write("lib/helpers.py", HELPERS)
    return project.write(name, text)


def plan(project: Project, inputs: dict[str, object] | None = None, *, name: str = "scripts/review.py") -> Plan:
    return project.plan(name, inputs if inputs is not None else {"target": "lib"})


def test_a_script_plan_has_no_nodes_and_freezes_the_script_its_imports_and_the_interpreter(project: Project) -> None:
    write_script(project)
    found = plan(project)
    graph = found.graph
    assert graph.name == "review"
    assert graph.nodes == ()
    assert graph.script is not None and graph.script.module == "//scripts/review.py" and graph.script.cwd == "//"
    assert [m.label for m in graph.python_modules] == ["//lib/__init__.py", "//lib/helpers.py", "//scripts/review.py"]
    assert graph.python is not None and graph.python.interpreter.file.sha256.startswith("sha256:")
    assert found.manifest.entry == "//scripts/review.py"
    assert [s.label for s in found.sources] == ["//lib/__init__.py", "//lib/helpers.py", "//scripts/review.py"]
    kinds = {(item.kind, item.value) for item in found.manifest.authority}
    assert ("capability", "process") in kinds and ("directory", "//") in kinds
    assert ("interpreter", graph.python.interpreter.file.path) in kinds
    assert found.manifest.inputs == {
        "count": 3,
        "loud": False,
        "mode": "fast",
        "note": "hi",
        "target": str(project.root / "lib"),
    }
    assert {d.name: d.type for d in graph.inputs}["target"] == "path"
    assert project.stored_plans() == [found.plan_id]


def test_planning_never_imports_the_script(project: Project) -> None:
    write_script(project, MARKER, name="scripts/marker.py")
    plan(project, {}, name="scripts/marker.py")
    assert not (project.root / "IMPORTED").exists()
    assert not (project.root / "scripts" / "IMPORTED").exists()


def test_the_digest_changes_with_the_script_and_with_an_imported_module_and_only_then(project: Project) -> None:
    write_script(project)
    first = plan(project)
    again = plan(project)
    assert again.plan_id == first.plan_id  # one plan per graph
    write_script(project, SCRIPT.replace('step_id="echo"', 'step_id="echo-2"'))
    edited = plan(project)
    assert edited.graph_digest != first.graph_digest
    project.write("lib/helpers.py", HELPERS.replace("upper", "lower"))
    imported = plan(project)
    assert imported.graph_digest not in (first.graph_digest, edited.graph_digest)
    project.write("lib/unrelated.py", "X = 1\n")
    assert plan(project).graph_digest == imported.graph_digest
    assert len(project.stored_plans()) == 3


def test_the_inputs_are_in_the_digest(project: Project) -> None:
    write_script(project)
    project.write("other/keep.txt", "")
    assert plan(project).graph_digest != plan(project, {"target": "other"}).graph_digest


@pytest.mark.parametrize(
    ("inputs", "rule", "words"),
    [
        ({"target": "lib", "colour": "red"}, "input.unknown", "unknown input 'colour'"),
        ({"target": "lib", "count": "three"}, "input.type", "input 'count' must be an integer"),
        ({"target": 7}, "input.type", "input 'target' must be a path"),
        ({"target": "lib", "mode": "slow"}, "input.enum", "not one of"),
        ({}, "input.missing", "missing required input 'target' (path)"),
        ({"target": "/"}, "input.path", "outside the workspace"),
        ({"target": "../.."}, "input.path", "outside the workspace"),
        (
            {"target": "lib", "note": "x" * (SCRIPT_INPUT_BYTES + 1)},
            "limit.script_inputs",
            f"cap of {SCRIPT_INPUT_BYTES}",
        ),
    ],
)
def test_bad_inputs_are_refused_before_anything_is_stored(
    project: Project, inputs: dict[str, object], rule: str, words: str
) -> None:
    write_script(project)
    with pytest.raises(InputError) as caught:
        plan(project, inputs)
    found = caught.value.diagnostics()
    assert [d.rule for d in found] == [rule], found
    assert words in found[0].message
    assert project.stored_plans() == []


def test_the_size_error_names_the_size_and_the_cap(project: Project) -> None:
    write_script(project)
    note = "x" * SCRIPT_INPUT_BYTES
    with pytest.raises(InputError) as caught:
        plan(project, {"target": "lib", "note": note})
    resolved = {"count": 3, "loud": False, "mode": "fast", "note": note, "target": str(project.root / "lib")}
    size = len(json.dumps(resolved, sort_keys=True, separators=(",", ":")).encode())
    assert f"{size} bytes of canonical JSON, over the cap of {SCRIPT_INPUT_BYTES} bytes" in caught.value.message


def test_a_path_input_is_made_canonical_and_a_symlink_out_of_the_workspace_is_refused(
    project: Project, tmp_path: Path
) -> None:
    write_script(project)
    found = plan(project, {"target": "scripts/../lib/./helpers.py"})
    assert found.manifest.inputs["target"] == str(project.root / "lib" / "helpers.py")
    absolute = plan(project, {"target": str(project.root / "lib")})
    assert absolute.manifest.inputs["target"] == str(project.root / "lib")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, project.root / "escape")
    with pytest.raises(InputError) as caught:
        plan(project, {"target": "escape/file.txt"})
    assert f"resolves to {outside}/file.txt, outside the workspace" in caught.value.message


def test_a_path_default_is_made_canonical_too(project: Project) -> None:
    write_script(project, 'INPUTS = {"where": {"type": "path", "default": "lib"}}\n', name="scripts/paths.py")
    found = plan(project, {}, name="scripts/paths.py")
    assert found.manifest.inputs == {"where": str(project.root / "lib")}


def test_an_unknown_input_type_names_the_key_and_the_allowed_types(project: Project) -> None:
    write_script(project, 'INPUTS = {"count": {"type": "float", "default": 3}}\n', name="scripts/typed.py")
    with pytest.raises(InvalidWorkflow) as caught:
        plan(project, {}, name="scripts/typed.py")
    message = caught.value.message
    assert (
        "INPUTS['count'] has type 'float'; allowed types: string, integer, bool, enum, path, int (= integer)" in message
    )
    assert project.stored_plans() == []


def test_a_script_whose_name_is_not_a_workflow_name_says_how_to_fix_it(project: Project) -> None:
    write_script(project, "INPUTS = {}\n", name="scripts/Review_Tool.py")
    with pytest.raises(InvalidWorkflow) as caught:
        plan(project, {}, name="scripts/Review_Tool.py")
    assert "'Review_Tool' (its file name) is not a workflow name" in caught.value.message
    assert "rename the file, e.g. to review_tool.py" in caught.value.message


def test_a_script_outside_the_workspace_is_refused(project: Project, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "loose.py"
    elsewhere.parent.mkdir()
    elsewhere.write_text("INPUTS = {}\n")
    service = project.service
    with pytest.raises(SourceError) as caught:
        service.request_for(elsewhere, workspace=Workspace(root=project.root))
    assert caught.value.diagnostics()[0].rule == "script.outside_workspace"
    assert "a script must live inside its workspace" in caught.value.message


def test_the_workspace_is_found_from_the_scripts_folder(project: Project, tmp_path: Path) -> None:
    write_script(project)
    request = project.service.request_for(project.root / "scripts" / "review.py")  # no workspace given
    assert request.workspace.root == project.root
    assert request.entry.label == "//scripts/review.py"


def test_a_lint_error_stops_the_plan(project: Project) -> None:
    write_script(project, "import rho_notebook.runtime.owner\nINPUTS = {}\n", name="scripts/inner.py")
    with pytest.raises(InvalidWorkflow) as caught:
        plan(project, {}, name="scripts/inner.py")
    assert caught.value.diagnostics()[0].rule == "script.import"
    assert project.stored_plans() == []


def test_parse_inputs_declaration_normalises_entries() -> None:
    declared = parse_inputs_declaration(SCRIPT, "//scripts/review.py")
    assert declared["target"] == {"type": "path", "required": True, "default": None, "choices": []}
    assert declared["count"] == {"type": "integer", "required": False, "default": 3, "choices": []}
    assert declared["mode"]["choices"] == ["fast", "full"]
    assert parse_inputs_declaration("x = 1\n", "//s.py") == {}


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ('{"type": "string", "colour": 1}', "unknown field(s) colour"),
        ('{"type": "enum"}', "needs a non-empty list of choices"),
        ('{"type": "string", "choices": ["a"]}', "choices belong to"),
        ('{"type": "integer", "default": "3"}', "default '3' must be an integer"),
        ('{"type": "string", "required": "yes"}', "required must be True or False"),
        ('{"type": "string", "required": True, "default": "x"}', "is required and has a default"),
        ('"string"', "must be a dict"),
    ],
)
def test_wrong_entry_shapes_are_errors(entry: str, words: str) -> None:
    found = lint_script(f'INPUTS = {{"k": {entry}}}\n', "//s.py")
    assert [f.rule for f in found] == ["script.inputs_entry"]
    assert words in found[0].message
    assert (found[0].line, found[0].column) == (1, 11)
