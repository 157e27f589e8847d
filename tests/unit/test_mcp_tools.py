"""The MCP tools called in-process (:class:`WorkflowTools`), with a real store in a temporary home:
what a client meets at the edges — files outside the served workspace, run ID prefixes, runs
that are still live, resources of unknown runs — answered as tool errors that name what the client
can do, never a shell command in place of a tool."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from rho_notebook.mcp import WorkflowTools
from rho_notebook.service import Consent, StartRun
from rho_notebook.store.run_locks import OwnerLock
from tests.conftest import REPO, Project, cancelled_gated_run, star, started_gated_run
from tests.processes import wait_gone

ONE = star(
    'return workflow(name = "one", nodes = [command(name = "hi", argv = ["echo", "hi"], timeout_seconds = 30, max_output_bytes = 4096)])'
)


def call(project: Project, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    tools = WorkflowTools(project.service, project.workspace)
    return asyncio.run(tools.call(name, arguments, client="pytest"))


def text(result: types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


def error(project: Project, name: str, arguments: dict[str, Any]) -> str:
    result = call(project, name, arguments)
    assert result.is_error, text(result)
    return text(result)


# -- files outside the served workspace ------------------------------------------------------------


def test_no_tool_reads_or_plans_a_file_outside_the_workspace(project: Project) -> None:
    outside = project.root.parent / "elsewhere"
    outside.mkdir()
    shutil.copy(REPO / "notebooks" / "01_quickstart.ipynb", outside / "nb.ipynb")
    shutil.copy(REPO / "examples" / "graphs" / "triage.graph.yaml", outside / "t.graph.yaml")
    (outside / "s.py").write_text("print('a script outside')\n")

    cases = [
        ("workflow_plan", "../elsewhere/nb.ipynb", "notebook.outside_workspace"),
        ("workflow_validate", "../elsewhere/s.py", "script.outside_workspace"),
        ("workflow_validate", str(outside / "t.graph.yaml"), "graph.outside_workspace"),
    ]
    for tool, file, rule in cases:
        answer = json.loads(error(project, tool, {"file": file}))
        assert answer["valid"] is False
        (diagnostic,) = answer["diagnostics"]
        assert diagnostic["rule"] == rule and diagnostic["file"] == file
        assert f"{file} is outside the workspace {project.root}" in diagnostic["message"]
    assert project.stored_plans() == []
    assert sorted(p.name for p in outside.iterdir()) == ["nb.ipynb", "s.py", "t.graph.yaml"]  # no export folder


def test_a_symlink_in_the_workspace_to_a_notebook_outside_it_is_refused(project: Project) -> None:
    outside = project.root.parent / "elsewhere"
    outside.mkdir()
    shutil.copy(REPO / "notebooks" / "01_quickstart.ipynb", outside / "nb.ipynb")
    (project.root / "link.ipynb").symlink_to(outside / "nb.ipynb")
    answer = json.loads(error(project, "workflow_plan", {"file": "link.ipynb"}))
    assert [d["rule"] for d in answer["diagnostics"]] == ["notebook.outside_workspace"]
    assert project.stored_plans() == [] and sorted(p.name for p in outside.iterdir()) == ["nb.ipynb"]


def test_a_notebook_inside_the_workspace_is_still_planned(project: Project) -> None:
    shutil.copy(REPO / "notebooks" / "01_quickstart.ipynb", project.root / "nb.ipynb")
    result = call(project, "workflow_plan", {"file": "nb.ipynb"})
    assert not result.is_error, text(result)
    assert json.loads(text(result))["workflow"] == "quickstart"


# -- resources -------------------------------------------------------------------------------------


def test_a_resource_of_an_unknown_run_names_the_tool_that_lists_runs(project: Project) -> None:
    tools = WorkflowTools(project.service, project.workspace)
    for uri in ("rho://runs/ffff/events", "rho://runs/ffff/nodes/hi/output"):
        with pytest.raises(MCPError) as raised:
            asyncio.run(tools.read(uri))
        assert raised.value.error.message == (
            "error[not_found]: no run matches 'ffff'; list them with the `workflow_runs` tool"
        )


# -- reading a run by a prefix of its ID -----------------------------------------------------------


def test_every_reading_tool_answers_the_whole_run_id_of_a_prefix(project: Project) -> None:
    project.write("one.star", ONE)
    run_id = project.create_run(project.plan("one.star"))
    assert asyncio.run(project.service.execute(run_id)).outcome is not None
    prefix = run_id[:13]
    for tool, extra in [
        ("workflow_status", {}),
        ("workflow_result", {}),
        ("workflow_events", {}),
        ("workflow_logs", {"node": "hi"}),
    ]:
        answer = json.loads(text(call(project, tool, {"run_id": prefix, **extra})))
        assert answer["run_id"] == run_id, tool
    logs = json.loads(text(call(project, "workflow_logs", {"run_id": prefix, "node": "hi"})))
    assert logs["text"] == "hi\n"


# -- a run that goes on by itself ------------------------------------------------------------------


def test_resuming_a_live_run_is_refused_without_a_shell_command_or_a_new_owner(project: Project) -> None:
    plan, run_id, owner = started_gated_run(project)
    try:
        for decisions in ({}, {"wait": "skip"}):
            arguments = {"run_id": run_id[:13], "graph_digest": plan.graph_digest, "decisions": decisions}
            refusal = error(project, "workflow_resume", arguments)
            assert refusal == (
                f"error[refused]: run {run_id} is owned by another live process and goes on by itself; nothing to "
                f"resume: follow it with workflow_wait(run_id={run_id!r})"
            )
        log = (project.home / "workflows" / "runs" / run_id / "owner.log").read_text()
        assert log.count("owning run") == 1  # no second owner was started to find the run taken
    finally:
        (project.root / "go").write_text("")
        assert wait_gone(owner), f"owner {owner} is still alive after 30 s"
    assert project.status(run_id).outcome is not None


# -- a flow module's Workflow ----------------------------------------------------------------------


def test_a_flow_modules_workflow_is_validated_as_the_cli_validates_it(project: Project) -> None:
    shutil.copy(REPO / "examples" / "flows" / "review.py", project.root / "review.py")
    for flow in ("Review", "Nope"):
        result = call(project, "workflow_validate", {"file": "review.py", "workflow": flow})
        cli = project.cli("validate", "review.py", "--flow", flow, "--output", "json")
        assert result.is_error == (cli.returncode != 0)
        said = json.loads(cli.stdout)
        for found in said["diagnostics"]:  # a tool names the flow by its workflow argument, not --flow
            found["message"] = found["message"].replace("--flow", "the workflow argument")
        assert json.loads(text(result)) == said
    assert "leave it out for a .star file" in error(project, "workflow_validate", {"file": "x.star", "workflow": "X"})
    notebook = error(project, "workflow_validate", {"file": "x.ipynb", "workflow": "X"})
    assert "plan a notebook with workflow_plan" in notebook  # not: leave workflow out


def test_resuming_a_failed_run_says_which_tool_runs_it_again_not_a_cli_fork(project: Project) -> None:
    """A failed graph run has nothing to resume; the CLI says to fork it at the failed node with
    ``rho-notebook fork``, but MCP has no fork tool: the answer names the workflow_run call that runs
    its plan again, and a person's fork command only as what a person may do."""
    project.write("fails.star", ONE.replace('["echo", "hi"]', '["false"]'))
    plan = project.plan("fails.star")
    state = asyncio.run(project.service.run(StartRun(plan=plan.plan_id, consent=Consent(yes=True))))
    assert state.outcome == "failure"
    said = error(project, "workflow_resume", {"run_id": state.run_id, "graph_digest": plan.graph_digest})
    assert said.startswith(f"error[refused]: run {state.run_id} completed with outcome failure"), said
    runs_again = (
        f"start a new run of its plan: workflow_run(plan_id='{plan.plan_id}', graph_digest='{plan.graph_digest}')"
    )
    assert f"to run hi again, {runs_again}; no tool forks a run" in said, said
    assert "fork the run at it" not in said and "`rho-notebook" not in said, said
    cli = project.cli("resume", state.run_id, "--yes")
    assert cli.returncode == 3, cli
    assert f"to run hi again, fork the run at it: `rho-notebook fork {state.run_id[:13]} --at hi`" in cli.stderr, cli


