"""The code-argument matrix (issue 27, docs/workflows.md "Data is never code"): every form a
workflow runs a command in x every interpreter x every wrapper, with data in the code position
(refused), as the script (refused), a literal in its place (accepted) and data after a static
program (accepted).

Forms, each through the real planning or step code, in process:

- ``starlark``: ``validate``/``plan`` of a ``.star`` (one workflow per interpreter, one node per
  cell; ``validate`` and ``plan`` are the same ``build_plan``); data is ``output("a", ["v"])``.
- ``item-validate`` and ``item-plan``: ``validate`` and ``plan`` of a ``FILE.graph.yaml``, the
  interpreter named through a workspace symlink (``./tools/run-sh``) so that only the file it
  resolves to shows what it is (busybox applets go by name); data is ``"={{ $json.c }}"``.
- ``aggregate-validate`` and ``aggregate-plan``: the same, each cell the inner command of an
  ``aggregate`` step (its item is the element, so ``"={{ $json.c }}"`` reads the element's ``c``).
- ``convert``: ``convert FILE.graph.yaml`` (by program name) refuses the data cells; the accepted
  cells convert to a workflow the Starlark planner accepts, with the data as ``output("ask", ["c"])``.
- ``script``: a script's ``run_command`` step as the runner prepares it (``{"step": ...}`` data).
- ``flow``: a flow ``Tool`` called by a model (``run_tool``), the model's arguments appended.

Interpreters and wrappers that are not installed (zsh, ksh, fish, ruby, php, lua, ``time``,
``busybox``, ...) are stand-in executables of that name on the planner's search path.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.errors import Diagnostic, InvalidWorkflow, StepInvalid
from rho_notebook.flow import Tool, ToolCall
from rho_notebook.model.graph import Graph, ScriptSpec
from rho_notebook.planning.code_args import wrapper_names
from rho_notebook.planning.convert import convert_graph
from rho_notebook.planning.itemgraph import lint_graph, lint_graph_file
from rho_notebook.runtime.script_steps import StepCall, StepRunner
from rho_notebook.script import StepHandle
from rho_notebook.service import Service
from rho_notebook.source.workspace import Workspace
from rho_notebook.store.layout import StoreLayout
from rho_notebook.store.runs import RunFolder

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
DATA = object()
"""Where the datum goes in a cell's argv."""


@dataclass(frozen=True)
class Interpreter:
    name: str
    code: tuple[str, ...]
    """The argv before the datum when the datum is the code (``-c DATA``)."""
    after: tuple[str, ...]
    """A static program: a datum after it is data."""


INTERPRETERS = (
    Interpreter("sh", ("sh", "-c"), ("sh", "-c", 'echo "$1"', "sh")),
    Interpreter("bash", ("bash", "-c"), ("bash", "-c", 'echo "$1"', "bash")),
    Interpreter("dash", ("dash", "-c"), ("dash", "-c", 'echo "$1"', "dash")),
    Interpreter("zsh", ("zsh", "-c"), ("zsh", "-c", 'echo "$1"', "zsh")),
    Interpreter("ksh", ("ksh", "-c"), ("ksh", "-c", 'echo "$1"', "ksh")),
    Interpreter("fish", ("fish", "-c"), ("fish", "-c", "echo $argv", "--")),
    Interpreter("python3", ("python3", "-c"), ("python3", "-c", "import sys; print(sys.argv[1])")),
    Interpreter("perl", ("perl", "-e"), ("perl", "-e", "print @ARGV", "--")),
    Interpreter("ruby", ("ruby", "-e"), ("ruby", "-e", "p ARGV", "--")),
    Interpreter("node", ("node", "-e"), ("node", "-e", "console.log(process.argv[1])", "--")),
    Interpreter("php", ("php", "-r"), ("php", "-r", "echo $argv[1];", "--")),
    Interpreter("lua", ("lua", "-e"), ("lua", "-e", "x=1", "script.lua")),
)
BY_NAME = {i.name: i for i in INTERPRETERS}

