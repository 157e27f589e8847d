"""Helpers of the policy matrix test (tests/cli/test_policy_matrix.py): the launches, the expected
cells read from docs/approvals.md, a hook program that acts on one launch only, and one real run of
a stored plan through the service with a person answering its requests from another thread."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rho_notebook.model.run_state import RunState
from rho_notebook.policy.approvals import ApprovalRequest
from rho_notebook.runtime.script_driver import SCRIPT_NODE
from rho_notebook.service import Consent, Service, StartRun
from rho_notebook.store.journal import read_journal
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.conftest import REPO

C = "timeout_seconds = 30, max_output_bytes = 10000"
FLOW_TOOL_STEP = "probe.agent#2"
"""The flow's tool call: the second step of its agent loop (model, tool, model)."""


@dataclass(frozen=True)
class Launch:
    """One column of the matrix: the launch a cell is about, in the plan that makes it."""

    column: str
    """Its column header in docs/approvals.md."""
    source: str
    """The file planned (in the workspace)."""
    target: str
    """The node, the step key, or ``(script)``."""
    tool: str
    """The ``tool`` a hook sees for it."""
    starts: Literal["process", "model", "script"]
    """What shows it started: ``process_started``, a request to the model server, ``script_launched``."""
    script: bool = False
    """A script or flow run (its own process passes the gate first)."""
    flow: str | None = None
    dask: bool = False
    others: tuple[tuple[str, str], ...] = ()
    """(node, tool) of the run's other launches, which every hook program must see with that tool."""

    def tool_of(self, node: str) -> str:
        known = {self.target: self.tool, **dict(self.others)}
        if self.script:
            known.setdefault(SCRIPT_NODE, "workflow_script")
        return known[node]


SCRIPT_OTHERS = ((SCRIPT_NODE, "workflow_script"),)
LAUNCHES: dict[str, Launch] = {
    "command": Launch("command node", "command.star", "target", "workflow_command", "process"),
    "shell": Launch("shell node", "shell.star", "target", "workflow_command", "process"),
    "python": Launch("Python node", "python.star", "target", "workflow_python", "process"),
    "item-command": Launch("item command step", "item_command.graph.yaml", "target", "workflow_command", "process"),
    "item-agent": Launch("item agent step", "item_agent.graph.yaml", "target", "workflow_agent", "model"),
    "item-model": Launch("item model step", "item_model.graph.yaml", "target", "workflow_model", "model"),
    "dask": Launch("Dask attempt", "command.star", "target", "workflow_command", "process", dask=True),
    "run-command": Launch(
        "`run_command` step", "script_command.py", "target", "workflow_command", "process", script=True
    ),
    "run-step": Launch("`run_step` step", "script_agent.py", "target", "workflow_agent", "model", script=True),
    "run-model": Launch("`run_model` step", "script_model.py", "target", "workflow_model", "model", script=True),
    "flow-tool": Launch(
        "flow tool call",
        "flow_tool.py",
        FLOW_TOOL_STEP,
        "workflow_command",
        "process",
        script=True,
        flow="Probe",
        others=(("probe.agent#1", "workflow_model"), ("probe.agent#3", "workflow_model")),
    ),
    "script": Launch("script process", "script_process.py", SCRIPT_NODE, "workflow_script", "script", script=True),
}

AGGREGATES: dict[str, Launch] = {
    kind: Launch(f"item {kind} aggregate", f"aggregate_{kind}.graph.yaml", "target", f"workflow_{kind}", starts)
    for kind, starts in (("command", "process"), ("agent", "model"), ("model", "model"))
}
"""An item ``aggregate`` step of each inner kind that launches (docs/graphs.md, "aggregate steps":
"an aggregate is a launch of its inner kind"): each rule does to it what it does to the item step
of that kind (its column of docs/approvals.md), with one decision for all its instances."""

ELEMENTS = ({"n": 1, "text": "first"}, {"n": 2, "text": "second"}, {"n": 3, "text": "third"})
"""The list every aggregate runs its inner step over (``tickets``, from a ``set`` step)."""

INNER_STEPS = {
    "command": """{kind: command, params: {argv: [echo, "={{ $json.n }}"]}}""",
    "agent": """{kind: agent, params: {agent: worker, prompt: "=say {{ $json.text }}", access: mutating}}""",
    "model": """{kind: model, params: {provider: local, model: test-model, prompt: "=say {{ $json.text }}"}}""",
}


