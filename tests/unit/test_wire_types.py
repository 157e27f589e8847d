"""The TypeScript wire types are generated from the TypedDicts of rho_notebook/service/wire.py
(``scripts/gen_wire_types.py`` -> ``js/src/wire.gen.ts``) and nobody copies them by hand.

The staleness check regenerates into a temporary file with json-schema-to-typescript, so it needs
node (skipped without it; ``npm ci`` runs first when the package is missing). The other checks
read the files only.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
from pathlib import Path

from rho_notebook.model.state import NodeState
from rho_notebook.service import wire
from tests.unit.node_workspace import JS, REPO, ensure_installed

GENERATED = JS / "src" / "wire.gen.ts"
GENERATOR = REPO / "scripts" / "gen_wire_types.py"
REGENERATE = ".venv/bin/python scripts/gen_wire_types.py"


def _declared(text: str) -> set[str]:
    return set(re.findall(r"^export (?:interface|type) (\w+)", text, flags=re.MULTILINE))


def test_committed_wire_types_are_current(tmp_path: Path) -> None:
    ensure_installed()
    fresh = tmp_path / "wire.gen.ts"
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--output", str(fresh)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{GENERATOR.name} failed:\n{done.stderr[-4000:]}"
    committed = GENERATED.read_text(encoding="utf-8")
    generated = fresh.read_text(encoding="utf-8")
    if committed != generated:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(keepends=True),
                generated.splitlines(keepends=True),
                "js/src/wire.gen.ts (committed)",
                "generated from rho_notebook/service/wire.py",
            )
        )
        raise AssertionError(f"js/src/wire.gen.ts is stale: run `{REGENERATE}` and commit it\n{diff[:6000]}")


def test_every_wire_type_is_generated() -> None:
    declared = _declared(GENERATED.read_text(encoding="utf-8"))
    missing = sorted(set(wire.WIRE_TYPES) - declared)
    assert not missing, f"js/src/wire.gen.ts lacks {missing}: run `{REGENERATE}`"


def test_no_wire_type_is_written_by_hand() -> None:
    generated = _declared(GENERATED.read_text(encoding="utf-8"))
    sources = [p for p in [*(JS / "src").glob("*.ts"), *(REPO / "labextension" / "src").glob("*.ts")] if p != GENERATED]
    copies = {
        f"{p.relative_to(REPO)}: {name}"
        for p in sources
        for name in _declared(p.read_text(encoding="utf-8")) & generated
    }
    assert not copies, (
        f"hand-written copies of generated wire types (import them from ./types or @rho-notebook/dagview): {sorted(copies)}"
    )


def test_state_names_of_the_view_are_the_node_states() -> None:
    types = (JS / "src" / "types.ts").read_text(encoding="utf-8")
    union = re.search(r"export type StateName =([^;]+);", types)
    assert union is not None, "js/src/types.ts no longer declares the StateName union"
    names = re.findall(r'"(\w+)"', union.group(1))
    assert names == [state.value for state in NodeState], (
        "js/src/types.ts StateName must list NodeState's values in order"
    )
