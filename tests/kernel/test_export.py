"""Notebook export and the headless `rho-notebook run NOTEBOOK.ipynb`, through real processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.conftest import REPO, Project
from tests.kernel.helpers import C

MODULE = '%%star //lib/steps.star\ndef step(name, text, needs = []):\n    return command(name = name, argv = ["echo", text], needs = needs, timeout_seconds = 10, max_output_bytes = 100)\n'
AGENT = "%%agent helper\n---\ndescription: Helps with numbers\ntools: [read_file]\n---\nAnswer briefly.\n"
ENTRY = f"""%%workflow numbers --input 'count=3'
load("//lib/steps.star", "step")

def build(inputs):
    return workflow(name = "numbers", nodes = [
        step("one", "one"),
        command(name = "typed", argv = ["python3", "-c", "import sys, json; print(json.dumps({{'count': int(sys.argv[1])}}))", str(inputs["count"])],
                output = schema.stdout_json(schema.record({{"count": schema.integer()}})), needs = ["one"], {C}),
        command(name = "big", argv = ["echo", "big"], needs = ["typed"], when = condition.equals(output("typed", ["count"]), 7), {C}),
    ])

WORKFLOW = define(inputs = {{"count": input.integer(default = 1)}}, build = build)
"""
OTHER = f'%%workflow other\ndef build(inputs):\n    return workflow(name = "other", nodes = [command(name = "x", argv = ["true"], {C})])\n\nWORKFLOW = define(inputs = {{}}, build = build)\n'


def notebook(path: Path, *sources: str) -> Path:
    cells = (
        [new_markdown_cell("# a notebook")]
        + [new_code_cell(s) for s in sources]
        + [new_code_cell("print('plain python')")]
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(new_notebook(cells=cells), path)
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_is_deterministic_and_plans_to_the_same_digest(project: Project) -> None:
    notebook(project.root / "nb" / "numbers.ipynb", MODULE, AGENT, ENTRY)
    first = project.cli("export", "nb/numbers.ipynb", "out1")
    assert first.returncode == 0, first.stderr
    assert project.cli("export", "nb/numbers.ipynb", "out2").returncode == 0
    files = _files(project.root / "out1")
    assert files == _files(project.root / "out2")  # byte-identical
    assert sorted(files) == ["agents/helper.md", "lib/steps.star", "numbers.star"]
    assert files["numbers.star"].decode().startswith("# %%workflow numbers --input 'count=3'\nload(")
    assert files["agents/helper.md"].decode() == AGENT.split("\n", 1)[1]
    # its module //lib/steps.star resolves from out1 only as a workspace of its own: the command says so
    command = first.stdout.split("plan it with: ", 1)[1].strip()
    assert command == (
        f"mkdir -p {project.root / 'out1' / '.rho'} && cd {project.root / 'out1'} && "
        "rho-notebook plan numbers.star --input count=3"
    )
    assert project.cli("export", "nb/numbers.ipynb", "out1").returncode == 0  # re-export over itself
    assert _files(project.root / "out1") == files
    # each export is a module root of its own (.rho/ marks it): //lib/steps.star resolves in it
    digests = []
    for folder in ("out1", "out2"):
        said = command.replace("out1", folder) + " --output json"  # the printed command, as a person runs it
        result = _shell_in(project, said)
        assert result.returncode == 0, result.stderr
        digests.append(json.loads(result.stdout)["graph_digest"])
    assert digests[0] == digests[1]
    inside = project.cli("export", "nb/numbers.ipynb", ".")  # into the workspace root: planned as it is
    assert inside.stdout.strip().endswith(
        f"plan it with: rho-notebook plan {project.root / 'numbers.star'} --input count=3"
    )


def _shell_in(project: Project, command: str) -> subprocess.CompletedProcess[str]:
    """A printed command line run by a shell, with this checkout's ``rho-notebook`` first on PATH."""
    import os
    import sys

    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO), "PATH": path}
    return subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, timeout=60)


def test_choosing_the_workflow(project: Project) -> None:
    notebook(project.root / "two.ipynb", ENTRY.replace(" --input 'count=3'", ""), MODULE, OTHER)
    several = project.cli("export", "two.ipynb", "out")
    assert several.returncode == 1 and "several workflows (numbers, other)" in several.stderr
    assert project.cli("export", "two.ipynb", "out", "--workflow", "other").returncode == 0
    assert (project.root / "out" / "other.star").exists() and not (project.root / "out" / "numbers.star").exists()
    missing = project.cli("export", "two.ipynb", "out", "--workflow", "ghost")
    assert "no %%workflow ghost cell" in missing.stderr
    notebook(project.root / "unnamed.ipynb", "%%workflow\n" + OTHER.split("\n", 1)[1])
    unnamed = project.cli("export", "unnamed.ipynb", "out")
    assert "has no NAME" in unnamed.stderr
    notebook(project.root / "badlabel.ipynb", "%%star lib/x.star\nX = 1\n", OTHER)
    bad = project.cli("export", "badlabel.ipynb", "out")
    assert bad.returncode == 1 and "badlabel.ipynb cell 2" in bad.stderr and "must start with //" in bad.stderr


