"""``rho-notebook run NOTEBOOK.ipynb`` with ``%%py`` cells: exported at their labels, run headless
with the interpreter the notebook's kernel would use, which the command names; the same
interpreter gives the digest the same cells plan to with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from tests.conftest import REPO, Project

C = "timeout_seconds = 60, max_output_bytes = 100000"
WHERE = (
    "%%py //nodes/where.py\nimport sys\n\n\ndef where(numbers):\n"
    '    return {"total": sum(numbers), "site": [p for p in sys.path if p.endswith("site-packages")]}\n'
)
ENTRY = f"""%%workflow where
def build(inputs):
    return workflow(name = "where", nodes = [
        python(name = "where", module = "//nodes/where.py", function = "where", args = {{"numbers": [3, 1, 4]}},
               output = schema.record({{"total": schema.integer(), "site": schema.list(schema.string())}}), {C}),
    ])

WORKFLOW = define(inputs = {{}}, build = build)
"""


def write_notebook(path: Path, *, kernel: str | None) -> Path:
    nb = new_notebook(cells=[new_code_cell("%load_ext rho_notebook"), new_code_cell(WHERE), new_code_cell(ENTRY)])
    if kernel is not None:
        nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def kernelspec(root: Path, name: str, *, argv0: str, language: str = "python") -> dict[str, str]:
    """A kernel ``name`` installed under ``root`` (found through JUPYTER_PATH); the environment."""
    folder = root / "kernels" / name
    folder.mkdir(parents=True)
    spec = {
        "argv": [argv0, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": name,
        "language": language,
    }
    (folder / "kernel.json").write_text(json.dumps(spec))
    return {"JUPYTER_PATH": str(root)}


def newest_result(project: Project) -> tuple[str, object]:
    """(outcome, output of node ``where``) of the newest run in the store."""
    runs = json.loads(project.cli("runs", "--output", "json").stdout)
    result = json.loads(project.cli("result", runs[-1]["run_id"], "--output", "json").stdout)
    return result["outcome"], result["nodes"]["where"]["output"]


def site_of(python: str) -> list[str]:
    """The site-packages folders of ``python``'s environment (on its isolated-mode sys.path)."""
    code = "import json, sys; print(json.dumps([p for p in sys.path if p.endswith('site-packages')]))"
    found: list[str] = json.loads(subprocess.run([python, "-I", "-c", code], capture_output=True, check=True).stdout)
    return found


def digest_of(stdout: str) -> str:
    return next(line.split("digest ")[1] for line in stdout.splitlines() if line.startswith("plan "))


def planned_with(project: Project, notebook: Path, interpreter: str) -> str:
    """The digest the notebook's cells plan to in a process (as in a kernel) with ``interpreter``."""
    probe = "\n".join(
        [
            "import sys",
            "from pathlib import Path",
            "import rho_notebook as rho",
            "from rho_notebook.service.export import read_cells",
            f"cells = read_cells(Path({str(notebook)!r}))",
            f"entry = '//{notebook.parent.relative_to(project.root).as_posix()}/where.star'",
            "source = cells.source(cells.workflows['where'], entry_label=entry, workflow_dir=Path.cwd(),"
            f" python_interpreter=Path({interpreter!r}))",
            "print(rho.validate(source).graph_digest)",
        ]
    )
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=notebook.parent, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_kernelspec_interpreter_runs_the_py_cells_and_gives_the_kernels_digest(
    project: Project, tmp_path: Path
) -> None:
    """A kernel whose interpreter is another Python of this machine (a fresh venv): the headless
    run freezes that interpreter, says so, and runs the node in it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    env = kernelspec(tmp_path / "jupyter", "other-python", argv0=str(python))
    notebook = write_notebook(project.root / "nb" / "where.ipynb", kernel="other-python")
    ran = project.cli("run", "nb/where.ipynb", "--yes", env=env, timeout=180)
    assert ran.returncode == 0, ran.stderr
    chosen = [line for line in ran.stdout.splitlines() if line.startswith("python ")]
    assert chosen == [
        f"python {python}  (the interpreter of the notebook's kernel 'other-python' in "
        f"{tmp_path / 'jupyter' / 'kernels' / 'other-python' / 'kernel.json'})"
    ], ran.stdout
    assert "run completed: success" in ran.stdout, ran.stdout
    # the node ran in the kernel's interpreter: its environment's site-packages
    assert newest_result(project) == ("success", {"total": 8, "site": site_of(str(python))})
    assert site_of(str(python)) == [
        str(venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages")
    ]
    digest = digest_of(ran.stdout)
    assert planned_with(project, notebook, str(python)) == digest
    assert planned_with(project, notebook, sys.executable) != digest  # another interpreter, another graph
    # the export holds the %%py cell at its label, verbatim
    exported = project.cli("export", "nb/where.ipynb", "out")
    assert exported.returncode == 0, exported.stderr
    assert (project.root / "out" / "nodes" / "where.py").read_text() == WHERE.split("\n", 1)[1]


def test_without_a_usable_kernelspec_the_commands_own_interpreter_runs_them(project: Project, tmp_path: Path) -> None:
    own = sys.executable
    cases = {
        "bare": "bare/kernel.json starts 'python', which Jupyter runs with the interpreter that launches the kernel",
        None: "the notebook names no kernel; this command's own interpreter",
        "missing-kernel": "the notebook's kernel 'missing-kernel' is not installed on this machine",
        "relative": "kernel.json starts 'bin/python3', not an absolute path, and interpreters are never looked up on PATH",
        "rkernel": "the notebook's kernel 'rkernel' is a R kernel, not a Python one",
    }
    jupyter = tmp_path / "jupyter"
    env = kernelspec(jupyter, "bare", argv0="python")
    kernelspec(jupyter, "relative", argv0="bin/python3")
    kernelspec(jupyter, "rkernel", argv0="/usr/bin/R", language="R")
    digests = set()
    for index, (kernel, reason) in enumerate(cases.items()):
        notebook = write_notebook(project.root / f"nb{index}" / "where.ipynb", kernel=kernel)
        first = index == 0
        # the first notebook runs; the others are planned and refused for want of --yes
        ran = project.cli("run", f"nb{index}/where.ipynb", *(["--yes"] if first else []), env=env, timeout=180)
        assert ran.returncode == (0 if first else 3), ran.stderr
        chosen = [line for line in ran.stdout.splitlines() if line.startswith("python ")]
        assert len(chosen) == 1 and chosen[0].startswith(f"python {own}  ("), ran.stdout
        assert reason in chosen[0], chosen[0]
        digests.add(digest_of(ran.stdout))
        if first:
            assert "run completed: success" in ran.stdout, ran.stdout
            assert newest_result(project) == ("success", {"total": 8, "site": site_of(own)})
            assert planned_with(project, notebook, own) == digest_of(ran.stdout)
    assert len(digests) == 1  # the same cells with the same interpreter: one graph
    # with --output jsonl, stdout stays JSON lines and the interpreter line goes to stderr
    quiet = project.cli("run", "nb1/where.ipynb", "--output", "jsonl", env=env)
    assert quiet.returncode == 3 and "python " not in quiet.stdout
    assert f"python {own}  (the notebook names no kernel" in quiet.stderr
