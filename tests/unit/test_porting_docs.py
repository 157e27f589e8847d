"""docs/porting.md cannot drift from what runs: every "ours" example on the page is a file under
docs/examples/porting/, byte for byte, and each file passes our own validators.

The page pairs each seed's code (CAO, OpenRath, Manykind) with ours. Seed blocks are fenced with
the word ``seed`` in their info string (```` ```python seed ````) and are quoted as the seed wrote
them (between ``<!-- fmt: off -->`` and ``<!-- fmt: on -->``, so that ``ruff format``, which formats
Python blocks in Markdown, leaves the quotes alone); every other ``python``/``yaml`` block is ours
and must open with the comment ``# docs/examples/porting/NAME`` naming the file whose whole text
it is. The files are validated
the way a person porting a workflow would: ``rho-notebook validate`` in a real subprocess, in a
workspace that holds copies of them, with a settings file whose provider ``main`` the examples
name (validation is offline: nothing contacts the provider). Every ``rho-notebook`` command on the
page names a verb and flags the CLI has, and its ``validate``, ``list`` and ``get`` commands are
run as written. The MCP table's "ours" column names only tools the server serves, and the page's
links (and the links to it from the docs index and the seed pages) resolve.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from rho_notebook.agents.catalog import resolve_agent
from rho_notebook.mcp.tools import TOOLS

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "porting.md"
EXAMPLES = REPO / "docs" / "examples" / "porting"
HEADER = "# docs/examples/porting/"
KEY_ENV = "RHO_PORTING_DOCS_KEY"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
SETTINGS = {
    "providers": {"main": {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": KEY_ENV}},
    "default_provider": "main",
    "default_model": "small",
}


def blocks() -> list[tuple[str, str]]:
    """Every fenced block of the page: (info string, text)."""
    return [(info.strip(), text) for info, text in FENCE.findall(PAGE.read_text(encoding="utf-8"))]


def ours_code() -> list[str]:
    """The python and yaml blocks that are ours (not quoted from a seed)."""
    found = []
    for info, text in blocks():
        words = info.split()
        if words and words[0] in ("python", "yaml") and "seed" not in words[1:]:
            found.append(text)
    return found


def example_files() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".py", ".yaml"))


def commands() -> list[list[str]]:
    """``$ rho-notebook ...`` lines of the page's console blocks that are ours, as argv lists."""
    found = []
    for info, text in blocks():
        if info.split()[:1] != ["console"] or "seed" in info.split():
            continue
        for line in text.splitlines():
            command = re.sub(r"^\$ (?:[A-Z_]+=\S+ )*", "", line) if line.startswith("$ ") else ""
            if command.startswith("rho-notebook "):
                found.append(shlex.split(command.split("  #")[0], comments=True))
    return found


def cli(args: list[str], *, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(home), KEY_ENV: "sk-porting-docs"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "rho_notebook", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180
    )


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """(a workspace holding copies of the examples, a store home whose settings name ``main``)."""
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLES, root)
    (root / ".rho").mkdir()
    (root / "docs").mkdir()
    (root / "docs" / "report.md").write_text("# Report\n\nQ3 went well.\n")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "settings.json").write_text(json.dumps(SETTINGS))
    return root.resolve(), home.resolve()


def test_every_code_block_of_ours_is_an_example_file_whole() -> None:
    shown = ours_code()
    assert shown, "the page shows no example of ours"
    for text in shown:
        first = text.splitlines()[0]
        assert first.startswith(HEADER), f"a block of ours does not name its file with {HEADER!r}: {first!r}"
        path = REPO / first[2:]
        assert path.is_file(), f"{first[2:]} is shown on the page but does not exist"
        assert text == path.read_text(encoding="utf-8"), f"the page's copy of {first[2:]} differs from the file"


def test_every_example_file_is_shown_on_the_page() -> None:
    shown = {text.splitlines()[0][2:] for text in ours_code()}
    for path in example_files():
        assert str(path.relative_to(REPO)) in shown, f"{path.name} is not shown on docs/porting.md"


def test_the_example_agents_are_in_the_catalog(tmp_path: Path) -> None:
    """The CAO ports name the agents ``developer`` and ``reviewer``; they are defined beside them."""
    for agent in ("developer", "reviewer"):
        definition, found = resolve_agent(agent, workflow_dir=EXAMPLES, workspace=tmp_path, user_home=tmp_path)
        assert found is not None and found.parent == EXAMPLES / "agents", (agent, found)
        assert definition.id == agent