def test_a_run_whose_owner_has_journaled_its_end_but_still_holds_the_lock_is_resumed(project: Project) -> None:
    """An owner journals the run's end, then lets go of its lock: a resume asked in between waits
    for the lock, then resumes (it was refused as if the run went on, or by the owner it started)."""
    plan, run_id = cancelled_gated_run(project)
    assert project.status(run_id).outcome is not None  # cancelled: resumable

    lock = OwnerLock(project.service.run_store.folder(run_id).lock)
    assert lock.try_acquire()  # the exiting owner, a moment before it lets go
    letting_go = threading.Timer(0.5, lock.release)
    letting_go.start()
    try:
        result = call(project, "workflow_resume", {"run_id": run_id, "graph_digest": plan.graph_digest})
    finally:
        letting_go.join()
        (project.root / "go").write_text("")  # the resumed owner ends the run
    assert not result.is_error, text(result)
    assert wait_gone(json.loads(text(result))["owner_pid"])
    assert project.status(run_id).outcome == "success"


def test_planning_a_flow_module_without_its_workflow_answers_the_warning_the_cli_prints(project: Project) -> None:
    shutil.copy(REPO / "examples" / "flows" / "review.py", project.root / "review.py")
    planned = json.loads(text(call(project, "workflow_plan", {"file": "review.py"})))
    assert planned["nodes"] == []  # as a script, the module calls no step
    assert [warning["rule"] for warning in planned["warnings"]] == ["flow.unnamed"]
    assert "review.py" in planned["warnings"][0]["file"]


