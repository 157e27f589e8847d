"""``rho-notebook validate SCRIPT.py`` (the script lint, never importing the script), and the
``plan``/``run`` dispatch of ``.py`` targets, through the real CLI.

Each lint rule has a case that triggers it and one that does not; exit 0 when the script has no
error (warnings allowed), 1 otherwise.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

import pytest

from tests.conftest import Project

HEAD = 'from rho_notebook.script import get_inputs, run_command, run_step\nINPUTS = {"name": {"type": "string", "default": "x"}}\n'


def validate(project: Project, body: str, *, head: str = HEAD) -> tuple[int, list[dict[str, Any]]]:
    project.write("scripts/check.py", head + textwrap.dedent(body))
    result = project.cli("validate", "scripts/check.py", "--output", "json")
    data = json.loads(result.stdout)
    assert data["valid"] == (result.returncode == 0), result
    return result.returncode, data["diagnostics"]


EXECUTOR = "from concurrent.futures import ThreadPoolExecutor\n"

CASES = [
    # (rule, the lines (after HEAD) where it must be found: none for a case that must not trigger, script body)
    (
        "script.import",
        [1, 2, 3],
        "import rho_notebook.runtime.owner\nfrom rho_notebook import service\nimport rho_notebook\n",
    ),
    ("script.import", [], "from rho_notebook import flow\nimport rho_notebook.script\nimport rho_notebookish\n"),
    (
        "script.nondeterminism",
        [1, 2, 3, 4, 6, 7, 8, 9],
        "import random\nrandom.shuffle([])\nfrom datetime import datetime as dt\nstamp = dt.now()\n"
        "import os\nkey = os.urandom(8)\nimport uuid\nimport secrets\nimport time\n",
    ),
    ("script.nondeterminism", [], "import os, json\nhere = os.getcwd()\ntime = 3\nprint(time)\n"),
    (
        "script.executor_step_id",
        [4, 7, 8],
        EXECUTOR + "pool = ThreadPoolExecutor(2)\ndef one(x):\n    return run_command(argv=['echo', x])\n"
        "pool.submit(one, 'a')\nwith ThreadPoolExecutor(2) as other:\n"
        "    other.submit(lambda: run_step(agent='a', prompt='p'))\n"
        "    run_command(argv=['inside'])\n",
    ),
    (
        "script.executor_step_id",
        [],
        EXECUTOR + "def one(x):\n    return run_command(argv=['echo', x], step_id=f'echo-{x}')\n"
        "with ThreadPoolExecutor(2) as pool:\n    list(pool.map(one, ['a', 'b']))\n"
        "run_command(argv=['true'])\n",
    ),
    ("script.recovery", [1], "run_command(argv=['true'], recovery='retry')\n"),
    (
        "script.recovery",
        [],
        "run_command(argv=['true'], recovery='rerun')\nrun_step(agent='a', prompt='p', recovery='manual')\n"
        "run_command(argv=['true'], recovery=None)\n",
    ),
    ("script.recovery_unchecked", [2], "policy = 'rerun'\nrun_command(argv=['true'], recovery=policy)\n"),
    (
        "script.recovery_unverifiable",
        [2],
        "opts = dict(step_id='x')\nrun_step('a', 'p', **opts)\nrun_step('a', 'p', recovery=None, **opts)\n"
        "run_command(argv=['true'], recovery='rerun')\n",
    ),
    (
        "script.inputs_undeclared",
        [1, 2, 4],
        "print(get_inputs()['colour'])\nprint(get_inputs().get('colour'))\ninputs = get_inputs()\nprint(inputs['colour'])\n",
    ),
    (
        "script.inputs_undeclared",
        [],
        "inputs = get_inputs()\nprint(inputs['name'], inputs.get('name'), get_inputs()['name'], {'colour': 1}['colour'])\n",
    ),
    (
        "script.step_id",
        [1, 3, 4, 5],
        "run_command(argv=['true'], step_id='-echo')\nn = 1\nrun_command(argv=['true'], step_id=f'echo {n}')\n"
        "run_command(argv=['true'], step_id='call-3')\nrun_command(argv=['true'], step_id=f'#{n}')\n",
    ),
    (
        "script.step_id",
        [],
        "n = 1\nrun_command(argv=['true'], step_id='echo-1')\nrun_command(argv=['x'], step_id=f'echo-{n}')\n"
        "run_command(argv=['true'], step_id=f'summarize:{n}')\nrun_command(argv=['true'], step_id='Fetch@v2/a.b')\n"
        "run_command(argv=['true'], step_id=f'{n}:x')\n",
    ),
]
WARNINGS = {
    "script.nondeterminism",
    "script.executor_step_id",
    "script.recovery_unchecked",
    "script.recovery_unverifiable",
}


@pytest.mark.parametrize(("rule", "lines", "body"), CASES, ids=[f"{r}-{'hit' if n else 'miss'}" for r, n, _ in CASES])
def test_each_lint_rule_triggers_and_does_not(project: Project, rule: str, lines: list[int], body: str) -> None:
    code, found = validate(project, body)
    offset = HEAD.count("\n")
    assert sorted({f["line"] - offset for f in found if f["rule"] == rule}) == lines, found
    if not lines:
        assert found == [] and code == 0
        return
    severity = "warning" if rule in WARNINGS else "error"
    assert {f["severity"] for f in found} == {severity}, found
    assert code == (1 if severity == "error" else 0)


@pytest.mark.parametrize(
    ("head", "triggers"),
    [
        ('INPUTS = dict(name={"type": "string"})\n', True),
        ("INPUTS = [1]\n", True),
        ('NAME = "x"\nINPUTS = {NAME: {"type": "string"}}\n', True),
        ('INPUTS = {"a": {"type": "bool"}}\nINPUTS = {}\n', True),
        ('INPUTS = {"a": {"type": "bool", "default": False}}\n', False),
        ("", False),
    ],
)
def test_inputs_must_be_a_literal_dict(project: Project, head: str, triggers: bool) -> None:
    code, found = validate(project, "x = 1\n", head=head)
    assert (["script.inputs_literal"] == [f["rule"] for f in found]) == triggers, found
    assert code == (1 if triggers else 0)


def test_a_wrong_entry_shape_is_an_error(project: Project) -> None:
    code, found = validate(project, "", head='INPUTS = {"n": {"type": "number", "default": 3}}\n')
    assert code == 1
    assert [(f["rule"], f["line"]) for f in found] == [("script.inputs_entry", 1)]
    assert "allowed types: string, integer, bool, enum, path" in found[0]["message"]


def test_an_undeclared_input_is_shown_how_to_declare_it(project: Project) -> None:
    head = "from rho_notebook.script import get_inputs\n"
    _, found = validate(project, "n = get_inputs()['n']\n", head=head)
    assert [f["rule"] for f in found] == ["script.inputs_undeclared"]
    assert 'declare it (e.g. INPUTS = {"n": {"type": "string"}} at the top of the script;' in found[0]["message"]
    _, found = validate(project, "n = get_inputs()['n']\n")  # HEAD declares "name"
    assert '(declared: name); declare it (e.g. "n": {"type": "string"} in INPUTS;' in found[0]["message"]


def test_text_output_prints_findings_like_diagnostics_and_never_imports_the_script(project: Project) -> None:
    project.write(
        "scripts/check.py",
        'import pathlib\nimport random\npathlib.Path("IMPORTED").write_text("ran")\n'
        "run_step(agent='a', prompt='p', recovery='later')\n",
    )
    result = project.cli("validate", "scripts/check.py")
    assert result.returncode == 1
    assert "scripts/check.py:2:1: warning[script.nondeterminism]: import random (line 2)" in result.stderr
    assert "scripts/check.py:4:42: error[script.recovery]: recovery='later'" in result.stderr
    assert "invalid: scripts/check.py (1 error, 1 warning)" in result.stdout
    assert not (project.root / "IMPORTED").exists() and not (project.root / "scripts" / "IMPORTED").exists()
    warned = project.write("scripts/warned.py", "import time\n")
    result = project.cli("validate", str(warned))
    assert result.returncode == 0, result.stderr
    assert "warning[script.nondeterminism]" in result.stderr and "valid: the script" in result.stdout


def test_a_syntax_error_is_an_error_finding(project: Project) -> None:
    code, found = validate(project, "def broken(:\n")
    assert code == 1 and [f["rule"] for f in found] == ["python.syntax"]
    assert found[0]["line"] == 3


SCRIPT = """\
from rho_notebook.script import emit_output, get_inputs, run_command

