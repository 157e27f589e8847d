"""The magics in a real IPython shell: cells, verbs, diagnostics at cell lines, completion."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import pytest

from rho_notebook.cli.main import build_parser
from rho_notebook.service.cell_args import options_of, verb_parser
from tests.conftest import Project
from tests.kernel.helpers import C, cell, ok, owner_pid, status_json, usage_error, wait_until, workflow_cell

HELLO = workflow_cell(
    "hello",
    f"""        command(name = "greet", argv = ["echo", "hello", inputs["who"]], {C}),
        command(name = "count", argv = ["python3", "-c", "print('{{\\"n\\": 3}}')"],
                output = schema.stdout_json(schema.record({{"n": schema.integer()}})), needs = ["greet"], {C}),
""",
    inputs='{"who": input.string(default = "world")}',
)

SLOW = workflow_cell(
    "slow",
    f"""        command(name = "first", argv = ["true"], {C}),
        shell(name = "wait", executable = "sh", arguments = ["-c"], command = "sleep 3; echo waited",
              needs = ["first"], {C}),
""",
)

LONG = workflow_cell(
    "long",
    f"""        shell(name = "long", executable = "sh", arguments = ["-c"], command = "sleep 30", {C}),
        command(name = "after", argv = ["true"], needs = ["long"], {C}),