def test_a_flow_is_named_in_the_tools_workflow_argument_not_with_a_flag(project: Project) -> None:
    """The CLI says ``pass --flow Review`` (flow.unnamed) and ``--flow names a Workflow ...``
    (flow.name); a tool takes ``workflow``, so it says that, and each finding names the flows."""
    shutil.copy(REPO / "examples" / "flows" / "review.py", project.root / "review.py")
    planned = json.loads(text(call(project, "workflow_plan", {"file": "review.py"})))
    validated = json.loads(text(call(project, "workflow_validate", {"file": "review.py"})))
    for [found] in (planned["warnings"], validated["diagnostics"]):
        assert found["rule"] == "flow.unnamed" and found["flows"] == ["Review"], found
        assert found["message"].endswith('pass it in the workflow argument: {"workflow": "Review"}'), found
        assert "--flow" not in found["message"], found
    for tool in ("workflow_plan", "workflow_validate"):
        for flow, said in [
            ("Reveiw", "the workflow argument names a Workflow"),
            ("x y", "the workflow argument 'x y'"),
        ]:
            [found] = json.loads(error(project, tool, {"file": "review.py", "workflow": flow}))["diagnostics"]
            assert found["rule"] == "flow.name" and found["flows"] == ["Review"], found
            assert said in found["message"] and "--flow" not in found["message"], found
    cli = project.cli("validate", "review.py")
    assert "to validate, plan or run the flow, pass --flow Review" in cli.stdout + cli.stderr  # the CLI's own words


def test_a_script_without_warnings_is_planned_without_the_key(project: Project) -> None:
    project.write("s.py", "from rho_notebook.script import emit_output\n\nemit_output({'ok': True})\n")
    planned = json.loads(text(call(project, "workflow_plan", {"file": "s.py"})))
    assert "plan_id" in planned and "warnings" not in planned


def test_a_node_resource_with_a_slash_in_the_name_says_to_percent_encode_it(project: Project) -> None:
    tools = WorkflowTools(project.service, project.workspace)
    with pytest.raises(MCPError) as raised:
        asyncio.run(tools.read("rho://runs/01a2/nodes/review/draft@1/output"))
    assert raised.value.error.message.endswith(
        "(a NODE that holds / is percent-encoded: %2F, as workflow_result names it)"
    )


