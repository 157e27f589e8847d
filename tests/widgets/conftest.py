"""Fixtures for widget tests: recorded comms and a small plan."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rho_notebook.model.plan import Plan
from rho_notebook.widgets._testing import RecordingComm, recording_comms
from tests.conftest import Project
from tests.widgets.helpers import SMALL


@pytest.fixture
def comms() -> Iterator[list[RecordingComm]]:
    with recording_comms() as created:
        yield created


@pytest.fixture
def small_plan(project: Project) -> Plan:
    project.write("wf.star", SMALL)
    return project.plan("wf.star")