""",
)


def _text(captured: Any) -> str:
    return "\n".join(str(o.data.get("text/plain", "")) for o in captured.outputs)


def test_load_registers_and_unload_removes(ip: Any) -> None:
    magics = ip.magics_manager.magics
    assert "workflow" in magics["line"] and {"workflow", "star", "agent"} <= set(magics["cell"])
    matchers = [
        m for m in ip.Completer.custom_matchers if getattr(m, "matcher_identifier", "") == "rho_notebook.workflow"
    ]
    assert len(matchers) == 1
    ip.run_line_magic("load_ext", "rho_notebook")  # already loaded: nothing doubles
    assert (
        len(
            [m for m in ip.Completer.custom_matchers if getattr(m, "matcher_identifier", "") == "rho_notebook.workflow"]
        )
        == 1
    )
    ip.run_line_magic("unload_ext", "rho_notebook")
    assert "workflow" not in magics["line"] and not {"workflow", "star", "agent"} & set(magics["cell"])
    assert not [
        m for m in ip.Completer.custom_matchers if getattr(m, "matcher_identifier", "") == "rho_notebook.workflow"
    ]
    ip.run_line_magic("load_ext", "rho_notebook")


def test_workflow_cell_validates_and_shows_the_graph(ip: Any, ws: Project) -> None:
    report, captured = ok(ip, HELLO)
    text = repr(report)
    assert text.startswith("workflow hello: valid\ndigest   sha256:")
    assert 'inputs   who="world"' in text and "greet" in text and "needs greet" in text
    [graph] = captured.outputs
    assert graph.data["text/plain"] == "graph of workflow hello: 2 nodes, 1 edge"
    # static viewers get the widget's picture of the DAG (PNG and SVG), and no HTML: untrusted
    # JupyterLab would show that, sanitized, instead of the PNG
    svg = graph.data["image/svg+xml"]
    assert svg.startswith("<svg") and ">greet</text>" in svg and ">count</text>" in svg
    assert graph.data["image/png"] and "text/html" not in graph.data
    assert "application/vnd.jupyter.widget-view+json" in graph.data
    assert ws.stored_plans() == []  # validation stores nothing


def test_graph_without_widgets_falls_back_to_the_html_table(ip: Any, monkeypatch: Any) -> None:
    from rho_notebook.notebook import display

    monkeypatch.setattr(display, "widgets_module", lambda: None)
    _, captured = ok(ip, HELLO)
    [graph] = captured.outputs
    assert graph.data["text/plain"] == "graph of workflow hello: 2 nodes, 1 edge"
    assert "application/vnd.jupyter.widget-view+json" not in graph.data  # the picture needs no widgets
    assert ">greet</text>" in graph.data["image/svg+xml"] and graph.data["image/png"]


def test_cell_inputs_are_taken_literally(ip: Any) -> None:
    ip.user_ns["x"] = "EXPANDED"
    report, _ = ok(ip, HELLO.replace("%%workflow hello", "%%workflow hello --input 'who=\"{x} $x\"'"))
    assert 'who="{x} $x"' in repr(report)


def test_diagnostics_point_at_cell_lines(ip: Any) -> None:
    broken = "%%workflow broken\ndef build(inputs):\n    return workflow(name = 'broken', nodes = [\n\nWORKFLOW = define(inputs = {}, build = build)\n"
    number = ip.execution_count
    message = usage_error(ip, broken)
    assert f"cell In[{number}]:5:10: error[starlark.syntax]" in message  # line 5 of the cell, counting %%workflow
    bad_need = workflow_cell("needs", f'        command(name = "a", argv = ["true"], needs = ["ghost"], {C}),\n')
    number = ip.execution_count
    message = usage_error(ip, bad_need)
    assert f"cell In[{number}]:4:" in message and "ghost" in message
    assert "_worker" not in message and ".py" not in message


def test_name_must_equal_the_built_workflow(ip: Any) -> None:
    message = usage_error(ip, HELLO.replace("%%workflow hello", "%%workflow greeting"))
    assert "%%workflow greeting" in message and "'hello'" in message
    message = usage_error(ip, "%workflow run greeting --yes")
    assert "no %%workflow greeting" in message or "neither" in message


def test_unnamed_cell_is_held_under_its_workflow_name(ip: Any) -> None:
    report, _ = ok(ip, HELLO.replace("%%workflow hello", "%%workflow"))
    assert repr(report).startswith("workflow hello: valid")
    report, _ = ok(ip, "%workflow validate hello --input 'who=\"you\"'")
    assert 'who="you"' in repr(report)


def test_star_modules_load_and_their_errors_point_at_their_cell(ip: Any) -> None:
    ok(
        ip,
        '%%star //lib/common.star\ndef echo(name, text):\n    return command(name = name, argv = ["echo", text], timeout_seconds = 5, max_output_bytes = 100)\n',
    )
    uses = '%%workflow uses\nload("//lib/common.star", "echo")\n\ndef build(inputs):\n    return workflow(name = "uses", nodes = [echo("hi", "there")])\n\nWORKFLOW = define(inputs = {}, build = build)\n'
    report, _ = ok(ip, uses)
    assert "hi" in repr(report)
    number = ip.execution_count
    ok(ip, "%%star //lib/common.star\ndef echo(name, text):\n    return 1 + 'a'\n")
    message = usage_error(ip, uses)
    assert "error[starlark.error]" in message
    assert ip.execution_count > number


def test_agent_cells_are_the_first_catalog_root(ip: Any) -> None:
    definition = "%%agent helper\n---\ndescription: Helps\ntools: [read_file, grep]\n---\nBe brief.\n"
    report, _ = ok(ip, definition)
    assert repr(report).startswith("agent helper: Helps")
    number = ip.execution_count
    message = usage_error(ip, "%%agent helper\n---\ndescription: Helps\ntools: bogus\n---\nBody.\n")
    assert f"cell In[{number}]:4:1: error[agent.tools]" in message  # line 4 of the cell: the tools key
    message = usage_error(ip, "%%agent helper\n---\nid: other\ndescription: x\n---\nBody.\n")
    assert "helper" in message and "other" in message
    ok(ip, definition)
    flow = workflow_cell(
        "ask", f'        agent(name = "q", agent = "helper", prompt = "hi", access = "read_only", {C}),\n'
    )
    ok(ip, flow)
    ok(ip, "%workflow plan ask --output json")
    plan = json.loads(ok(ip, "%workflow plan ask --output json")[1].stdout)
    [item] = [a for a in plan["authority"] if a["kind"] == "agent"]
    assert "from notebook" in item["detail"]


def test_run_returns_at_once_then_await_and_outputs(ip: Any, ws: Project) -> None:
    ok(ip, SLOW)
    _, captured = ok(ip, "run = %workflow run slow --yes")
    handle = ip.user_ns["run"]
    assert not handle.done()  # the cell returned while the 3 s node runs
    assert "digest sha256:" in captured.stdout
    text = _text(captured)
    assert f"run {handle.run_id} of workflow slow: running in its own process" in text
    assert f"reattach with: %workflow show {handle.run_id[:13]}" in text
    live = status_json(ws, handle.run_id)  # a terminal sees the notebook's run live
    assert live["lifecycle"] == "running"
    assert owner_pid(ws.home, handle.run_id) not in (None, 0, os.getpid())  # an owner process, not the kernel
    ok(ip, "final = await run")
    assert ip.user_ns["final"].outcome == "success"
    report, _ = ok(ip, f"%workflow status {handle.run_id[:13]}")
    assert "lifecycle  completed   outcome success" in repr(report)
    _, captured = ok(ip, f"%workflow status {handle.run_id} --output json")
    assert json.loads(captured.stdout) == status_json(ws, handle.run_id)
    _, captured = ok(ip, f"%workflow result {handle.run_id} --output json")
    cli = ws.cli("result", handle.run_id, "--output", "json")
    assert json.loads(captured.stdout) == json.loads(cli.stdout)
    assert json.loads(captured.stdout)["nodes"]["wait"]["state"] == "success"
    _, captured = ok(ip, f"%workflow logs {handle.run_id} wait --stream stdout")
    assert captured.stdout == "waited\n"


def test_logs_that_print_nothing_say_why_on_stderr(ip: Any) -> None:
    silent = workflow_cell(
        "silent",
        f'        command(name = "a", argv = ["false"], {C}),\n'
        f'        command(name = "b", argv = ["echo", "b"], needs = ["a"], {C}),\n',
    )
    ok(ip, silent)
    ok(ip, "run = %workflow run silent --yes --wait")
    _, captured = ok(ip, "%workflow logs {run.data.run_id} a")
    assert captured.stdout == "" and captured.stderr == "node a wrote nothing (attempt 1; failure)\n"
    _, captured = ok(ip, "%workflow logs {run.data.run_id} b --stream stdout --follow")
    assert captured.stdout == "" and captured.stderr == "node b wrote nothing to stdout (it has not run; blocked)\n"


def test_a_target_that_is_no_cell_is_a_workflow_file(ip: Any, ws: Project) -> None:
    message = usage_error(ip, "%workflow validate steps.py")  # a script file that is not there
    assert message.endswith("steps.py: error[load.missing]: steps.py: no such file"), message
    message = usage_error(ip, "%workflow plan triage.graph.yaml")
    assert message.endswith("triage.graph.yaml: no such file"), message
    (ws.root / "saved.ipynb").write_text("{}")
    message = usage_error(ip, "%workflow validate saved.ipynb")
    assert message == (
        "%workflow validate takes a workflow of this notebook or a workflow file, not a saved notebook; "
        "in a terminal: rho-notebook validate saved.ipynb"
    )
    message = usage_error(ip, "%workflow validate nonesuch")
    assert message.endswith("nor a workflow file (FILE.star, SCRIPT.py or FILE.graph.yaml)"), message


def test_a_malformed_input_on_a_verb_line_is_the_flags_mistake(ip: Any) -> None:
    ok(ip, HELLO)
    for line in ("%workflow validate hello --input who", "%workflow run hello --input who --yes"):
        message = usage_error(ip, line)
        assert message.startswith("--input 'who' must have the form KEY=VALUE"), message  # as on a cell's line
        assert "not valid" not in message


@pytest.mark.parametrize("magic", ["star", "py", "script", "flow", "graph", "agent"])
def test_help_on_a_cell_magics_line_prints_the_help_without_a_traceback(ip: Any, magic: str) -> None:
    result, captured = cell(ip, f"%%{magic} --help\nx = 1\n")
    assert result.error_in_exec is None, result.error_in_exec
    assert captured.stdout.startswith(f"usage: %%{magic} [-h]") and "Traceback" not in captured.stdout


@pytest.mark.parametrize("seconds", ["nan", "-5", "inf"])
def test_cancel_wait_takes_a_finite_number_0_or_more(ip: Any, seconds: str) -> None:
    message = usage_error(ip, f"%workflow cancel 01a2 --wait {seconds}")  # checked before the run is looked up
    assert message.startswith(f"%workflow cancel: argument --wait: '{seconds}': give a finite number, 0 or more\n")


@pytest.mark.parametrize("limit", ["0", "-3", "x"])
def test_runs_limit_takes_a_whole_number_1_or_more(ip: Any, limit: str) -> None:
    """The CLI's own argument type (service/flags.positive_int): --limit 0 listed every run."""
    message = usage_error(ip, f"%workflow runs --limit {limit}")
    assert message.startswith(f"%workflow runs: argument --limit: '{limit}'"), message


