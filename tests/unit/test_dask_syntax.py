"""The syntax of distributed placement (docs/distributed.md): node ``placement`` and
``resources``, workflow ``checkout``; their plan errors, their place in the graph digest, and
that a plan stored before them keeps its digest. Real Starlark, no mocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rho_notebook.errors import Diagnostic, ExecutorInvalid, InvalidWorkflow, SettingsError
from rho_notebook.model.canonical import graph_bytes, graph_digest
from rho_notebook.model.graph import (
    AgentNode,
    CommandNode,
    FrozenExecutable,
    FrozenFile,
    Graph,
    ShellNode,
    placement_of,
    resources_of,
)
from rho_notebook.model.plan import Plan
from rho_notebook.model.reference import Template
from tests.conftest import Project, star

BUDGET = "timeout_seconds = 10, max_output_bytes = 1000"


def command(name: str, extra: str = "") -> str:
    tail = (", " + extra) if extra else ""
    return f'command(name = "{name}", argv = ["true"], {BUDGET}{tail})'


def workflow(*nodes: str, options: str = "") -> str:
    listed = ",\n    ".join(nodes)
    tail = (", " + options) if options else ""
    return star(f'return workflow(name = "d", nodes = [\n    {listed},\n]{tail})')


def planned(project: Project, text: str) -> Plan:
    project.write("wf.star", text)
    return project.plan("wf.star", store=False)


def rejected(project: Project, text: str) -> Diagnostic:
    with pytest.raises(InvalidWorkflow) as caught:
        planned(project, text)
    found = caught.value.diagnostics()
    assert len(found) == 1, "\n".join(d.render() for d in found)
    return found[0]


# -- a plan stored before these options keeps its digest ------------------------------------------

# The digest of FIXED computed by the code before placement, resources and checkout existed
# (commit before issue 20): the new fields at their defaults are left out of the encoding.
DIGEST_BEFORE_ISSUE_20 = "sha256:a9dfb00a51cb43ed887681a6902b4e269b873c330a794defb88eca41b744911b"


def fixed_graph() -> Graph:
    exe = FrozenExecutable(file=FrozenFile(path="/usr/bin/true", in_workspace=False, sha256="sha256:" + "ab" * 32))
    budget = {"timeout_seconds": 60, "max_output_bytes": 100}
    return Graph(
        name="fixed",
        inputs=(),
        nodes=(
            AgentNode(name="a", agent="reviewer", prompt=Template(parts=("hi",)), **budget),
            CommandNode(name="c", argv=("true",), cwd="//", executable=exe, **budget),
            ShellNode(name="s", executable=exe, arguments=(), command="true", cwd="//", **budget),
        ),
    )


def test_an_existing_plan_keeps_its_digest() -> None:
    graph = fixed_graph()
    assert graph_digest(graph) == DIGEST_BEFORE_ISSUE_20
    dumped = graph.model_dump(mode="json")
    assert "checkout" not in dumped
    for node in dumped["nodes"]:
        assert "placement" not in node and "resources" not in node
    assert b"placement" not in graph_bytes(graph) and b"resources" not in graph_bytes(graph)


def test_the_options_are_covered_by_the_digest() -> None:
    graph = fixed_graph()
    command = graph.node("c")
    variants = [
        graph.model_copy(update={"checkout": "shared"}),
        graph.model_copy(
            update={"nodes": (graph.nodes[0], command.model_copy(update={"placement": "local"}), graph.nodes[2])}
        ),
        graph.model_copy(
            update={"nodes": (graph.nodes[0], command.model_copy(update={"resources": (("GPU", 1),)}), graph.nodes[2])}
        ),
    ]
    digests = {graph_digest(graph), *(graph_digest(v) for v in variants)}
    assert len(digests) == 4


# -- placement ---------------------------------------------------------------------------------


def test_defaults_are_any_for_command_shell_python_and_local_for_agent(project: Project) -> None:
    plan = planned(project, workflow(command("a")))
    node = plan.graph.node("a")
    assert placement_of(node) == "any" and resources_of(node) == {}
    assert plan.graph.checkout == "exclusive"
    agent = AgentNode(name="x", agent="r", prompt=Template(parts=("p",)), timeout_seconds=1, max_output_bytes=1)
    assert placement_of(agent) == "local" and resources_of(agent) == {}


def test_placement_local_and_resources_are_frozen_and_change_the_digest(project: Project) -> None:
    plain = planned(project, workflow(command("a")))
    local = planned(project, workflow(command("a", 'placement = "local"')))
    gpu = planned(project, workflow(command("a", 'resources = {"GPU": 1, "MEM": 4}')))
    assert placement_of(local.graph.node("a")) == "local"
    assert resources_of(gpu.graph.node("a")) == {"GPU": 1, "MEM": 4}
    assert len({plain.graph_digest, local.graph_digest, gpu.graph_digest}) == 3
    explicit_any = planned(project, workflow(command("a", 'placement = "any"')))
    assert explicit_any.graph_digest == plain.graph_digest


def test_shell_nodes_take_placement_and_resources(project: Project) -> None:
    shell = f'shell(name = "s", executable = "sh", command = "true", {BUDGET}, placement = "local", resources = {{"GPU": 2}})'
    node = planned(project, workflow(shell)).graph.node("s")
    assert placement_of(node) == "local" and resources_of(node) == {"GPU": 2}


def test_checkout_shared_is_frozen_and_changes_the_digest(project: Project) -> None:
    plain = planned(project, workflow(command("a")))
    shared = planned(project, workflow(command("a"), options='checkout = "shared"'))
    assert shared.graph.checkout == "shared"
    assert shared.graph_digest != plain.graph_digest
    exclusive = planned(project, workflow(command("a"), options='checkout = "exclusive"'))
    assert exclusive.graph_digest == plain.graph_digest


def test_a_bad_placement_names_node_and_option(project: Project) -> None:
    found = rejected(project, workflow(command("a", 'placement = "gpu"')))
    assert found.rule == "node.placement"
    assert "command 'a'" in found.message and 'placement must be "local" or "any"' in found.message


def test_placement_any_on_an_approval_node_is_a_plan_error(project: Project) -> None:
    approval = f'approval(name = "ok", prompt = "go?", {BUDGET}, placement = "any")'
    found = rejected(project, workflow(approval))
    assert found.rule == "node.placement"
    assert "approval 'ok'" in found.message and "always run with the run owner" in found.message


def test_placement_local_on_an_approval_node_is_accepted(project: Project) -> None:
    approval = f'approval(name = "ok", prompt = "go?", {BUDGET}, placement = "local")'
    plan = planned(project, workflow(approval))
    assert placement_of(plan.graph.node("ok")) == "local"


def test_placement_any_on_an_agent_node_is_a_plan_error(project: Project) -> None:
    agent = f'agent(name = "rev", agent = "reviewer", prompt = "hi", {BUDGET}, placement = "any")'
    found = rejected(project, workflow(agent))
    assert found.rule == "node.placement" and "agent 'rev'" in found.message


def test_resources_on_an_approval_node_are_a_plan_error(project: Project) -> None:
    approval = f'approval(name = "ok", prompt = "go?", {BUDGET}, resources = {{"GPU": 1}})'
    found = rejected(project, workflow(approval))
    assert found.rule == "node.resources" and "approval 'ok'" in found.message


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ('["GPU"]', "must be a dictionary"),
        ('{"GPU": 0}', 'resources["GPU"] must be a positive integer, got 0'),
        ('{"GPU": -1}', "must be a positive integer"),
        ('{"GPU": True}', "must be a positive integer, got true"),
        ('{"GPU": "1"}', "must be a positive integer"),
        ('{"": 1}', "keys must be non-empty resource names"),
    ],
)
def test_bad_resources_name_node_and_option(project: Project, value: str, says: str) -> None:
    found = rejected(project, workflow(command("a", f"resources = {value}")))
    assert found.rule == "node.resources"
    assert "command 'a'" in found.message and says in found.message, found.message


def test_a_bad_checkout_is_a_plan_error(project: Project) -> None:
    found = rejected(project, workflow(command("a"), options='checkout = "per-node"'))
    assert found.rule == "workflow.checkout"
    assert 'checkout must be "exclusive" or "shared"' in found.message and 'workflow "d"' in found.message


def test_the_pane_and_plan_text_show_placement_and_resources(project: Project) -> None:
    from rho_notebook.views.dag import definition_of

    text = workflow(
        command("a", 'placement = "local"'), command("b", 'resources = {"GPU": 1}'), options='checkout = "shared"'
    )
    plan = planned(project, text)
    assert definition_of(plan.graph.node("a"))["placement"] == "local"
    shown = definition_of(plan.graph.node("b"))
    assert shown["placement"] == "any" and shown["resources"] == ["GPU=1"]
    project.write("wf.star", text)
    printed = project.cli("validate", "wf.star", check=True).stdout
    assert "checkout    shared" in printed
    assert "placement   a: local" in printed and "placement   b: any  resources GPU=1" in printed


# -- the executor choice (runtime/executor_choice.py) -------------------------------------------------


def test_executor_choices_parse_and_print_back() -> None:
    from rho_notebook.runtime.executor_choice import parse_executor

    assert parse_executor("local").spec() == "local"
    assert parse_executor("dask").spec() == "dask" and parse_executor("dask").address is None
    assert parse_executor("dask=tcp://h:8786").address == "tcp://h:8786"
    for bad in ("", "ray", "local=x", "dask=", "dask= tcp://h:1", "dask=tcp://h:1 x"):
        with pytest.raises(ExecutorInvalid) as caught:
            parse_executor(bad)
        assert repr(bad) in caught.value.message and caught.value.exit_code == 2


def test_dask_takes_its_address_from_the_flag_then_the_environment_then_user_settings(tmp_path: Path) -> None:
    from rho_notebook.runtime.executor_choice import SCHEDULER_ENV, resolve_executor

    home = tmp_path / "home"
    home.mkdir()
    assert resolve_executor(None, home=home, environ={}).spec() == "local"
    assert resolve_executor("dask", home=home, environ={}).spec() == "dask"  # a LocalCluster
    (home / "settings.json").write_text(
        json.dumps({"dask_scheduler": "tcp://settings:1", "dask_path_map": {"/home/me/ws": "/srv/ws"}})
    )
    from_settings = resolve_executor("dask", home=home, environ={})
    assert from_settings.spec() == "dask=tcp://settings:1"
    assert dict(from_settings.path_map) == {"/home/me/ws": "/srv/ws"}
    environ = {SCHEDULER_ENV: "tcp://env:2"}
    assert resolve_executor("dask", home=home, environ=environ).spec() == "dask=tcp://env:2"
    assert resolve_executor("dask=tcp://flag:3", home=home, environ=environ).spec() == "dask=tcp://flag:3"
    assert resolve_executor("local", home=home, environ=environ).spec() == "local"


def test_bad_dask_settings_name_the_file_and_key(tmp_path: Path) -> None:
    from rho_notebook.runtime.executor_choice import resolve_executor

    home = tmp_path / "home"
    home.mkdir()
    for data, key in (
        ({"dask_scheduler": 8786}, "dask_scheduler"),
        ({"dask_path_map": {"relative": "/srv"}}, "dask_path_map"),
        ({"dask_path_map": ["/a", "/b"]}, "dask_path_map"),
    ):
        (home / "settings.json").write_text(json.dumps(data))
        with pytest.raises(SettingsError) as caught:
            resolve_executor("dask", home=home, environ={})
        assert str(home / "settings.json") in caught.value.message and key in caught.value.message


def test_project_settings_never_choose_a_scheduler(project: Project) -> None:
    from rho_notebook.runtime.executor_choice import resolve_executor

    project.write(".rho/settings.json", json.dumps({"dask_scheduler": "tcp://project:1"}))
    project.home.mkdir(parents=True, exist_ok=True)
    assert resolve_executor("dask", home=project.home, environ={}).spec() == "dask"


def test_the_notebook_verbs_take_the_flag() -> None:
    from rho_notebook.service.cell_args import parse_verb

    assert parse_verb("run wf --yes --executor dask=tcp://h:8786").executor == "dask=tcp://h:8786"
    assert parse_verb("run wf --yes").executor is None
    assert parse_verb("resume 01abc --executor local").executor == "local"
