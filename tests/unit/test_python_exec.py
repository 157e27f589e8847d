"""Python nodes at run time: the harness, the executor and its registration, through the real owner.

Graphs are built by hand (the frozen interpreter, its identity and the modules recorded as the
planner records them), stored as a plan and executed by ``execute_run`` with the default executors,
so every launch goes through verification, the run folder and the journal like a planned run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import UnavailableValue
from rho_notebook.exec.python import python_facts, render_args
from rho_notebook.model.canonical import graph_digest
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.events import now_iso
from rho_notebook.model.graph import (
    EnvironmentPolicy,
    FrozenExecutable,
    FrozenFile,
    Graph,
    PythonArg,
    PythonModule,
    PythonNode,
    PythonRuntime,
)
from rho_notebook.model.identity import FileIdentity, identity_of_stat
from rho_notebook.model.plan import Plan, PlanManifest
from rho_notebook.model.reference import OutputRef
from rho_notebook.model.run_state import RunState
from rho_notebook.model.schema import IntegerSchema, RecordSchema, Schema, StringSchema
from rho_notebook.policy.permission import LaunchDecision, PermissionMode, decide_launch
from rho_notebook.runtime.owner import create_run, execute_run
from rho_notebook.source.pymodules import HARNESS_PATH
from rho_notebook.store.ids import new_id
from rho_notebook.store.layout import StoreLayout
from tests.conftest import Project, star

LIMITS: dict[str, Any] = {"timeout_seconds": 60, "max_output_bytes": 100_000}


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _interpreter_path() -> tuple[list[str], list[str]]:
    """sys.path and site directories of this test's interpreter started by its path with -I."""
    code = "import json, site, sys; print(json.dumps([sys.path, site.getsitepackages()]))"
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    path, sites = json.loads(done.stdout)
    return path, [s for s in sites if s in path]


def _runtime(interpreter: Path, *, harness_sha256: str | None = None) -> tuple[PythonRuntime, dict[str, FileIdentity]]:
    real = Path(os.path.realpath(interpreter))
    sys_path, site_dirs = _interpreter_path()
    runtime = PythonRuntime(
        interpreter=FrozenExecutable(
            file=FrozenFile(path=str(real), in_workspace=False, sha256=_sha256(real.read_bytes()))
        ),
        version=".".join(map(str, sys.version_info[:3])),
        sys_path=tuple(sys_path),
        site_dirs=tuple(site_dirs),
        harness_sha256=harness_sha256 or _sha256(HARNESS_PATH.read_bytes()),
    )
    return runtime, {str(real): identity_of_stat(os.stat(real))}


def _module(label: str, text: str) -> PythonModule:
    text = textwrap.dedent(text)
    name = label.removeprefix("//").removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    return PythonModule(label=label, name=name, sha256=_sha256(text.encode()), text=text)


def _node(name: str, module: str, function: str, *, output: Schema | None = None, **args: Any) -> PythonNode:
    frozen = tuple(
        PythonArg(name=key, ref=value) if isinstance(value, OutputRef) else PythonArg(name=key, value=value)
        for key, value in sorted(args.items())
    )
    needs = tuple(sorted({a.ref.node for a in frozen if a.ref is not None}))
    return PythonNode(
        name=name, module=module, function=function, args=frozen, cwd="//", modules=(module,), needs=needs,
        output=output, **LIMITS,
    )  # fmt: skip


def _run(
    project: Project,
    nodes: list[PythonNode],
    modules: list[PythonModule],
    *,
    interpreter: Path | None = None,
    harness_sha256: str | None = None,
    environment: EnvironmentPolicy | None = None,
    before_run: Any = None,
    mode: str = "auto",
) -> tuple[RunState, Path]:
    """Freeze a graph of Python nodes as a plan of ``project``, run it, return (state, run folder)."""
    runtime, identities = _runtime(interpreter or Path(sys.executable), harness_sha256=harness_sha256)
    identities["//"] = identity_of_stat(os.lstat(project.root))
    graph = Graph(
        name="py",
        inputs=(),
        nodes=tuple(sorted(nodes, key=lambda n: n.name)),
        environment=environment or EnvironmentPolicy(),
        python=runtime,
        python_modules=tuple(sorted(modules, key=lambda m: m.label)),
    )
    manifest = PlanManifest(
        plan_id=new_id(),
        created_at=now_iso(),
        graph_digest=graph_digest(graph),
        workflow=graph.name,
        entry="//wf.star",
        workspace_root=str(project.root),
        workspace_key=hashlib.sha256(os.fsencode(project.root)).hexdigest(),
        sources=(),
        inputs={},
        identities=identities,
        authority=(),
        limits={},
        planner={},
    )
    layout = StoreLayout(home=project.home)
    run_id = create_run(layout, Plan(manifest=manifest, graph=graph), mode=mode)
    if before_run is not None:
        before_run()
    state = asyncio.run(execute_run(layout, run_id, resume=False))
    return state, layout.run_dir(run_id)


