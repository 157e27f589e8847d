"""The policy matrix (issue 27): every rule of the launch gate x every kind of launch, each cell a
real run whose launch, run outcome and journal match the tables in docs/approvals.md ("What each
rule does to each launch"), which this test reads.

Real runs: plans of real Starlark workflows, item graphs, scripts and a flow, executed in-process
by the service (the real owner, store and journal) with real subprocesses for every process
launch, a real hook program (/bin/sh) configured in settings, a person approving or denying from
another thread, a local OpenAI-compatible server for agents and model calls, and a local Dask
cluster for the Dask attempts. One workspace, its plans, the model server and the cluster serve
the module; each cell copies the template store home, so approvals carried from one cell never
reach another. The hook program acts only on the cell's launch (matched by the ``tool`` and
``node`` of its payload) and logs every payload, which shows the ``tool`` of every launch.

An item ``aggregate`` step of each launching inner kind (command, mutating agent, model) gets
every rule too: docs/graphs.md says it is a launch of its inner kind, so its expected cells are
the tables' cells of the item step of that kind, and every decision on it (a hook's, a person's)
lists all its instances' facts, in element order, before any instance starts.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rho_notebook.policy.approvals import ApprovalRequest
from rho_notebook.runtime.script_driver import SCRIPT_NODE
from rho_notebook.service import Service
from rho_notebook.source.workspace import Workspace
from rho_notebook.store.layout import StoreLayout
from tests.agents.fakeserver import ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.cli.policymatrix import (
    AGGREGATES,
    ELEMENTS,
    HOOK,
    LAUNCHES,
    SOURCES,
    Cell,
    Home,
    HookAction,
    Launch,
    Observed,
    answer,
    expected_cells,
    hook_settings,
)

RULES = ("1", "2", "3", "4", "5a", "5b", "6", "7", "8")
HOOK_ACTIONS: dict[str, HookAction] = {"4": "deny", "5a": "exit", "5b": "sleep", "6": "deny"}
"""What the hook does to the cell's launch under rules 4 to 6."""
EXPECTED = expected_cells()


@dataclass(frozen=True)
class Template:
    root: Path
    home: Path
    hook: Path
    plans: dict[str, str]
    authority: dict[str, list[tuple[str, str, str]]]
    """Launch source -> its plan's authority list, as (kind, value, detail)."""


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer([answer], repeat_last=True) as made:
        yield made


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, server: ScriptedServer) -> Iterator[Template]:
    """The workspace with every launch's source, a store home holding their plans, the hook."""
    base = tmp_path_factory.mktemp("matrix").resolve()
    root, home = base / "ws", base / "home"
    (root / ".rho").mkdir(parents=True)
    for name, text in SOURCES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    hook = base / "gate"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    write_settings_for(home, server)
    service = Service(layout=StoreLayout(home=home))
    workspace = Workspace(root=root)
    plans: dict[str, str] = {}
    authority: dict[str, list[tuple[str, str, str]]] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, SECRET)  # the provider's key, read from the environment (planning checks it)
        for launch in [*LAUNCHES.values(), *AGGREGATES.values()]:
            key = launch.source + (f"#{launch.flow}" if launch.flow else "")
            if key not in plans:
                inputs = {"prompt": "go"} if launch.flow else None
                planned = service.request_for(
                    root / launch.source, workspace=workspace, flow=launch.flow, inputs=inputs
                )
                stored = asyncio.run(service.plan(planned))
                plans[key] = stored.plan_id
                authority[launch.source] = [(i.kind, i.value, i.detail) for i in stored.manifest.authority]
        yield Template(root=root, home=home, hook=hook, plans=plans, authority=authority)


