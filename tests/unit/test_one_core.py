"""The pieces issue 29 made one: the seal every authoring form plans through, the form registry,
the CLI's one sync bridge, and the run/resume flags written once for the CLI and the magics.

Real planning (the Starlark worker, a script's and a flow's interpreter) on real files.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import warnings
from pathlib import Path

import pytest

from rho_notebook.cli.main import build_parser
from rho_notebook.errors import ArgumentError
from rho_notebook.model.canonical import graph_digest
from rho_notebook.planning.forms import form_of
from rho_notebook.service.cell_args import verb_parser
from rho_notebook.service.flags import parse_decisions
from rho_notebook.service.sync import run_sync
from tests.conftest import Project, star

STARLARK = star(
    'return workflow(name = "one", nodes = [command(name = "a", argv = ["true"], '
    "timeout_seconds = 5, max_output_bytes = 100)])"
)
SCRIPT = 'from rho_notebook.script import run_command\n\nrun_command(argv=["true"], timeout_seconds=5, max_output_bytes=100)\n'
GRAPH = """\
name: tiny
steps:
  - {id: start, kind: set, params: {fields: {n: 1}}}
  - {id: done, kind: output}
edges:
  - {from: start, to: done}
"""
FLOW = """\
from rho_notebook.flow import AgentParam, Session, Workflow, run_session_loop


class Echo(Workflow):
    def __init__(self):
        super().__init__()
        self.speaker = AgentParam(system="Say it back.", model="m")

    def forward(self, session: Session) -> Session:
        return run_session_loop(session, self.speaker)
"""


def test_every_form_is_sealed_with_the_canonical_digest(project: Project) -> None:
    project.home.mkdir(parents=True, mode=0o700)
    (project.home / "settings.json").write_text('{"providers": {"p": {"type": "openai"}}, "default_provider": "p"}')
    files = {"wf.star": STARLARK, "steps.py": SCRIPT, "tiny.graph.yaml": GRAPH, "echo.py": FLOW}
    for name, text in files.items():
        project.write(name, text)
    service = project.service
    cases = [("wf.star", None, "starlark"), ("steps.py", None, "script"), ("tiny.graph.yaml", None, "item graph")]
    cases.append(("echo.py", "Echo", "flow"))
    for name, flow, form in cases:
        request = service.request_for(
            project.root / name, inputs={"prompt": "hi"} if flow else {}, workspace=project.workspace, flow=flow
        )
        assert form_of(request).name == form, name
        unsaved = asyncio.run(service.validate(request))
        stored = asyncio.run(service.plan(request))
        assert unsaved.manifest.graph_digest == graph_digest(unsaved.graph), f"{form}: digest is not the canonical one"
        assert stored.manifest.graph_digest == unsaved.manifest.graph_digest, form
        assert (unsaved.plan_id, stored.plan_id != "unsaved") == ("unsaved", True), form


def test_run_sync_serves_every_call_from_one_loop_and_cancels_what_a_call_leaves() -> None:
    async def current_loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    left: list[asyncio.Task[None]] = []

    async def leaves_a_task() -> str:
        left.append(asyncio.get_running_loop().create_task(asyncio.sleep(60)))
        return "done"

    assert run_sync(current_loop()) is run_sync(current_loop())
    assert run_sync(leaves_a_task()) == "done"
    assert left[0].cancelled(), "a task the call left running is cancelled when it returns"


def test_run_sync_refuses_inside_a_running_loop_without_leaking_the_coroutine() -> None:
    async def verb() -> int:
        return 1

    async def inside() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a coroutine never awaited would warn
            with pytest.raises(RuntimeError, match="inside a running event loop"):
                run_sync(verb())

    asyncio.run(inside())


def test_run_sync_from_another_thread_uses_a_loop_of_its_own() -> None:
    async def loop_id() -> int:
        return id(asyncio.get_running_loop())

    main = run_sync(loop_id())
    seen: list[int] = []
    worker = threading.Thread(target=lambda: seen.append(run_sync(loop_id())))
    worker.start()
    worker.join(timeout=30)
    assert seen and seen[0] != main


def test_decisions_parse_once_for_both_front_ends() -> None:
    assert parse_decisions(["call-2=rerun", "review=skip"]) == {"call-2": "rerun", "review": "skip"}
    for bad in (["call-2"], ["=rerun"], ["call-2=retry"]):
        with pytest.raises(ArgumentError, match="STEP=rerun or --decide STEP=skip"):
            parse_decisions(bad)
    with pytest.raises(ArgumentError, match="twice"):
        parse_decisions(["a=rerun", "a=skip"])


def verb(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    return parser.verbs[name]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["run", "resume"])
def test_the_cli_and_the_magics_take_the_same_values_for_the_flags_they_share(name: str) -> None:
    cli, magic = verb(build_parser(), name), verb(verb_parser(), name)
    shared = set(cli.option_names) & set(magic.option_names)  # type: ignore[attr-defined]
    assert {"--yes", "--approval-timeout", "--output"} <= shared
    target = ["x"]
    for front in (cli, magic):
        parsed = front.parse_args([*target, "--approval-timeout", "2.5", "--output", "jsonl"])
        assert (parsed.approval_timeout, parsed.output) == (2.5, "jsonl")
    for front in (cli, magic):
        with pytest.raises((SystemExit, ArgumentError)):
            front.parse_args([*target, "--approval-timeout", "-1"])


def test_flag_definitions_live_in_one_table() -> None:
    """Both parsers' ``--approval-timeout`` help text comes from service/flags.py: no front end
    keeps its own copy of the flag's definition."""
    package = Path(__file__).resolve().parents[2] / "rho_notebook"
    source = "\n".join(p.read_text() for p in (package / "cli").glob("*.py"))
    source += (package / "service" / "cell_args.py").read_text()
    assert '"--approval-timeout"' not in source and '"--decide"' not in source
