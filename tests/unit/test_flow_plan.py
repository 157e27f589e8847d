"""Flow plans (planning/flow.py, the flow parts of planning/script.py): the ``flow.fork`` lint, the
default ``prompt`` input, ``flow.name``, the ``ScriptSpec.flow`` field outside the digest when
unset, every rule of the manifest check, and step keys as one store folder each. Real files and a
real interpreter for planning; manifests checked against real settings documents."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.agents.settings import parse_settings
from rho_notebook.errors import InvalidWorkflow
from rho_notebook.model.canonical import graph_bytes
from rho_notebook.model.graph import Graph, ScriptSpec
from rho_notebook.planning.flow import check_manifest
from rho_notebook.planning.script import lint_script
from rho_notebook.store.runs import RunFolder, node_folder
from tests.conftest import Project

POOL_WITHOUT_FORK = """\
from concurrent.futures import ThreadPoolExecutor
from rho_notebook.flow import AgentParam, Workflow, run_session_loop


class Team(Workflow):
    def forward(self, session):
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(self.one, [session, session]))
        return results[0]
"""


def rules(text: str) -> list[tuple[str, str, int]]:
    """The findings of ``text`` checked as the flow ``Team`` (as ``--flow Team`` checks it)."""
    return [(f.rule, f.severity, f.line) for f in lint_script(text, "//team.py", flow="Team")]


def test_a_flow_that_runs_threads_without_fork_gets_a_warning_at_each_thread_line() -> None:
    assert rules(POOL_WITHOUT_FORK) == [("flow.fork", "warning", 7), ("flow.fork", "warning", 8)]
    forked = POOL_WITHOUT_FORK.replace("[session, session]", "[session.fork(), session.fork()]")
    assert rules(forked) == []
    threads = "import threading\nfrom rho_notebook import flow\n\nthreading.Thread(target=print).start()\n"
    assert rules(threads) == [("flow.fork", "warning", 4)]
    plain_script = POOL_WITHOUT_FORK.replace("rho_notebook.flow", "rho_notebook.script").replace(
        "AgentParam, Workflow, run_session_loop", "run_model"
    )
    assert [r for r in rules(plain_script) if r[0] == "flow.fork"] == []  # only flow modules


def test_the_flow_field_is_left_out_of_the_digest_when_unset() -> None:
    bare = Graph(name="s", inputs=(), nodes=(), script=ScriptSpec(module="//s.py"))
    flow = Graph(name="s", inputs=(), nodes=(), script=ScriptSpec(module="//s.py", flow="Review"))
    assert b"flow" not in graph_bytes(bare)
    assert b"flow" in graph_bytes(flow) and b"Review" in graph_bytes(flow)
    assert hashlib.sha256(graph_bytes(bare)).digest() != hashlib.sha256(graph_bytes(flow)).digest()
    assert Graph.model_validate_json(flow.model_dump_json()).script == flow.script


FLOW = """\
from rho_notebook.flow import AgentParam, Session, Workflow, run_session_loop


class Echo(Workflow):
    def __init__(self):
        super().__init__()
        self.speaker = AgentParam(system="Say it back.", model="m")

    def forward(self, session: Session) -> Session:
        return run_session_loop(session, self.speaker)
