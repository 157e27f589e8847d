"""``script.import_name`` and ``script.step_argument`` (planning/script_api.py): a name the script
API does not provide, or a step argument its function does not take, is refused by ``validate``
instead of failing the run at that line."""

from __future__ import annotations

from pathlib import Path

import pytest

from rho_notebook.errors import InvalidWorkflow
from rho_notebook.planning.script import lint_script
from tests.conftest import Project


def api_findings(text: str) -> list[tuple[str, int, str]]:
    return [
        (f.rule, f.line, f.message)
        for f in lint_script(text, "//s.py")
        if f.rule in ("script.import_name", "script.step_argument")
    ]


def test_an_import_the_script_api_does_not_provide_names_the_one_meant() -> None:
    text = "from rho_notebook.script import emit_output, run_comand\nfrom rho_notebook.flow import Sesion\n"
    assert api_findings(text) == [
        (
            "script.import_name",
            1,
            "from rho_notebook.script import run_comand: rho_notebook.script has no 'run_comand'; "
            "did you mean 'run_command'?",
        ),
        (
            "script.import_name",
            2,
            "from rho_notebook.flow import Sesion: rho_notebook.flow has no 'Sesion'; did you mean 'Session'?",
        ),
    ]
    (unlike,) = api_findings("from rho_notebook.script import zzz\n")
    assert unlike[2].startswith(
        "from rho_notebook.script import zzz: rho_notebook.script has no 'zzz'; it provides run_step"
    )


def test_what_the_api_provides_imports_clean() -> None:
    text = (
        "from rho_notebook.script import run_step, run_command, run_model, get_inputs, emit_output, schema, channel\n"
        "from rho_notebook.flow import Session, run_flow\nfrom rho_notebook.script import *\n"
    )
    assert api_findings(text) == []


def test_a_step_argument_its_function_does_not_take() -> None:
    text = """\
import rho_notebook.script as rs
from rho_notebook import script
from rho_notebook.script import run_command as rc, run_step

rc(["true"], timeout_seconds=5, max_output_bytes=5, retries=2)
rs.run_command(["true"], "x", timeout_seconds=5, max_output_bytes=5)
script.run_step("a", "b", step_idd="x")
run_step("a", "b", **{"recovery": "rerun", "timeout": 3})
"""
    assert api_findings(text) == [
        (
            "script.step_argument",
            5,
            "run_command() takes no argument 'retries'; it takes argv, step_id, cwd, timeout_seconds, "
            "max_output_bytes, recovery, after",
        ),
        (
            "script.step_argument",
            6,
            "run_command() takes 1 positional argument(s) (argv), 2 given; pass the others by keyword",
        ),
        (
            "script.step_argument",
            7,
            "run_step() takes no argument 'step_idd' (did you mean 'step_id'?); it takes agent, prompt, step_id, "
            "output, recovery, after, budget",
        ),
        (
            "script.step_argument",
            8,
            "run_step() takes no argument 'timeout'; it takes agent, prompt, step_id, output, recovery, after, budget",
        ),
    ]


def test_calls_it_cannot_see_through_or_that_are_not_the_apis_are_left_alone() -> None:
    text = """\
from rho_notebook.script import run_step

LIMITS = {"timeout_seconds": 60, "max_output_bytes": 100}
opts = dict(step_idd="x")
run_step("a", "b", **opts)
run_step(*["a", "b", "c"])

def run_command(*args, **kwargs):
    return None

run_command(["true"], retries=3)
"""
    assert api_findings(text) == []


def test_validate_and_plan_refuse_such_a_script(project: Project) -> None:
    project.write("s.py", "from rho_notebook.script import run_command\nrun_command(['true'], timeout=5)\n")
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("s.py")
    (found,) = caught.value.diagnostics()
    assert (found.rule, found.line) == ("script.step_argument", 2)
    assert Path(project.root / "s.py").exists() and project.stored_plans() == []