def _attempt(run: Path, node: str) -> Path:
    return run / "nodes" / node / "attempts" / "1"


def test_return_value_is_the_node_value_and_print_is_the_log(project: Project) -> None:
    helpers = _module(
        "//nodes/helpers.py",
        """
        def double(x):
            return 2 * x
        """,
    )
    calc = _module(
        "//nodes/calc.py",
        """
        from nodes.helpers import double

        def base():
            print("computing base")
            return {"n": 3, "label": "three"}

        def total(x, y):
            print(f"x={x} y={y}")
            return {"total": double(x) + y}

        def plain():
            return [1, "two", None]
        """,
    )
    calc_modules = ("//nodes/calc.py", "//nodes/helpers.py")
    record = RecordSchema(fields=(("label", StringSchema()), ("n", IntegerSchema())))
    nodes = [
        _node("base", "//nodes/calc.py", "base", output=record),
        _node("total", "//nodes/calc.py", "total", output=RecordSchema(fields=(("total", IntegerSchema()),)),
              x=OutputRef(node="base", path=("n",)), y=4),
        _node("plain", "//nodes/calc.py", "plain"),
    ]  # fmt: skip
    nodes = [n.model_copy(update={"modules": calc_modules}) for n in nodes]
    state, run = _run(project, nodes, [helpers, calc])
    assert {name: n.state.value for name, n in state.nodes.items()} == {n.name: "success" for n in nodes}
    total = _attempt(run, "total")
    assert json.loads((total / "value.json").read_text()) == {"total": 10}
    assert (total / "stdout").read_text() == "x=3 y=4\n"
    assert json.loads((total / "request.json").read_text())["args"] == {"x": 3, "y": 4}
    assert (_attempt(run, "base") / "stdout").read_text() == "computing base\n"
    # no schema: the value is stored all the same, so `result` shows what the function returned
    assert json.loads((_attempt(run, "plain") / "value.json").read_text()) == [1, "two", None]
    folder = run / "python"
    assert (folder / "modules" / "nodes" / "helpers.py").read_text() == helpers.text
    assert (folder / "_rho_harness.py").read_bytes() == HARNESS_PATH.read_bytes()
    assert (folder.stat().st_mode & 0o777) == 0o700
    assert (folder / "modules" / "nodes" / "calc.py").stat().st_mode & 0o777 == 0o600


def test_schema_invalid_return_fails_with_the_validation_error(project: Project) -> None:
    module = _module("//nodes/bad.py", "def f():\n    return {'total': 'ten'}\n")
    node = _node("bad", "//nodes/bad.py", "f", output=RecordSchema(fields=(("total", IntegerSchema()),)))
    state, run = _run(project, [node], [module])
    bad = state.nodes["bad"]
    assert bad.state.value == "failure"
    assert bad.reason.startswith("output does not match the schema: ")
    assert "$.total: expected integer" in bad.reason
    assert not (_attempt(run, "bad") / "value.json").exists()


def test_an_exception_fails_with_the_traceback_tail(project: Project) -> None:
    module = _module("//nodes/boom.py", "def f(n):\n    raise ValueError(f'boom {n}')\n")
    state, run = _run(project, [_node("boom", "//nodes/boom.py", "f", n=7)], [module])
    assert state.nodes["boom"].state.value == "failure"
    assert state.nodes["boom"].reason == "exited with code 1: ValueError: boom 7"
    stderr = (_attempt(run, "boom") / "stderr").read_text()
    assert stderr.startswith("Traceback (most recent call last):") and 'nodes/boom.py", line 2, in f' in stderr


