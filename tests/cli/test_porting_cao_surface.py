"""The CLI surface a CAO user reaches for (issue 33 point 5), driven from the seed's own examples
(/work/shared/seeds/cao-workflows.txt) through real ``rho-notebook`` subprocesses.

The workflows are the seed's *Quick start* ``hello.py`` and *Parameterized workflows*
``summarize.py`` as docs/porting.md ports them, read from their files under docs/examples/porting/
(one copy: the page shows those files byte for byte), adapted only where docs/scripts.md names a
deliberate difference: they import ``rho_notebook.script`` instead of ``cao_workflow``, and
``run_step`` names an agent of the workspace's catalog without CAO's provider argument (agents come
from the agent catalog, docs/scripts.md "Compared with CAO's script tier"). The agents are answered by a local
OpenAI-compatible server on 127.0.0.1.

The commands are the seed's *CLI reference* rows with ``cao workflow`` replaced by
``rho-notebook``: ``list --dir DIR --json``, ``get NAME --json``, ``run NAME`` (ours takes the
file: docs/running.md), ``status/result/wait RUN --json``, ``runs --state S --limit N --json`` and
``events RUN --no-follow --after-seq N``. ``--run-id`` takes a UUIDv7, not a free-form name
(docs/running.md "Detach, wait, choose the run ID").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from rho_notebook.cli.main import build_parser
from rho_notebook.store.ids import new_id
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
from tests.conftest import REPO, Project

ENV = {KEY_ENV: SECRET}

PORTS = REPO / "docs" / "examples" / "porting"
HELLO = (PORTS / "cao_hello.py").read_text()
SUMMARIZE = (PORTS / "cao_summarize.py").read_text()
"""docs/porting.md's ports of the seed's ``hello.py`` and ``summarize.py``, read from their files."""

AGENT = """\
---
id: {name}
description: the seed's {name} role
runtime: rho
---
Answer in one line.
"""


def answer(request: Recorded) -> Reply:
    prompt = request.body["messages"][-1]["content"]
    return OPENAI.answer("Hello from the note." if "hello note" in prompt else "Short and friendly.")


@pytest.fixture
def ws(project: Project) -> Iterator[Project]:
    with ScriptedServer([answer], repeat_last=True) as server:
        write_settings_for(project.home, server)
        project.write("hello.py", HELLO)
        project.write("summarize.py", SUMMARIZE)
        for name in ("developer", "reviewer"):
            project.write(f"agents/{name}.md", AGENT.format(name=name))
        yield project


def cli_json(ws: Project, *args: str, code: int = 0) -> Any:
    done = ws.cli(*args, env=ENV, timeout=120)
    assert done.returncode == code, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_list_and_get_show_the_seeds_workflows(ws: Project) -> None:
    """``list --dir DIR --json`` (CAO: list the indexed workflows) and ``get summarize --json``
    (CAO: the parsed spec): the workflow's kind, source and typed inputs, the seed's ``int``
    shown as ``integer``."""
    listed = cli_json(ws, "list", "--dir", str(ws.root), "--json")
    assert listed["workspace"] == str(ws.root)
    found = {(entry["name"], entry["kind"], entry["file"]) for entry in listed["workflows"]}
    assert found == {("hello", "script", "hello.py"), ("summarize", "script", "summarize.py")}
    text = ws.cli("list")
    assert text.returncode == 0, text.stderr
    assert [line.split() for line in text.stdout.splitlines()] == [
        ["NAME", "KIND", "FILE"],
        ["hello", "script", "hello.py"],
        ["summarize", "script", "summarize.py"],
    ]

    got = cli_json(ws, "get", "summarize", "--json")
    assert (got["name"], got["kind"], got["file"]) == ("summarize", "script", "summarize.py")
    assert got["source"] == SUMMARIZE
    assert got["inputs"] == [
        {"name": "max_points", "type": "integer", "required": False, "default": 3, "choices": []},
        {"name": "target_file", "type": "path", "required": True, "default": None, "choices": []},
        {"name": "verbose", "type": "bool", "required": False, "default": False, "choices": []},
    ]
    assert got["inputs_error"] is None
    assert got["run"].startswith("rho-notebook run summarize.py")
    assert cli_json(ws, "get", "summarize.py", "--output", "json") == got  # the file names it too

    shown = ws.cli("get", "hello")
    assert shown.returncode == 0, shown.stderr
    assert "kind      script" in shown.stdout and "inputs    none" in shown.stdout
    assert '  note = run_step("developer", "Write a one-line hello note. Return it only.")' in shown.stdout


def test_get_of_an_unknown_name_names_the_catalog(ws: Project) -> None:
    missing = ws.cli("get", "summarise")
    assert missing.returncode == 1, missing.stdout + missing.stderr
    assert missing.stdout == ""
    assert "no workflow 'summarise' in the workspace" in missing.stderr
    assert "its workflows: hello, summarize" in missing.stderr
    assert "(did you mean summarize?)" in missing.stderr
    assert "rho-notebook list" in missing.stderr


def test_list_keeps_its_columns_for_long_names_and_get_offers_input_only_when_there_are_some(ws: Project) -> None:
    """A name longer than the NAME column (an OpenRath class name) pushes the columns, not the
    row; ``get``'s run line of a workflow without inputs has no ``--input KEY=JSON...``."""
    ws.write("EngineeringProjectWorkflowTeam.py", HELLO)
    text = ws.cli("list")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len({line.index(" script ") for line in lines[1:]} | {lines[0].index(" KIND ")}) == 1, text.stdout
    assert "run       rho-notebook run hello.py\n" in ws.cli("get", "hello").stdout
    assert "run       rho-notebook run summarize.py --input KEY=JSON...\n" in ws.cli("get", "summarize").stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["get", "hello", "--json", "--output", "text"],
        ["get", "hello", "--output", "text", "--json"],
        ["runs", "--output", "text", "--json"],
        ["run", "hello.py", "--json", "--output", "jsonl"],
    ],
)
def test_json_with_another_output_is_a_usage_error(ws: Project, argv: list[str]) -> None:
    refused = ws.cli(*argv)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "--json is --output json; it cannot be given with --output" in refused.stderr
    assert not (ws.home / "workflows" / "runs").exists() or not list((ws.home / "workflows" / "runs").iterdir())


