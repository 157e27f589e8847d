"""The committed JupyterLab extension (``rho_notebook/labextension/``) is what the sources build to,
wherever the repository is checked out.

``pip install -e .`` rebuilds that directory in place (``labextension/build_hook.py``: ``npm install``
and ``npm run build:prod`` in ``labextension/``), while wheel and sdist builds without Node.js ship it
as committed. When the build depended on the checkout path (the module federation container
entry's id was a hash over absolute paths, see ``labextension/rspack.config.js``), a fresh clone
was dirty after the README's own commands: ``remoteEntry.*.js`` re-created under another name and
``package.json`` rewritten.

- :func:`test_lab_bundle_builds_byte_for_byte_at_another_path` runs that build in a copy of the
  build inputs at another path (node_modules hard-linked, not symlinked: symlinks would resolve back
  into this checkout) and compares every output file with ``rho_notebook/labextension/`` here. It
  fails when the build depends on the path again, or when the sources changed without the bundle
  being rebuilt. It never writes into this checkout. Skipped only when node is not installed.
- :func:`test_lab_bundle_is_clean_in_git_when_its_sources_are`: ``scripts/test.sh`` runs
  ``pip install -e .`` (the build, in this checkout) before pytest, so on a clean clone -- CI -- this
  is the check that the README's commands leave ``git status`` clean.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.node_workspace import NODE_MODULES, REPO, ensure_installed, missing_tool, node

BUNDLE = REPO / "rho_notebook" / "labextension"
# what `npm run build:prod` in labextension/ reads, relative to the repository (the workspace root)
INPUT_FILES = ("package.json", "package-lock.json")
INPUT_DIRS = ("js", "labextension")
# build outputs and litter inside INPUT_DIRS, left out of the copy
NOT_INPUTS = {"node_modules", "lib", "tsconfig.tsbuildinfo", ".ipynb_checkpoints", "__pycache__"}
# the build inputs and the bundle, for git
GIT_INPUTS = [*INPUT_FILES, *INPUT_DIRS]


def _link_or_copy(src: str, dst: str) -> str:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


def _ignore_outputs(directory: str, names: list[str]) -> set[str]:
    return {name for name in names if name in NOT_INPUTS}


def _files(root: Path) -> dict[str, Path]:
    return {path.relative_to(root).as_posix(): path for path in sorted(root.rglob("*")) if path.is_file()}


def _copy_build_inputs(destination: Path) -> None:
    for name in INPUT_FILES:
        shutil.copy2(REPO / name, destination / name)
    for name in INPUT_DIRS:
        shutil.copytree(REPO / name, destination / name, symlinks=True, ignore=_ignore_outputs)
    # hard links: the same bytes under the new path (the build only reads node_modules); the
    # workspace links (node_modules/@rho-notebook/dagview -> ../../js) stay relative symlinks
    shutil.copytree(NODE_MODULES, destination / "node_modules", symlinks=True, copy_function=_link_or_copy)
    for name in INPUT_DIRS:
        nested = REPO / name / "node_modules"
        if nested.is_dir():
            shutil.copytree(nested, destination / name / "node_modules", symlinks=True, copy_function=_link_or_copy)


def test_lab_bundle_builds_byte_for_byte_at_another_path(tmp_path: Path) -> None:
    node()
    npm = shutil.which("npm")
    if npm is None:
        missing_tool("npm is not installed: building the JupyterLab extension needs Node.js 20+ with npm")
    scripts = Path(sys.executable).parent
    if shutil.which("jupyter-builder", path=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}") is None:
        pytest.fail("jupyter-builder (a dependency of jupyterlab) is not installed next to this Python or on PATH")
    ensure_installed()
    if not (NODE_MODULES / "@jupyter" / "builder").is_dir():
        pytest.fail(f"@jupyter/builder is missing from {NODE_MODULES}: run `npm ci` in {REPO}")
    assert BUNDLE.is_dir(), f"{BUNDLE} is missing: the built extension is committed"

    # another path, of another length and depth than the checkout's
    elsewhere = tmp_path / "another" / "checkout-at-a-different-path"
    elsewhere.mkdir(parents=True)
    assert elsewhere.resolve() != REPO
    _copy_build_inputs(elsewhere)
    env = {
        **os.environ,
        "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
        "CI": "1",
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
    }
    done = subprocess.run(
        [npm, "run", "build:prod"],
        cwd=elsewhere / "labextension",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, (
        f"npm run build:prod failed in {elsewhere}:\n{done.stdout[-5000:]}\n{done.stderr[-3000:]}"
    )

    built = _files(elsewhere / "rho_notebook" / "labextension")
    committed = _files(BUNDLE)
    assert built, f"the build wrote nothing to {elsewhere / 'rho_notebook' / 'labextension'}"
    differing = sorted(
        name for name in built.keys() & committed.keys() if not filecmp.cmp(built[name], committed[name], shallow=False)
    )
    problems = {
        "only in the committed bundle": sorted(committed.keys() - built.keys()),
        "only in the fresh build": sorted(built.keys() - committed.keys()),
        "different content": differing,
    }
    assert not any(problems.values()), (
        f"building labextension/ at {elsewhere} does not reproduce {BUNDLE.relative_to(REPO)} byte for byte: "
        f"{ {key: value for key, value in problems.items() if value} }. Either the sources changed and the bundle "
        "was not rebuilt (cd labextension && npm run build:prod, then commit rho_notebook/labextension), or the "
        "build depends on the checkout path again (see labextension/rspack.config.js), which leaves a fresh "
        "clone dirty after `pip install -e .`"
    )


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        pytest.skip(f"`git {' '.join(args)}` failed here: {done.stderr.strip()[:300]}")
    return done.stdout


def test_lab_bundle_is_clean_in_git_when_its_sources_are() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (or git is not installed): nothing to compare the bundle with")
    changed_inputs = _git("status", "--porcelain", "--", *GIT_INPUTS).strip()
    if changed_inputs:
        pytest.skip(
            "the extension's sources have uncommitted changes, so the bundle may rightly differ from HEAD:\n"
            + changed_inputs[:1000]
        )
    dirty = _git("status", "--porcelain", "--", BUNDLE.relative_to(REPO).as_posix()).strip()
    assert not dirty, (
        "rho_notebook/labextension differs from the commit although its sources do not; `pip install -e .` "
        "(scripts/test.sh, scripts/demo.sh) rebuilds it here, so either the committed bundle is stale "
        "(rebuild and commit it) or the build depends on the checkout path:\n" + dirty
    )
