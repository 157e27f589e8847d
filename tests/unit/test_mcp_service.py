"""The service pieces the model-facing tool (MCP) stands on, with a real store in a temporary home:
who started a run (manifest fields, old manifests), the mode ceiling of MCP runs, the detached
owner (it outlives its creator and waits for a person), which script decisions a model may pass,
and the workspace's workflow listing."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from rho_notebook.errors import ConfirmationRequired, DecisionNeedsPerson, RunRefused, SettingsError
from rho_notebook.model.plan import Plan
from rho_notebook.service import Consent, Mode, ResumeRun, Service, StartRun
from rho_notebook.service.catalog import scan_workflows
from rho_notebook.service.wire import run_row_json
from rho_notebook.store.runs import RunStore
from tests.conftest import REPO, Project, star, wait_journaled
from tests.processes import wait_gone

T = TypeVar("T")

C = "timeout_seconds = 30, max_output_bytes = 4096"

ONE = star(f'return workflow(name = "one", nodes = [command(name = "hi", argv = ["echo", "hi"], {C})])')

GATED = star(
    f"""
return workflow(name = "gated", nodes = [
    command(name = "wait", argv = ["sh", "-c", "while [ ! -f go ]; do sleep 0.05; done; echo went"], {C}),
])
"""
)

HEAD = """\
from rho_notebook.script import emit_output, run_command

def sh(command, **options):
    return run_command(argv=["sh", "-c", command], timeout_seconds=60, max_output_bytes=10000, **options)

"""

MANUAL = (
    HEAD
    + """\
check = sh("echo ran >> check.log; [ -f fixed ]", step_id="check", recovery="manual")
emit_output({"state": check.state})
if not check.ok:
    raise SystemExit(1)  # the run fails with its step (a handled failure would end it success)
"""
)

SLOW = (
    HEAD
    + """\
slow = sh("echo ran >> slow.log; while [ ! -f release ]; do sleep 0.05; done", step_id="slow")
emit_output({"state": slow.state})
"""
)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def start(project: Project, plan: Plan, **fields: object) -> str:
    request = StartRun.model_validate({"plan": plan.plan_id, "consent": Consent(yes=True), **fields})
    return run(project.service.create_run_of(plan, request))


# -- who started a run ------------------------------------------------------------------------------


def test_the_manifest_records_who_started_the_run_and_how(project: Project) -> None:
    project.write("wf.star", ONE)
    plan = project.plan("wf.star")
    mcp = start(project, plan, origin="mcp", client="Claude\x07 Code")
    cli = start(project, plan)
    service = project.service

    manifest = run(service.manifest(mcp))
    assert (manifest.initiator, manifest.via, manifest.client, manifest.origin) == (
        getpass.getuser(),
        "mcp",
        "Claude? Code",  # self-reported: kept printable
        "mcp",
    )
    plain = run(service.manifest(cli))
    assert (plain.via, plain.client, plain.initiator) == ("cli", None, getpass.getuser())

    rows = {row["run_id"]: row for row in run(service.run_rows())}
    assert (rows[mcp]["via"], rows[mcp]["client"], rows[mcp]["initiator"]) == ("mcp", "Claude? Code", getpass.getuser())
    assert rows[cli]["via"] == "cli" and rows[cli]["client"] is None


def test_a_manifest_written_before_the_fields_still_loads(project: Project) -> None:
    project.write("wf.star", ONE)
    run_id = start(project, project.plan("wf.star"), origin="notebook")
    path = project.home / "workflows" / "runs" / run_id / "manifest.json"
    old = json.loads(path.read_text())
    for field in ("initiator", "via", "client"):
        del old[field]
    path.write_text(json.dumps(old))

    manifest = RunStore(project.service.layout).manifest(run_id)
    assert (manifest.via, manifest.initiator, manifest.client) == ("notebook", "", None)
    state = project.status(run_id)
    assert run_row_json(state, manifest)["via"] == "notebook"


# -- the mode ceiling -------------------------------------------------------------------------------


def mode(service: Service, digest: str, requested: Mode) -> tuple[str, str]:
    return run(service.mcp_run_mode(digest, requested))


def test_mcp_runs_are_supervised_until_a_person_approves_the_digest(project: Project) -> None:
    project.write("wf.star", ONE)
    digest = project.plan("wf.star").graph_digest
    service = project.service

    granted, why = mode(service, digest, "auto")
    assert granted == "supervised"
    assert f"rho-notebook approve-plan {digest}" in why
    assert mode(service, digest, "supervised")[0] == "supervised"
    assert mode(service, digest, "plan")[0] == "plan"  # asking for less is always granted

    run(service.approve_plan(digest))
    granted, why = mode(service, digest, "auto")
    assert granted == "auto" and "approved by" in why
    assert mode(service, digest, "plan")[0] == "plan"
    assert mode(service, "sha256:" + "0" * 64, "auto")[0] == "supervised"  # the record covers its digest only


def test_only_the_user_settings_raise_the_ceiling(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    project.write("wf.star", ONE)
    digest = project.plan("wf.star").graph_digest
    service = project.service

    run(service.trust(project.root))  # even a trusted project's settings do not count
    (project.root / ".rho" / "settings.json").write_text(json.dumps({"mcp_max_mode": "auto"}))
    monkeypatch.setenv("RHO_NOTEBOOK_MCP_MAX_MODE", "auto")
    assert mode(service, digest, "auto")[0] == "supervised"

    project.home.mkdir(parents=True, exist_ok=True)
    (project.home / "settings.json").write_text(json.dumps({"mcp_max_mode": "auto"}))
    granted, why = mode(service, digest, "auto")
    assert granted == "auto" and "mcp_max_mode" in why and str(project.home / "settings.json") in why
    assert mode(service, digest, "plan")[0] == "plan"

    (project.home / "settings.json").write_text(json.dumps({"mcp_max_mode": "yolo"}))
    with pytest.raises(SettingsError, match="mcp_max_mode"):
        mode(service, digest, "auto")


# -- the detached owner ------------------------------------------------------------------------------

CREATOR = """\
import asyncio, json, sys
from pathlib import Path
from rho_notebook.service import Consent, Service, StartRun, StoreLayout