def test_validate_with_inputs_says_how_to_run_with_them(ip: Any) -> None:
    ok(ip, HELLO)
    report, _ = ok(ip, "%workflow validate hello --input 'who=\"a b\"'")
    assert repr(report).endswith("\nnext     %workflow run hello --input 'who=\"a b\"' --yes")
    report, _ = ok(ip, "%workflow validate hello")
    assert repr(report).endswith("\nnext     %workflow run hello --yes")
    script = "%%script probe\nINPUTS = {'n': {'type': 'integer', 'required': False, 'default': 1}}\n"
    ok(ip, script + "from rho_notebook.script import get_inputs\nn = get_inputs()['n']\n")
    report, _ = ok(ip, "%workflow validate probe --input n=2")
    assert repr(report).endswith("\nnext     %workflow run probe --input n=2 --yes")


def test_run_without_yes_shows_the_digest_and_starts_nothing(ip: Any, ws: Project) -> None:
    ok(ip, HELLO)
    result, captured = ok(ip, "%workflow run hello")
    assert result is None
    assert "to run it, confirm the digest: %workflow run" in _text(captured)
    assert not (ws.home / "workflows" / "runs").exists()


def test_run_wait_prints_progress(ip: Any) -> None:
    ok(ip, HELLO)
    report, captured = ok(ip, "%workflow run hello --yes --wait --input 'who=\"notebook\"'")
    assert "greet" in captured.stdout and "run completed: success" in captured.stdout
    assert "outcome success" in repr(report)
    _, captured = ok(ip, "%workflow plans")
    assert "hello" in captured.stdout or "hello" in _text(captured)


