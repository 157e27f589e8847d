"""Recognising version-manager shims and asking their manager (planning/shims.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rho_notebook.errors import PlanError
from rho_notebook.planning.shims import detect_shim, frozen_environment, shim_program


def script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_pyenv_shim_names_its_manager_and_exports(tmp_path: Path) -> None:
    manager = script(tmp_path / ".pyenv" / "libexec" / "pyenv", "#!/bin/sh\necho /usr/bin/python3\n")
    shim = script(
        tmp_path / ".pyenv" / "shims" / "python3",
        '#!/usr/bin/env bash\nset -e\nprogram="${0##*/}"\n'
        f'export PYENV_ROOT="{tmp_path / ".pyenv"}"\nexec "{manager}" exec "$program" "$@"\n',
    )
    found = detect_shim(shim, search_path="")
    assert found is not None
    assert (found.manager, found.command) == ("pyenv", manager)
    assert found.exports == (("PYENV_ROOT", str(tmp_path / ".pyenv")),)
    assert found.describe() == f"via pyenv shim {shim}"


def test_an_asdf_shim_finds_its_manager_on_path(tmp_path: Path) -> None:
    manager = script(tmp_path / "bin" / "asdf", "#!/bin/sh\n")
    shim = script(
        tmp_path / ".asdf" / "shims" / "node",
        '#!/usr/bin/env bash\n# asdf-plugin: nodejs 20.1.0\nexec asdf exec "node" "$@"\n',
    )
    found = detect_shim(shim, search_path=str(tmp_path / "bin"))
    assert found is not None and (found.manager, found.command) == ("asdf", manager)


def test_a_shim_without_a_reachable_manager_is_still_a_shim(tmp_path: Path) -> None:
    shim = script(tmp_path / ".rbenv" / "shims" / "ruby", '#!/usr/bin/env bash\nexec rbenv exec "${0##*/}" "$@"\n')
    found = detect_shim(shim, search_path="")
    assert found is not None and found.command is None
    with pytest.raises(PlanError, match="Put the real interpreter first on PATH"):
        shim_program(found, cwd=tmp_path, environment={}, node="n")


def test_outside_shims_only_a_dispatching_hand_over_counts(tmp_path: Path) -> None:
    usage = script(tmp_path / "bin" / "tool", '#!/bin/sh\necho "usage: ${0##*/} FILE"\n')
    assert detect_shim(usage, search_path="") is None
    manager = script(tmp_path / "vm" / "bin" / "vm", "#!/bin/sh\n")
    dispatch = script(tmp_path / "bin" / "python3", f'#!/bin/sh\nexec "{manager}" exec "$(basename "$0")" "$@"\n')
    found = detect_shim(dispatch, search_path="")
    assert found is not None and found.command == manager
    binary = tmp_path / "bin" / "plain"
    binary.write_bytes(b"\x7fELF\x00")
    assert detect_shim(binary, search_path="") is None


def test_the_manager_is_asked_in_the_cwd_with_the_environment(tmp_path: Path) -> None:
    real = os.path.realpath("/bin/sh")
    manager = script(
        tmp_path / "root" / "bin" / "pyenv",
        f'#!/bin/sh\n[ "$1 $2" = "which python3" ] && [ "$PWD" = "{tmp_path / "w"}" ] && [ -z "$SECRET" ] '
        f'&& [ "$PYENV_ROOT" = /r ] && echo "{real}" && exit 0\necho "pyenv: nope" >&2; exit 1\n',
    )
    shim = script(
        tmp_path / "root" / "shims" / "python3", f'#!/bin/sh\nexport PYENV_ROOT="/r"\nexec "{manager}" exec python3\n'
    )
    (tmp_path / "w").mkdir()
    found = detect_shim(shim, search_path="")
    assert found is not None
    env = frozen_environment("/usr/bin:/bin", {"HOME": "/h", "SECRET": "x", "LC_ALL": "C"})
    assert env == {"HOME": "/h", "LC_ALL": "C", "PATH": "/usr/bin:/bin"}
    assert shim_program(found, cwd=tmp_path / "w", environment=env, node="n") == Path(real)
    with pytest.raises(PlanError, match="pyenv: nope"):
        shim_program(found, cwd=tmp_path, environment=env, node="n")