Argv = tuple[Any, ...]
WRAPPERS: dict[str, Callable[[Argv], Argv]] = {
    "direct": lambda a: a,
    "env": lambda a: ("env", "-uX", "-u", "Y", "--unset=Z", "-i", "--", "-", "A=1", *a),
    "env-s": lambda a: ("env", "-S", f"-i {a[0]}", *a[1:]),
    "timeout": lambda a: ("timeout", "-s", "KILL", "-k1", "--foreground", "5", *a),
    "nice": lambda a: ("nice", "-n", "5", *a),
    "nohup": lambda a: ("nohup", "--", *a),
    "setsid": lambda a: ("setsid", "-w", "--fork", *a),
    "stdbuf": lambda a: ("stdbuf", "-oL", "--error=0", *a),
    "xargs": lambda a: ("xargs", "-0", "-n", "1", "-r", *a),
    "ionice": lambda a: ("ionice", "-c", "3", "-t", *a),
    "time": lambda a: ("time", "-f", "%e", *a),
    "taskset": lambda a: ("taskset", "-c", "0", *a),
    "flock": lambda a: ("flock", "-w", "5", "/tmp/rho-lock", *a),
    "chrt": lambda a: ("chrt", "-o", "-R", "--sched-runtime", "0", "0", *a),
    "busybox": lambda a: ("busybox", *a),
    "nested": lambda a: ("env", "A=1", "timeout", "5", "nice", "-n", "1", "chrt", "-o", "0", *a),
}
KINDS = ("code", "script", "literal", "after")
REFUSED = ("code", "script")
FORMS = ("starlark", "item-validate", "item-plan", "aggregate-validate", "aggregate-plan", "convert", "script", "flow")
STAND_INS = ("time", "busybox", *(i.name for i in INTERPRETERS))


def cell_argv(interpreter: Interpreter, wrapper: str, kind: str, *, program: str | None = None) -> Argv:
    """The argv of one cell; ``program`` names the interpreter differently (a symlink)."""
    name = program or interpreter.name
    inner: Argv = {
        "code": (name, *interpreter.code[1:], DATA),
        "script": (name, DATA),
        "literal": (name, *interpreter.code[1:], "echo literal"),
        "after": (name, *interpreter.after[1:], DATA),
    }[kind]
    return WRAPPERS[wrapper](inner)


def cell_name(wrapper: str, kind: str) -> str:
    return f"{wrapper}-{kind}"


def data_index(argv: Argv) -> int:
    return next(i for i, part in enumerate(argv) if part is DATA)


# -- the workspace: stand-ins, symlinks, a service -----------------------------------------------------


@dataclass
class Bench:
    root: Path
    home: Path
    search_path: str
    service: Service
    caches: dict[tuple[str, str], dict[str, Any]]

    def plan(self, relative: str, text: str) -> list[Diagnostic]:
        """The diagnostics of planning ``text`` (nothing stored); [] when it plans."""
        (self.root / relative).write_text(text)
        request = self.service.request_for(
            self.root / relative, workspace=Workspace(root=self.root), search_path=self.search_path
        )
        try:
            asyncio.run(self.service.validate(request))
        except InvalidWorkflow as err:
            return list(err.diagnostics())
        return []


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    base = tmp_path_factory.mktemp("matrix")
    stand_ins = base / "bin"
    stand_ins.mkdir()
    for name in STAND_INS:
        if shutil.which(name, path=SYSTEM_PATH) is None:
            (stand_ins / name).write_text(f"#!/bin/sh\n# a stand-in {name} for the code-argument matrix\nexit 0\n")
            (stand_ins / name).chmod(0o755)
    search_path = f"{stand_ins}:{SYSTEM_PATH}"
    root = (base / "ws").resolve()
    (root / ".rho").mkdir(parents=True)
    (root / "tools").mkdir()
    for interpreter in INTERPRETERS:
        found = shutil.which(interpreter.name, path=search_path)
        assert found is not None, interpreter.name
        os.symlink(os.path.realpath(found), root / "tools" / f"run-{interpreter.name}")
    home = (base / "home").resolve()
    yield Bench(root, home, search_path, Service(layout=StoreLayout(home=home)), {})


