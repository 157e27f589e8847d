"""A run picker asked for a run that does not exist refuses with NotFound, and the half-made
widget then goes away quietly (ipywidgets closes every widget it collects)."""

from __future__ import annotations

import gc
import sys
from typing import Any

import pytest

from rho_notebook.errors import NotFound
from rho_notebook.widgets._picker import RunPicker
from rho_notebook.widgets._testing import RecordingComm
from tests.conftest import Project


def test_a_picker_of_an_unknown_run_refuses_and_is_collected_without_an_error(
    project: Project, comms: list[RecordingComm], monkeypatch: pytest.MonkeyPatch
) -> None:
    unraised: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraised.append)
    with pytest.raises(NotFound, match="no run matches 'nosuch'"):
        RunPicker("nosuch", service=project.service)
    gc.collect()
    assert [f"{u.exc_type.__name__}: {u.exc_value}" for u in unraised] == []
