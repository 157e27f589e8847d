"""The TypeScript of the front ends, checked from pytest so that the README's test command runs it:
the vitest suite of ``js/`` (the DAG view model, the view in jsdom, BaseDagSource, the widget's
ModelStore) and a type check of both workspace packages. Skipped only when node is not installed;
``npm ci`` runs first when the pinned dev dependencies are missing.
"""

from __future__ import annotations

import os
import subprocess

from tests.unit.node_workspace import JS, NODE_MODULES, REPO, ensure_installed, node

ENV = {**os.environ, "CI": "1", "NO_COLOR": "1", "FORCE_COLOR": "0"}


def _run(args: list[str], cwd: os.PathLike[str] | str, *, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout, check=False)


def test_vitest_suite_passes() -> None:
    ensure_installed()
    done = _run([node(), str(NODE_MODULES / "vitest" / "vitest.mjs"), "run"], JS, timeout=600)
    assert done.returncode == 0, f"vitest failed in js/:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert " passed" in done.stdout, done.stdout[-3000:]


def test_dagview_package_typechecks() -> None:
    ensure_installed()
    done = _run(
        [node(), str(NODE_MODULES / "typescript" / "bin" / "tsc"), "--noEmit", "-p", "tsconfig.json"], JS, timeout=300
    )
    assert done.returncode == 0, f"tsc found errors in js/ (src and test):\n{done.stdout[-6000:]}{done.stderr[-2000:]}"


def test_labextension_typechecks_against_the_workspace_package() -> None:
    ensure_installed()
    tsc = str(NODE_MODULES / "typescript" / "bin" / "tsc")
    # the sidebar imports @rho-notebook/dagview from its compiled lib/ (js/lib, not committed)
    built = _run([node(), tsc, "-p", "tsconfig.lib.json"], JS, timeout=300)
    assert built.returncode == 0, f"tsc could not build js/lib:\n{built.stdout[-6000:]}{built.stderr[-2000:]}"
    done = _run([node(), tsc, "--noEmit", "-p", "tsconfig.json"], REPO / "labextension", timeout=300)
    assert done.returncode == 0, f"tsc found errors in labextension/:\n{done.stdout[-6000:]}{done.stderr[-2000:]}"