async def main():
    service = Service(layout=StoreLayout(home=Path(sys.argv[1])))
    plan = await service.load_plan(sys.argv[2])
    run_id = await service.create_run_of(plan, StartRun(plan=plan.plan_id, consent=Consent(yes=True), origin="mcp"))
    pid = await service.start_detached(run_id)
    print(json.dumps({"run_id": run_id, "pid": pid}))

asyncio.run(main())
"""


def test_a_detached_owner_finishes_the_run_after_its_creator_exited(project: Project) -> None:
    project.write("wf.star", GATED)
    plan = project.plan("wf.star")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    creator = subprocess.run(
        [sys.executable, "-c", CREATOR, str(project.home), plan.plan_id],
        capture_output=True,
        text=True,
        env=env,
        cwd=project.root,
        timeout=120,
        check=False,
    )
    assert creator.returncode == 0, creator.stderr
    started = json.loads(creator.stdout)
    run_id = started["run_id"]
    assert project.service.is_owned(run_id)  # its creator exited; the owner holds the run, waiting for go

    (project.root / "go").write_text("")
    done = wait_journaled(project.home, run_id, "run_completed", timeout=60)
    assert done["outcome"] == "success"
    assert project.status(run_id).nodes["wait"].state.value == "success"
    log = (project.home / "workflows" / "runs" / run_id / "owner.log").read_text()
    assert f"owning run {run_id}" in log  # written before it reported that it holds the run


def test_a_supervised_detached_run_waits_for_a_person(project: Project) -> None:
    project.write("wf.star", ONE)
    plan = project.plan("wf.star")
    run_id = start(project, plan, mode="supervised", origin="mcp")
    service = project.service
    pid = run(service.start_detached(run_id))
    assert pid != os.getpid()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # not our child: nothing of this process holds the run

    asked = wait_journaled(project.home, run_id, "approval_requested", node="hi")
    assert project.status(run_id).lifecycle.value == "waiting"  # waits, not denied at once
    pending = run(service.pending_approvals(run_id))
    assert [r.request_id for r in pending] == [asked["request_id"]]

    run(service.approve(run_id, asked["request_id"], via="cli"))
    assert wait_journaled(project.home, run_id, "run_completed")["outcome"] == "success"


def test_a_detached_start_reports_why_the_owner_could_not_take_the_run(project: Project) -> None:
    project.write("wf.star", ONE)
    run_id = start(project, project.plan("wf.star"))
    service = project.service
    owner = run(service.start_detached(run_id))
    assert wait_gone(owner), f"owner {owner} is still alive after 30 s"
    assert project.status(run_id).outcome == "success"
    with pytest.raises(RunRefused, match="already started"):
        run(service.start_detached(run_id))
    with pytest.raises(RunRefused, match="already completed"):
        run(service.resume_detached(ResumeRun(run=run_id, consent=Consent(yes=True))))
    with pytest.raises(ConfirmationRequired):
        run(service.resume_detached(ResumeRun(run=run_id, consent=Consent(digest="sha256:" + "1" * 64))))


# -- decisions a model may pass ----------------------------------------------------------------------


def test_a_manual_halt_may_be_decided_over_mcp(project: Project) -> None:
    project.write("check.py", MANUAL)
    plan = project.plan("check.py")
    run_id = start(project, plan, origin="mcp")
    service = project.service
    first = run(service.execute(run_id))
    assert first.outcome == "failure"
    halted = run(service.resume(ResumeRun(run=run_id, consent=Consent(yes=True))))
    assert halted.lifecycle.value == "needs_decision"
    assert halted.halted[0]["why"].startswith('recovery="manual"')

    run(service.check_mcp_decisions(run_id, {"check": "rerun"}))  # allowed
    with pytest.raises(DecisionNeedsPerson, match="'other' of run .* is not halted"):
        run(service.check_mcp_decisions(run_id, {"other": "rerun"}))

    (project.root / "fixed").write_text("")
    request = ResumeRun(run=run_id, consent=Consent(yes=True), decisions={"check": "rerun"})
    run(service.resume_detached(request))
    assert wait_journaled(project.home, run_id, "run_completed", after_seq=halted.last_seq)["outcome"] == "success"
    assert (project.root / "check.log").read_text().count("ran") == 2


def test_an_uncertain_halt_needs_a_person(project: Project) -> None:
    project.write("slow.py", SLOW)
    run_id = start(project, project.plan("slow.py"), origin="mcp")
    service = project.service
    pid = run(service.start_detached(run_id))
    wait_journaled(project.home, run_id, "process_started", node="slow")
    os.kill(pid, signal.SIGKILL)  # the owner dies while the step runs: did it finish? nobody knows
    assert wait_gone(pid), f"owner {pid} is still alive after 30 s"
    try:
        halted = run(service.resume(ResumeRun(run=run_id, consent=Consent(yes=True))))
        assert halted.lifecycle.value == "needs_decision"
        with pytest.raises(DecisionNeedsPerson) as refused:
            run(service.check_mcp_decisions(run_id, {"slow": "skip"}))
        message = str(refused.value)
        assert "'slow'" in message and "started and never settled" in message
        assert f"rho-notebook resume {run_id[:13]} --decide slow=skip" in message
        assert refused.value.step == "slow"

        with pytest.raises(RunRefused, match="--recover-uncertain"):
            run(service.resume_detached(ResumeRun(run=run_id, consent=Consent(yes=True), recover_uncertain=True)))
    finally:
        (project.root / "release").write_text("")  # the orphaned step ends


# -- the workspace's workflows -----------------------------------------------------------------------

NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["%%workflow not-code"]},
        {"cell_type": "code", "metadata": {}, "source": ["%%workflow nbflow\n", "WORKFLOW = 1\n"], "outputs": []},
        {"cell_type": "code", "metadata": {}, "source": "%%script tool --input n=1\nprint(1)\n", "outputs": []},
        {"cell_type": "code", "metadata": {}, "source": "%%workflow\nunnamed\n", "outputs": []},
        {"cell_type": "code", "metadata": {}, "source": "print('plain')\n", "outputs": []},
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def test_workflows_lists_every_form_and_skips_what_is_not_the_workspaces(project: Project) -> None:
    project.write(
        "flows/a.star", 'def build(inputs):\n    return workflow(name = "alpha", nodes = [])\n\nWORKFLOW = 1\n'
    )
    project.write("flows/lib.star", "def helper():\n    pass\n")  # a module, not an entry
    project.write("scripts/s.py", "from rho_notebook.script import run_command\n")
    project.write(
        "scripts/f.py",
        textwrap.dedent(
            """\
            from rho_notebook import flow

            class Review(flow.Workflow):
                pass

            class Helper:
                pass
            """
        ),
    )
    project.write("scripts/plain.py", "import os\n")
    project.write("graphs/t.graph.yaml", "name: triage\nsteps: []\n")
    project.write("graphs/u.graph.yaml", "steps: []\n")
    project.write("nb.ipynb", json.dumps(NOTEBOOK))
    for hidden in (".rho/x.star", ".venv/lib/v.star", "node_modules/m/n.star", "env/e.star"):
        project.write(hidden, "WORKFLOW = 1\n")
    (project.root / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (project.root / "linked").symlink_to(project.root / "flows")

    entries = run(project.service.workflows(project.root))
    assert [e.to_json() for e in entries] == [
        {"file": "flows/a.star", "kind": "starlark", "name": "alpha"},
        {"file": "graphs/t.graph.yaml", "kind": "graph", "name": "triage"},
        {"file": "graphs/u.graph.yaml", "kind": "graph", "name": "u"},
        {"file": "nb.ipynb", "kind": "notebook", "name": "nbflow"},
        {"file": "nb.ipynb", "kind": "notebook", "name": "tool"},
        {"file": "scripts/f.py", "kind": "flow", "name": "Review"},
        {"file": "scripts/s.py", "kind": "script", "name": "s"},
    ]


def test_a_flow_module_is_listed_by_the_names_flow_takes(project: Project) -> None:
    """The catalog's flow names are planning's (``flows_defined``): a preset instance is listed by
    its name (``--flow agent``), a module-level instance too, and a module that imports the flow
    package but defines no flow is a script (its top level runs), never a ``--flow STEM`` that
    planning refuses."""
    project.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    settings = '{"providers": {"p": {"type": "openai"}}, "default_provider": "p", "default_model": "m"}'
    (project.home / "settings.json").write_text(settings)
    project.write("preset.py", "from rho_notebook import flow\n\nagent = flow.Agent(system_prompt='x', provider='p')\n")
    project.write(
        "pair.py",
        "from rho_notebook.flow import Workflow\n\n\nclass Review(Workflow):\n    pass\n\n\nreview = Review()\n",
    )
    project.write("driver.py", "from pair import Review\nfrom rho_notebook.flow import use_providers\n\nw = Review()\n")
    entries = run(project.service.workflows(project.root))
    assert [(e.file, e.kind, e.name) for e in entries] == [
        ("driver.py", "script", "driver"),
        ("pair.py", "flow", "Review"),
        ("pair.py", "flow", "review"),
        ("preset.py", "flow", "agent"),
    ]
    for entry in entries:
        if entry.kind == "flow":
            plan = asyncio.run(
                project.service.validate(
                    project.service.request_for(
                        project.root / entry.file, inputs={"prompt": "x"}, workspace=project.workspace, flow=entry.name
                    )
                )
            )
            assert plan.graph.script is not None and plan.graph.script.flow == entry.name


def test_a_store_kept_in_the_workspace_is_not_scanned(project: Project) -> None:
    """``RHO_NOTEBOOK_HOME=./store``: the store's plans keep copies of their sources, which are not
    the workspace's workflows (`list` showed every plan's copy, and `get NAME` found them ambiguous)."""
    from rho_notebook.store.layout import StoreLayout

    project.write("wf.star", star('return workflow(name = "solo", nodes = [])'))
    inside = Service(layout=StoreLayout(home=project.root / "store"))
    run(inside.plan(inside.request_for(project.root / "wf.star", workspace=project.workspace)))
    assert list((project.root / "store").rglob("*.star"))  # the plan's copy of its source
    entries = run(inside.workflows(project.root))
    assert [e.to_json() for e in entries] == [{"file": "wf.star", "kind": "starlark", "name": "solo"}]
    assert len(scan_workflows(project.root).workflows) == 2  # what the scan finds when not told


def test_the_workflow_scan_is_bounded_and_says_so(project: Project) -> None:
    for index in range(5):
        project.write(f"w{index}.star", "WORKFLOW = 1\n")
    project.write("broken.ipynb", "{not json")
    full = scan_workflows(project.root)
    assert not full.truncated and len(full.workflows) == 5 and full.files_read == 6
    assert len(full.skipped) == 1 and full.skipped[0].startswith("broken.ipynb: ")
    bounded = scan_workflows(project.root, max_files=3)
    assert bounded.truncated and bounded.files_read == 3


def test_a_recordings_copied_sources_are_not_scanned(project: Project) -> None:
    """``record RUN DIR`` copies the plan's sources to DIR/sources for its test; they are not the
    workspace's workflows (`list` showed the copy beside the original, and `get NAME` was ambiguous).
    A folder named sources with no recording beside it is scanned as any other."""
    from rho_notebook.runtime.recording import RECORDING_FILE
    from rho_notebook.service.catalog import RECORDING_FILE as SKIPPED_BESIDE

    assert SKIPPED_BESIDE == RECORDING_FILE
    project.write("wf.star", star('return workflow(name = "solo", nodes = [])'))
    project.write("tests/rec/sources/wf.star", star('return workflow(name = "solo", nodes = [])'))
    project.write("tests/rec/recording.json", "{}")
    project.write("lib/sources/other.star", star('return workflow(name = "other", nodes = [])'))
    files = sorted(entry.file for entry in scan_workflows(project.root).workflows)
    assert files == ["lib/sources/other.star", "wf.star"]
