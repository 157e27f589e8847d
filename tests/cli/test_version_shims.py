"""A version-manager shim (pyenv style) first on PATH: planning freezes the program it runs, or
rejects the plan with the fix (issue 13 item 1)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.conftest import Project, star

C = "timeout_seconds = 30, max_output_bytes = 100000"
REAL = os.path.realpath(sys.executable)


def fake_pyenv(root: Path, *, answers: dict[str, str]) -> Path:
    """A pyenv root whose shims dispatch on ``$0`` like pyenv's and whose ``pyenv which NAME``
    answers ``answers[NAME]`` (anything else: pyenv's error, exit 127). Returns the shims folder."""
    (root / "shims").mkdir(parents=True)
    (root / "libexec").mkdir()
    cases = "".join(f'  {name}) echo "{path}" ;;\n' for name, path in answers.items())
    manager = root / "libexec" / "pyenv"
    manager.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1" = which ]; then\n'
        '  case "$2" in\n'
        f"{cases}"
        '  *) echo "pyenv: $2: command not found" >&2; exit 127 ;;\n'
        "  esac\n"
        "  exit 0\n"
        "fi\n"
        'if [ "$1" = exec ]; then\n'
        '  case "$2" in\n'
        + "".join(f'  {name}) shift 2; exec "{path}" "$@" ;;\n' for name, path in answers.items())
        + '  *) echo "pyenv: $2: command not found" >&2; exit 127 ;;\n'
        "  esac\n"
        "fi\n"
        "exit 1\n"
    )
    manager.chmod(0o755)
    for name in [*answers, "python9"]:
        shim = root / "shims" / name
        shim.write_text(
            "#!/usr/bin/env bash\n"
            "set -e\n"
            'program="${0##*/}"\n'
            f'export PYENV_ROOT="{root}"\n'
            f'exec "{manager}" exec "$program" "$@"\n'
        )
        shim.chmod(0o755)
    return root / "shims"


def workflow(project: Project, program: str) -> None:
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "s", nodes = [command(name = "py", argv = ["{program}", "-c", "print(1)"], {C})])'
        ),
    )


def test_a_pyenv_shim_freezes_the_program_it_runs(project: Project, tmp_path: Path) -> None:
    shims = fake_pyenv(tmp_path / "pyenv", answers={"python3": REAL})
    env = {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    workflow(project, "python3")
    planned = project.cli("plan", "wf.star", "--output", "json", env=env)
    assert planned.returncode == 0, planned.stderr
    summary = json.loads(planned.stdout)
    executables = [a for a in summary["authority"] if a["kind"] == "executable"]
    assert [a["value"] for a in executables] == [REAL]
    assert f"via pyenv shim {shims / 'python3'}" in executables[0]["detail"]
    ran = project.cli("run", summary["plan_id"], "--yes", "--output", "jsonl", env=env)
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    status = json.loads(project.cli("status", run_id, "--output", "json").stdout)
    assert status["outcome"] == "success", (ran.stdout, ran.stderr)
    assert project.cli("logs", run_id, "py", "--stream", "stdout").stdout == "1\n"


def test_an_unresolvable_shim_is_rejected_with_the_fix(project: Project, tmp_path: Path) -> None:
    shims = fake_pyenv(tmp_path / "pyenv", answers={"python3": REAL})
    env = {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    workflow(project, "python9")
    planned = project.cli("plan", "wf.star", env=env)
    assert planned.returncode != 0
    message = " ".join(planned.stderr.split())
    assert f"{shims / 'python9'} is a pyenv shim" in message
    assert "pyenv: python9: command not found" in message
    assert "Put the real interpreter first on PATH" in message and "absolute path" in message
    assert project.stored_plans() == []


def test_a_shim_is_asked_in_the_nodes_working_directory(project: Project, tmp_path: Path) -> None:
    """``pyenv which`` runs in the node's cwd, where a ``.python-version`` would be read."""
    root = tmp_path / "pyenv"
    shims = fake_pyenv(root, answers={"python3": REAL})
    manager = root / "libexec" / "pyenv"
    manager.write_text(
        "#!/usr/bin/env bash\n"
        'if [ -f .python-version ]; then echo "' + REAL + '"; exit 0; fi\n'
        'echo "pyenv: no version in $PWD" >&2; exit 1\n'
    )
    (project.root / "sub").mkdir()
    (project.root / "sub" / ".python-version").write_text("3\n")
    project.write(
        "wf.star",
        star(
            f'return workflow(name = "s", nodes = ['
            f'command(name = "here", argv = ["python3", "-c", "print(1)"], cwd = "sub", {C})])'
        ),
    )
    env = {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    assert project.cli("plan", "wf.star", env=env).returncode == 0
    project.write(
        "wf.star",
        star(f'return workflow(name = "s", nodes = [command(name = "top", argv = ["python3", "-c", "1"], {C})])'),
    )
    refused = project.cli("plan", "wf.star", env=env)
    assert refused.returncode != 0 and "no version in" in refused.stderr


def test_a_script_whose_env_line_finds_a_shim_freezes_the_program(project: Project, tmp_path: Path) -> None:
    """``#!/usr/bin/env python3`` with the shims first on PATH: env's python3 is unshimmed too."""
    shims = fake_pyenv(tmp_path / "pyenv", answers={"python3": REAL})
    env = {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    project.write("tool.py", "#!/usr/bin/env python3\nimport sys\nprint('tool', sys.argv[1])\n", mode=0o755)
    project.write(
        "wf.star",
        star(f'return workflow(name = "s", nodes = [command(name = "t", argv = ["./tool.py", "hi"], {C})])'),
    )
    planned = project.cli("plan", "wf.star", "--output", "json", env=env)
    assert planned.returncode == 0, planned.stderr
    summary = json.loads(planned.stdout)
    interpreters = {a["value"]: a["detail"] for a in summary["authority"] if a["kind"] == "interpreter"}
    assert f"via pyenv shim {shims / 'python3'}" in interpreters[REAL]
    ran = project.cli("run", summary["plan_id"], "--yes", "--output", "jsonl", env=env)
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    assert project.cli("logs", run_id, "t", "--stream", "stdout").stdout == "tool hi\n", ran.stdout + ran.stderr
