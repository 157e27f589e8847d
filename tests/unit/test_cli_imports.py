"""The CLI's read verbs import only what they use (issue 31, item 1).

``rho-notebook status``, ``runs``, ``result``, ``events``, ``logs``, ``plans`` and ``--help`` start
in a fraction of a second only if they leave the heavy parts alone: the Starlark planner and its
worker, the agent loop and model clients, Dask, the MCP server, rich's live display and the
Jupyter stack. Each verb runs here as a real ``python -m rho_notebook ...`` process over a real
finished run in a temporary store, and the modules it imported are read from its ``sys.modules``
once the verb has ended. bench/cli_start.py measures the time this saves.

``status`` and ``runs`` go further (:mod:`rho_notebook.service.glance`): they build no pydantic
model and start no event loop (:data:`LIGHT_FORBIDDEN`), for a run that succeeded and for one
that failed (whose ``reason`` line reads the graph's ``allow_failure``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rho_notebook.cli.main import build_parser, handler_of
from rho_notebook.runtime.status import MANIFEST_FIELDS
from rho_notebook.store.graphs import load_outline
from rho_notebook.store.runs import RunManifest
from tests.conftest import REPO, Project, star

FORBIDDEN = (
    "starlark",
    "rho_notebook.source._starlark",
    "rho_notebook.source._worker",
    "rho_notebook.agents",
    "rho_notebook.planning",
    "rho_notebook.exec.model",
    "httpx",
    "dask",
    "distributed",
    "mcp",
    "rich",
    "jupyter*",
    "ipykernel",
    "ipywidgets",
    "IPython",
)
"""Modules (and their submodules) no read verb may import; ``jupyter*`` is every module whose
name starts so (jupyter_client, jupyter_server, jupyter_core, ...)."""

LIGHT_FORBIDDEN = (
    "pydantic",
    "pydantic_core",
    "rho_notebook.model.base",
    "rho_notebook.model.graph",
    "rho_notebook.model.plan",
    "rho_notebook.model.events",
    "rho_notebook.store.runs",
    "rho_notebook.store.plans",
    "rho_notebook.policy",
    "rho_notebook.service.requests",
    "rho_notebook.service.wire_plans",
    "rho_notebook.service.wire_types",
    "rho_notebook.runtime.execution",
    "asyncio",
    "rho_notebook.service.usage",
    "rho_notebook.model.ledger",
    "orjson",
)
"""What ``status`` and ``runs`` must not import besides :data:`FORBIDDEN`: pydantic and every
module of ours that defines a model (the graph, the plan, the run manifest, the approval
records, the requests), the event loop (issue 31), and, for runs that made no model call (these
tests' runs), the ledger and its builder (nothing to price) and orjson (only the journal's writer
encodes with it; it imports uuid and platform)."""

WF = star(
    'return workflow(name = "imports", nodes = [command(name = "say", argv = ["echo", "hi"], '
    "timeout_seconds = 30, max_output_bytes = 1000), "
    'command(name = "then", argv = ["echo", "then"], timeout_seconds = 30, max_output_bytes = 1000, needs = ["say"])])'
)
FAILING = star(
    'return workflow(name = "fails", nodes = [command(name = "no", argv = ["false"], timeout_seconds = 30, '
    'max_output_bytes = 1000), command(name = "may", argv = ["false"], timeout_seconds = 30, '
    "max_output_bytes = 1000, allow_failure = True)])"
)


RUN_AND_LIST = """\
import json, os, runpy, sys
try:
    runpy.run_module("rho_notebook", run_name="__main__", alter_sys=True)
finally:
    with open(os.environ["MODULES_LISTING"], "w") as out:
        json.dump(sorted(sys.modules), out)
