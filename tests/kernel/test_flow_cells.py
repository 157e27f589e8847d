"""``%%flow NAME`` cells (docs/flows.md, "In a notebook"): the cell is a flow module held at
``//<notebook folder>/NAME.py``; running it plans a flow run and starts it on the background runner,
whose live DAG grows a node per model call as the call starts; a later cell reads the final
session. ``--compile`` shows the module-tree widget instead. A ``Workflow`` called in a plain cell
runs in memory through the backend the extension installs.

Model calls go to the scripted OpenAI-compatible server of tests/agents on 127.0.0.1 (real HTTP),
configured as provider ``local`` in the store home's settings. The first test drives a real kernel
through jupyter_client and reads the DAG widget's comm messages as a front end receives them; the
rest use the in-process IPython shell.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError

from rho_notebook.service.cells import FlowCell
from tests.agents.fakeserver import OPENAI, Recorded, Reply, ScriptedServer
from tests.agents.helpers import KEY_ENV, SECRET
from tests.cli.flowhelp import setup, system_of
from tests.conftest import REPO, Project
from tests.kernel.helpers import cell, ok, usage_error

Serve = Callable[..., ScriptedServer]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

BODY = """\
from rho_notebook.flow import AgentParam, Workflow, run_session_loop


class Review(Workflow):
    def __init__(self):
        super().__init__()
        self.writer = AgentParam(system="Write a first draft.", provider="local", model="test-model")
        self.reviewer = AgentParam(system="Review the draft and tighten it.", provider="local")

    def forward(self, session):
        return run_session_loop(run_session_loop(session, self.writer), self.reviewer)


review = Review()
"""
FLOW = "%%flow review --input 'prompt=\"Write about owls\"'\n" + BODY
KEYS = ["review.writer#1", "review.reviewer#1"]

ROUTED = """\
from rho_notebook.flow import Agent, EmptyWorkflow, Selector, Workflow


class Support(Workflow):
    def __init__(self):
        super().__init__()
        self.billing = Agent("Answer billing questions.", "local", description="Invoices, refunds and payments")
        self.tech = Agent("Fix technical problems.", "local", model="test-model", description="Installation and runtime errors")
        self.route = Selector(provider="local", candidates=(self.billing, self.tech))

    def forward(self, session):
        chosen = self.route(session)
        return session if isinstance(chosen, EmptyWorkflow) else chosen(session)


