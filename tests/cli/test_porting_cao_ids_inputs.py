"""Issue 33, points 2 and 3: CAO's own script examples (/work/shared/seeds/cao-workflows.txt) run
through the real CLI, offline, their agent steps answered by a local OpenAI-compatible server.

Point 2: the seed's fan-out ids (``step_id=f"summarize:{name}"``) are step ids; such a step runs,
is shown by ``status``, ``result`` and ``logs``, and is replayed on ``resume``. Point 3: the seed's
``summarize.py`` with ``"type": "int"`` and ``--input target_file=/abs/path`` (a bare word) plans
and runs; a bare word for an integer input is refused, naming the input and its type.

The adaptations every test makes, each a deliberate difference named in docs/scripts.md ("Compared
with CAO's script tier"): ``from rho_notebook.script import ...`` for ``from cao_workflow import
...``; ``run_step(AGENT, PROMPT)`` for ``run_step(PROVIDER, PROFILE, PROMPT)`` (our agent
definition carries its provider); and a step that fails returns a handle with ``ok`` False rather
than raising ``ShimError``, so the seed's per-unit ``except ShimError`` becomes a test of ``h.ok``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest

from rho_notebook.store.journal import read_journal
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.cli.mcp_session import McpSession
from tests.conftest import REPO, Project

Serve = Callable[..., ScriptedServer]
ENV = {KEY_ENV: SECRET}

FANOUT = """\
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import sys
from rho_notebook.script import run_step, emit_output

some_items = ["report.md", "notes.txt", "docs/guide@v2.md"]


def summarize(name):
    h = run_step("reviewer",
                 f"Summarize {name}. Return the summary only.",
                 step_id=f"summarize:{name}")   # STABLE, explicit step_id (required)
    return name, (h.output if h.ok else f"ERROR: {h.message}")   # per-unit tolerance


items = sorted(some_items)                            # sorted() -> stable item->step_id map
with ThreadPoolExecutor(max_workers=2) as pool:       # 2 is a good default for claude_code
    results = dict(pool.map(summarize, items))
emit_output(results)
if not Path("go").exists():                           # the test's interruption (not in the seed)
    sys.exit(3)
