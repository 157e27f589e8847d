"""The layer order of docs/architecture.md, enforced on every import in the package.

The table between ``<!-- layers`` and ``<!-- end layers -->`` lists the layers bottom first; every
``import`` / ``from ... import`` in rho_notebook (module level, inside functions, under
``TYPE_CHECKING``) must follow the rules that page states.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rho_notebook"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

FRONT_END_MAY_USE = frozenset({"service", "model", "views", "errors", "oshelpers", "lazy", "flow"})
"""``flow`` too: the authoring API, whose in-memory model backend the notebook extension installs."""
STANDALONE = "script"
"""The one layer that imports nothing of ours, not even the base: it runs in a script's interpreter."""
SHIM_LAYERS = {STANDALONE: frozenset({STANDALONE}), "flow": frozenset({"flow", STANDALONE})}
"""Layers that run in a script's interpreter: the standard library and these packages of ours only."""
EXTRA_FRONT_END_EDGES = {("notebook", "widgets"), ("cli", "mcp")}
"""The exceptions the page names: the notebook displays widgets; the CLI serves the MCP server."""


@dataclass(frozen=True)
class Layers:
    rank: dict[str, int]
    """Top-level module or package -> its layer's position, bottom first."""
    front_ends: frozenset[str]


def read_layers(text: str) -> Layers:
    block = text.split("<!-- layers", 1)[1].split("<!-- end layers -->", 1)[0]
    rank: dict[str, int] = {}
    front_ends: set[str] = set()
    position = 0
    for line in block.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
            continue
        names = re.findall(r"`([a-z_]+)`", cells[1])
        if cells[0] == "front ends":
            front_ends.update(names)
            continue
        for name in names:
            rank[name] = position
        position += 1
    return Layers(rank=rank, front_ends=frozenset(front_ends))


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every import of ours in ``source``, wherever it stands."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "rho_notebook":
                found.extend((node.lineno, f"rho_notebook.{alias.name}") for alias in node.names)
            elif node.module.startswith("rho_notebook."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.append((node.lineno, "." * node.level + (node.module or "")))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names if alias.name.startswith("rho_notebook"))
    return found


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def violations(owner: str, source: str, layers: Layers) -> list[str]:
    """Imports in module ``owner`` (dotted) that break the rules; empty when it follows them."""
    mine = top(owner)
    bad = []
    for line, target in imported_modules(source):
        if target.startswith("."):
            bad.append(f"{owner}:{line}: relative import {target!r}; import rho_notebook.... by name")
            continue
        theirs = top(target)
        if mine in SHIM_LAYERS and theirs not in SHIM_LAYERS[mine]:
            ours = " and ".join(sorted(SHIM_LAYERS[mine]))
            bad.append(f"{owner}:{line}: {mine} may import nothing of rho_notebook but {ours}, not {target}")
            continue
        if theirs == mine or theirs in ("errors", "oshelpers"):
            continue
        if mine in ("", "__main__"):
            allowed = theirs in layers.front_ends
        elif mine in layers.front_ends:
            allowed = theirs in FRONT_END_MAY_USE or (mine, theirs) in EXTRA_FRONT_END_EDGES
        elif mine in layers.rank and theirs in layers.rank:  # its own layer (errors -> diagnostics) or above
            allowed = layers.rank[theirs] <= layers.rank[mine]
        else:
            bad.append(
                f"{owner}:{line}: {mine or 'rho_notebook'} or {theirs} is not in docs/architecture.md's layer table"
            )
            continue
        if not allowed:
            bad.append(f"{owner}:{line}: {mine or 'rho_notebook'} may not import {target}")
    return bad


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        dotted = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found.append((dotted, path))
    return found


LAYERS = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))


def test_the_table_names_every_package() -> None:
    tops = {top(dotted) for dotted, _ in modules()} - {"", "__main__"}
    named = set(LAYERS.rank) | LAYERS.front_ends
    assert tops <= named, f"packages missing from docs/architecture.md: {sorted(tops - named)}"
    assert LAYERS.rank[STANDALONE] == 0 and LAYERS.rank["flow"] == 1
    assert LAYERS.rank["errors"] == 2 and LAYERS.rank["model"] == 3
    assert LAYERS.rank["runtime"] < LAYERS.rank["service"] < LAYERS.rank["views"]