def test_a_return_value_that_is_not_json_fails(project: Project) -> None:
    module = _module("//nodes/odd.py", "def f():\n    return {1, 2}\n")
    state, _ = _run(project, [_node("odd", "//nodes/odd.py", "f")], [module])
    assert state.nodes["odd"].state.value == "failure"
    assert state.nodes["odd"].reason.startswith(
        "exited with code 2: the return value of f() is not JSON-encodable: set"
    )


def test_timeout_oversized_result_and_exit_before_returning(project: Project) -> None:
    module = _module(
        "//nodes/edge.py",
        """
        import sys
        import time

        def slow():
            time.sleep(60)

        def big():
            return "x" * 1000

        def leave():
            sys.exit(0)
        """,
    )
    nodes = [
        _node("slow", "//nodes/edge.py", "slow").model_copy(update={"timeout_seconds": 1}),
        _node("big", "//nodes/edge.py", "big").model_copy(update={"max_output_bytes": 500}),
        _node("leave", "//nodes/edge.py", "leave"),
    ]
    state, _ = _run(project, nodes, [module])
    assert state.nodes["slow"].reason == "timed out after 1 s; the process tree was stopped"
    assert state.nodes["big"].reason == (
        "the return value of big() is 1002 bytes as JSON, more than max_output_bytes=500"
    )
    assert state.nodes["leave"].reason == "exited with code 0 before leave() returned (did it call sys.exit?)"
    assert {state.nodes[n.name].state.value for n in nodes} == {"failure"}


def test_an_interpreter_replaced_after_planning_fails_closed(project: Project, tmp_path: Path) -> None:
    copy = tmp_path / "bin" / "python3"
    copy.parent.mkdir()
    shutil.copy2(os.path.realpath(sys.executable), copy)
    touched = tmp_path / "ran"
    module = _module("//nodes/touch.py", f"def f():\n    open({str(touched)!r}, 'w').close()\n    return 1\n")

    def replace() -> None:
        replacement = tmp_path / "replacement"
        shutil.copy2("/bin/sh", replacement)
        os.replace(replacement, copy)

    state, _ = _run(project, [_node("touch", "//nodes/touch.py", "f")], [module], interpreter=copy, before_run=replace)
    node = state.nodes["touch"]
    assert node.state.value == "failure" and node.current is not None
    assert node.current.exit is not None and node.current.exit["kind"] == "not_started"
    assert str(copy) in node.reason
    assert not touched.exists()