def test_the_seeds_run_then_its_read_verbs_with_json(ws: Project) -> None:
    """``run hello --run-id ID --json``, then ``status``, ``result``, ``wait`` with ``--json``,
    ``runs --state completed --limit 1 --json`` and ``events --no-follow --after-seq N``."""
    run_id = new_id()
    ended = cli_json(ws, "run", "hello.py", "--run-id", run_id, "--yes", "--json")
    assert (ended["run_id"], ended["lifecycle"], ended["outcome"]) == (run_id, "completed", "success")

    status = cli_json(ws, "status", run_id, "--json")
    assert status["outcome"] == "success" and status["output"] == {
        "note": "Hello from the note.",
        "review": "Short and friendly.",
    }
    assert cli_json(ws, "status", run_id, "--output", "json") == status  # --json is --output json
    result = cli_json(ws, "result", run_id, "--json")
    assert result["output"] == status["output"]
    assert cli_json(ws, "wait", run_id, "--json")["outcome"] == "success"

    second = new_id()
    cli_json(ws, "run", "hello.py", "--run-id", second, "--yes", "--json")
    rows = cli_json(ws, "runs", "--state", "completed", "--limit", "1", "--json")
    assert [row["run_id"] for row in rows] == [second]  # the newest one
    both = cli_json(ws, "runs", "--state", "completed", "--json")
    assert [row["run_id"] for row in both] == [run_id, second]  # newest last, as `runs` always lists
    assert cli_json(ws, "runs", "--state", "running", "--json") == []

    every = ws.cli("events", run_id, "--no-follow", timeout=120)
    assert every.returncode == 0, every.stderr
    records = [json.loads(line) for line in every.stdout.splitlines()]
    assert records[0]["kind"] == "run_created" and records[-1]["kind"] == "run_completed"
    later = ws.cli("events", run_id, "--no-follow", "--after-seq", "3", timeout=120)
    assert later.returncode == 0, later.stderr
    tail = [json.loads(line) for line in later.stdout.splitlines()]
    assert tail == [record for record in records if record["seq"] > 3]


def test_every_verb_with_output_json_takes_json_and_every_verb_is_documented() -> None:
    """The seed's CLI reference gives ``--json`` to every verb that answers in JSON: ours is the
    same flag as ``--output json`` wherever a verb has that, declared in one place (the CLI's
    parser class); and every verb, ``list`` and ``get`` too, is named in the docs."""
    parser = build_parser()
    verbs: dict[str, Any] = parser.verbs  # type: ignore[attr-defined]
    with_json = set()
    for name, sub in verbs.items():
        output = next((action for action in sub._actions if "--output" in action.option_strings), None)
        if output is not None and "json" in (output.choices or ()):
            with_json.add(name)
            assert "--json" in sub.option_names, name
        else:
            assert "--json" not in sub.option_names, name
    assert {"list", "get", "status", "result", "runs", "wait", "run", "resume", "validate", "cancel"} <= with_json
    assert "events" not in with_json  # always JSON lines: docs/running.md "Differences from CAO"
    docs = "\n".join(path.read_text() for path in (REPO / "docs").rglob("*.md"))
    for name in verbs:
        assert re.search(rf"rho-notebook {re.escape(name)}\b", docs), f"no doc names `rho-notebook {name}`"
    running = (REPO / "docs" / "running.md").read_text()
    assert "rho-notebook events RUN_ID [--follow | --no-follow]" in running
    assert "rho-notebook list [--workspace DIR]" in running and "rho-notebook get NAME|FILE" in running
