"""The shared no-follow open never blocks on a FIFO (issue 14, item 4): it refuses anything but a
regular file, naming the path, and hands back an ordinary (blocking) descriptor for a regular one."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import NotRegularFile, SourceError, StoreError
from rho_notebook.oshelpers import open_regular_nofollow, read_regular_nofollow
from rho_notebook.source.labels import read_regular_file_nofollow
from rho_notebook.store.files import read_json, read_nofollow


def within(seconds: float, call: Callable[[], Any]) -> BaseException | None:
    """Run ``call`` in a thread; the exception it raised (None if it returned). A call still
    running after ``seconds`` fails the test: that is the hang being tested for."""
    caught: list[BaseException | None] = [None]

    def target() -> None:
        try:
            call()
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            caught[0] = err

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():  # the daemon thread stays blocked; the test process still exits
        pytest.fail(f"{call} still blocked after {seconds} s")
    return caught[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    os.mkfifo(path, 0o600)
    return path


@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_WRONLY | os.O_APPEND | os.O_CREAT, os.O_RDWR])
def test_fifo_is_refused_without_blocking(fifo: Path, flags: int) -> None:
    err = within(5, lambda: open_regular_nofollow(fifo, flags))
    assert isinstance(err, NotRegularFile)
    assert str(fifo) in str(err)


def test_read_of_fifo_is_refused_naming_it(fifo: Path) -> None:
    err = within(5, lambda: read_regular_nofollow(fifo))
    assert isinstance(err, NotRegularFile) and "FIFO" in str(err) and str(fifo) in str(err)


def test_store_reads_turn_it_into_a_store_error(fifo: Path) -> None:
    for read in (read_nofollow, read_json):
        err = within(5, lambda read=read: read(fifo))  # type: ignore[misc]
        assert isinstance(err, StoreError) and str(fifo) in str(err)


def test_source_reads_turn_it_into_a_source_error(fifo: Path) -> None:
    err = within(5, lambda: read_regular_file_nofollow(fifo.parent, [fifo.name], shown=fifo.name))
    assert isinstance(err, SourceError) and "FIFO" in str(err)


def test_device_is_refused(tmp_path: Path) -> None:
    err = within(5, lambda: read_regular_nofollow("/dev/null"))
    assert isinstance(err, NotRegularFile) and "character device" in str(err)


def test_regular_file_descriptor_is_blocking(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"data")
    fd, info = open_regular_nofollow(path)
    try:
        assert os.get_blocking(fd)
        assert info.st_size == 4
    finally:
        os.close(fd)
    fd, _ = open_regular_nofollow(path, os.O_RDONLY | os.O_NONBLOCK)  # asked for: kept
    try:
        assert not os.get_blocking(fd)
    finally:
        os.close(fd)