"""
"""``python -m rho_notebook ARGV`` that writes the names in ``sys.modules`` to $MODULES_LISTING
when the verb has ended (normally or by ``SystemExit``)."""


def imported(project: Project, *argv: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python -m rho_notebook ARGV`` over the project's store (through :mod:`runpy`, as
    ``-m`` does, in a wrapper that writes ``sys.modules`` when the verb has ended): the process and
    the names of every module it imported, however it imported them (``-X importtime`` does not
    list a module that :func:`importlib.import_module` imports)."""
    listing = project.root.parent / "modules.json"
    listing.unlink(missing_ok=True)
    env = {
        **os.environ,
        "RHO_NOTEBOOK_HOME": str(project.home),
        "PYTHONPATH": str(REPO),
        "MODULES_LISTING": str(listing),
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST, *argv],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    names = set(json.loads(listing.read_text())) if listing.exists() else set()
    return done, names


def forbidden(names: set[str], rules: tuple[str, ...] = FORBIDDEN) -> list[str]:
    """The names among ``names`` that ``rules`` (:data:`FORBIDDEN`) name."""
    found = []
    for name in sorted(names):
        for rule in rules:
            if rule.endswith("*") and name.startswith(rule[:-1]):
                found.append(name)
            elif name == rule or name.startswith(rule + "."):
                found.append(name)
    return found


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, str, str]:
    """A project whose store holds one finished run of one ``echo`` node: (project, plan, run)."""
    base = tmp_path_factory.mktemp("imports")
    root = base / "ws"
    (root / ".rho").mkdir(parents=True)
    project = Project(root=root.resolve(), home=(base / "home").resolve())
    project.write("wf.star", WF)
    planned = project.cli("plan", "wf.star", "--output", "json", check=True)
    plan_id = planned.stdout.split('"plan_id": "', 1)[1].split('"', 1)[0]
    ran = project.cli("run", plan_id, "--yes", "--output", "jsonl", timeout=120)
    assert ran.returncode == 0, ran.stderr
    run_id = ran.stdout.split('"run_id":"', 1)[1].split('"', 1)[0]
    return project, plan_id, run_id


@pytest.fixture(scope="module")
def failed_run(finished_run: tuple[Project, str, str]) -> str:
    """A run of :data:`FAILING` in the same store: one node failed, one failed but may."""
    project, _, _ = finished_run
    project.write("fails.star", FAILING)
    planned = project.cli("plan", "fails.star", "--output", "json", check=True)
    plan_id = planned.stdout.split('"plan_id": "', 1)[1].split('"', 1)[0]
    ran = project.cli("run", plan_id, "--yes", "--output", "jsonl", timeout=120)
    assert ran.returncode == 1, ran.stderr
    return ran.stdout.split('"run_id":"', 1)[1].split('"', 1)[0]


LIGHT_VERBS = {
    "status": ("status", "{run}"),
    "status-json": ("status", "{run}", "--output", "json"),
    "status-failed": ("status", "{failed}"),
    "status-failed-json": ("status", "{failed}", "--output", "json"),
    "runs": ("runs",),
    "runs-json": ("runs", "--output", "json"),
    "runs-filtered": ("runs", "--state", "completed", "--limit", "1"),
}


@pytest.mark.parametrize("verb", sorted(LIGHT_VERBS))
def test_status_and_runs_build_no_model(finished_run: tuple[Project, str, str], failed_run: str, verb: str) -> None:
    """A real ``python -m rho_notebook status|runs`` process: no pydantic, no model module of
    ours, no asyncio in its ``sys.modules`` when the verb has ended; and it answered."""
    project, _, run_id = finished_run
    argv = [arg.format(run=run_id, failed=failed_run) for arg in LIGHT_VERBS[verb]]
    done, names = imported(project, *argv)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rho_notebook.service.glance" in names
    bad = forbidden(names, (*FORBIDDEN, *LIGHT_FORBIDDEN))
    assert not bad, f"`rho-notebook {' '.join(argv)}` imported {bad}"
    if verb == "status-failed":
        assert "reason     node no failed" in done.stdout  # the outline's allow_failure: `may` is not named


def test_the_light_reading_knows_every_manifest_field() -> None:
    """The manifest is read as plain JSON only when every key is one the model has (any other
    manifest is validated by the model): the two lists must stay equal."""
    assert set(RunManifest.model_fields) == MANIFEST_FIELDS