def test_every_import_follows_the_layer_order() -> None:
    bad = [
        problem
        for dotted, path in modules()
        for problem in violations(dotted, path.read_text(encoding="utf-8"), LAYERS)
    ]
    assert not bad, "imports against docs/architecture.md:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("owner", "source"),
    [
        ("rho_notebook.model.graph", "from rho_notebook.store.files import read_nofollow\n"),
        ("rho_notebook.store.plans", "def f():\n    from rho_notebook.planning.plan import build_plan\n"),
        ("rho_notebook.cli.main", "from rho_notebook.runtime.owner import execute_run\n"),
        (
            "rho_notebook.server.handlers",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rho_notebook.store.runs import RunStore\n",
        ),
        ("rho_notebook.widgets._dag", "import rho_notebook.notebook.api\n"),
        ("rho_notebook.service.service", "from rho_notebook.views.dag import node_view\n"),
        ("rho_notebook.script._steps", "from rho_notebook.errors import RhoError\n"),
        ("rho_notebook.script._channel", "def f():\n    import rho_notebook.oshelpers\n"),
        ("rho_notebook.script", "from rho_notebook.model.schema import Schema\n"),
        ("rho_notebook.script._steps", "from rho_notebook.flow import Session\n"),
        ("rho_notebook.flow.session", "from rho_notebook.errors import RhoError\n"),
        ("rho_notebook.flow", "def f():\n    from rho_notebook.agents.completion import complete_once\n"),
    ],
)
def test_an_upward_import_is_caught(owner: str, source: str) -> None:
    assert violations(owner, source, LAYERS), f"{source!r} in {owner} should break the layer order"


@pytest.mark.parametrize(
    ("owner", "source"),
    [
        (
            "rho_notebook.cli.main",
            "from rho_notebook.service import Service\nfrom rho_notebook.model.state import Lifecycle\n",
        ),
        ("rho_notebook.notebook.display", "def f():\n    from rho_notebook.widgets import show\n"),
        ("rho_notebook.runtime.owner", "from rho_notebook.store.runs import RunStore\n"),
        ("rho_notebook.views.dag", "from rho_notebook.service.wire import NodeView\n"),
        ("rho_notebook.script", "from rho_notebook.script._steps import run_step\n"),
        ("rho_notebook.flow.backend", "from rho_notebook.script._steps import _keyed_step\n"),
        ("rho_notebook.errors", "from rho_notebook.diagnostics import Diagnostic\n"),  # within the base
    ],
)
def test_a_downward_import_is_allowed(owner: str, source: str) -> None:
    assert violations(owner, source, LAYERS) == []


def stdlib_violations(owner: str, source: str) -> list[str]:
    """Imports in ``owner`` (of a layer in :data:`SHIM_LAYERS`) of anything but the standard library
    and the packages of ours that layer may use."""
    layer = top(owner)
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] in sys.stdlib_module_names or name == "__future__":
                continue
            if name.startswith("rho_notebook.") and top(name) in SHIM_LAYERS[layer]:
                continue
            bad.append(f"{owner}:{node.lineno}: {layer} imports only the standard library, not {name}")
    return bad


@pytest.mark.parametrize("layer", sorted(SHIM_LAYERS))
def test_the_script_shim_and_flow_import_only_the_standard_library(layer: str) -> None:
    shim = [(dotted, path) for dotted, path in modules() if top(dotted) == layer]
    assert shim, f"rho_notebook/{layer} is missing"
    bad = [problem for dotted, path in shim for problem in stdlib_violations(dotted, path.read_text(encoding="utf-8"))]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "source",
    ["import pydantic\n", "def f():\n    from starlark import Module\n", "from rho_notebook import errors\n"],
)
@pytest.mark.parametrize("owner", ["rho_notebook.script._steps", "rho_notebook.flow.session"])
def test_a_third_party_import_in_the_script_shim_or_flow_is_caught(owner: str, source: str) -> None:
    found = stdlib_violations(owner, source) + violations(owner, source, LAYERS)
    assert found, f"{source!r} in {owner} should be refused"


def test_headless_import_loads_no_jupyter_framework() -> None:
    code = (
        "import sys, rho_notebook, rho_notebook.notebook.api, rho_notebook.service, rho_notebook.cli.main\n"
        "rho_notebook.validate\n"
        "bad = sorted(m for m in ('IPython', 'ipywidgets', 'traitlets', 'jupyter_server', 'anywidget') if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "", f"headless import loaded: {done.stdout.strip()}"