@pytest.mark.parametrize("name", [p.name for p in sorted(EXAMPLES.glob("cao_*.py"))])
def test_each_cao_port_validates_without_a_finding(name: str, workspace: tuple[Path, Path]) -> None:
    root, home = workspace
    done = cli(["validate", name, "--output", "json"], cwd=root, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == {"valid": True, "diagnostics": []}


FLOWS = {
    "openrath_agent.py": ("agent",),
    "openrath_parallel.py": ("TradingWorkflow",),
    "openrath_review.py": ("ReviewWorkflow",),
    "openrath_selector.py": ("SupportWorkflow",),
    "openrath_tree.py": ("IdentityWorkflow", "PlanningWorkflow", "Team", "EngineeringProjectWorkflow"),
}
"""The flows each OpenRath port defines (``--flow NAME``); openrath_compile.py is a plain script."""


def test_every_openrath_port_is_validated() -> None:
    ports = {p.name for p in EXAMPLES.glob("openrath_*.py")} - {"openrath_compile.py"}
    assert ports == set(FLOWS)


@pytest.mark.parametrize(("name", "flow"), [(name, flow) for name, flows in FLOWS.items() for flow in flows])
def test_each_openrath_port_validates_as_a_flow(name: str, flow: str, workspace: tuple[Path, Path]) -> None:
    root, home = workspace
    done = cli(["validate", name, "--flow", flow, "--output", "json"], cwd=root, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["valid"] is True and answer["diagnostics"] == [], answer


@pytest.mark.parametrize("name", [p.name for p in sorted(EXAMPLES.glob("*.graph.yaml"))])
def test_each_manykind_port_validates_as_an_item_graph(name: str, workspace: tuple[Path, Path]) -> None:
    root, home = workspace
    done = cli(["validate", name, "--output", "json"], cwd=root, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == {"valid": True, "diagnostics": []}


@cache
def help_of(*verb: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rho_notebook", *verb, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_command_on_the_page_names_a_verb_and_flags_the_cli_has() -> None:
    shown = commands()
    assert shown, "the page shows no rho-notebook command"
    for argv in shown:
        verb = argv[1]
        assert re.search(rf"^\s+{re.escape(verb)}\s", help_of(), re.MULTILINE), f"no verb {verb!r}: {argv}"
        for flag in (a.split("=")[0] for a in argv[2:] if a.startswith("--")):
            assert flag in help_of(verb), f"rho-notebook {verb} has no {flag}: {shlex.join(argv)}"


def test_the_read_only_commands_on_the_page_pass_as_written(workspace: tuple[Path, Path]) -> None:
    """``validate``, ``list`` and ``get`` store nothing, so the page's own lines are run as they are."""
    root, home = workspace
    reading = [argv for argv in commands() if argv[1] in ("validate", "list", "get")]
    assert {argv[1] for argv in reading} == {"validate", "list", "get"}
    for argv in reading:
        done = cli(argv[1:], cwd=root, home=home)
        assert done.returncode == 0, f"{shlex.join(argv)}: {done.stdout}{done.stderr}"


def test_the_compile_example_places_and_checks_the_tree_offline(workspace: tuple[Path, Path]) -> None:
    """openrath_compile.py runs in a plain interpreter (no run, no model call) and prints what the
    page says: the writer's overlaid model, both kinds from the provider table, no problem."""
    root, home = workspace
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(home), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "openrath_compile.py"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    models = {"review_workflow.reviewer": None, "review_workflow.writer": "small"}
    kinds = {"review_workflow.reviewer": "openai", "review_workflow.writer": "openai"}
    assert done.stdout.strip() == f"{models} {kinds} []"
    page = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert f"`{models}`" in page and "`[]`" in page


def test_the_mcp_tools_the_page_names_as_ours_exist() -> None:
    served = {tool.name for tool in TOOLS}
    text = PAGE.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `workflow_")]
    assert rows, "the page has no MCP tool table"
    for row in rows:
        ours = row.split("|")[2]
        for name in re.findall(r"`(workflow_\w+)`", ours):
            assert name in served, f"the page names MCP tool {name}, which the server does not serve: {row}"


def slugs(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    found = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if line.startswith("#") and not line.startswith("#!"):
            text = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def test_the_links_of_the_page_and_to_it_resolve() -> None:
    """Every relative link on the page names a file (and heading) that exists, and the pages that
    point readers here (the docs index and the three seed pages) do so with working links."""
    pointing = {
        REPO / "README.md": "docs/porting.md",
        REPO / "docs" / "workflows.md": "porting.md",
        REPO / "docs" / "scripts.md": "porting.md#cao-script-tier",
        REPO / "docs" / "flows.md": "porting.md#openrath-workflow-modules",
        REPO / "docs" / "graphs.md": "porting.md#manykind-item-graphs",
    }
    for source, link in pointing.items():
        assert f"]({link})" in source.read_text(encoding="utf-8"), f"{source.name} does not link {link}"
    links = [(PAGE, target) for target in re.findall(r"\]\(([^)\s]+)\)", PAGE.read_text(encoding="utf-8"))]
    links += [(source, link) for source, link in pointing.items()]
    for source, target in links:
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (source.parent / path).resolve() if path else source
        assert resolved.exists(), f"{source.name}: link {target} names no file"
        if anchor:
            assert anchor in slugs(resolved), f"{source.name}: link {target} names no heading of {resolved.name}"