def test_cancel_and_resume_verbs(ip: Any, ws: Project) -> None:
    ok(ip, LONG)
    ok(ip, "run = %workflow run long --yes")
    handle = ip.user_ns["run"]
    wait_until(lambda: handle.state().nodes["long"].state.value == "running")
    assert "still running (this kernel follows it)" in usage_error(ip, f"%workflow resume {handle.run_id} --yes")
    _, captured = ok(ip, f"%workflow cancel {handle.run_id[:13]}")
    assert f"cancel requested for run {handle.run_id}: acknowledged by the owner" in captured.stdout
    assert handle.wait(10).outcome == "cancellation"
    _, captured = ok(ip, f"%workflow cancel {handle.run_id[:13]} --output json")  # JSON on request
    assert json.loads(captured.stdout)["cancellation_state"] == "already_completed"
    message = usage_error(ip, f"%workflow resume {handle.run_id}")
    assert "confirmation" in message and handle.graph_digest in message
    ok(ip, f"resumed = %workflow resume {handle.run_id} --yes")
    resumed = ip.user_ns["resumed"]
    wait_until(lambda: resumed.state().nodes["long"].state.value == "running")
    resumed.cancel()
    assert resumed.wait(10).outcome == "cancellation"
    assert resumed.state().nodes["long"].attempt == 2