support = Support()
"""


# -- a real kernel, its widget messages read as a front end reads them --------------------------------


class Front:
    """A jupyter_client kernel in the project's workspace, executing one cell at a time and keeping
    every IOPub message."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.messages: list[dict[str, Any]] = []

    def read(self, until: Callable[[dict[str, Any]], bool], *, limit: float = 30.0) -> None:
        """Keep reading IOPub until a message satisfies ``until`` (a guard against hanging, not a
        timing assertion)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                message = self.client.get_iopub_msg(timeout=1)
            except queue.Empty:
                continue
            self.messages.append(message)
            if until(message):
                return
        last = [m["msg_type"] for m in self.messages[-8:]]
        raise AssertionError(f"no such message within {limit} s; the last ones: {last}")

    def follow(self, dag: Dag, done: Callable[[], bool]) -> None:
        """Feed IOPub messages to ``dag`` until ``done()`` holds (it may hold already)."""
        if not done():
            self.read(lambda message: (dag.take(message), done())[1])

    def execute(self, code: str) -> list[dict[str, Any]]:
        """Run one cell; its IOPub messages (up to its idle). Fails on an error."""
        msg_id = self.client.execute(code)
        start = len(self.messages)
        self.read(
            lambda m: (
                m["msg_type"] == "status"
                and m["content"]["execution_state"] == "idle"
                and m["parent_header"].get("msg_id") == msg_id
            )
        )
        mine = [m for m in self.messages[start:] if m["parent_header"].get("msg_id") == msg_id]
        errors = [m["content"] for m in mine if m["msg_type"] == "error"]
        stderr = "".join(
            m["content"]["text"] for m in mine if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"
        )
        assert not errors and "UsageError" not in stderr, (errors, stderr)
        return mine

    def stdout(self, messages: list[dict[str, Any]]) -> str:
        return "".join(
            m["content"]["text"] for m in messages if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"
        )


@pytest.fixture
def front(project: Project) -> Iterator[Front]:
    from jupyter_client.manager import start_new_kernel

    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO), KEY_ENV: SECRET}
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(project.root), env=env)
    try:
        yield Front(client)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


class Dag:
    """The DAG widget as a front end knows it: its opening state, then every patch applied."""

    def __init__(self) -> None:
        self.comm_id: str | None = None
        self.names: list[str] = []
        self.states: dict[str, str] = {}
        self.lifecycle = ""
        self.grown: list[list[str]] = []
        """The node list after each message that changed it."""

    def take(self, message: dict[str, Any]) -> None:
        content = message["content"]
        if message["msg_type"] == "comm_open" and content.get("target_name") == "jupyter.widget":
            state = content["data"]["state"]
            if str(state.get("_anywidget_id", "")).endswith("DagWidget") and state.get("mode") == "run":
                self.comm_id = content["comm_id"]
                self._apply({"layout": state["graph_layout"], "nodes": state["nodes"], "run": state["run"]})
        elif message["msg_type"] == "comm_msg" and content["comm_id"] == self.comm_id:
            custom = content["data"].get("content") or {}
            if custom.get("kind") in ("patch", "snapshot"):
                self._apply(custom)

    def _apply(self, patch: dict[str, Any]) -> None:
        if "layout" in patch:
            names = [node["name"] for node in patch["layout"]["nodes"]]
            if names != self.names:
                self.names = names
                self.grown.append(names)
        for name, view in (patch.get("nodes") or {}).items():
            self.states[name] = view.get("state", "pending")
        self.lifecycle = (patch.get("run") or {}).get("lifecycle", self.lifecycle)


def test_a_flow_cell_runs_with_its_calls_live_in_the_dag_and_a_later_cell_reads_the_text(
    project: Project, serve: Serve, front: Front
) -> None:
    release = threading.Event()
    server = serve(
        [OPENAI.answer("A draft about owls."), Reply(body=OPENAI.answer("Owls, tightened.").body, hold=release)]
    )
    setup(project, server)
    dag = Dag()

    front.execute("%load_ext rho_notebook")
    shown = front.execute(FLOW)
    assert "flow review" in front.stdout(shown)
    for message in shown:
        dag.take(message)
    assert dag.comm_id is not None, "the %%flow cell showed no run widget"
    # the live widget as for %%workflow, with its picture for saved and untrusted notebooks (no
    # HTML: untrusted JupyterLab would show that sanitized instead of the PNG)
    [display] = [m["content"] for m in shown if m["msg_type"] == "display_data" and WIDGET_MIME in m["content"]["data"]]
    assert display["data"]["image/png"] and "text/html" not in display["data"]
    assert display["data"]["text/plain"].startswith("run ") and display["transient"]["display_id"]

    # the reviewer's request is held at the server: its step has started and the DAG shows it running
    server.wait_for_requests(2, timeout=60)
    front.follow(dag, lambda: dag.states.get(KEYS[1]) == "running")
    assert dag.names == KEYS and dag.states[KEYS[0]] == "success"
    assert dag.lifecycle == "running"
    assert all(names == KEYS[: len(names)] for names in dag.grown)  # grown call by call, in call order

    release.set()
    front.follow(dag, lambda: dag.lifecycle == "completed")
    assert dag.states == {KEYS[0]: "success", KEYS[1]: "success"}

    later = front.execute(
        "import json\nimport rho_notebook as rho\n"
        "run = _  # the handle the %%flow cell returned\n"
        "final = await run\n"
        "print(json.dumps({'outcome': final.outcome, 'text': rho.result(run.run_id).output['text']}))"
    )
    assert json.loads(front.stdout(later).strip().splitlines()[-1]) == {
        "outcome": "success",
        "text": "Owls, tightened.",
    }
    # when the run stopped, the cell's picture was replaced by the final DAG (same display id);
    # one copy carries the running cell's parent, so nbclient (nbconvert --execute) saves it too
    display_id = display["transient"]["display_id"]
    updates = [
        m
        for m in front.messages
        if m["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == display_id
    ]
    assert updates, "the run cell's picture was never replaced by the final DAG"
    final_png = updates[-1]["content"]["data"]["image/png"]
    assert final_png != display["data"]["image/png"]
    assert updates[-1]["content"]["data"]["text/plain"] == display["data"]["text/plain"]
    assert [system_of(r) for r in server.requests] == ["Write a first draft.", "Review the draft and tighten it."]
    assert server.requests[1].body["messages"][-1]["content"] == "A draft about owls."


# -- the in-process shell ----------------------------------------------------------------------------


@pytest.fixture
def local(ws: Project, serve: Serve, monkeypatch: pytest.MonkeyPatch) -> Callable[..., ScriptedServer]:
    """Start the scripted server and point provider ``local`` at it (credential in the environment)."""
    monkeypatch.setenv(KEY_ENV, SECRET)

    def start(script: list[Any], **kwargs: Any) -> ScriptedServer:
        server = serve(script, **kwargs)
        setup(ws, server)
        return server

    return start


def test_compile_shows_the_module_tree_widget_and_runs_nothing(ip: Any, ws: Project, local: Any) -> None:
    from ipywidgets.widgets.widget import _instances

    server = local([])
    report, captured = ok(ip, "%%flow support --compile\n" + ROUTED)
    assert "flow support: stored as //support.py; compiled (0 errors, 0 warnings); not run" in repr(report)
    assert server.requests == [] and json.loads(ws.cli("runs", "--output", "json").stdout) == []

    [tree] = captured.outputs
    text = tree.data["text/plain"]
    assert text.splitlines()[0] == "flow support: 4 modules, 3 agents, 1 selector"
    assert "route  Selector (chooses at run time)" in text
    assert '-> support.billing (Agent)  choice 1  "Invoices, refunds and payments"' in text
    assert '-> support.tech (Agent)  choice 2  "Installation and runtime errors"' in text
    widget = _instances[tree.data[WIDGET_MIME]["model_id"]]
    manifest = report.data.manifest
    assert widget.manifest == manifest
    html = widget.value
    for row in ("support", "support.billing", "support.tech", "support.route"):
        assert f'data-path="{row}"' in html
    tech = next(a for a in manifest["agents"] if a["path"] == "support.tech.agent")
    assert tech["provider"] == {"name": "local", "model": "test-model", "credential_ref": "settings:providers.local"}
    assert f'title="{tech["definition_digest"]}"' in html  # each agent's definition digest
    assert "provider <b>local</b> · model <b>test-model</b>" in html
    assert html.count('data-kind="candidate"') == 2 and "Installation and runtime errors" in html
    # static viewers (a saved notebook) get the same tree
    assert widget._repr_mimebundle_()[0]["text/html"] == html


def test_compile_findings_point_at_the_cell(ip: Any, local: Any) -> None:
    local([])
    body = BODY.replace('provider="local")\n', 'provider="nowhere")\n')
    result, captured = cell(ip, "%%flow review --compile\n" + body)
    text = str(result.error_in_exec)
    assert isinstance(result.error_in_exec, UsageError), text
    assert "compiled (1 error, 0 warnings)" in text
    assert "review.reviewer" in text and "nowhere" in text
    [tree] = captured.outputs  # the tree is shown before the cell fails
    assert "agent reviewer  provider nowhere" in tree.data["text/plain"]


def test_a_workflow_called_in_a_plain_cell_runs_in_memory(ip: Any, ws: Project, local: Any) -> None:
    def answer(request: Recorded) -> Reply:
        system = system_of(request)
        if system.startswith("Combine"):
            return OPENAI.answer("both: " + request.body["messages"][-1]["content"])
        return OPENAI.answer(f"{system.split()[0].lower()} says hi")

    server = local([answer], repeat_last=True)
    ok(
        ip,
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from rho_notebook.flow import AgentParam, Session, Workflow, run_session_loop\n\n"
        "class Pair(Workflow):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.left = AgentParam(system='Left side.', provider='local')\n"
        "        self.right = AgentParam(system='Right side.', provider='local')\n"
        "        self.judge = AgentParam(system='Combine the sides.')\n\n"
        "    def forward(self, session):\n"
        "        with ThreadPoolExecutor(2) as pool:\n"
        "            a = pool.submit(run_session_loop, session.fork(), self.left)\n"
        "            b = pool.submit(run_session_loop, session.fork(), self.right)\n"
        "            sides = [a.result().text(), b.result().text()]\n"
        "        return run_session_loop(Session.from_user_message(' / '.join(sides)), self.judge)\n\n"
        "pair_text = Pair()(Session.from_user_message('hello')).text()\n",
    )
    assert ip.user_ns["pair_text"] == "both: left says hi / right says hi"
    assert sorted(system_of(r) for r in server.requests) == ["Combine the sides.", "Left side.", "Right side."]
    assert json.loads(ws.cli("runs", "--output", "json").stdout) == []  # in memory: no run, nothing stored

    ip.run_line_magic("unload_ext", "rho_notebook")  # unloading takes the backend away again
    try:
        result = ip.run_cell("Pair()(Session.from_user_message('again'))")
        assert type(result.error_in_exec).__name__ == "FlowError"
        assert "has no model backend" in str(result.error_in_exec)
    finally:
        ip.run_line_magic("load_ext", "rho_notebook")
    assert len(server.requests) == 3


def test_a_placement_in_a_plain_cell_is_checked_against_the_settings_of_that_moment(
    ip: Any, ws: Project, local: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As OpenRath's ``.to`` reads the provider's configuration, ``.to(provider=...)`` in a kernel
    fails at that line for a name settings do not define, and knows a provider added meanwhile."""
    from rho_notebook.flow.providers import known_providers

    monkeypatch.delenv("RHO_FLOW_PROVIDERS", raising=False)
    local([])  # settings.json: provider "local"
    ok(ip, "from rho_notebook.flow import AgentParam\nparam = AgentParam(system='Write.', provider='local')")
    refused = ip.run_cell("param.to(provider='mian')").error_in_exec
    assert type(refused).__name__ == "FlowError"
    assert "provider 'mian' is not defined in settings (providers: local)" in str(refused)
    assert ip.user_ns["param"].provider == "local"  # the refused placement changed nothing

    settings_file = ws.home / "settings.json"
    settings = json.loads(settings_file.read_text())
    settings["providers"]["mian"] = dict(settings["providers"]["local"])
    settings_file.write_text(json.dumps(settings))
    ok(ip, "placed = param.to(provider='mian').provider")
    assert ip.user_ns["placed"] == "mian"

    ip.run_line_magic("unload_ext", "rho_notebook")  # unloading takes the table away again
    try:
        assert known_providers() is None
    finally:
        ip.run_line_magic("load_ext", "rho_notebook")