def cached(bench: Bench, form: str, interpreter: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    key = (form, interpreter)
    if key not in bench.caches:
        bench.caches[key] = compute()
    return bench.caches[key]


def by_cell(diagnostics: list[Diagnostic], subject: str) -> dict[str, Diagnostic]:
    found: dict[str, Diagnostic] = {}
    for diagnostic in diagnostics:
        named = re.match(rf"{subject} '([a-z0-9_-]+)'", diagnostic.message)
        assert named is not None, diagnostic.render()
        found.setdefault(named.group(1), diagnostic)
    return found


# -- Starlark ----------------------------------------------------------------------------------------

PRODUCER = (
    'command(name = "a", argv = ["printf", "{}"], output = schema.stdout_json(schema.record({"v": schema.string()})), '
    "timeout_seconds = 5, max_output_bytes = 100)"
)


def starlark_results(bench: Bench, interpreter: Interpreter) -> dict[str, Any]:
    nodes = [PRODUCER]
    for wrapper in WRAPPERS:
        for kind in KINDS:
            argv = cell_argv(interpreter, wrapper, kind)
            shown = ", ".join('output("a", ["v"])' if p is DATA else json.dumps(p) for p in argv)
            nodes.append(
                f'command(name = "{cell_name(wrapper, kind)}", argv = [{shown}], needs = ["a"], '
                "timeout_seconds = 5, max_output_bytes = 100)"
            )
    body = ",\n".join(f"        {node}" for node in nodes)
    text = f'def build(inputs):\n    return workflow(name = "m", nodes = [\n{body}\n    ])\n\n'
    text += "WORKFLOW = define(inputs = {}, build = build)\n"
    return by_cell(bench.plan(f"m_{interpreter.name}.star", text), "node")


# -- item graphs and convert --------------------------------------------------------------------------

MAPPING = "={{ $json.c }}"


def graph_text(cells: list[tuple[str, Argv]], *, aggregate: bool = False) -> tuple[str, dict[str, int]]:
    """An item graph: an agent step answering ``c``, then the cells' command steps in a chain (with
    ``aggregate``, aggregate steps over the list ``cs`` whose inner step is the cell's command);
    and the line each cell is on."""
    lines = [
        "name: matrix",
        "steps:",
        "  - {id: ask, kind: agent, params: {agent: explorer, prompt: go, answer: {c: {type: string}}}}",
    ]
    at: dict[str, int] = {}
    for number, (name, argv) in enumerate(cells):
        shown = json.dumps([MAPPING if p is DATA else p for p in argv])
        at[name] = len(lines) + 1
        if aggregate:
            inner = f"{{kind: command, params: {{argv: {shown}}}}}"
            params = f"{{over: cs, max_items: 3, into: out{number}, step: {inner}}}"
            lines.append(f"  - {{id: {name}, kind: aggregate, params: {params}}}")
        else:
            lines.append(f"  - {{id: {name}, kind: command, params: {{argv: {shown}, into: out{number}}}}}")
    lines.append("edges:")
    chain = ["ask", *(name for name, _ in cells)]
    lines += [f"  - {{from: {a}, to: {b}}}" for a, b in zip(chain, chain[1:], strict=False)]
    return "\n".join(lines) + "\n", at


def all_cells(
    interpreter: Interpreter, *, alias: bool = False, kinds: tuple[str, ...] = KINDS
) -> list[tuple[str, Argv]]:
    program = f"./tools/run-{interpreter.name}" if alias else None
    return [
        (cell_name(w, k), cell_argv(interpreter, w, k, program=None if w == "busybox" else program))
        for w in WRAPPERS
        for k in kinds
    ]


def alias_groups(interpreter: Interpreter) -> list[list[tuple[str, Argv]]]:
    """The cells with the interpreter behind a symlink, so that a check by name passes and only the
    file the name resolves to shows what it is; busybox runs applets by name, so its cells keep the
    name and go in a document of their own (a finding by name stops a document's other checks)."""
    cells = all_cells(interpreter, alias=True)
    return [[c for c in cells if not c[0].startswith("busybox")], [c for c in cells if c[0].startswith("busybox")]]


def item_validate_results(bench: Bench, interpreter: Interpreter, *, aggregate: bool = False) -> dict[str, Any]:
    """``validate FILE.graph.yaml`` (:func:`lint_graph_file`, with the planner's search path as
    the process's PATH): by name, then against the files the names resolve to."""
    found: dict[str, Any] = {}
    for number, group in enumerate(alias_groups(interpreter)):
        text, at = graph_text(group, aggregate=aggregate)
        if number == 0:
            assert lint_graph(text, display="m.graph.yaml")[1] == [], "the symlinked names must pass by name"
        path = bench.root / f"v{number}_{interpreter.name}.graph.yaml"
        path.write_text(text)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("PATH", bench.search_path)
            findings = lint_graph_file(path, display=path.name)
        found.update({str(f.step): (f.diagnostic(), at[str(f.step)]) for f in findings})
    return found


def item_plan_results(bench: Bench, interpreter: Interpreter, *, aggregate: bool = False) -> dict[str, Any]:
    """``plan FILE.graph.yaml`` of the same documents."""
    found: dict[str, Any] = {}
    for group in alias_groups(interpreter):
        text, at = graph_text(group, aggregate=aggregate)
        diagnostics = bench.plan(f"m_{interpreter.name}.graph.yaml", text)
        found.update({name: (d, at[name]) for name, d in by_cell(diagnostics, "step").items()})
    return found


def convert_results(bench: Bench, interpreter: Interpreter) -> dict[str, Any]:
    refused_text, _ = graph_text(all_cells(interpreter, kinds=REFUSED))
    with pytest.raises(InvalidWorkflow) as caught:
        convert_graph(refused_text, display="m.graph.yaml")
    found: dict[str, Any] = dict(by_cell(list(caught.value.diagnostics()), "step"))
    accepted_text, _ = graph_text(all_cells(interpreter, kinds=("literal", "after")))
    converted = convert_graph(accepted_text, display="m.graph.yaml")
    assert converted.count('output("ask", ["c"])') == len(WRAPPERS), converted
    found.update(by_cell(bench.plan(f"converted_{interpreter.name}.star", converted), "node"))
    return found


# -- script and flow steps ----------------------------------------------------------------------------

STEP_DATA = {"step": "find", "text": "touch PWNED"}
WHERE = "//scripts/matrix.py:7"


def step_runner(bench: Bench) -> StepRunner:
    layout = StoreLayout(home=bench.home)
    return StepRunner(
        graph=Graph(name="matrix", inputs=(), nodes=(), script=ScriptSpec(module="//scripts/matrix.py")),
        workspace=bench.root,
        layout=layout,
        run_id="run-matrix",
        folder=RunFolder(path=layout.runs / "run-matrix"),
        environ={"PATH": bench.search_path},
        search_path=bench.search_path,
    )


def script_result(runner: StepRunner, name: str, argv: Argv) -> str | None:
    items = [STEP_DATA if p is DATA else p for p in argv]
    call = StepCall(
        key=name,
        kind="command",
        args={"argv": items, "timeout_seconds": 5, "max_output_bytes": 100},
        where=WHERE,
    )
    try:
        runner.prepare(call)
    except StepInvalid as err:
        return err.message
    return None


def flow_result(runner: StepRunner, name: str, argv: Argv, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """A model's tool call through the flow backend's real ``run_tool``; the step it sends is
    prepared by the runner (a refusal comes back as the ValueError the shim raises)."""
    from rho_notebook.flow import backend

    def keyed_step(kind: str, key: str, args: dict[str, Any], *, after: Any = ()) -> StepHandle:
        try:
            runner.prepare(StepCall(key=key, kind=kind, args=args, after=tuple(after), where=WHERE))
        except StepInvalid as err:
            raise ValueError(err.message) from None
        return StepHandle(step_id=key, state="success", output="ok", value=None, replayed=False)

    monkeypatch.setattr(backend, "_keyed_step", keyed_step)
    monkeypatch.setattr(backend, "in_run", lambda: True)
    assert argv[-1] is DATA
    tool = Tool(name="t", description="a tool", argv=tuple(str(p) for p in argv[:-1]))
    call = ToolCall.from_dict({"id": "c1", "name": "t", "arguments": {"text": "touch PWNED"}})
    try:
        message = backend.run_tool(f"flow.agent/{name}#2", tool, call, asked_by="flow.agent#1")
    except ValueError as err:
        return str(err)
    assert message.content == "ok" and not message.is_error
    return None


# -- the matrix ---------------------------------------------------------------------------------------

SUBJECT = {"starlark": "node", "convert": "step"}
SHOWN = {"starlark": 'output("a", ["v"])', "script": "step 'find'", "flow": "step 'flow.agent#1'"}


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
@pytest.mark.parametrize("interpreter", list(BY_NAME))
@pytest.mark.parametrize("form", FORMS)
def test_data_is_refused_where_it_would_be_code_and_accepted_after_a_static_program(
    bench: Bench, form: str, interpreter: str, wrapper: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = BY_NAME[interpreter]
    computed = {
        "starlark": starlark_results,
        "item-validate": item_validate_results,
        "item-plan": item_plan_results,
        "aggregate-validate": partial(item_validate_results, aggregate=True),
        "aggregate-plan": partial(item_plan_results, aggregate=True),
        "convert": convert_results,
    }
    results = cached(bench, form, interpreter, lambda: computed[form](bench, spec)) if form in computed else {}
    runner = step_runner(bench) if form in ("script", "flow") else None
    for kind in KINDS:
        name = cell_name(wrapper, kind)
        argv = cell_argv(spec, wrapper, kind)
        if form == "flow" and kind == "literal":
            continue  # a tool's model arguments always come last: there is no literal in their place
        if form == "script" and runner is not None:
            check_step(form, name, argv, kind, script_result(runner, name, argv))
        elif form == "flow" and runner is not None:
            check_step(form, name, argv, kind, flow_result(runner, name, argv, monkeypatch))
        else:
            check_diagnostic(form, name, argv, kind, results.get(name))


def check_step(form: str, name: str, argv: Argv, kind: str, message: str | None) -> None:
    if kind not in REFUSED:
        assert message is None, f"{form} {name} {argv}: refused: {message}"
        return
    assert message is not None, f"{form} {name} {argv}: accepted"
    key = name if form == "script" else f"flow.agent/{name}#2"
    index = data_index(argv)
    assert f"step {key!r} (called at {WHERE}): argv[{index}] is {SHOWN[form]}" in message, message
    assert "pass values as positional arguments" in message.lower(), message


def check_diagnostic(form: str, name: str, argv: Argv, kind: str, found: Any) -> None:
    if kind not in REFUSED:
        assert found is None, f"{form} {name} {argv}: refused: {found}"
        return
    assert found is not None, f"{form} {name} {argv}: accepted"
    diagnostic, line = found if isinstance(found, tuple) else (found, None)
    assert diagnostic.rule == "argv.code", diagnostic.render()
    assert diagnostic.line is not None and diagnostic.column is not None, diagnostic.render()
    if line is not None:  # item graphs: at the argument itself
        assert diagnostic.line == line, diagnostic.render()
    subject = SUBJECT.get(form, "step")
    shown = SHOWN.get(form, "{{ $json.c }}")
    assert f"{subject} {name!r}: argv[{data_index(argv)}] is {shown}" in diagnostic.message, diagnostic.render()


def test_the_docs_list_every_wrapper_and_interpreter() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "workflows.md").read_text()
    section = text.split("#### Data is never code", 1)[1].split("### `shell(...)`", 1)[0]
    for name in wrapper_names():
        assert f"| `{name}` |" in section, name
    for name in ("dash", "zsh", "ksh", "fish", "python3", "perl", "ruby", "node", "php", "lua", "awk", "sed"):
        assert re.search(rf"\b{name}\b", section), name