def test_the_events_resource_of_a_damaged_journal_says_so_after_its_readable_part(project: Project) -> None:
    project.write("one.star", ONE)
    run_id = project.create_run(project.plan("one.star"))
    asyncio.run(project.service.execute(run_id))
    events = project.home / "workflows" / "runs" / run_id / "events.jsonl"
    lines = events.read_text().splitlines()
    lines[3] = lines[3].replace('"kind"', '"kinx"')  # an edited record breaks the chain
    events.write_text("\n".join(lines) + "\n")

    text = asyncio.run(WorkflowTools(project.service, project.workspace).read(f"rho://runs/{run_id}/events")).text
    *records, marker = text.splitlines()
    assert [json.loads(record)["seq"] for record in records] == [1, 2, 3]
    assert marker.startswith("[... damaged: the journal cannot be trusted past the records above: ")
    assert "seq 4" in marker


def test_a_long_run_output_is_cut_in_every_answer_and_read_whole_from_its_resource(project: Project) -> None:
    project.write("big.py", "from rho_notebook.script import emit_output\n\nemit_output({'blob': 'x' * 50000})\n")
    run_id = project.create_run(project.plan("big.py"))
    asyncio.run(project.service.execute(run_id))
    uri = f"rho://runs/{run_id}/output"
    marker = f"[... truncated: 50012 characters of JSON; read the resource {uri}]"
    for tool in ("workflow_status", "workflow_wait", "workflow_result"):
        answer = text(call(project, tool, {"run_id": run_id[:13]}))
        assert len(answer) < 20_000 and json.loads(answer)["output"] == marker, tool

    tools = WorkflowTools(project.service, project.workspace)
    pages = []
    offset: int | None = 0
    while offset is not None:
        page = asyncio.run(tools.read(f"{uri}?offset={offset}")).text
        body, _, rest = page.partition("\n[... truncated: ")
        pages.append(body)
        offset = int(rest.rsplit("offset=", 1)[1].rstrip("]")) if rest else None
    assert len(pages) == 3 and json.loads("".join(pages)) == {"blob": "x" * 50000}


def test_the_output_resource_of_a_run_without_output_says_so(project: Project) -> None:
    project.write("one.star", ONE)
    run_id = project.create_run(project.plan("one.star"))
    with pytest.raises(MCPError) as raised:
        asyncio.run(WorkflowTools(project.service, project.workspace).read(f"rho://runs/{run_id}/output"))
    assert raised.value.error.message == (
        f"run {run_id} has no output (yet): only a run whose workflow emits one has it"
    )


def test_the_tools_that_cut_a_run_output_name_its_resource_in_their_description(project: Project) -> None:
    listed = {tool.name: tool.description or "" for tool in WorkflowTools(project.service, project.workspace).listing()}
    for name in ("workflow_status", "workflow_result"):
        assert "rho://runs/{run_id}/output" in listed[name], name


def test_a_run_names_the_plans_approval_only_when_it_would_change_the_mode(project: Project) -> None:
    project.write("one.star", ONE)
    plan = project.plan("one.star")
    approval = f"a person who read this plan may approve it with rho-notebook approve-plan {plan.plan_id}"
    named = {}
    for mode in ("auto", "supervised", "plan"):
        arguments = {"plan_id": plan.plan_id, "graph_digest": plan.graph_digest, "mode": mode}
        started = json.loads(text(call(project, "workflow_run", arguments)))
        named[started["mode_asked"], started["mode"]] = any(note.startswith(approval) for note in started["person"])
        asyncio.run(project.service.cancel(started["run_id"], wait_seconds=10))
        assert wait_gone(started["owner_pid"])
    # asked auto, got supervised: approval gives auto; asked supervised or plan: it changes nothing
    assert named == {("auto", "supervised"): True, ("supervised", "supervised"): False, ("plan", "plan"): False}