VERBS = {
    "status": ("status", "{run}"),
    "status-json": ("status", "{run}", "--output", "json"),
    "runs": ("runs",),
    "runs-json": ("runs", "--output", "json"),
    "result": ("result", "{run}"),
    "events": ("events", "{run}"),
    "logs": ("logs", "{run}", "say"),
    "plans": ("plans",),
    "help": ("--help",),
    "status-help": ("status", "--help"),
}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_read_verb_imports_only_what_it_uses(finished_run: tuple[Project, str, str], verb: str) -> None:
    project, _, run_id = finished_run
    argv = [arg.format(run=run_id) for arg in VERBS[verb]]
    done, names = imported(project, *argv)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rho_notebook.cli.main" in names, "the importtime lines were not read"
    bad = forbidden(names)
    assert not bad, f"`rho-notebook {' '.join(argv)}` imported {bad}"


def test_the_read_verbs_still_answer(finished_run: tuple[Project, str, str]) -> None:
    """What they print is unchanged by the lazy imports: the run, its node and its output."""
    project, plan_id, run_id = finished_run
    status = project.cli("status", run_id, check=True).stdout
    assert run_id in status and "say" in status and "success" in status
    assert run_id in project.cli("runs", check=True).stdout
    assert "say" in project.cli("result", run_id, check=True).stdout
    assert project.cli("logs", run_id, "say", "--stream", "stdout", check=True).stdout == "hi\n"
    assert '"kind":"run_completed"' in project.cli("events", run_id, check=True).stdout
    assert plan_id in project.cli("plans", check=True).stdout
    assert "status" in project.cli("--help", check=True).stdout


def test_the_check_sees_a_forbidden_import(finished_run: tuple[Project, str, str]) -> None:
    """``validate`` plans (its Starlark runs in a worker process): the same reading of -X importtime
    must see the planning layer it imports."""
    project, _, _ = finished_run
    done, names = imported(project, "validate", "wf.star")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rho_notebook.planning.plan" in forbidden(names)
    assert forbidden({"jupyter_client.session", "richer", "rich", "mcp.server"}) == [
        "jupyter_client.session",
        "mcp.server",
        "rich",
    ]


def test_every_verb_names_a_handler_that_exists() -> None:
    """Handlers are named as text (``"read_verbs:run_status"``) so that declaring a verb imports
    nothing of it: each name must still lead to a function."""
    parser = build_parser()
    verbs = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    assert len(verbs.choices) >= 20
    for name, sub in verbs.choices.items():
        handler = sub.get_default("handler")
        assert isinstance(handler, str), name
        assert callable(handler_of(handler)), f"{name}: {handler}"


def test_a_graph_the_light_reading_does_not_accept_is_validated(
    finished_run: tuple[Project, str, str], tmp_path: Path
) -> None:
    """The outline is taken from graph.json's JSON as it stands only when that JSON digests to the
    confirmed digest. A graph.json that holds the same graph in another spelling (a field the model
    leaves out at its default, as an older version may have written it) is validated as the model
    and digests the same; a modified one digests otherwise, and status refuses the run."""
    project, _, run_id = finished_run
    run_folder = project.home / "workflows" / "runs" / run_id
    original = json.loads((run_folder / "graph.json").read_text())
    expected = json.loads((run_folder / "manifest.json").read_text())["graph_digest"]
    below = tmp_path
    light = tmp_path / "light.json"
    light.write_text(json.dumps(original))
    outline, digest = load_outline(light, below=below, expected_digest=expected)
    assert (outline.name, outline.nodes, digest) == ("imports", ("say", "then"), expected)

    spelled = tmp_path / "spelled.json"
    spelled.write_text(json.dumps({**original, "checkout": "exclusive"}))  # the default, left out when written
    assert load_outline(spelled, below=below, expected_digest=expected) == (outline, expected)

    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps({**original, "name": "other"}))
    renamed, other = load_outline(changed, below=below, expected_digest=expected)
    assert renamed.name == "other" and other != expected