def test_user_mistakes_are_usage_errors(ip: Any, ws: Project) -> None:
    assert "invalid choice" in usage_error(ip, "%workflow frobnicate")
    assert "required" in usage_error(ip, "%workflow status")
    # the way to list the runs is the notebook's own verb, not the terminal's command
    assert usage_error(ip, "%workflow status 0000").endswith("no run matches '0000'; list them with %workflow runs")
    assert "floats are not supported" in usage_error(ip, "%workflow validate hello --input who=1.5")
    assert "neither" in usage_error(ip, "%workflow validate nothing-here")
    ok(ip, HELLO)
    _, captured = ok(ip, "%workflow plan hello --output json")
    plan_id = json.loads(captured.stdout)["plan_id"]
    assert "frozen" in usage_error(ip, f"%workflow run {plan_id} --input 'who=\"x\"'")
    # a misspelled workflow is answered with the one meant, whether it could be a file or a plan
    assert "(its workflows: hello; did you mean 'hello'?) nor a workflow file" in usage_error(
        ip, "%workflow validate helo"
    )
    assert "(its workflows: hello; did you mean 'hello'?) nor a plan ID" in usage_error(ip, "%workflow run helo")
    assert "close the quote" in usage_error(ip, "%workflow run 'hello")
    result, captured = cell(ip, "%workflow run --help")
    assert result.error_in_exec is None and "--approval-timeout" in captured.stdout
    # export's usage says what it takes, not argparse's "[NOTEBOOK.ipynb] DIR [[NOTEBOOK.ipynb] DIR ...]"
    assert usage_error(ip, "%workflow export").endswith(
        "usage: %workflow export [-h] [--workflow NAME] [NOTEBOOK.ipynb] DIR"
    )


def test_export_and_hub(ip: Any, ws: Project) -> None:
    ok(ip, "%%star //lib/util.star\nX = 1\n")
    ok(ip, HELLO)
    report, _ = ok(ip, "%workflow export out")
    assert (ws.root / "out" / "hello.star").read_text().startswith("# %%workflow hello\n")
    assert (ws.root / "out" / "lib" / "util.star").read_text() == "# %%star //lib/util.star\nX = 1\n"
    assert "hello.star" in repr(report)
    # //lib/util.star is under out/, not the workspace root: the way to plan it says so
    said = f"plan with: mkdir -p {ws.root / 'out' / '.rho'} && cd {ws.root / 'out'} && rho-notebook plan hello.star"
    assert said in repr(report), repr(report)
    _, captured = ok(ip, "%workflow hub")
    text = _text(captured)
    assert "workflow   hello" in text and "module     //lib/util.star" in text


def test_every_cli_flag_is_a_magic_flag() -> None:
    cli = options_of(build_parser())
    magic = options_of(verb_parser())
    for verb in ("validate", "plan", "run", "resume", "status", "cancel", "runs", "plans", "result", "logs", "approve"):
        # run's --workflow selects a notebook cell and --output-notebook copies one; --detach and --run-id
        # are the terminal's (a cell never blocks on a run unless --wait, and a notebook names its runs
        # by their handles); --json is CAO's spelling of --output json, for the terminal (docs/running.md)
        terminal_only = {"--workflow", "--output-notebook", "--detach", "--run-id", "--json"}
        missing = set(cli[verb]) - set(magic[verb]) - terminal_only
        assert not missing, f"%workflow {verb} lacks {sorted(missing)}"


def _complete(ip: Any, text: str) -> set[str]:
    from IPython.core.completer import provisionalcompleter

    with provisionalcompleter():
        return {c.text for c in ip.Completer.completions(text, len(text))}