def test_right_after_a_resume_the_run_reads_as_going_on_and_a_cancel_stops_it(project: Project) -> None:
    plan, run_id = cancelled_gated_run(project)

    for _ in range(4):  # the window is short: each round is another chance to fall in it
        arguments = {"run_id": run_id, "graph_digest": plan.graph_digest}
        resumed = json.loads(text(call(project, "workflow_resume", arguments)))
        try:
            waited = json.loads(text(call(project, "workflow_wait", {"run_id": run_id, "timeout_seconds": 0})))
            assert waited["lifecycle"] == "running", waited  # not the ended run it was before the resume
            cancelled = json.loads(text(call(project, "workflow_cancel", {"run_id": run_id, "timeout_seconds": 10})))
            assert cancelled["cancellation_state"] == "acknowledged", cancelled
        finally:
            if not wait_gone(resumed["owner_pid"], timeout=10):
                (project.root / "go").write_text("")
                assert wait_gone(resumed["owner_pid"])


def test_a_file_name_no_file_system_can_hold_is_refused_by_name_not_with_a_traceback(project: Project) -> None:
    for tool, file in (
        ("workflow_plan", "a\x00b.ipynb"),
        ("workflow_validate", "a\x00b.py"),
        ("workflow_validate", "a\x00b.graph.yaml"),
    ):
        refusal = error(project, tool, {"file": file})
        assert refusal.startswith("error[") and "holds a NUL byte" in refusal, (tool, refusal)
        assert "failed unexpectedly" not in refusal


MANY = star(
    'return workflow(name = "many", nodes = [command(name = "n" + ("00" + str(i))[-3:], argv = ["true"], timeout_seconds = 30,'
    " max_output_bytes = 64) for i in range(400)])"
)


def test_a_run_of_many_nodes_is_answered_a_page_of_nodes_at_a_time(project: Project) -> None:
    """docs/mcp.md: answers are bounded. 400 nodes' status is ~60,000 characters of JSON: each of
    workflow_status, workflow_wait and workflow_result answers a page of them, counts every node's
    state, and names the node_offset that reads on; the pages put together are the whole run."""
    project.write("many.star", MANY)
    run_id = project.create_run(project.plan("many.star"))
    asyncio.run(project.service.execute(run_id))
    names = [f"n{i:03d}" for i in range(400)]
    for tool in ("workflow_status", "workflow_wait", "workflow_result"):
        seen: list[str] = []
        offset: int | None = 0
        while offset is not None:
            raw = text(call(project, tool, {"run_id": run_id[:13], "node_offset": offset}))
            answer = json.loads(raw)
            assert len(raw) < 45_000, (tool, len(raw))
            where = answer["nodes_page"]
            assert where["total"] == 400 and where["shown"] == {"success": 400} and where["node_offset"] == offset
            seen += answer["nodes"]
            offset = where["next_node_offset"]
            if offset is not None:
                assert where["how"] == f"call {tool} with run_id={run_id!r} and node_offset={offset}"
        assert seen == names, tool
    beyond = json.loads(text(call(project, "workflow_status", {"run_id": run_id, "node_offset": 500})))
    assert beyond["nodes"] == {} and beyond["nodes_page"]["next_node_offset"] is None


def test_a_run_of_few_nodes_is_answered_whole_as_the_cli_answers_it(project: Project) -> None:
    project.write("one.star", ONE)
    run_id = project.create_run(project.plan("one.star"))
    asyncio.run(project.service.execute(run_id))
    for tool in ("workflow_status", "workflow_result"):
        answer = json.loads(text(call(project, tool, {"run_id": run_id})))
        assert "nodes_page" not in answer and list(answer["nodes"]) == ["hi"], tool
    assert "node_offset" in error(project, "workflow_status", {"run_id": run_id, "node_offset": -1})


NEEDS_SCORE = ONE.replace("inputs = {}", 'inputs = {"score": input.integer()}')
NEEDS_TARGET = "from rho_notebook.script import run_command\n\nINPUTS = {'target': {'type': 'path', 'required': True}}\n\nrun_command(['true'])\n"