def test_a_flow_cell_is_held_as_a_script_module_and_exported(ip: Any, ws: Project, local: Any) -> None:
    from rho_notebook.notebook.extension import current_session

    local([])
    ok(ip, "%%flow review --compile\n" + BODY)
    session = current_session()
    cell = session.cells.scripts["review"]
    assert isinstance(cell, FlowCell) and cell.flow == "review" and cell.text == BODY
    assert session.source("review").flow == "review" and session.source("review").entry.label == "//review.py"
    assert session.describe()["workflows"]["review"]["kind"] == "flow"
    validated, _ = ok(ip, "%workflow validate review --input 'prompt=\"x\"'")
    assert "flow review: stored as //review.py" in repr(validated)  # a flow cell, not a script
    report, _ = ok(ip, "%workflow export out --workflow review")
    assert (ws.root / "out" / "review.py").read_text() == BODY
    assert f"rho-notebook plan {ws.root / 'out' / 'review.py'} --flow review" in repr(report)
    # the exported file is a flow module like any other: validate it with --flow, its tree shows
    _, captured = ok(ip, "%workflow validate out/review.py --flow review --input 'prompt=\"x\"'")
    [tree] = captured.outputs
    assert tree.data["text/plain"].splitlines()[:2] == [
        "flow review: 1 module, 2 agents, 0 selectors",
        "  review  Review",
    ]