@pytest.fixture(scope="module")
def dask_address() -> Iterator[str]:
    """``dask=ADDRESS`` of one local cluster (one worker process) for the module's Dask cells."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=True, threads_per_worker=1, dashboard_address=":0") as cluster:
        yield f"dask={cluster.scheduler_address}"


def make_home(template: Template, server: ScriptedServer, tmp_path: Path, dask: str | None) -> Home:
    home = tmp_path / "home"
    shutil.copytree(template.home, home)
    return Home(
        service=Service(layout=StoreLayout(home=home)),
        server=server,
        plans=template.plans,
        hook_log=tmp_path / "hooks.jsonl",
        dask=dask,
    )


def configure(template: Template, home: Home, launch: Launch, *, event: str, action: HookAction) -> None:
    """User settings: the model provider and one hook acting on ``launch``."""
    hooks = hook_settings(template.hook, home.hook_log, launch, event=event, action=action)
    write_settings_for(home.service.layout.home, home.server, hooks=hooks)


def approve_all(request: ApprovalRequest) -> bool:
    return True


@pytest.mark.parametrize("launch_id", list(LAUNCHES))
@pytest.mark.parametrize("rule", RULES)
def test_cell(
    rule: str,
    launch_id: str,
    template: Template,
    server: ScriptedServer,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    launch = LAUNCHES[launch_id]
    dask = request.getfixturevalue("dask_address") if launch.dask else None
    home = make_home(template, server, tmp_path, dask)
    play(rule, launch, template, home, lambda row: EXPECTED[(row, launch_id)])


def play(rule: str, launch: Launch, template: Template, home: Home, cell_of: Callable[[str], Cell]) -> None:
    """Run the cell of ``rule`` for ``launch`` (``cell_of(ROW)``: its expected cell in row ROW of
    the tables) and check it (``home.history`` holds the runs it made)."""
    if rule in ("1", "2", "3", "7"):  # a hook that lets everything through: it shows where hooks run
        configure(template, home, launch, event="before_tool_use", action="continue")
    if rule == "1":
        observed = home.run(launch, mode="plan")
        check(cell_of("1"), launch, observed)
        if cell_of("1").how == "allowed":  # what plan mode allows still passes the hooks
            assert [p for p in observed.hooks if p["node"] == launch.target and p["mode"] == "plan"]
    elif rule == "2":
        observed = home.run(launch, mode="supervised", decide=approve_all)
        check(cell_of("2"), launch, observed)
        if launch.script and launch.target != SCRIPT_NODE:  # the script process was asked first
            assert observed.seq(SCRIPT_NODE, "approval_decided", decision="approve") < observed.seq(
                launch.target, "node_launched"
            )
    elif rule == "3":
        observed = home.run(launch, mode="supervised", decide=lambda r: r.node != launch.target)
        check(cell_of("3"), launch, observed)
        if launch.script and launch.target != SCRIPT_NODE:  # the person let the script process start
            observed.seq(SCRIPT_NODE, "approval_decided", decision="approve")
    elif rule in ("4", "5a", "5b", "6"):
        event = "after_tool_use" if rule == "6" else "before_tool_use"
        configure(template, home, launch, event=event, action=HOOK_ACTIONS[rule])
        check(cell_of(rule), launch, home.run(launch), rule=rule)
    elif rule == "7":
        first = home.run(launch, mode="supervised", decide=approve_all)
        assert first.state.outcome == "success", first.summary()
        second = home.run(launch, mode="supervised", decide=approve_all)
        check(cell_of("7"), launch, second, first_run=first.state.run_id)
        assert second.asked == [], second.summary()  # nobody was asked anything
        if launch.script:  # the script process carried too
            second.seq(SCRIPT_NODE, "approval_carried", from_run=first.state.run_id)
    else:
        project = template.root / ".rho" / "settings.json"
        hooks = hook_settings(template.hook, home.hook_log, launch, event="before_tool_use", action="deny")
        project.write_text(json.dumps({"hooks": hooks}))
        try:
            untrusted = home.run(launch)
            check(cell_of("8a"), launch, untrusted)
            assert untrusted.hooks == [] and not [r for r in untrusted.records if r["kind"] == "hook_ran"]
            asyncio.run(home.service.trust(template.root))
            check(cell_of("8b"), launch, home.run(launch), origin="project")
        finally:
            project.unlink()


@pytest.mark.parametrize("kind", list(AGGREGATES))
@pytest.mark.parametrize("rule", RULES)
def test_aggregate_cell(rule: str, kind: str, template: Template, server: ScriptedServer, tmp_path: Path) -> None:
    """An item ``aggregate`` step is a launch of its inner kind (docs/graphs.md, "aggregate
    steps"): each rule does to it what the tables say for the item step of that kind, with one
    decision for the whole step whose facts list every instance's, in element order."""
    launch = AGGREGATES[kind]
    home = make_home(template, server, tmp_path, None)
    play(rule, launch, template, home, lambda row: EXPECTED[(row, f"item-{kind}")])
    assert home.history
    for run in home.history:
        check_instances(kind, launch, run)


def test_an_aggregate_confirms_its_inner_launch(template: Template) -> None:
    """The plan's authority list (what a person confirms before the first run) names what an
    aggregate's instances may do: exactly what the item step of its inner kind names."""
    for kind, launch in AGGREGATES.items():
        listed = template.authority[launch.source]
        assert listed == template.authority[LAUNCHES[f"item-{kind}"].source], (kind, listed)
        expected = {
            "command": ("capability", "process", "run frozen commands in the workspace"),
            "agent": ("agent", "worker", "rho agent from builtin; tools: all; access: mutating"),
            "model": ("capability", "model", "one completion from local/test-model"),
        }[kind]
        assert expected in listed, (kind, listed)
    command = template.authority[AGGREGATES["command"].source]
    assert [Path(value).name for kind, value, _ in command if kind == "executable"] == ["echo"], command


def instance_facts(kind: str, element: dict[str, object]) -> dict[str, object]:
    """The facts a person or a hook must see for the instance of ``element`` (a subset)."""
    if kind == "command":
        return {"argv": ["echo", str(element["n"])]}
    if kind == "agent":
        return {"agent": "worker", "access": "mutating", "prompt": f"say {element['text']}"}
    return {"provider": "local", "model": "test-model", "prompt": f"say {element['text']}"}


def check_instances(kind: str, launch: Launch, run: Observed) -> None:
    """The aggregate's facts and instances in ``run``: every decision (a hook's, a person's) was on
    the facts of all its instances; no instance starts before the decision, and then all of them
    start, in element order; or none does, when the step was not let start."""
    target, where = launch.target, run.summary()
    requested = run.of(target, "approval_requested")
    assert len(requested) <= 1, where  # one decision covers every instance
    shown = [p["facts"] for p in run.hooks if p["node"] == target] + [r["facts"] for r in requested]
    for facts in shown:
        assert facts["kind"] == "aggregate" and facts["over"] == "tickets", facts
        assert len(facts["instances"]) == len(ELEMENTS), facts
        for instance, element in zip(facts["instances"], ELEMENTS, strict=True):
            expected = instance_facts(kind, element)
            assert {key: instance.get(key) for key in expected} == expected, facts
        if kind == "command":
            assert all(Path(i["executable"]).name == "echo" and i["sha256"] for i in facts["instances"]), facts
    launched = run.of(target, "instance_launched")
    if not started(launch, run):
        assert launched == [] and run.requests == 0, where
        return
    assert [r["instance"] for r in launched] == list(range(len(ELEMENTS))), where
    finished = run.of(target, "instance_finished")
    assert [r["state"] for r in finished] == ["success"] * len(ELEMENTS), where
    if kind == "command":
        assert [r["value"] for r in finished] == [e["n"] for e in ELEMENTS], where
    else:
        assert run.requests >= len(ELEMENTS), where  # each instance asked the model
    gate = [
        r
        for r in run.of(target)
        if r["kind"] in ("approval_requested", "approval_decided", "approval_carried")
        or (r["kind"] == "hook_ran" and r["hook_event"] == "before_tool_use")
    ]
    assert all(r["seq"] < launched[0]["seq"] for r in gate), where


def check(
    cell: Cell,
    launch: Launch,
    run: Observed,
    *,
    rule: str = "",
    first_run: str | None = None,
    origin: str = "user",
) -> None:
    """The run did what ``cell`` says, for ``launch``."""
    target = launch.target
    where = f"{cell} for {launch.column}: {run.summary()}"
    completed = [r for r in run.records if r["kind"] == "run_completed"]
    assert run.state.outcome == cell.outcome and completed[-1]["outcome"] == cell.outcome, where
    # the launch's final state and its message
    if launch.target == SCRIPT_NODE:
        state, message = run.state.outcome, str(completed[-1].get("message", ""))
    elif cell.how == "no step":
        assert target not in run.state.nodes and not run.of(target), where
        assert not [r for r in run.records if r["kind"] == "script_launched"], where
        state, message = None, str(completed[-1].get("message", ""))
    else:
        finished = run.of(target, "node_finished")
        assert finished, where
        state, message = finished[-1]["state"], str(finished[-1].get("message", ""))
        assert run.state.nodes[target].state.value == state, where
    assert state == cell.state, where
    # every hook saw every launch under its tool, the run's mode and the mode's policy for it (the
    # launches here are processes, mutating agents and model calls: only model calls never ask)
    for payload in run.hooks:
        assert payload["tool"] == launch.tool_of(payload["node"]), payload
        ask = run.mode == "supervised" and payload["tool"] != "workflow_model"
        assert payload["mode"] == run.mode and payload["policy"] == ("ask" if ask else "allow"), payload
    ran = run.of(target, "hook_ran")
    if ran:
        assert [p for p in run.hooks if p["node"] == target and p["tool"] == launch.tool], where
    kinds = [r["kind"] for r in run.of(target)]
    asked = "approval_requested" in kinds or "approval_carried" in kinds or "approval_decided" in kinds

    if cell.how in ("mode", "no step"):
        assert "denied by permission mode 'plan': nothing was started" in message, where
        assert not ran and not asked and not started(launch, run), where
    elif cell.how == "allowed":
        assert not asked and started(launch, run), where
    elif cell.how == "approved":
        requested = run.of(target, "approval_requested")
        assert requested and requested[0]["approval"] == "launch", where
        hook = run.seq(target, "hook_ran", hook_event="before_tool_use", verdict="continue")
        decided = run.seq(target, "approval_decided", decision="approve")
        assert hook < requested[0]["seq"] < decided, where
        assert started(launch, run) and target in [r.node for r in run.asked], where
    elif cell.how == "person":
        assert run.seq(target, "approval_requested") < run.seq(target, "approval_decided", decision="deny"), where
        assert message.startswith("launch denied by "), where
        assert not started(launch, run), where
    elif cell.how in ("hook", "fails closed"):
        denied = [r for r in ran if r["hook_event"] == "before_tool_use" and r["verdict"] == "deny"]
        assert len(denied) == 1 and denied[0]["hook"].startswith(f"{origin}:"), where
        assert message.startswith(f"before_tool_use hook {origin}:"), where
        if cell.how == "fails closed":
            why = {"5a": "exited with code 3", "5b": "did not answer within 0.5 s"}[rule]
            assert why in denied[0]["reason"] and "failing closed" in denied[0]["reason"], where
            assert why in message and message.endswith("failing closed"), where
        else:
            assert "denied" in message, where
        assert not asked and not started(launch, run), where
    elif cell.how == "after hook":
        denied = [r for r in ran if r["hook_event"] == "after_tool_use" and r["verdict"] == "deny"]
        assert len(denied) == 1 and started(launch, run), where
        assert message.startswith("after_tool_use hook user:"), where
        after = [p for p in run.hooks if p["node"] == target and p["hook_event"] == "after_tool_use"]
        assert after and after[0]["result"]["state"] == "success", where  # the hook saw a success
    elif cell.how == "carried":
        hook = run.seq(target, "hook_ran", hook_event="before_tool_use", verdict="continue")
        carried = run.of(target, "approval_carried")
        assert carried and hook < carried[0]["seq"] and carried[0]["from_run"] == first_run, where
        assert "approval_requested" not in kinds and target not in [r.node for r in run.asked], where
        assert started(launch, run), where
    else:
        raise AssertionError(f"docs/approvals.md: unknown cell {cell}")


def started(launch: Launch, run: Observed) -> bool:
    """Whether the launch started: its process, the script's process, or a request to the model."""
    if launch.starts == "script":
        return bool([r for r in run.records if r["kind"] == "script_launched"])
    if launch.starts == "model":
        return run.requests > 0
    began = bool(run.of(launch.target, "process_started"))
    if began and launch.dask:  # it ran on the cluster's worker, not on the owner
        finished = run.of(launch.target, "node_finished")
        assert finished and (finished[-1].get("exit") or {}).get("worker"), finished
    return began


def test_the_tables_cover_every_rule_and_launch() -> None:
    rows = {row for row, _ in EXPECTED}
    assert rows == {"1", "2", "3", "4", "5a", "5b", "6", "7", "8a", "8b"}
    assert set(EXPECTED) == {(row, launch) for row in rows for launch in LAUNCHES}