INPUTS = {"target": {"type": "path", "required": True}}

emit_output(run_command(argv=["ls", get_inputs()["target"]], step_id="list").output)
"""


def test_plan_script_prints_the_digest_and_stores_one_plan(project: Project) -> None:
    project.write("scripts/listing.py", SCRIPT)
    result = project.cli("plan", "scripts/listing.py", "--input", 'target="scripts"')
    assert result.returncode == 0, result.stderr
    digest = re.search(r"^digest\s+(sha256:[0-9a-f]{64})$", result.stdout, re.M)
    assert digest is not None, result.stdout
    assert "script      //scripts/listing.py" in result.stdout
    assert f'target = "{project.root / "scripts"}"' in result.stdout
    data = json.loads(
        project.cli("plan", "scripts/listing.py", "--input", 'target="scripts"', "--output", "json").stdout
    )
    assert data["graph_digest"] == digest.group(1)
    assert len(project.stored_plans()) == 1


def test_plan_script_with_bad_inputs_stores_nothing(project: Project) -> None:
    project.write("scripts/listing.py", SCRIPT)
    result = project.cli("plan", "scripts/listing.py", "--input", 'target="/"')
    assert result.returncode == 1
    assert "input 'target' is '/', which resolves to /, outside the workspace" in result.stderr
    result = project.cli("plan", "scripts/listing.py", "--input", 'colour="red"')
    assert result.returncode == 1
    assert "unknown input 'colour'" in result.stderr and "missing required input 'target' (path)" in result.stderr
    assert project.stored_plans() == []


def test_run_script_without_yes_refuses_and_names_the_digest(project: Project) -> None:
    project.write("scripts/listing.py", SCRIPT)
    result = project.cli("run", "scripts/listing.py", "--input", 'target="scripts"')
    assert result.returncode == 3, result.stderr
    shown = re.search(r"digest (sha256:[0-9a-f]{64})", result.stdout)
    assert shown is not None, result.stdout
    assert f"pass --yes to confirm digest {shown.group(1)}" in result.stderr
    runs = project.home / "workflows" / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []


def test_run_dispatches_by_suffix(project: Project) -> None:
    result = project.cli("run", "scripts/missing.py")
    assert result.returncode == 2 and "scripts/missing.py: no such script" in result.stderr
    project.write("notes.txt", "x = 1\n")
    result = project.cli("run", "notes.txt")
    assert result.returncode == 2
    assert "run takes a plan ID or a FILE.star, SCRIPT.py, FILE.graph.yaml or NOTEBOOK.ipynb" in result.stderr
    project.write("wf.star", "x = 1\n")  # a .star entry is planned, then run: here its plan fails
    result = project.cli("run", "wf.star", "--yes")
    assert result.returncode == 1 and "wf.star" in result.stderr
    result = project.cli("run", "0123abcd")
    assert result.returncode == 1 and "plan" in result.stderr.lower()


def test_validate_with_inputs_checks_them_against_the_declaration(project: Project) -> None:
    project.write("scripts/listing.py", SCRIPT)
    result = project.cli("validate", "scripts/listing.py", "--input", 'target="scripts"')
    assert result.returncode == 0, result.stderr
    result = project.cli("validate", "scripts/listing.py", "--input", "target=3", "--output", "json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["valid"] is False
    assert [(d["rule"], d["severity"]) for d in data["diagnostics"]] == [("input.type", "error")]
    assert project.stored_plans() == []


def test_plan_script_shows_the_lint_warnings(project: Project) -> None:
    project.write("scripts/stamped.py", "import time\nINPUTS = {}\n")
    result = project.cli("plan", "scripts/stamped.py")
    assert result.returncode == 0, result.stderr
    assert "scripts/stamped.py:1:1: warning[script.nondeterminism]: import time" in result.stderr


def test_plan_of_an_invalid_script_ends_with_the_line_validate_prints(project: Project) -> None:
    """``plan`` printed the findings of a script it refused but not ``validate``'s summary line, so
    its output read as cut off; now both end with the same ``invalid: ...`` line (exit 1)."""
    project.write(
        "scripts/bad.py",
        'import random\nfrom rho_notebook.script import run_step\n\nrun_step("a", "x", recovery="no")\n',
    )
    checked = project.cli("validate", "scripts/bad.py")
    planned = project.cli("plan", "scripts/bad.py")
    ran = project.cli("run", "scripts/bad.py", "--yes")  # run plans it first: said the same way
    said = "invalid: scripts/bad.py (1 error, 1 warning); nothing was stored"
    assert (checked.returncode, planned.returncode, ran.returncode) == (1, 1, 1), planned
    assert checked.stdout.strip() == said and planned.stdout.strip() == said, planned.stdout
    assert ran.stdout.strip() == said, ran.stdout
    for refused in (planned, ran):
        assert "error[script.recovery]" in refused.stderr and "warning[script.nondeterminism]" in refused.stderr
    as_json = project.cli("plan", "scripts/bad.py", "--output", "json")
    assert json.loads(as_json.stdout)["valid"] is False and "invalid:" not in as_json.stdout
    assert project.stored_plans() == []