def aggregate_source(kind: str) -> str:
    """An item graph: a ``set`` step making the list, the aggregate ``target`` over it, an output."""
    tickets = json.dumps(list(ELEMENTS))
    return f"""\
        name: a{kind}
        steps:
          - {{id: list, kind: set, params: {{fields: {{tickets: {tickets}}}}}}}
          - id: target
            kind: aggregate
            params: {{over: tickets, max_items: 5, into: r, step: {INNER_STEPS[kind]}}}
          - {{id: done, kind: output}}
        edges:
          - {{from: list, to: target}}
          - {{from: target, to: done}}
        """


SOURCES: dict[str, str] = {
    "command.star": f"""\
        def build(inputs):
            return workflow(name = "c", nodes = [command(name = "target", argv = ["echo", "ok"], {C})])

        WORKFLOW = define(inputs = {{}}, build = build)
        """,
    "shell.star": f"""\
        def build(inputs):
            return workflow(name = "s", nodes = [
                shell(name = "target", executable = "sh", arguments = ["-c"], command = "echo ok", {C}),
            ])

        WORKFLOW = define(inputs = {{}}, build = build)
        """,
    "nodes/calc.py": "def calc():\n    return 1\n",
    "python.star": f"""\
        def build(inputs):
            return workflow(name = "p", nodes = [
                python(name = "target", module = "//nodes/calc.py", function = "calc", {C}),
            ])

        WORKFLOW = define(inputs = {{}}, build = build)
        """,
    "item_command.graph.yaml": """\
        name: ic
        steps:
          - {id: target, kind: command, params: {argv: [echo, '{"n": 1}'], into: r}}
          - {id: done, kind: output}
        edges:
          - {from: target, to: done}
        """,
    "item_agent.graph.yaml": """\
        name: ia
        steps:
          - {id: target, kind: agent, params: {agent: worker, prompt: "say ok", access: mutating}}
          - {id: done, kind: output}
        edges:
          - {from: target, to: done}
        """,
    "item_model.graph.yaml": """\
        name: im
        steps:
          - {id: target, kind: model, params: {provider: local, model: test-model, prompt: "say ok", into: r}}
          - {id: done, kind: output}
        edges:
          - {from: target, to: done}
        """,
    "script_command.py": """\
        from rho_notebook.script import run_command

        run_command(["echo", "ok"], step_id="target", timeout_seconds=30, max_output_bytes=10000)
        """,
    "script_agent.py": """\
        from rho_notebook.script import run_step

        run_step("worker", "say ok", step_id="target")
        """,
    "script_model.py": """\
        from rho_notebook.script import run_model

        run_model([{"role": "user", "content": "say ok"}], provider="local", model="test-model", step_id="target")
        """,
    "script_process.py": """\
        from rho_notebook.script import emit_output

        emit_output({"ok": True})
        """,
    "flow_tool.py": """\
        from rho_notebook.flow import AgentParam, Tool, Workflow, run_session_loop

        PROBE = Tool(
            name="probe",
            description="Echo the arguments",
            argv=("echo",),
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        )


        class Probe(Workflow):
            def __init__(self):
                super().__init__()
                self.agent = AgentParam(system="Call the probe tool once, then answer.")

            def forward(self, session):
                return run_session_loop(session, self.agent, tools=[PROBE])
        """,
}
SOURCES.update({launch.source: aggregate_source(kind) for kind, launch in AGGREGATES.items()})


def answer(request: Recorded) -> Reply:
    """The model: call ``probe`` when it is offered and was not called yet, else answer a JSON object
    (an item agent step without answer fields needs one)."""
    offered = [tool["function"]["name"] for tool in request.body.get("tools") or []]
    called = any(message["role"] == "tool" for message in request.body["messages"])
    if "probe" in offered and not called:
        return OPENAI.tools(("c1", "probe", {"text": "hi"}))
    return OPENAI.answer('{"ok": true}')


# -- the hook program ----------------------------------------------------------------------------------

HOOK = """\
#!/bin/sh
# gate ACTION TOOL NODE LOG: log the payload, then act (deny | exit | sleep) only on the launch
# whose tool and node are TOOL and NODE; let every other launch through.
payload=$(cat)
printf '%s\\n' "$payload" >> "$4"
case "$payload" in *"\\"tool\\": \\"$2\\""*) ;; *) exit 0 ;; esac
case "$payload" in *"\\"node\\": \\"$3\\""*) ;; *) exit 0 ;; esac
case "$1" in
  deny) printf '{"decision": "deny", "reason": "the matrix denies %s %s"}\\n' "$2" "$3" ;;
  exit) exit 3 ;;
  sleep) sleep 30 ;;
esac
"""

HookAction = Literal["continue", "deny", "exit", "sleep"]