"""

SUMMARIZE = (REPO / "docs" / "examples" / "porting" / "cao_summarize.py").read_text()
"""The seed's ``summarize.py`` as docs/porting.md ports it, read from its file (one copy)."""


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve([replies...])`` starts a scripted server on 127.0.0.1, stopped after the test."""
    started: list[ScriptedServer] = []

    def start(script: list[Any], **kwargs: Any) -> ScriptedServer:
        server = ScriptedServer(script, **kwargs).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


def summary(request: Recorded) -> Reply:
    """The reviewer's answer: the prompt's first line, as a summary of it."""
    prompt = request.body["messages"][-1]["content"]
    return OPENAI.answer("summary of: " + prompt.splitlines()[0])


def setup(project: Project, server: ScriptedServer, name: str, text: str) -> None:
    project.write(name, text)
    shutil.copytree(REPO / "examples" / "scripts" / "agents", project.root / "agents")
    write_settings_for(project.home, server)


def run_id_of(done: Any) -> str:
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout + done.stderr
    return str(lines[0]["run_id"])


def journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    return list(read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events)


def status(project: Project, run_id: str) -> dict[str, Any]:
    done = project.cli("status", run_id, "--output", "json")
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


KEYS = ["summarize:docs/guide@v2.md", "summarize:notes.txt", "summarize:report.md"]


def test_the_seeds_fanout_ids_run_show_and_replay_on_resume(project: Project, serve: Serve) -> None:
    """Seed section "Fan-out (concurrency)": its code, adapted as the module docstring says, plus
    an exit after ``emit_output`` while the file ``go`` is missing, so that there is a run to
    resume. One item holds ``/`` and ``@`` (``summarize:docs/guide@v2.md``, the ``a:b@c/d`` form)."""
    server = serve([summary], repeat_last=True)
    setup(project, server, "fanout.py", FANOUT)

    checked = project.cli("validate", "fanout.py", env=ENV)
    assert checked.returncode == 0 and "0 errors" in checked.stdout, checked.stdout + checked.stderr
    first = project.cli("run", "fanout.py", "--yes", "--output", "jsonl", env=ENV)
    assert first.returncode == 1, first.stdout + first.stderr  # the script exited 3
    run_id = run_id_of(first)
    assert len(server.requests) == 3

    shown = status(project, run_id)
    assert sorted(shown["nodes"]) == KEYS
    assert {shown["nodes"][key]["state"] for key in KEYS} == {"success"}
    # the store keeps one folder per key: '/' written as %2F, ':' and '@' as they are
    nodes = project.home / "workflows" / "runs" / run_id / "nodes"
    assert sorted(p.name for p in nodes.iterdir()) == [
        "summarize:docs%2Fguide@v2.md",
        "summarize:notes.txt",
        "summarize:report.md",
    ]
    logs = project.cli("logs", run_id, "summarize:docs/guide@v2.md")  # an agent step writes no stdout
    assert logs.returncode == 0, logs.stderr
    unknown = project.cli("logs", run_id, "summarize:docs")
    assert unknown.returncode != 0, "the node is found by its whole key, not by a prefix or a folder"

    (project.root / "go").write_text("")
    again = project.cli("resume", run_id, "--yes", env=ENV)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(server.requests) == 3, "a replayed step asks nothing"
    replayed = sorted(r["node"] for r in journal(project, run_id) if r["kind"] == "step_replayed")
    assert replayed == KEYS
    final = status(project, run_id)
    assert final["outcome"] == "success" and sorted(final["nodes"]) == KEYS
    result = json.loads(project.cli("result", run_id, "--output", "json").stdout)
    assert "summarize:docs/guide@v2.md" in result["nodes"]
    assert result["output"] == {
        "docs/guide@v2.md": "summary of: Summarize docs/guide@v2.md. Return the summary only.",
        "notes.txt": "summary of: Summarize notes.txt. Return the summary only.",
        "report.md": "summary of: Summarize report.md. Return the summary only.",
    }


def test_a_halted_step_with_a_seed_id_is_decided_by_its_id(project: Project, serve: Serve) -> None:
    """Seed section "Halts and --decide" with the fan-out's ids: ``resume --decide
    summarize:report.md=rerun`` names the step by its id (``=`` is outside the grammar, so the
    first ``=`` splits it). The step halts because it declares ``recovery="manual"`` and failed."""
    server = serve([Reply(status=500, body={"error": {"message": "down"}}), summary], repeat_last=True)
    script = (
        "from rho_notebook.script import run_step, emit_output\n"
        'h = run_step("reviewer", "Summarize report.md.", step_id="summarize:report.md", recovery="manual")\n'
        "emit_output(h.output)\n"
        "raise SystemExit(0 if h.ok else 3)\n"
    )
    setup(project, server, "one.py", script)
    first = project.cli("run", "one.py", "--yes", "--output", "jsonl", env=ENV)
    run_id = run_id_of(first)
    assert status(project, run_id)["nodes"]["summarize:report.md"]["state"] == "failure"
    halted = project.cli("resume", run_id, "--yes", env=ENV)
    assert halted.returncode != 0
    assert status(project, run_id)["lifecycle"] == "needs_decision"
    decided = project.cli("resume", run_id, "--yes", "--decide", "summarize:report.md=rerun", env=ENV)
    assert decided.returncode == 0, decided.stdout + decided.stderr
    final = status(project, run_id)
    assert final["outcome"] == "success"
    assert final["nodes"]["summarize:report.md"]["attempt"] == 2


def test_the_seeds_summarize_inputs_take_int_and_a_bare_path(project: Project, serve: Serve) -> None:
    """Seed section "Parameterized workflows (inputs)": ``summarize.py`` as written there (``"type":
    "int"``), run with the seed's ``--input target_file=/abs/path/to/report.md --input
    max_points=5 --input verbose=true``; the path is inside the workspace, as ours must be."""
    server = serve([summary], repeat_last=True)
    setup(project, server, "summarize.py", SUMMARIZE)
    report = project.write("reports/report.md", "# Report\n")
    checked = project.cli("validate", "summarize.py", env=ENV)
    assert checked.returncode == 0 and "0 errors, 0 warnings" in checked.stdout, checked.stdout + checked.stderr

    args = ["--input", f"target_file={report}", "--input", "max_points=5", "--input", "verbose=true"]
    done = project.cli("run", "summarize.py", "--yes", "--output", "jsonl", *args, env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = run_id_of(done)
    prompt = server.requests[0].body["messages"][-1]["content"]
    assert prompt == f"Summarize {report.resolve()} in 5 bullet points. Return the summary only."
    plan = json.loads(project.cli("status", run_id, "--output", "json").stdout)
    assert plan["outcome"] == "success"

    # a relative bare word is a path from the workspace root, as a JSON string is
    bare = project.cli("plan", "summarize.py", "--input", "target_file=reports/report.md", "--output", "json")
    quoted = project.cli("plan", "summarize.py", "--input", 'target_file="reports/report.md"', "--output", "json")
    assert bare.returncode == 0 and quoted.returncode == 0, bare.stderr + quoted.stderr
    assert json.loads(bare.stdout)["graph_digest"] == json.loads(quoted.stdout)["graph_digest"]


def test_a_bare_word_for_an_integer_input_names_the_input_and_its_type(project: Project, serve: Serve) -> None:
    """The seed's ``summarize.py`` with ``--input max_points=abc``: CAO's CLI keeps it a string and
    its engine refuses it against the declared ``int``; ours refuses it before anything is stored."""
    server = serve([summary], repeat_last=True)
    setup(project, server, "summarize.py", SUMMARIZE)
    project.write("reports/report.md", "# Report\n")
    done = project.cli(
        "run", "summarize.py", "--yes", "--input", "target_file=reports/report.md", "--input", "max_points=abc", env=ENV
    )
    assert done.returncode != 0
    assert "'max_points' is an integer, and 'abc' is not JSON" in done.stderr, done.stderr
    assert "--input max_points=3" in done.stderr
    assert project.stored_plans() == [] and server.requests == []
    for wrong, shown in (("verbose=yes", "'verbose' is a bool"), ("max_points=2.5", "floats are not supported")):
        refused = project.cli("plan", "summarize.py", "--input", "target_file=r.md", "--input", wrong)
        assert refused.returncode != 0 and shown in refused.stderr, refused.stderr


def test_int_is_read_as_integer_before_anything_uses_the_declaration(project: Project) -> None:
    """``int`` is read as ``integer`` when ``INPUTS`` is read: the seed's script freezes the very
    input declarations the same script declaring ``integer`` freezes (the digests differ only
    because the source text does), so plans of scripts that say ``integer`` keep their digests."""
    project.write("summarize.py", SUMMARIZE)
    project.write("reports/report.md", "# Report\n")
    seed = project.plan("summarize.py", {"target_file": "reports/report.md", "max_points": 5})
    declared = {decl.name: decl for decl in seed.graph.inputs}
    assert (declared["max_points"].type, declared["max_points"].value) == ("integer", 5)
    project.write("summarize.py", SUMMARIZE.replace('"type": "int",', '"type": "integer",'))
    ours = project.plan("summarize.py", {"target_file": "reports/report.md", "max_points": 5})
    assert seed.graph.inputs == ours.graph.inputs


def test_a_bare_word_fills_an_enum_or_string_input_and_json_keeps_its_meaning(project: Project) -> None:
    """The seed's inputs with an ``enum`` and a ``string`` added (our types): ``--input
    mode=quick`` and ``--input title=Weekly`` are text; ``--input title=true`` is JSON ``true``,
    which a string input refuses, as CAO's engine refuses its CLI's coerced bool."""
    project.write(
        "summarize.py",
        SUMMARIZE.replace(
            "INPUTS = {\n",
            'INPUTS = {\n    "mode": {"type": "enum", "choices": ["quick", "full"], "default": "quick"},\n'
            '    "title": {"type": "string", "required": False, "default": "t"},\n',
        ),
    )
    project.write("r.md", "")
    base = ["plan", "summarize.py", "--input", "target_file=r.md", "--output", "json"]
    done = project.cli(*base, "--input", "mode=full", "--input", "title=Weekly")
    assert done.returncode == 0, done.stderr
    inputs = json.loads(done.stdout)["inputs"]
    assert (inputs["mode"], inputs["title"]) == ("full", "Weekly")
    wrong = project.cli(*base, "--input", "mode=slow")
    assert wrong.returncode != 0 and "'mode' is \"slow\", which is not one of" in wrong.stderr, wrong.stderr
    json_bool = project.cli(*base, "--input", "title=true")
    assert json_bool.returncode != 0 and "'title' must be a string, got true" in json_bool.stderr, json_bool.stderr


COMMAND_STEP = """\
from rho_notebook.script import run_command, emit_output

