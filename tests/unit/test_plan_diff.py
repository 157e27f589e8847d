"""Plan diff (model/diff.py), one plan per graph (store/plans.py) and the derived plan of ``try``
(service/diff.py), on workflows planned from real Starlark."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from rho_notebook.errors import NotFound, TryRefused
from rho_notebook.model.canonical import graph_digest
from rho_notebook.model.diff import ancestors, diff_graphs
from rho_notebook.model.plan import Plan
from rho_notebook.service import Consent, Service, StartRun
from rho_notebook.source.workspace import Workspace
from rho_notebook.store.layout import StoreLayout
from tests.conftest import Project

C = "timeout_seconds = 10, max_output_bytes = 1000"


def flow(*nodes: str, name: str = "w") -> str:
    body = ",\n        ".join(nodes)
    return (
        "def build(inputs):\n"
        f'    return workflow(name = "{name}", nodes = [\n        {body},\n    ])\n\n'
        "WORKFLOW = define(inputs = {}, build = build)\n"
    )


def cmd(name: str, *argv: str, extra: str = "") -> str:
    quoted = ", ".join(f'"{a}"' for a in argv)
    return f'command(name = "{name}", argv = [{quoted}], {extra}{C})'


def py(name: str, module: str, function: str, *, args: str = "{}", extra: str = "") -> str:
    return (
        f'python(name = "{name}", module = "{module}", function = "{function}", args = {args}, '
        f'access = "read_only", {extra}{C})'
    )


BASE = flow(
    cmd("a", "echo", "a"),
    cmd("b", "echo", "b", extra='needs = ["a"], '),
    cmd("c", "echo", "c", extra='needs = ["b"], '),
    cmd("gone", "true"),
)


def validated(project: Project, text: str) -> Plan:
    project.write("wf.star", text)
    return project.plan("wf.star", store=False)


def run_plan(project: Project, plan: Plan) -> str:
    service = project.service
    state = asyncio.run(service.run(StartRun(plan=plan.plan_id, consent=Consent(yes=True))))
    assert state.outcome == "success", state
    return state.run_id


# -- diff ---------------------------------------------------------------------------------------------


def test_diff_names_added_removed_and_changed_fields(project: Project) -> None:
    old = validated(project, BASE)
    new = validated(
        project,
        flow(
            cmd("a", "echo", "a"),
            cmd("b", "echo", "B", extra='needs = ["a"], '),
            cmd("c", "echo", "c", extra="timeout_seconds = 11, max_output_bytes = 5, ").replace(f", {C}", ""),
            cmd("fresh", "true", extra='needs = ["a"], '),
        ),
    )
    found = diff_graphs(old.graph, new.graph, old_digest=old.graph_digest, new_digest=new.graph_digest)
    assert found.added == ("fresh",)
    assert found.removed == ("gone",)
    assert found.unchanged == ("a",)
    assert [(c.node, c.fields) for c in found.changed] == [
        ("b", ("argv",)),
        ("c", ("needs", "timeout_seconds", "max_output_bytes")),
    ]
    assert not found.same and found.graph == ()
    assert diff_graphs(old.graph, old.graph).same


def test_diff_names_condition_and_output_schema(project: Project) -> None:
    old = validated(project, flow(cmd("a", "echo", "{}", extra="output = schema.stdout_json(schema.record({})), ")))
    new = validated(
        project,
        flow(
            cmd(
                "a",
                "echo",
                "{}",
                extra='output = schema.stdout_json(schema.record({"x": schema.optional(schema.string())})), ',
            )
        ),
    )
    assert diff_graphs(old.graph, new.graph).change("a") is not None
    assert diff_graphs(old.graph, new.graph).changed[0].fields == ("output",)
    gated = validated(
        project,
        flow(
            cmd("a", "echo", "{}", extra="output = schema.stdout_json(schema.record({})), "),
            cmd("b", "true", extra='needs = ["a"], when = condition.equals(status("a"), "success"), '),
        ),
    )
    plain = validated(
        project,
        flow(
            cmd("a", "echo", "{}", extra="output = schema.stdout_json(schema.record({})), "),
            cmd("b", "true", extra='needs = ["a"], '),
        ),
    )
    assert diff_graphs(plain.graph, gated.graph).changed[0].fields == ("when",)


def test_python_module_source_change_names_the_nodes_that_import_it(project: Project) -> None:
    project.write("nodes/helper.py", "def k():\n    return 2\n")
    project.write(
        "nodes/calc.py",
        "from nodes.helper import k\n\ndef double(x):\n    return x * k()\n",
    )
    project.write("nodes/other.py", "def same(x):\n    return x\n")
    text = flow(
        py("d", "//nodes/calc.py", "double", args='{"x": 2}'),
        py("o", "//nodes/other.py", "same", args='{"x": 2}'),
    )
    old = validated(project, text)
    project.write("nodes/helper.py", "def k():\n    return 3\n")
    new = validated(project, text)
    found = diff_graphs(old.graph, new.graph)
    assert [(c.node, c.fields) for c in found.changed] == [("d", ("module source",))]
    assert found.unchanged == ("o",)
    renamed = validated(
        project, text.replace('function = "double", args = {"x": 2}', 'function = "double", args = {"x": 5}')
    )
    assert diff_graphs(new.graph, renamed.graph).changed[0].fields == ("args",)


def test_ancestors_are_the_transitive_needs(project: Project) -> None:
    plan = validated(project, BASE)
    assert ancestors(plan.graph, "c") == ("a", "b")
    assert ancestors(plan.graph, "a") == ()
    with pytest.raises(KeyError):
        ancestors(plan.graph, "nope")


def test_service_diff_takes_plan_ids_digests_and_run_ids(project: Project) -> None:
    project.write("wf.star", BASE)
    old = project.plan("wf.star")
    run_id = run_plan(project, old)
    project.write("wf.star", BASE.replace('"echo", "b"', '"echo", "bb"'))
    new = project.plan("wf.star")
    service = project.service
    by_id = asyncio.run(service.diff(old.plan_id[:13], new.plan_id))
    by_digest = asyncio.run(service.diff(old.graph_digest, new.graph_digest))
    by_run = asyncio.run(service.diff(run_id, new.plan_id[:13]))
    for result in (by_id, by_digest, by_run):
        assert [(c.node, c.fields) for c in result.diff.changed] == [("b", ("argv",))]
        assert result.new.id == new.plan_id
        assert result.will_launch == ("a", "b", "c", "gone") and result.will_reuse == ()
    assert by_run.old.kind == "run" and by_run.old.id == run_id
    with pytest.raises(NotFound):
        asyncio.run(service.diff("sha256:" + "0" * 64, new.plan_id))


# -- one plan per graph -------------------------------------------------------------------------------


def test_planning_the_same_graph_twice_returns_the_stored_plan(project: Project) -> None:
    project.write("wf.star", BASE)
    first = project.plan("wf.star")
    again = project.plan("wf.star")
    assert again.plan_id == first.plan_id
    assert project.stored_plans() == [first.plan_id]
    assert [m.plan_id for m in asyncio.run(project.service.plans())] == [first.plan_id]
    project.write("wf.star", BASE + "# a comment changes the source, not the graph\n")
    commented = project.plan("wf.star")
    assert commented.graph_digest == first.graph_digest and commented.plan_id != first.plan_id
    project.write("wf.star", BASE)
    assert project.plan("wf.star").plan_id == first.plan_id


def test_a_deleted_plan_is_a_miss(project: Project) -> None:
    project.write("wf.star", BASE)
    first = project.plan("wf.star")
    asyncio.run(project.service.delete_plan(first.plan_id))
    second = project.plan("wf.star")
    assert second.plan_id != first.plan_id
    assert project.stored_plans() == [second.plan_id]
    assert project.plan("wf.star").plan_id == second.plan_id
    shutil.rmtree(project.home / "workflows" / "plans" / second.plan_id)  # the index entry is left stale
    third = project.plan("wf.star")
    assert third.plan_id not in (first.plan_id, second.plan_id)
    assert project.stored_plans() == [third.plan_id]


def test_a_touched_executable_is_a_new_plan(project: Project) -> None:
    project.write("tool.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    project.write("wf.star", flow(cmd("t", "./tool.sh")))
    first = project.plan("wf.star")
    tool = project.root / "tool.sh"
    stat = tool.stat()
    os.utime(tool, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    second = project.plan("wf.star")
    assert second.graph_digest == first.graph_digest
    assert second.plan_id != first.plan_id  # the stored plan's file identity would fail at launch
    assert project.plan("wf.star").plan_id == second.plan_id


def test_another_checkout_with_the_same_files_gets_its_own_plan(project: Project, tmp_path: Path) -> None:
    project.write("wf.star", BASE)
    here = project.plan("wf.star")
    other_root = tmp_path / "other"
    shutil.copytree(project.root, other_root)
    other = Project(root=other_root.resolve(), home=project.home)
    assert other.workspace.key != project.workspace.key
    there = other.plan("wf.star")
    assert there.graph_digest == here.graph_digest
    assert there.plan_id != here.plan_id
    assert there.manifest.workspace_key == Workspace(root=other_root.resolve()).key
    assert other.plan("wf.star").plan_id == there.plan_id
    assert project.plan("wf.star").plan_id == here.plan_id


# -- try one node -------------------------------------------------------------------------------------


def test_try_derives_a_plan_of_the_node_and_its_ancestors(project: Project) -> None:
    project.write("wf.star", BASE)
    plan = project.plan("wf.star")
    run_id = run_plan(project, plan)
    project.write("wf.star", BASE.replace('"echo", "c"', '"echo", "cc"'))
    current = project.plan("wf.star")
    tried = asyncio.run(project.service.try_node(current.plan_id, "c"))
    derived = tried.plan
    assert tried.source_run == run_id
    assert tried.seed_nodes == ("a", "b")
    assert [n.name for n in derived.graph.nodes] == ["a", "b", "c"]
    assert derived.graph.node("c") == current.graph.node("c")
    assert derived.graph_digest == graph_digest(derived.graph) != current.graph_digest
    assert derived.plan_id in project.stored_plans()
    loaded = asyncio.run(project.service.load_plan(derived.plan_id))
    assert loaded.graph_digest == derived.graph_digest
    assert loaded.manifest.planner["derived_from"] == current.plan_id
    again = asyncio.run(project.service.try_node(current.plan_id, "c", from_run=run_id[:13]))
    assert again.plan.plan_id == derived.plan_id
    root = asyncio.run(project.service.try_node(current.plan_id, "a"))
    assert [n.name for n in root.plan.graph.nodes] == ["a"] and root.seed_nodes == ()
    request = StartRun(
        plan=derived.plan_id, consent=Consent(yes=True), seed_from=tried.source_run, seed_nodes=tried.seed_nodes
    )
    state = asyncio.run(project.service.run(request))
    assert state.outcome == "success"
    taken = {name: record.current.reused_from for name, record in state.nodes.items() if record.current}
    assert taken["a"] is not None and taken["a"]["run_id"] == run_id
    assert taken["b"] is not None and taken["b"]["run_id"] == run_id
    assert taken["c"] is None
    logs = asyncio.run(project.service.log_text(state.run_id, "c"))
    assert logs["stdout"] == "cc\n"


def test_try_refuses_when_an_ancestor_changed_and_names_it(project: Project) -> None:
    project.write("wf.star", BASE)
    run_plan(project, project.plan("wf.star"))
    project.write("wf.star", BASE.replace('"echo", "a"', '"echo", "A"'))
    current = project.plan("wf.star")
    with pytest.raises(TryRefused) as caught:
        asyncio.run(project.service.try_node(current.plan_id, "c"))
    assert caught.value.node == "a"
    assert caught.value.fields == ("argv",)
    assert "'a'" in caught.value.message and "argv" in caught.value.message
    tried = asyncio.run(project.service.try_node(current.plan_id, "gone"))
    assert tried.seed_nodes == ()


def test_try_needs_an_earlier_run_and_a_known_node(project: Project) -> None:
    project.write("wf.star", BASE)
    plan = project.plan("wf.star")
    with pytest.raises(NotFound, match="has no run"):
        asyncio.run(project.service.try_node(plan.plan_id, "c"))
    run_plan(project, plan)
    with pytest.raises(NotFound, match="no node 'zz'"):
        asyncio.run(project.service.try_node(plan.plan_id, "zz"))


def test_try_refuses_a_source_run_of_another_workspace(project: Project, tmp_path: Path) -> None:
    project.write("wf.star", BASE)
    run_id = run_plan(project, project.plan("wf.star"))
    other_root = tmp_path / "other"
    shutil.copytree(project.root, other_root)
    other = Project(root=other_root.resolve(), home=project.home)
    plan = other.plan("wf.star")
    with pytest.raises(TryRefused, match="another workspace"):
        asyncio.run(Service(layout=StoreLayout(home=project.home)).try_node(plan.plan_id, "c", from_run=run_id))


def test_a_working_directory_whose_entries_changed_is_the_same_plan(project: Project) -> None:
    """A launch holds a working directory to its device and inode, not its size and mtime, which
    move whenever an entry is added or removed (a node's output, a notebook's export folder made
    and removed beside it): re-planning after that hands back the stored plan."""
    project.write("wf.star", flow(cmd("t", "true")))
    first = project.plan("wf.star")
    assert "//" in first.manifest.identities
    project.write("made-by-a-run.txt", "output\n")
    (project.root / ".rho-notebook-export-x").mkdir()
    (project.root / ".rho-notebook-export-x").rmdir()
    info = project.root.stat()
    os.utime(project.root, ns=(info.st_atime_ns, first.manifest.identities["//"].mtime_ns + 5_000_000_000))
    again = project.plan("wf.star")
    assert again.plan_id == first.plan_id
    moved = project.plan("wf.star", store=False)
    assert moved.manifest.identities["//"].mtime_ns != first.manifest.identities["//"].mtime_ns  # what changed
