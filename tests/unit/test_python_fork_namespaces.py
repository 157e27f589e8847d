"""Namespace packages of frozen modules, found once in the fork server (``_Namespaces`` in
rho_notebook/source/_py_forkserver.py): which packages are found, that a child gets them only
where its own import would find the same (the same ``sys.path``, the same frozen modules, an
environment the server's), and that a forked attempt in a run imports through them.

The finder's lookups run in this process (as they run in the server); the last test runs a real
fork server through ``execute_run``.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.source import _py_forkserver as server
from tests.conftest import Project
from tests.unit.test_python_exec import _attempt, _module, _node, _run

STEP = "def step():\n    return 1\n"


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _frozen(root: Path, files: dict[str, str]) -> dict[str, str]:
    """Write ``files`` below ``root``; their digests as the plan lists them."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {relative: _digest(text) for relative, text in files.items() if relative.endswith(".py")}


@pytest.fixture
def isolated_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sys.path`` and ``sys.meta_path`` restored after the test (the lookups change neither)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))


def _found(path: list[str], root: Path, modules: dict[str, str]) -> server._Namespaces:
    """What the server finds for ``modules`` with ``sys.path`` == ``path`` (its finder first, as there)."""
    sys.path[:] = path
    sys.meta_path.insert(0, server._VerifiedFinder(str(root), modules))
    try:
        return server._Namespaces(tuple(path), str(root), modules)
    finally:
        del sys.meta_path[0]


@pytest.mark.usefixtures("isolated_imports")
def test_the_namespace_packages_holding_frozen_modules_are_found(tmp_path: Path) -> None:
    root = tmp_path / "modules"
    modules = _frozen(
        root,
        {
            "nodes/step.py": STEP,
            "deep/er/mod.py": STEP,  # nested: a child looks for ``deep.er`` itself
            "pkg/__init__.py": "",  # a frozen regular package: its own loader, not a namespace
            "pkg/sub/mod.py": STEP,  # below a regular package: found through it, not here
            "top.py": STEP,
        },
    )
    found = _found([str(root)], root, modules)
    assert sorted(found.specs) == ["deep", "nodes"]
    assert list(found.specs["nodes"].submodule_search_locations) == [str(root / "nodes")]
    cold = importlib.machinery.PathFinder.find_spec("nodes", [str(root)])
    assert cold is not None and found.specs["nodes"].origin == cold.origin is None


@pytest.mark.usefixtures("isolated_imports")
def test_a_package_of_that_name_further_on_the_path_wins_as_in_an_import(tmp_path: Path) -> None:
    root = tmp_path / "modules"
    modules = _frozen(root, {"nodes/step.py": STEP})
    other = tmp_path / "site"
    _frozen(other, {"nodes/__init__.py": "X = 1\n"})
    found = _found([str(root), str(other)], root, modules)
    assert found.specs == {}, "a regular package anywhere on the path is what an import gets"
    assert "nodes" not in sys.modules, "finding imports nothing"


class _Failing:
    """A finder (one a ``.pth`` file installed, say) that fails for every name."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        raise RuntimeError(f"cannot look for {name}")


@pytest.mark.usefixtures("isolated_imports")
def test_a_lookup_that_fails_leaves_the_package_to_the_child(tmp_path: Path) -> None:
    root = tmp_path / "modules"
    modules = _frozen(root, {"nodes/step.py": STEP, "unfrozen/step.py": STEP})
    (root / "unfrozen" / "__init__.py").write_text("")  # on disk, not frozen: the verified finder refuses it
    sys.meta_path.insert(0, _Failing())
    assert _found([str(root)], root, modules).specs == {}, "the server starts all the same"
    del sys.meta_path[0]
    assert sorted(_found([str(root)], root, modules).specs) == ["nodes"]


@pytest.mark.usefixtures("isolated_imports")
def test_a_child_gets_them_only_with_the_path_they_were_found_for(tmp_path: Path) -> None:
    root = tmp_path / "modules"
    modules = _frozen(root, {"nodes/step.py": STEP})
    found = _found([str(root)], root, modules)
    finder = server._VerifiedFinder(str(root), modules, found)
    sys.path[:] = [str(root)]
    assert finder.find_spec("nodes") is found.specs["nodes"]
    sys.path[:] = [str(root), str(tmp_path)]
    assert finder.find_spec("nodes") is None, "another path: the import system looks for it itself"


def test_the_memo_gives_them_to_a_child_of_the_same_modules_and_environment(tmp_path: Path) -> None:
    memo = server._SiteMemo()
    modules = {"nodes/step.py": _digest(STEP)}
    memo.namespaces = server._Namespaces((), str(tmp_path), modules)
    assert memo.known(str(tmp_path), dict(modules)) is None, "an environment other than the server's"
    memo.active = True
    assert memo.known(str(tmp_path), dict(modules)) is memo.namespaces
    assert memo.known(str(tmp_path), {"nodes/step.py": _digest(STEP + "\n")}) is None
    assert memo.known(str(tmp_path / "other"), dict(modules)) is None


PROBE = """\
import sys

def probe():
    first = sys.meta_path[0]
    known = getattr(first, "known", None)
    nodes = sys.modules["nodes"]
    return {
        "path": list(nodes.__path__), "origin": nodes.__spec__.origin,
        "loader": type(nodes.__spec__.loader).__name__, "known": sorted(known.specs) if known else None,
    }
"""


def test_a_forked_attempt_imports_through_the_namespaces_the_server_found(project: Project) -> None:
    probe = _module("//nodes/probe.py", PROBE)
    state, run = _run(
        project, [_node("n0", "//nodes/probe.py", "probe"), _node("n1", "//nodes/probe.py", "probe")], [probe]
    )
    assert state.outcome == "success"
    for name in ("n0", "n1"):
        seen: dict[str, Any] = json.loads((_attempt(run, name) / "value.json").read_text())
        assert seen["known"] == ["nodes"], "the child's finder had the server's namespace"
        assert seen["path"] == [str(run / "python" / "modules" / "nodes")]
        assert seen["origin"] is None and seen["loader"] == "NamespaceLoader"