name = "guide@v2.md"
h = run_command(["echo", f"summary of {name}"], step_id=f"summarize:docs/{name}",
                timeout_seconds=60, max_output_bytes=10000)
emit_output({name: h.output})
"""


def test_a_seed_shaped_id_works_in_the_mcp_node_tools(project: Project) -> None:
    """The fan-out's id form ``summarize:{name}`` with a name holding ``/`` and ``@``, in the MCP
    tools that take a node (``workflow_logs``) or show nodes (``workflow_status``,
    ``workflow_result``) and in the node's resource, whose URI holds the key percent-encoded.
    A command step (the seed's agent step would print no stdout to read back)."""
    key = "summarize:docs/guide@v2.md"
    project.write("cmd.py", COMMAND_STEP)
    done = project.cli("run", "cmd.py", "--yes", "--output", "jsonl")
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = run_id_of(done)
    mcp = McpSession(project)
    try:
        assert key in mcp.answer("workflow_status", {"run_id": run_id})["nodes"]
        assert key in mcp.answer("workflow_result", {"run_id": run_id})["nodes"]
        logs = mcp.answer("workflow_logs", {"run_id": run_id, "node": key})
        assert "summary of guide@v2.md" in json.dumps(logs), logs
        output = json.loads(mcp.read(f"rho://runs/{run_id}/nodes/{quote(key, safe='')}/output"))
        assert output["state"] == "success", output
    finally:
        mcp.close()