def test_completion(ip: Any, ws: Project) -> None:
    ok(ip, HELLO)
    assert _complete(ip, "%workflow sta") == {"status"}
    assert {"resume", "result"} <= _complete(ip, "r = %workflow re")
    assert "hello" in _complete(ip, "%workflow run he")
    assert "hello" in _complete(ip, "%%workflow he")
    assert {"--yes", "--mode", "--wait"} <= _complete(ip, "%workflow run hello --")
    assert _complete(ip, "%workflow run hello --mode s") == {"supervised"}
    _, captured = ok(ip, "%workflow plan hello --output json")
    plan_id = json.loads(captured.stdout)["plan_id"]
    assert plan_id in _complete(ip, f"%workflow run {plan_id[:8]}")
    ok(ip, f"run = %workflow run {plan_id} --yes --wait")
    run_id = json.loads(ws.cli("runs", "--output", "json").stdout)[0]["run_id"]
    assert run_id in _complete(ip, f"%workflow status {run_id[:10]}")
    assert _complete(ip, f"%workflow logs {run_id} c") == {"count"}


def test_completion_knows_every_value_flag_and_choice() -> None:
    from rho_notebook.notebook.completion import CompletionSource, complete_line

    source = CompletionSource(
        workflows=lambda: ["hello"],
        plan_ids=lambda: ["01aa-plan"],
        run_ids=lambda: ["01bb-run", "01cc-run"],
        nodes=lambda run: ["greet"],
    )

    def complete(text: str) -> set[str]:
        found = complete_line(text, source)
        return set(found.completions) if found is not None else set()

    assert complete("%workflow runs --state needs_d") == {"needs_decision"}
    assert complete("%workflow cancel 01bb-run --output j") == {"json"}
    assert complete("%workflow diff 01bb-run 01cc-run --output ") == {"text", "json"}
    # the word after a flag that takes a value is not the positional argument
    assert complete("%workflow resume --executor local 01") == {"01bb-run", "01cc-run"}
    assert complete("%workflow cancel --wait 5 01") == {"01bb-run", "01cc-run"}
    assert complete("%workflow resume --decide a=rerun 01b") == {"01bb-run"}
    assert complete("%workflow fork 01c") == {"01cc-run"}
    assert complete("%workflow try greet --from 01c") == {"01cc-run"}
    assert complete("%workflow run hello --executor d") == {"dask"}


@pytest.mark.parametrize(
    "verb",
    [
        "validate",
        "plan",
        "run",
        "resume",
        "status",
        "cancel",
        "runs",
        "plans",
        "result",
        "logs",
        "approve",
        "export",
        "hub",
    ],
)
def test_every_verb_has_help(verb: str) -> None:
    parser = verb_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[verb]
    assert sub.format_help()


def test_supervised_launches_wait_for_a_decision_made_in_the_notebook(ip: Any) -> None:
    ok(ip, HELLO)
    ok(ip, "run = %workflow run hello --yes --mode supervised")
    handle = ip.user_ns["run"]
    wait_until(lambda: bool(handle.pending_approvals()))
    _, captured = ok(ip, f"%workflow approve {handle.run_id}")
    [request] = handle.pending_approvals()
    assert f"request {request.request_id}  node greet" in captured.stdout
    _, captured = ok(ip, f"%workflow approve {handle.run_id} {request.request_id[:13]} --comment fine")
    assert captured.stdout.startswith("approve by ")
    wait_until(lambda: any(p.node == "count" for p in handle.pending_approvals()))
    [second] = handle.pending_approvals()
    ok(ip, f"%workflow approve {handle.run_id} {second.request_id} --deny")
    final = handle.wait(30)
    assert final.nodes["greet"].state.value == "success"
    assert final.nodes["count"].state.value == "denial" and final.outcome == "denial"


def test_cells_run_without_history_are_named_by_their_magic_line(ip: Any) -> None:
    from IPython.core.error import UsageError
    from IPython.utils.capture import capture_output

    with capture_output():
        ip.run_cell("%%agent helper\n---\ndescription: Helps\n---\nBody.\n", store_history=False)
        result = ip.run_cell(
            "%%workflow broken\ndef build(inputs):\n    return workflow(name = 'broken', nodes = [\n\nWORKFLOW = define(inputs = {}, build = build)\n",
            store_history=False,
        )
    assert isinstance(result.error_in_exec, UsageError)
    assert "cell %%workflow broken:5:10: error[starlark.syntax]" in str(result.error_in_exec)
    with capture_output():
        result = ip.run_cell("%%agent helper\n---\ndescription: Helps\ntools: bogus\n---\nBody.\n", store_history=False)
    assert "cell %%agent helper:4:1: error[agent.tools]" in str(result.error_in_exec)