"""


def plan_flow(project: Project, file: str, flow: str, inputs: dict[str, Any] | None = None) -> Any:
    service = project.service
    request = service.request_for(project.root / file, inputs=inputs or {}, workspace=project.workspace, flow=flow)
    return asyncio.run(service.validate(request))


def test_a_flow_without_inputs_takes_a_required_prompt_and_must_define_its_name(project: Project) -> None:
    project.home.mkdir(parents=True, mode=0o700)
    (project.home / "settings.json").write_text('{"providers": {"p": {"type": "openai"}}, "default_provider": "p"}')
    project.write("echo.py", FLOW)
    plan = plan_flow(project, "echo.py", "Echo", {"prompt": "hello"})
    assert [(i.name, i.type, i.required, i.value) for i in plan.graph.inputs] == [("prompt", "string", True, "hello")]
    assert plan.graph.script.flow == "Echo"
    assert plan.manifest.flow["agents"][0]["path"] == "echo.speaker"

    with pytest.raises(InvalidWorkflow, match="missing required input 'prompt'"):
        plan_flow(project, "echo.py", "Echo")
    with pytest.raises(InvalidWorkflow, match="defines no Nope at its top level") as err:
        plan_flow(project, "echo.py", "Nope", {"prompt": "x"})
    assert err.value.diagnostics()[0].rule == "flow.name"
    assert err.value.diagnostics()[0].suggestion == "Echo"  # nothing close: the first flow defined
    project.write("broken.py", FLOW.replace("super().__init__()", "super().__init__()\n        raise ValueError('no')"))
    with pytest.raises(InvalidWorkflow, match="does not compile .*ValueError: no") as err:
        plan_flow(project, "broken.py", "Echo", {"prompt": "x"})
    assert err.value.diagnostics()[0].rule == "flow.compile"


def test_a_flow_that_raises_while_compiling_is_refused_at_its_line_with_the_exception_alone(project: Project) -> None:
    """The compile's traceback becomes the author's file and line and the exception's own words:
    not the frozen copy's temporary path, the frame's source or the carets under it."""
    project.home.mkdir(parents=True, mode=0o700)
    (project.home / "settings.json").write_text('{"providers": {"p": {"type": "openai"}}, "default_provider": "p"}')
    project.write("typo.py", FLOW.replace('system="Say it back."', 'sytem="Say it back."'))
    with pytest.raises(InvalidWorkflow) as err:
        plan_flow(project, "typo.py", "Echo", {"prompt": "x"})
    [found] = err.value.diagnostics()
    assert (found.rule, found.line) == ("flow.compile", 7)
    assert found.message.endswith(
        "does not compile (exit 1): TypeError: AgentParam.__init__() got an unexpected keyword argument 'sytem'"
    )
    project.write("helper.py", 'def make():\n    raise ValueError("no\\nsecond line")\n')
    project.write(
        "deep.py", "import helper\n" + FLOW.replace('AgentParam(system="Say it back.", model="m")', "helper.make()")
    )
    with pytest.raises(InvalidWorkflow) as err:
        plan_flow(project, "deep.py", "Echo", {"prompt": "x"})
    [found] = err.value.diagnostics()
    assert found.line == 8  # the flow's own line that called into the helper
    assert found.message.endswith("ValueError: no | second line (raised at //helper.py:2)")
    assert "rho-flow-compile" not in found.message and "^^^" not in found.message


def test_a_manifest_finding_is_at_the_line_that_places_the_agent(project: Project) -> None:
    """``echo.speaker: provider 'q' is not defined`` points at ``self.speaker = ...``, not at 1:1."""
    project.home.mkdir(parents=True, mode=0o700)
    (project.home / "settings.json").write_text('{"providers": {"p": {"type": "openai"}}, "default_provider": "p"}')
    project.write("placed.py", FLOW.replace('model="m")', 'model="m", provider="q")'))
    with pytest.raises(InvalidWorkflow) as err:
        plan_flow(project, "placed.py", "Echo", {"prompt": "x"})
    [found] = err.value.diagnostics()
    assert (found.rule, found.line, found.column) == ("flow.provider", 7, 9)
    assert found.message.startswith("echo.speaker: provider 'q' is not defined in settings")
    # a preset instance's own agent: at the instance's line
    project.write(
        "preset.py", "from rho_notebook import flow\n\nagent = flow.Agent(system_prompt='x', provider='q', model='m')\n"
    )
    with pytest.raises(InvalidWorkflow) as err:
        plan_flow(project, "preset.py", "agent", {"prompt": "x"})
    [found] = err.value.diagnostics()
    assert (found.rule, found.line, found.column) == ("flow.provider", 3, 1)


def test_a_flow_name_that_gives_no_workflow_is_refused_in_one_line_that_says_what_to_pass(project: Project) -> None:
    """A misspelt name is pointed at the flow the module defines; a name the harness cannot make a
    workflow of (a class that is no Workflow, one whose constructor needs arguments) is said
    without the harness's own traceback."""
    project.home.mkdir(parents=True, mode=0o700)
    (project.home / "settings.json").write_text('{"providers": {"p": {"type": "openai"}}, "default_provider": "p"}')
    project.write("echo.py", FLOW + "\n\nclass Plain:\n    pass\n")
    with pytest.raises(InvalidWorkflow) as err:
        plan_flow(project, "echo.py", "echo", {"prompt": "x"})
    assert "defines no echo at its top level (did you mean Echo?)" in str(err.value)
    [named] = err.value.diagnostics()
    assert (named.rule, named.suggestion) == ("flow.name", "Echo")  # the name meant, for front ends to read
    assert str(err.value).endswith("--flow names a Workflow subclass or instance the module defines: Echo")
    project.write("loud.py", FLOW + "\n\nloud: Echo = Echo()\n")
    with pytest.raises(InvalidWorkflow) as err:
        plan_flow(project, "loud.py", "lod", {"prompt": "x"})
    assert err.value.diagnostics()[0].suggestion == "loud"  # the closest, not the first (Echo)

    with pytest.raises(InvalidWorkflow) as err:
        plan_flow(project, "echo.py", "Plain", {"prompt": "x"})
    assert err.value.diagnostics()[0].rule == "flow.compile"
    assert str(err.value).endswith(
        "does not compile (exit 1): //echo.py: Plain is a type, not a Workflow subclass or instance "
        "(workflows defined there: Echo)"
    )

    # found in the module's text before anything runs (keyword-only arguments without a default too)
    needs = FLOW.replace("def __init__(self):", "def __init__(self, tone, /, mood, *rest, loud=False, pitch):")
    project.write("needs.py", needs)
    with pytest.raises(InvalidWorkflow) as err:
        plan_flow(project, "needs.py", "Echo", {"prompt": "x"})
    assert err.value.diagnostics()[0].rule == "flow.name"
    assert "Echo() needs arguments (tone, mood, pitch), and --flow makes it without any" in str(err.value)
    assert err.value.diagnostics()[0].suggestion is None
    project.write("fine.py", FLOW.replace("def __init__(self):", "def __init__(self, tone='dry', *rest, loud=False):"))
    assert plan_flow(project, "fine.py", "Echo", {"prompt": "x"}).graph.script.flow == "Echo"


