"""The item-graph JSON Schema ships in the package and is generated from the pydantic model
(``scripts/gen_graph_schema.py`` -> ``rho_notebook/schemas/graph.schema.json``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

from rho_notebook.model.itemgraph import GRAPH_SCHEMA_FILE, graph_json_schema
from tests.unit.test_itemgraph_validate import TRIAGE

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_schema_equals_the_generated_one(tmp_path: Path) -> None:
    fresh = tmp_path / "graph.schema.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_graph_schema.py"), "--output", str(fresh)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert GRAPH_SCHEMA_FILE.read_text(encoding="utf-8") == fresh.read_text(encoding="utf-8"), (
        "rho_notebook/schemas/graph.schema.json is stale: run .venv/bin/python scripts/gen_graph_schema.py"
    )


def test_the_schema_lives_inside_the_package_so_the_wheel_ships_it() -> None:
    assert GRAPH_SCHEMA_FILE.is_relative_to(REPO / "rho_notebook")
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'packages = ["rho_notebook"]' in pyproject
    assert "rho_notebook/schemas" not in pyproject  # not excluded


def test_editors_can_validate_the_triage_example_against_it() -> None:
    schema = json.loads(GRAPH_SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema == graph_json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    assert list(validator.iter_errors(yaml.safe_load(TRIAGE))) == []
    broken = yaml.safe_load(TRIAGE.replace("kind: output", "kind: outptu"))
    assert list(validator.iter_errors(broken)) != []
    no_rounds = yaml.safe_load(TRIAGE + "  - {from: done, to: start, loop: {}}\n")
    assert list(validator.iter_errors(no_rounds)) != []