def test_run_notebook_headless(project: Project) -> None:
    notebook(project.root / "nb" / "numbers.ipynb", MODULE, AGENT, ENTRY)
    result = project.cli("run", "nb/numbers.ipynb", "--yes", "--output", "jsonl", "--input", "count=7")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    finished = {e["node"]: e["state"] for e in events if e["kind"] == "node_finished"}
    assert finished == {"one": "success", "typed": "success", "big": "success"}  # --input 7 overrode the cell's 3
    run_id = events[0]["run_id"]
    assert not list((project.root / "nb").glob(".rho-notebook-export-*"))  # the temporary export is gone
    text = project.cli("run", "nb/numbers.ipynb", "--yes")
    assert text.returncode == 0, text.stderr
    assert "notebook nb/numbers.ipynb  workflow numbers" in text.stdout and "digest sha256:" in text.stdout
    assert "big                      skipped" in text.stdout  # the cell's count=3
    status = json.loads(project.cli("status", run_id, "--output", "json").stdout)
    assert status["outcome"] == "success"
    refused = project.cli("run", "nb/numbers.ipynb")
    assert refused.returncode == 3 and "pass --yes" in refused.stderr
    assert project.cli("run", "nb/missing.ipynb", "--yes").returncode == 2
    plan_id = json.loads(project.cli("plans", "--output", "json").stdout)[0]["plan_id"]
    wrong = project.cli("run", plan_id, "--yes", "--workflow", "numbers")
    assert wrong.returncode == 2 and "apply to `run NOTEBOOK.ipynb`" in wrong.stderr


def test_run_notebook_diagnostics_point_at_notebook_cells(project: Project) -> None:
    broken = ENTRY.replace('step("one", "one"),', 'step("one", "one"), 1.5,')
    notebook(project.root / "broken.ipynb", MODULE, broken)
    result = project.cli("run", "broken.ipynb", "--yes")
    assert result.returncode == 1
    assert "broken.ipynb cell 3:6:" in result.stderr and "float" in result.stderr, result.stderr
    assert ".rho-notebook-export-" not in result.stderr
    assert not list(project.root.glob(".rho-notebook-export-*"))
    bad_agent = AGENT.replace("tools: [read_file]", "tools: bogus")
    notebook(
        project.root / "agent.ipynb",
        MODULE,
        bad_agent,
        ENTRY.replace(
            'step("one", "one"),',
            'step("one", "one"), agent(name = "ask", agent = "helper", prompt = "hi", ' + C + "),",
        ),
    )
    result = project.cli("run", "agent.ipynb", "--yes")
    assert result.returncode == 1
    assert "agent.ipynb cell 3:4:1: error[agent.tools]" in result.stderr, result.stderr


def test_quickstart_notebook_runs_headless_with_the_kernel_digest(tmp_path: Path) -> None:
    """The README's main job: `rho-notebook run notebooks/01_quickstart.ipynb --yes`."""
    import os
    import sys

    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "rho_notebook", "run", "notebooks/01_quickstart.ipynb", "--yes"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "run completed: success" in run.stdout
    digest = next(line.split("digest ")[1] for line in run.stdout.splitlines() if line.startswith("plan "))
    # the same cells planned in memory, as the kernel does, freeze to the same graph
    from rho_notebook.service.export import read_cells

    cells = read_cells(REPO / "notebooks" / "01_quickstart.ipynb")
    probe = "\n".join(
        [
            "import json, sys",
            "from pathlib import Path",
            "import rho_notebook as rho",
            "from rho_notebook.service.export import read_cells",
            f"cells = read_cells(Path({str(REPO / 'notebooks' / '01_quickstart.ipynb')!r}))",
            "source = cells.source(cells.workflows['quickstart'], entry_label='//notebooks/quickstart.star', workflow_dir=Path('notebooks').resolve())",
            "print(rho.validate(source).graph_digest)",
        ]
    )
    kernel_like = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO / "notebooks", env=env, capture_output=True, text=True, timeout=120
    )
    assert kernel_like.returncode == 0, kernel_like.stderr
    assert kernel_like.stdout.strip() == digest
    assert "quickstart" in cells.workflows


def test_exporting_a_name_no_cell_has_names_every_cell_kind_that_could(project: Project) -> None:
    from rho_notebook.errors import ExportError
    from rho_notebook.service.export import export_notebook

    path = notebook(project.root / "nb.ipynb", OTHER)
    try:
        export_notebook(path, project.root / "out", workflow="triage")
    except ExportError as err:
        assert (
            "has no %%workflow triage cell (nor a %%script, %%flow or %%graph triage); its workflows: other"
            in err.message
        )
    else:
        raise AssertionError("exported a workflow no cell names")


def test_a_misspelled_workflow_name_is_answered_with_the_one_meant(project: Project) -> None:
    """Exporting (and so planning or running a notebook headless) with ``--workflow othr`` names
    the workflow it most likely means, as every other misspelled name is answered."""
    from rho_notebook.errors import ExportError
    from rho_notebook.service.cells import CellSet
    from rho_notebook.service.export import export_notebook

    path = notebook(project.root / "nb.ipynb", OTHER)
    try:
        export_notebook(path, project.root / "out", workflow="othr")
    except ExportError as err:
        assert err.message.endswith("its workflows: other; did you mean 'other'?"), err.message
    else:
        raise AssertionError("exported a workflow no cell names")
    assert CellSet().names_text("x", none="none yet") == "its workflows: none yet"
