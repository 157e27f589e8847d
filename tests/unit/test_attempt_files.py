"""An attempt's directory (store/artifacts.AttemptFiles): its path is worked out only when asked
for (a launch whose attempt writes nothing builds none), the directory is made on first write by
the run's writer thread, and a directory the caller made is written into at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rho_notebook.store.artifacts import ArtifactWriter, AttemptFiles


def test_the_path_is_located_once_and_only_when_asked_for(tmp_path: Path) -> None:
    asked: list[int] = []

    def locate() -> Path:
        asked.append(1)
        return tmp_path / "nodes" / "n" / "attempts" / "1"

    writer = ArtifactWriter(tmp_path)
    files = writer.attempt_files(locate)
    assert not files.prepared and asked == []
    assert files.path == tmp_path / "nodes" / "n" / "attempts" / "1"
    assert files.path == tmp_path / "nodes" / "n" / "attempts" / "1"
    assert asked == [1]
    writer.close()


def test_a_located_directory_is_made_on_first_write(tmp_path: Path) -> None:
    where = tmp_path / "nodes" / "n" / "attempts" / "2"
    writer = ArtifactWriter(tmp_path)
    files = writer.attempt_files(lambda: where)
    files.write_later("exit.json", b"{}\n")
    assert files.prepared
    assert asyncio.run(writer.drain()) == []
    writer.close()
    assert (where / "exit.json").read_bytes() == b"{}\n"


def test_a_directory_the_caller_made_is_written_at_once(tmp_path: Path) -> None:
    files = AttemptFiles.made(tmp_path)
    assert files.prepared and files.path == tmp_path
    files.write_later("value.json", b"1\n")
    assert (tmp_path / "value.json").read_bytes() == b"1\n"  # no writer thread to wait for
    assert asyncio.run(files.ready()) == tmp_path


def test_either_a_path_or_a_way_to_locate_it(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="either a path or a way to locate it"):
        AttemptFiles(None)
    with pytest.raises(TypeError, match="either a path or a way to locate it"):
        AttemptFiles(None, path=tmp_path, locate=lambda: tmp_path)
