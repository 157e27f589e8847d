"""Verified descriptors kept for a run (rho_notebook.exec.handles): reused while the file is what
was verified, verified again from its path (and refused) after an edit, a replacement, a swapped-in
link or a removal. Real files and real launches; ``SETTLED_SECONDS`` is lowered so that files
written by the test may be kept at all."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
from pathlib import Path

import pytest

from rho_notebook.errors import VerificationError
from rho_notebook.exec import verify
from rho_notebook.exec.handles import VerifiedHandles
from rho_notebook.exec.process import ProcessSpec, run_process
from rho_notebook.exec.verify import identity_of
from rho_notebook.model.graph import FrozenExecutable, FrozenFile

SCRIPT = b"#!/bin/sh\necho kept\n"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture()
def settled_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify, "SETTLED_SECONDS", 0.0)


@pytest.fixture()
def tool(tmp_path: Path) -> Path:
    path = tmp_path / "tool.sh"
    path.write_bytes(SCRIPT)
    path.chmod(0o755)
    return path


def _frozen(path: Path, data: bytes = SCRIPT) -> FrozenFile:
    return FrozenFile(path=str(path), in_workspace=False, sha256=sha(data))


def _open(handles: VerifiedHandles, path: Path, data: bytes = SCRIPT, *, pinned: bool = True) -> int:
    identity = identity_of(path) if pinned else None
    return asyncio.run(handles.open_file(_frozen(path, data), identity=identity))


def _same_object(a: int, b: int) -> bool:
    sa, sb = os.fstat(a), os.fstat(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def test_a_settled_file_is_kept_and_handed_out_as_duplicates(settled_now: None, tool: Path, tmp_path: Path) -> None:
    handles = VerifiedHandles(tmp_path)
    identity = identity_of(tool)
    first = asyncio.run(handles.open_file(_frozen(tool), identity=identity))
    second = asyncio.run(handles.open_file(_frozen(tool), identity=identity))
    try:
        assert len(handles) == 1
        assert first != second and _same_object(first, second)
        assert os.pread(second, 9, 0) == b"#!/bin/sh"
    finally:
        os.close(first)
        os.close(second)
        handles.close()
    assert len(handles) == 0


def test_a_freshly_written_file_is_not_kept(tool: Path, tmp_path: Path) -> None:
    handles = VerifiedHandles(tmp_path)
    os.close(_open(handles, tool))
    assert len(handles) == 0  # changed within SETTLED_SECONDS: verified on every launch
    handles.close()


def test_an_edit_in_place_after_keeping_is_refused(settled_now: None, tool: Path, tmp_path: Path) -> None:
    handles = VerifiedHandles(tmp_path)
    identity = identity_of(tool)
    os.close(asyncio.run(handles.open_file(_frozen(tool), identity=identity)))
    with open(tool, "r+b") as handle:  # same inode, same size
        handle.write(b"#!/bin/sh\necho evil\n")
    with pytest.raises(VerificationError) as err:
        asyncio.run(handles.open_file(_frozen(tool), identity=identity))
    assert err.value.reason in ("identity", "content") and str(tool) in err.value.message
    assert len(handles) == 0
    handles.close()


def test_a_replacement_with_the_same_bytes_is_refused_while_the_old_file_lives_on(
    settled_now: None, tool: Path, tmp_path: Path
) -> None:
    handles = VerifiedHandles(tmp_path)
    identity = identity_of(tool)
    os.close(asyncio.run(handles.open_file(_frozen(tool), identity=identity)))
    os.rename(tool, tool.with_name("old.sh"))  # the kept inode is still linked
    shutil.copy2(tool.with_name("old.sh"), tool)
    with pytest.raises(VerificationError) as err:
        asyncio.run(handles.open_file(_frozen(tool), identity=identity))
    assert err.value.reason == "identity"
    handles.close()


def test_a_file_swapped_for_a_symlink_is_refused(settled_now: None, tool: Path, tmp_path: Path) -> None:
    handles = VerifiedHandles(tmp_path)
    os.close(_open(handles, tool, pinned=False))
    os.rename(tool, tool.with_name("real.sh"))
    os.symlink(tool.with_name("real.sh"), tool)  # the link points at the kept inode itself
    with pytest.raises(VerificationError) as err:
        _open(handles, tool, pinned=False)
    assert err.value.reason == "symlink"
    handles.close()


def test_a_removed_file_is_refused(settled_now: None, tool: Path, tmp_path: Path) -> None:
    handles = VerifiedHandles(tmp_path)
    os.close(_open(handles, tool))
    identity = identity_of(tool)
    tool.unlink()
    with pytest.raises(VerificationError) as err:
        asyncio.run(handles.open_file(_frozen(tool), identity=identity))
    assert err.value.reason == "missing"
    handles.close()


def test_working_directory_kept_then_removed_or_replaced(tmp_path: Path) -> None:
    handles = VerifiedHandles(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    identity = identity_of(work)
    a = handles.open_dir(work, identity=identity)
    b = handles.open_dir(work, identity=identity)
    assert len(handles) == 1 and _same_object(a, b)
    os.close(a)
    os.close(b)
    work.rename(tmp_path / "moved")  # the kept directory lives on elsewhere
    work.mkdir()
    with pytest.raises(VerificationError) as replaced:
        handles.open_dir(work, identity=identity)
    assert replaced.value.reason == "identity"
    work.rmdir()
    with pytest.raises(VerificationError) as missing:
        handles.open_dir(work, identity=identity)
    assert missing.value.reason == "missing"
    handles.close()


def test_launches_through_kept_handles_run_the_verified_script_and_stop_after_an_edit(
    settled_now: None, tool: Path, tmp_path: Path
) -> None:
    executable = FrozenExecutable(
        file=FrozenFile(path=str(tool), in_workspace=False, sha256=sha(SCRIPT)),
        interpreters=(
            FrozenFile(path=os.path.realpath("/bin/sh"), in_workspace=False, sha256=sha(Path("/bin/sh").read_bytes())),
        ),
    )
    spec = ProcessSpec(
        argv=("tool.sh",), executable=executable, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
        timeout_seconds=10, max_output_bytes=1000, workspace=tmp_path,
    )  # fmt: skip
    handles = VerifiedHandles(tmp_path)

    async def launch() -> bytes:
        out = bytearray()

        async def keep(chunk: bytes) -> None:
            out.extend(chunk)

        async def drop(chunk: bytes) -> None:
            return None

        result = await run_process(spec, stdout_sink=keep, stderr_sink=drop, cancel=asyncio.Event(), handles=handles)
        assert result.kind == "exit" and result.exit_code == 0
        return bytes(out)

    assert asyncio.run(launch()) == b"kept\n"
    assert asyncio.run(launch()) == b"kept\n"
    assert len(handles) == 3  # the script, /bin/sh and the working directory
    tool.write_bytes(b"#!/bin/sh\necho evil\n")
    with pytest.raises(VerificationError) as err:
        asyncio.run(launch())
    assert err.value.reason == "content" and str(tool) in err.value.message
    handles.close()