def hook_settings(program: Path, log: Path, launch: Launch, *, event: str, action: HookAction) -> dict[str, Any]:
    """The ``hooks`` settings section: one hook for ``event`` acting on ``launch`` only."""
    spec: dict[str, Any] = {"command": [str(program), action, launch.tool, launch.target, str(log)]}
    if action == "sleep":
        spec["timeout_seconds"] = 0.5
    return {event: [spec]}


# -- the expected cells --------------------------------------------------------------------------------

DOC = REPO / "docs" / "approvals.md"
_CELL = re.compile(r"^(?P<how>[a-z ]+?)(?: `(?P<state>[a-z]+)`)?, run `(?P<outcome>[a-z]+)`$")


@dataclass(frozen=True)
class Cell:
    how: str
    state: str | None
    outcome: str


def expected_cells() -> dict[tuple[str, str], Cell]:
    """(row, launch id) -> the cell, from the tables of "What each rule does to each launch"."""
    text = DOC.read_text()
    section = text[text.index("### What each rule does to each launch") :]
    section = section[: section.index("\n## ")]
    by_column = {launch.column: key for key, launch in LAUNCHES.items()}
    cells: dict[tuple[str, str], Cell] = {}
    columns: list[str] = []
    for line in section.splitlines():
        if not line.startswith("| "):
            continue
        parts = [part.strip() for part in line.strip().strip("|").split("|")]
        if parts[0] == "rule":
            columns = [by_column[name] for name in parts[1:]]
            continue
        if set(parts[0]) <= {"-", " "}:
            continue
        row = parts[0].split()[0]
        for key, text_of_cell in zip(columns, parts[1:], strict=True):
            found = _CELL.match(text_of_cell)
            assert found is not None, f"docs/approvals.md: cell ({row}, {key}) reads {text_of_cell!r}"
            cells[(row, key)] = Cell(found["how"], found["state"], found["outcome"])
    return cells


# -- one run -------------------------------------------------------------------------------------------


@dataclass
class Observed:
    """What one run did."""

    state: RunState
    records: list[dict[str, Any]]
    asked: list[ApprovalRequest]
    hooks: list[dict[str, Any]]
    """The payloads the hook program was given, in order."""
    requests: int
    """Requests the model server got during the run."""
    mode: str

    def of(self, node: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("node") == node and (kind is None or r["kind"] == kind)]

    def seq(self, node: str, kind: str, **fields: Any) -> int:
        found = [r for r in self.of(node, kind) if all(r.get(k) == v for k, v in fields.items())]
        assert found, f"no {kind} {fields} for {node}: {self.summary()}"
        return int(found[0]["seq"])

    def summary(self) -> str:
        return ", ".join(
            r["kind"] + (f"({r['node']})" if "node" in r else "") for r in self.records if r["kind"] != "node_ready"
        )


Decide = Callable[[ApprovalRequest], bool]


@dataclass
class Home:
    """A cell's own store home (a copy of the template's, with its plans) over the shared workspace."""

    service: Service
    server: ScriptedServer
    plans: dict[str, str]
    """Launch source (``FILE#FLOW`` for a flow) -> its stored plan's ID."""
    hook_log: Path
    dask: str | None = None
    """``dask=ADDRESS`` of the module's cluster, for the Dask launch."""
    history: list[Observed] = field(default_factory=list)
    """Every run made so far, in order."""

    def run(self, launch: Launch, *, mode: str = "auto", decide: Decide | None = None) -> Observed:
        """Run ``launch``'s plan once; ``decide(request)`` answers each request (True: approve)."""
        service = self.service
        asked: list[ApprovalRequest] = []
        deciders: list[threading.Thread] = []

        def answer(request: ApprovalRequest) -> None:
            assert decide is not None
            approve = decide(request)
            asyncio.run(service.decide(request, approve=approve, comment=None, via="cli"))

        def responder(request: ApprovalRequest) -> None:
            asked.append(request)
            thread = threading.Thread(target=answer, args=(request,), daemon=True)
            deciders.append(thread)
            thread.start()

        self.hook_log.write_text("")
        before = len(self.server.requests)
        start = StartRun(
            plan=self.plans[launch.source + (f"#{launch.flow}" if launch.flow else "")],
            consent=Consent(yes=True),
            mode=mode,  # type: ignore[arg-type]
            executor=self.dask if launch.dask else None,
        )
        state = asyncio.run(service.run(start, responder=responder if decide is not None else None))
        for thread in deciders:
            thread.join(timeout=30)
        folder = service.run_store.folder(state.run_id)
        records = list(read_journal(folder.events).events)
        hooks = [json.loads(line) for line in self.hook_log.read_text().splitlines() if line.strip()]
        observed = Observed(state, records, asked, hooks, len(self.server.requests) - before, mode)
        self.history.append(observed)
        return observed