def agent(path: str, **provider: Any) -> dict[str, Any]:
    return {"path": path, "agent": None, "system": "x", "provider": {"name": None, "model": None, **provider}}


SETTINGS = {
    "providers": {
        "keyed": {"type": "openai", "api_key_env": "FLOW_TEST_KEY"},
        "profiled": {"type": "anthropic", "auth_profile": "team"},
        "local": {"type": "openai"},
    },
    "auth_profiles": {"team": {"api_key_env": "FLOW_TEAM_KEY"}},
}


def check(manifest: dict[str, Any], settings: dict[str, Any], environ: dict[str, str], tmp_path: Path) -> list[str]:
    found = check_manifest(
        manifest,
        settings=parse_settings(settings, source="settings.json"),
        environ=environ,
        display="flow.py",
        workflow_dir=tmp_path,
        workspace=tmp_path,
        user_home=tmp_path / "home",
    )
    return [f"{f.rule}: {f.message}" for f in found]


def test_the_manifest_check_names_the_module_path_of_each_problem(tmp_path: Path) -> None:
    manifest = {
        "agents": [
            agent("f.ok", name="keyed", model="m"),
            agent("f.local", name="local", model="m"),
            agent("f.missing_key", name="profiled", model="m"),
            agent("f.unknown", name="elsewhere", model="m"),
            agent("f.kind", name="local", model="m", kind="grpc"),
            agent("f.env_ref", model="m", credential_ref="env:not a name"),
            agent("f.no_model", name="local"),
            {"path": "f.catalog", "agent": "ghost", "provider": {"name": "local", "model": "m"}},
            {"path": "f.builtin", "agent": "reviewer", "provider": {"name": "local"}},
        ]
    }
    settings = {**SETTINGS, "default_provider": "local"}
    problems = check(manifest, settings, {"FLOW_TEST_KEY": "sk-x"}, tmp_path)
    assert problems[0].startswith("flow.credential: f.missing_key: credential environment variable FLOW_TEAM_KEY")
    assert problems[1].startswith("flow.provider: f.unknown: provider 'elsewhere' is not defined in settings")
    assert (
        problems[2] == "flow.provider_kind: f.kind: provider kind 'grpc' is not known (known kinds: openai, anthropic)"
    )
    assert (
        problems[3]
        == "flow.credential: f.env_ref: credential reference 'not a name' is not an environment variable name"
    )
    assert problems[4].startswith("flow.model: f.no_model: names no model and settings set no default_model")
    assert problems[5].startswith("flow.agent: f.catalog: agent 'ghost' is not in the agent catalog")
    assert len(problems) == 6  # the built-in agent is found; a local server needs no key

    no_default = check({"agents": [agent("f.a", model="m")]}, SETTINGS, {}, tmp_path)
    assert no_default == ["flow.provider: f.a: names no provider and settings set no default_provider (settings.json)"]


def test_a_catalog_agent_whose_definition_is_broken_is_said_with_its_file_and_line(tmp_path: Path) -> None:
    """``flow.agent`` said only the first nested message, without the definition file's line; now
    every nested finding is inlined as a script step's refusal says it (``[rule] file:line: ...``)."""
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "broken.md").write_text("---\nid: broken\ndescription: x\nruntime: nope\n---\nhi\n")
    manifest = {"agents": [{"path": "f.catalog", "agent": "broken", "provider": {"name": None, "model": None}}]}
    problems = check(manifest, {**SETTINGS, "default_provider": "local"}, {}, tmp_path)
    assert len(problems) == 1, problems
    assert problems[0].startswith("flow.agent: f.catalog: agent 'broken' is not in the agent catalog: ["), problems
    assert "agents/broken.md:4:1: runtime: 'nope' is not allowed" in problems[0], problems
    assert "error[" not in problems[0]


def test_a_step_key_is_one_folder_and_plain_names_keep_theirs(tmp_path: Path) -> None:
    assert node_folder("team.research.writer/f1#2") == "team.research.writer%2Ff1#2"
    assert node_folder("support.router#1") == "support.router#1"
    assert node_folder("build") == "build"
    assert node_folder("a%2Fb") == "a%252Fb"  # never equal to the folder of "a/b"
    folder = RunFolder(tmp_path / "run")
    attempt = folder.attempt_dir("team.research.writer/f1.2#3", 1)
    assert attempt.relative_to(folder.path).parts == ("nodes", "team.research.writer%2Ff1.2#3", "attempts", "1")