def test_a_missing_input_is_asked_for_in_the_tools_inputs_argument_not_with_a_flag(project: Project) -> None:
    """The CLI says ``pass --input 'score=JSON'``; a tool takes ``inputs``, so it says that, for
    every form that declares inputs, and the finding names the input for a client to read."""
    project.write("need.star", NEEDS_SCORE)
    project.write("need.py", NEEDS_TARGET)
    for tool, file, key in [
        ("workflow_validate", "need.star", "score"),
        ("workflow_plan", "need.star", "score"),
        ("workflow_plan", "need.py", "target"),
    ]:
        [found] = json.loads(error(project, tool, {"file": file}))["diagnostics"]
        assert found["rule"] == "input.missing" and found["input"] == key, (tool, file, found)
        assert found["message"].endswith(f'; pass it in the inputs argument: {{"{key}": VALUE}}'), found
        assert "--input" not in found["message"], found
    planned = json.loads(text(call(project, "workflow_plan", {"file": "need.star", "inputs": {"score": 3}})))
    assert planned["plan_id"]


# -- a long output, paged ------------------------------------------------------------------------------

LONG = star(
    'return workflow(name = "long", nodes = [command(name = "big", argv = ["python3", "-c", '
    "\"import sys; sys.stdout.write('x' + 'é' * 1500000 + 'end')\"], timeout_seconds = 60, "
    "max_output_bytes = 4000000)])"
)


def test_a_long_output_is_read_a_piece_at_a_time_and_paged_without_joining_it(project: Project) -> None:
    """3 MB of output (two-byte characters, one byte off so pieces split characters): ``logs``
    yields it in pieces of at most LOG_PIECE_BYTES, decoded whole, and workflow_logs pages it from
    those pieces; every window is the text's own, and the pages joined are the text."""
    from rho_notebook.service.reading import LOG_PIECE_BYTES

    project.write("long.star", LONG)
    run_id = project.create_run(project.plan("long.star"))
    assert asyncio.run(project.service.execute(run_id)).outcome == "success"
    whole = "x" + "é" * 1_500_000 + "end"

    async def pieces() -> list[str]:
        return [text async for _, text in project.service.logs(run_id, "big", streams=("stdout",))]

    read = asyncio.run(pieces())
    assert len(read) == 3 and "".join(read) == whole  # 3,000,004 bytes in pieces of 1 MiB
    assert all(len(piece.encode()) <= LOG_PIECE_BYTES for piece in read)
    assert "\ufffd" not in "".join(read)  # a character split between two reads is kept whole
    for offset in (0, 1_048_000, len(whole) - 5, len(whole) + 10):
        answer = json.loads(text(call(project, "workflow_logs", {"run_id": run_id, "node": "big", "offset": offset})))
        assert answer["total"] == len(whole)
        assert answer["text"].split("\n[... truncated: ")[0] == whole[offset : offset + 20_000]
        assert answer["next_offset"] == (offset + 20_000 if offset + 20_000 < len(whole) else None)


@pytest.mark.parametrize("cuts", [[], [0], [3], [1, 2, 3], [5, 5, 9], [10, 40, 41, 42]])
@pytest.mark.parametrize(("offset", "limit"), [(0, 7), (3, 4), (9, 100), (45, 3), (60, 5)])
def test_a_window_of_pieces_is_the_window_of_their_text(cuts: list[int], offset: int, limit: int) -> None:
    from rho_notebook.mcp._paging import page, page_pieces

    whole = "".join(chr(0x41 + i % 26) for i in range(50))
    bounds = [0, *sorted(cut for cut in cuts if cut <= len(whole)), len(whole)]
    split = [whole[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]

    async def pieces() -> Any:
        for piece in split:
            yield piece

    how = "read on at {offset}"
    paged = asyncio.run(page_pieces(pieces(), offset=offset, limit=limit, how=how))
    assert paged == page(whole, offset=offset, limit=limit, how=how)