def test_isolated_from_pythonpath_and_a_sitecustomize_in_cwd(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "customized"
    hook = f"open({str(marker)!r}, 'w').close()\n"
    for folder in (planted, project.root):
        (folder / "sitecustomize.py").write_text(hook)
        (folder / "usercustomize.py").write_text(hook)
    (planted / "evil.py").write_text("VALUE = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(planted))
    monkeypatch.setenv("PYTHONSTARTUP", str(planted / "evil.py"))
    module = _module(
        "//nodes/probe.py",
        """
        import importlib.util
        import os
        import sys

        def f():
            return {
                "pythonpath": os.environ.get("PYTHONPATH", ""),
                "evil": importlib.util.find_spec("evil") is not None,
                "cwd_on_path": any(p in ("", os.getcwd()) for p in sys.path),
                "isolated": sys.flags.isolated,
            }
        """,
    )
    policy = EnvironmentPolicy(names=(*EnvironmentPolicy().names, "PYTHONPATH", "PYTHONSTARTUP"))
    state, run = _run(project, [_node("probe", "//nodes/probe.py", "f")], [module], environment=policy)
    assert state.nodes["probe"].state.value == "success", state.nodes["probe"].reason
    seen = json.loads((_attempt(run, "probe") / "value.json").read_text())
    assert seen == {"pythonpath": str(planted), "evil": False, "cwd_on_path": False, "isolated": 1}
    assert not marker.exists()


def test_a_changed_harness_fails_closed(project: Project) -> None:
    module = _module("//nodes/ok.py", "def f():\n    return 1\n")
    state, run = _run(project, [_node("ok", "//nodes/ok.py", "f")], [module], harness_sha256="sha256:" + "0" * 64)
    node = state.nodes["ok"]
    assert node.state.value == "failure"
    assert node.reason.startswith("the rho_notebook Python harness changed since this plan was made (sha256 ")
    assert node.reason.endswith("; plan again")
    assert node.current is not None and node.current.exit is not None and node.current.exit["kind"] == "not_started"
    assert not (run / "python").exists()


def test_render_args_and_launch_facts() -> None:
    module = _module("//nodes/m.py", "def f(a, b):\n    return a\n")
    node = _node("n", "//nodes/m.py", "f", a=OutputRef(node="up", path=("rows", 1)), b={"k": [1]})
    runtime, _ = _runtime(Path(sys.executable))
    graph = Graph(name="g", inputs=(), nodes=(node,), python=runtime, python_modules=(module,))
    outputs = {"up": {"rows": ["x", "y"]}}
    assert render_args(node, lambda name: outputs.get(name, UNAVAILABLE)) == {"a": "y", "b": {"k": [1]}}
    facts = python_facts(node, graph, lambda name: outputs.get(name, UNAVAILABLE))
    assert facts == {
        "interpreter": runtime.interpreter.file.path,
        "sha256": runtime.interpreter.file.sha256,
        "module": "//nodes/m.py",
        "module_sha256": module.sha256,
        "function": "f",
        "args": {"a": "y", "b": {"k": [1]}},
        "cwd": "//",
    }
    with pytest.raises(UnavailableValue, match=r"output\('up'\)\['rows'\]\[1\] is unavailable"):
        render_args(node, lambda name: UNAVAILABLE)


@pytest.mark.parametrize("access", ["read_only", "mutating"])
def test_python_launches_are_processes_in_every_permission_mode(access: str) -> None:
    node = _node("n", "//nodes/m.py", "f").model_copy(update={"access": access})
    assert decide_launch(PermissionMode.AUTO, node) is LaunchDecision.ALLOW
    assert decide_launch(PermissionMode.PLAN, node) is LaunchDecision.DENY
    # read-only is the author's unverified declaration: a supervised launch still asks
    assert decide_launch(PermissionMode.SUPERVISED, node) is LaunchDecision.ASK


def test_a_supervised_read_only_python_node_without_a_responder_is_denied(project: Project, tmp_path: Path) -> None:
    touched = tmp_path / "ran"
    module = _module("//nodes/touch.py", f"def f():\n    open({str(touched)!r}, 'w').close()\n")
    node = _node("touch", "//nodes/touch.py", "f").model_copy(update={"access": "read_only"})
    state, _ = _run(project, [node], [module], mode="supervised")
    assert state.nodes["touch"].state.value == "denial"
    assert "supervised launch needs approval" in state.nodes["touch"].reason
    assert not touched.exists()


def test_a_planned_starlark_workflow_runs_its_python_nodes(project: Project) -> None:
    """The planner's freeze (interpreter, sys.path, modules by label) and the executor agree."""
    project.write(
        "nodes/helpers.py",
        """
        def mean(values):
            return sum(values) // len(values)
        """,
    )
    project.write(
        "nodes/stats.py",
        """
        from nodes.helpers import mean

        def load():
            return {"values": [1, 2, 6]}

        def stats(values, window):
            print("window", window)
            return {"mean": mean(values), "count": len(values)}
        """,
    )
    project.write(
        "wf.star",
        star(
            """
            L = {"timeout_seconds": 60, "max_output_bytes": 100000}
            return workflow(name = "py", nodes = [
                python(name = "load", module = "//nodes/stats.py", function = "load",
                       output = schema.record({"values": schema.list(schema.integer())}), **L),
                python(name = "stats", module = "//nodes/stats.py", function = "stats",
                       args = {"values": output("load", ["values"]), "window": 3}, needs = ["load"],
                       output = schema.record({"mean": schema.integer(), "count": schema.integer()}), **L),
            ])
            """
        ),
    )
    plan = project.plan("wf.star")
    assert plan.graph.python is not None
    assert [m.label for m in plan.graph.python_modules] == ["//nodes/helpers.py", "//nodes/stats.py"]
    layout = StoreLayout(home=project.home)
    run_id = create_run(layout, plan)
    state = asyncio.run(execute_run(layout, run_id, resume=False))
    assert state.nodes["stats"].state.value == "success", state.nodes["stats"].reason
    stats = _attempt(layout.run_dir(run_id), "stats")
    assert json.loads((stats / "value.json").read_text()) == {"count": 3, "mean": 3}
    assert (stats / "stdout").read_text() == "window 3\n"
