"""``rho-notebook diff OLD NEW`` on a fixture pair, in text and ``--output json``; and ``plans``
listing one row for a graph planned twice."""

from __future__ import annotations

import json

from tests.conftest import Project

C = "timeout_seconds = 10, max_output_bytes = 1000"

OLD = f"""\
def build(inputs):
    return workflow(name = "pair", nodes = [
        command(name = "fetch", argv = ["echo", "{{}}"], output = schema.stdout_json(schema.record({{}})), {C}),
        python(name = "stats", module = "//nodes/stats.py", function = "stats", args = {{"n": 2}},
               needs = ["fetch"], access = "read_only", reuse = True, {C}),
        command(name = "report", argv = ["echo", "old"], needs = ["stats"], {C}),
        command(name = "cleanup", argv = ["true"], {C}),
    ])

WORKFLOW = define(inputs = {{}}, build = build)
"""

NEW = (
    OLD.replace('argv = ["echo", "old"], needs = ["stats"]', 'argv = ["echo", "new"], needs = ["stats", "fetch"]')
    .replace(f'command(name = "cleanup", argv = ["true"], {C}),', f'command(name = "publish", argv = ["true"], {C}),')
    .replace('"n": 2', '"n": 3')
)


def plan_id(project: Project, entry: str) -> str:
    done = project.cli("plan", entry, "--output", "json", check=True)
    return str(json.loads(done.stdout)["plan_id"])


def test_diff_text_and_json_on_a_fixture_pair(project: Project) -> None:
    project.write("nodes/stats.py", "def stats(n):\n    return {'n': n}\n")
    project.write("old.star", OLD)
    project.write("new.star", NEW)
    old, new = plan_id(project, "old.star"), plan_id(project, "new.star")

    text = project.cli("diff", old, new)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"diff plan {old[:13]} (sha256:") and f"-> plan {new[:13]} (sha256:" in lines[0]
    assert lines[1:] == [
        "+ publish",
        "- cleanup",
        "~ report: needs, argv",
        "~ stats: args",
        "will reuse: (none)",
        "will launch: fetch, publish, report, stats",
    ]

    answer = json.loads(project.cli("diff", old, new, "--output", "json", check=True).stdout)
    assert answer["old"]["id"] == old and answer["new"]["id"] == new
    assert answer["old"]["kind"] == answer["new"]["kind"] == "plan"
    assert answer["new"]["workflow"] == "pair"
    assert answer["same"] is False
    assert answer["added"] == ["publish"] and answer["removed"] == ["cleanup"]
    assert answer["changed"] == [
        {"node": "report", "fields": ["needs", "argv"]},
        {"node": "stats", "fields": ["args"]},
    ]
    assert answer["unchanged"] == ["fetch"] and answer["graph"] == []
    assert answer["will_reuse"] == [] and answer["will_launch"] == ["fetch", "publish", "report", "stats"]

    same = project.cli("diff", answer["new"]["graph_digest"], new[:13])
    assert "no changes: the graphs are the same" in same.stdout


def test_diff_of_a_run_and_an_edited_module_predicts_reuse(project: Project) -> None:
    project.write("nodes/stats.py", "def stats(n):\n    return {'n': n}\n")
    project.write(
        "wf.star",
        f"""\
def build(inputs):
    return workflow(name = "r", nodes = [
        python(name = "base", module = "//nodes/base.py", function = "base", args = {{}}, access = "read_only", reuse = True, {C}),
        python(name = "stats", module = "//nodes/stats.py", function = "stats", args = {{"n": 2}},
               needs = ["base"], access = "read_only", reuse = True, {C}),
    ])

WORKFLOW = define(inputs = {{}}, build = build)
""",
    )
    project.write("nodes/base.py", "def base():\n    return 1\n")
    first = plan_id(project, "wf.star")
    done = project.cli("run", first, "--yes", "--output", "jsonl")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout.splitlines()[0])["run_id"]
    project.write("nodes/stats.py", "def stats(n):\n    return {'n': n + 1}\n")
    second = plan_id(project, "wf.star")
    text = project.cli("diff", run_id, second)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[1:] == [
        "~ stats: module source",
        "will reuse: base",
        "will launch: stats",
    ]


def test_plans_lists_one_row_for_a_graph_planned_twice(project: Project) -> None:
    project.write("nodes/stats.py", "def stats(n):\n    return {'n': n}\n")
    project.write("old.star", OLD)
    first, second = plan_id(project, "old.star"), plan_id(project, "old.star")
    assert first == second
    rows = json.loads(project.cli("plans", "--output", "json", check=True).stdout)
    assert [row["plan_id"] for row in rows] == [first]


def test_diff_of_unknown_targets_is_a_plain_error(project: Project) -> None:
    done = project.cli("diff", "nope", "sha256:" + "0" * 64)
    assert done.returncode == 1
    assert "nope" in done.stderr and "Traceback" not in done.stderr