def test_flow_cell_mistakes_are_usage_errors(ip: Any, local: Any) -> None:
    local([])
    assert "a-z, 0-9 and _" in usage_error(ip, "%%flow Review\n" + BODY)
    assert "required: name" in usage_error(ip, "%%flow\n" + BODY)
    missing = usage_error(ip, "%%flow nothing --compile\n" + BODY)
    # the instance to write is one of the flow the cell defines (the cell's name cannot be `Review`)
    assert "%%flow nothing" in missing and "flow.name" in missing and "`nothing = Review()`" in missing
    meant = usage_error(ip, "%%flow review --compile\n" + BODY.replace("review = Review()", ""))
    assert "(did you mean Review?)" in meant and "such as `review = Review()` at the end of the cell" in meant
    assert usage_error(ip, "%%flow reveiw --compile\n" + BODY).endswith(
        "(the cell defines the flow review: run it as %%flow review)"
    )
    assert "`other = MyFlow()`" in usage_error(ip, "%%flow other --compile\nfrom rho_notebook.flow import Workflow\n")
    syntax = usage_error(ip, "%%flow broken --compile\nfrom rho_notebook.flow import Workflow\nclass (:\n")
    assert "python.syntax" in syntax and ":3:" in syntax  # line 2 of the module is line 3 of the cell


def test_a_saved_notebooks_flow_cell_runs_headless(project: Project, serve: Serve) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    server = serve([OPENAI.answer("A draft."), OPENAI.answer("Tightened.")])
    setup(project, server)
    notebook = new_notebook(cells=[new_code_cell("%load_ext rho_notebook"), new_code_cell(FLOW)])
    nbformat.write(notebook, os.fspath(project.root / "owls.ipynb"))  # type: ignore[no-untyped-call]

    ran = project.cli("run", "owls.ipynb", "--workflow", "review", "--yes", "--output", "jsonl", env={KEY_ENV: SECRET})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = json.loads(next(line for line in ran.stdout.splitlines() if line.startswith("{")))["run_id"]
    result = json.loads(project.cli("result", run_id, "--output", "json").stdout)
    assert list(result["nodes"]) == KEYS and result["output"]["text"] == "Tightened."
    # planned headless, the flow keeps the label and the flow name the kernel gives the cell
    [plan] = json.loads(project.cli("plans", "--output", "json").stdout)
    assert plan["entry"] == "//review.py"