def test_run_and_plan_ids_expand_like_ipython_only_in_id_positions(ip: Any, ws: Project) -> None:
    """``{expr}`` and ``$name`` are evaluated in the user namespace where a verb takes a RUN_ID or
    PLAN_ID; ``--input`` values and cell bodies stay literal."""
    ok(ip, HELLO)
    ip.user_ns["plan"] = json.loads(ok(ip, "%workflow plan hello --output json")[1].stdout)["plan_id"]
    ok(ip, "run = %workflow run $plan --yes")
    handle = ip.user_ns["run"]
    assert handle.wait(30).outcome == "success"
    report, _ = ok(ip, "%workflow status {run.run_id}")
    assert f"run        {handle.run_id}" in repr(report) or handle.run_id in repr(report)
    ip.user_ns["rid"] = handle.run_id
    _, captured = ok(ip, "%workflow result $rid --output json")
    assert json.loads(captured.stdout)["run_id"] == handle.run_id
    _, captured = ok(ip, "%workflow logs {rid[:13]} greet --stream stdout")
    assert captured.stdout == "hello world\n"
    ip.user_ns["x"] = "EXPANDED"
    report, _ = ok(ip, "%workflow validate hello --input 'who=\"{x} $x\"'")
    assert 'who="{x} $x"' in repr(report)  # inputs stay literal
    message = usage_error(ip, "%workflow status {nothing_here.run_id}")
    assert "{nothing_here.run_id}" in message and "nothing_here" in message and "no run matches" not in message
    ip.user_ns.pop("rid", None)
    ip.user_ns.pop("plan", None)


def test_missing_required_input_names_it_and_how_to_pass_it(ip: Any) -> None:
    needy = workflow_cell(
        "needy",
        f'        command(name = "a", argv = ["echo", inputs["who"]], {C}),\n',
        inputs='{"who": input.string()}',
    )
    result, captured = cell(ip, needy)
    message = str(result.error_in_exec)
    assert "UsageError" in type(result.error_in_exec).__name__
    assert "not valid" not in message and "problem" not in message
    assert "'who'" in message and "%%workflow needy --input 'who=JSON'" in message
    assert captured.stdout == "" and captured.outputs == []
    assert captured.stderr.strip() == f"UsageError: {message}"  # nothing but the message: no empty output


def test_a_missing_required_input_of_a_verb_names_the_line_to_run_again(ip: Any) -> None:
    needy = workflow_cell(
        "needy",
        f'        command(name = "a", argv = ["echo", inputs["who"], inputs["what"]], {C}),\n',
        inputs='{"who": input.string(), "what": input.string(default = "x")}',
    )
    cell(ip, needy)  # refused: the cell gives no value for who
    message = usage_error(ip, "%workflow run needy --input what=y --yes")
    assert message.endswith("pass it on the magic line: %workflow run needy --input what=y --yes --input 'who=JSON'")
    message = usage_error(ip, "%workflow plan needy")
    assert message.endswith("pass it on the magic line: %workflow plan needy --input 'who=JSON'")
    # try takes no --input: the value comes from the cell's magic line
    message = usage_error(ip, "%workflow try a")
    assert message.endswith("pass it on the magic line: %%workflow needy --input 'who=JSON'")


def test_a_misspelled_verb_or_choice_is_given_the_one_it_most_likely_meant(ip: Any) -> None:
    """One rewrite for both front ends (service/flags.with_suggestion)."""
    message = usage_error(ip, "%workflow stauts 01a2")
    assert message.startswith("%workflow: argument VERB: invalid choice: 'stauts' (choose from "), message
    assert "); did you mean 'status'?\nusage: %workflow" in message
    assert "did you mean" not in usage_error(ip, "%workflow frobnicate")
