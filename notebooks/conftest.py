"""`pytest --nbval notebooks/`: a private store home, a scripted model endpoint, sanitized outputs.

- ``RHO_NOTEBOOK_HOME`` is a fresh temporary folder (set before nbval starts any kernel, which
  inherits the environment), removed afterwards. The kernels start in this folder, so the
  workspace is the repository root (it holds ``.git``).
- 02_agents runs its agent nodes against the test suite's scripted local OpenAI-compatible server
  (``tests/agents/fakeserver.py``, in this process, on 127.0.0.1): its settings are written to the
  temporary home and its URL is exported as ``RHO_NOTEBOOK_TEST_OPENAI_URL``. Set
  ``RHO_NOTEBOOK_TEST_OPENAI_URL`` yourself to use another endpoint instead (then configure it in
  the home's settings.json as docs/providers.md shows).
- Plan and run IDs and graph digests are replaced by placeholders before outputs are compared
  (``nbval-sanitize.cfg``) unless ``--nbval-sanitize-with`` names another file.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
_HOME = pytest.StashKey[str]()
_SERVER = pytest.StashKey[Any]()

ANSWER = {"decision": "approve", "summary": "All five numbers are positive, so the set is approved."}
"""What the scripted model answers to every request (02_agents asks for exactly this shape)."""


def _start_scripted_endpoint(home: Path) -> Any:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.agents.fakeserver import OPENAI, ScriptedServer

    server = ScriptedServer([OPENAI.answer(json.dumps(ANSWER))], repeat_last=True)
    server.__enter__()
    settings = {
        "providers": {"scripted": {"type": "openai", "base_url": OPENAI.base(server.url)}},
        "default_provider": "scripted",
        "default_model": "scripted-model",
    }
    (home / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    os.environ["RHO_NOTEBOOK_TEST_OPENAI_URL"] = server.url
    return server


def pytest_configure(config: pytest.Config) -> None:
    home = tempfile.mkdtemp(prefix="rho-notebook-nbval-")
    config.stash[_HOME] = home
    os.environ["RHO_NOTEBOOK_HOME"] = home
    if not os.environ.get("RHO_NOTEBOOK_TEST_OPENAI_URL"):
        config.stash[_SERVER] = _start_scripted_endpoint(Path(home))
    option = config.option
    if hasattr(option, "nbval_sanitize_with") and not option.nbval_sanitize_with:
        option.nbval_sanitize_with = str(Path(__file__).with_name("nbval-sanitize.cfg"))


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_SERVER, None)
    if server is not None:
        server.__exit__(None, None, None)
        os.environ.pop("RHO_NOTEBOOK_TEST_OPENAI_URL", None)
    home = config.stash.get(_HOME, None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)
