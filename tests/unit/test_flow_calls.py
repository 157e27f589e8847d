"""The calls a flow makes, outside a run (the in-memory backend): step keys for nested modules and
for forked branches in a thread pool (the same whichever thread goes first), the agent loop with a
real command tool, the compressor, selector parsing and routing, and the errors.

The backend here is a small deterministic function standing in for hosted models (the boundary
``use_backend`` exists for); everything else is the real code.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rho_notebook.flow import (
    KEY,
    Agent,
    AgentParam,
    Compressor,
    EmptyWorkflow,
    FlowError,
    ModelCall,
    ModelReply,
    Selector,
    Session,
    Tool,
    ToolCall,
    Workflow,
    parse_selection,
    run_flow,
    run_session_loop,
    select_session,
    use_backend,
)

Answer = Callable[[ModelCall], "ModelReply | str"]


@dataclass
class Model:
    """The in-memory backend: records every call and answers with ``answer`` (default: echo the key)."""

    answer: Answer = lambda call: f"answer to {call.key}"
    calls: list[ModelCall] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, call: ModelCall) -> ModelReply | str:
        with self.lock:
            self.calls.append(call)
        return self.answer(call)

    @property
    def keys(self) -> list[str]:
        return [call.key for call in self.calls]


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[Model]:
    monkeypatch.delenv("RHO_SCRIPT_CHANNEL", raising=False)
    monkeypatch.delenv("RHO_SCRIPT_TOKEN", raising=False)
    made = Model()
    previous = use_backend(made)
    try:
        yield made
    finally:
        use_backend(previous)


def user(text: str = "hello") -> Session:
    return Session.from_user_message(text)


# -- keys -------------------------------------------------------------------------------------------


class Research(Workflow):
    def __init__(self) -> None:
        super().__init__()
        self.writer = AgentParam(system="Write.", provider="local", model="m")

    def forward(self, session: Session) -> Session:
        return run_session_loop(run_session_loop(session, self.writer), self.writer)


class Team(Workflow):
    def __init__(self) -> None:
        super().__init__()
        self.research = Research()
        self.lead = AgentParam(system="Lead.")

    def forward(self, session: Session) -> Session:
        planned = run_session_loop(session, self.lead)
        return run_session_loop(self.research(planned), self.lead)


def test_keys_are_module_path_and_per_path_call_number(model: Model) -> None:
    out = Team()(user())
    assert model.keys == ["team.lead#1", "team.research.writer#1", "team.research.writer#2", "team.lead#2"]
    assert all(KEY.fullmatch(key) for key in model.keys)
    assert out.text() == "answer to team.lead#2"
    first = model.calls[1]
    assert (first.provider, first.model, first.tools, first.agent) == ("local", "m", None, None)
    assert first.messages == (
        {"role": "system", "content": "Write."},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "answer to team.lead#1"},
    )


def test_a_named_root_prefixes_every_key_and_each_root_call_counts_afresh(model: Model) -> None:
    team = Team()
    out = run_flow(team, user(), name="ReviewTeam")
    team(out)  # a session of a finished root starts a new root
    assert model.keys[:4] == [
        "review_team.lead#1",
        "review_team.research.writer#1",
        "review_team.research.writer#2",
        "review_team.lead#2",
    ]
    assert model.keys[4:] == ["team.lead#1", "team.research.writer#1", "team.research.writer#2", "team.lead#2"]


class Parallel(Workflow):
    """The OpenRath pattern: fork, send the branches to a pool, merge."""

    def __init__(self) -> None:
        super().__init__()
        self.analyst = AgentParam(system="Analyse.")
        self.bear = AgentParam(system="Bear case.")
        self.bull = AgentParam(system="Bull case.")
        self.trader = AgentParam(system="Trade.")

    def forward(self, session: Session) -> Session:
        analysed = run_session_loop(session, self.analyst)
        left, right = analysed.fork(), analysed.fork()
        with ThreadPoolExecutor(max_workers=2) as pool:
            bear = pool.submit(lambda s: run_session_loop(run_session_loop(s, self.bear), self.bear), left)
            bull = pool.submit(run_session_loop, right, self.bull)
            both = bear.result().merge(bull.result())
        return run_session_loop(both, self.trader)


def ordered(first: str, then: str, answered: list[str]) -> Answer:
    """Answers that hold every call on branch ``then`` until a call on branch ``first`` was
    answered; ``answered`` gets the keys in the order their answers went out."""
    done = threading.Event()

    def answer(call: ModelCall) -> str:
        if f"/{then}#" in call.key and not done.wait(timeout=30):
            raise AssertionError(f"no call on {first} arrived")
        answered.append(call.key)
        if f"/{first}#" in call.key:
            done.set()
        return f"answer to {call.key}"

    return answer


def test_forked_branches_in_a_pool_get_the_same_keys_whichever_thread_goes_first(model: Model) -> None:
    runs = []
    for first, then in (("f1", "f2"), ("f2", "f1")):
        model.calls.clear()
        answered: list[str] = []
        model.answer = ordered(first, then, answered)
        out = Parallel()(user())
        runs.append(({c.key: c.messages for c in model.calls}, out.to_json()["messages"]))
        branches = [key.split("/")[1].split("#")[0] for key in answered if "/" in key]
        assert branches[0] == first  # the threads really went in that order
    assert runs[0] == runs[1]
    assert sorted(runs[0][0]) == [
        "parallel.analyst#1",
        "parallel.bear/f1#1",
        "parallel.bear/f1#2",
        "parallel.bull/f2#1",
        "parallel.trader/f1#1",
    ]
    assert runs[0][1][-1] == {"role": "assistant", "content": "answer to parallel.trader/f1#1"}


def test_nested_forks_and_fresh_sessions_inside_forward(model: Model) -> None:
    class Nested(Workflow):
        def __init__(self) -> None:
            super().__init__()
            self.worker = AgentParam(system="Work.")

        def forward(self, session: Session) -> Session:
            inner = session.fork().fork()
            run_session_loop(inner, self.worker)
            fresh = Session.from_user_message("made inside forward")  # counts in the running root
            with ThreadPoolExecutor(max_workers=1) as pool:  # also in a pool thread, and a child called there
                pool.submit(self.child, Session.from_user_message("fresh in a thread")).result()
            return run_session_loop(fresh, self.worker)

    class Child(Workflow):
        def __init__(self) -> None:
            super().__init__()
            self.helper = AgentParam(system="Help.")

        def forward(self, session: Session) -> Session:
            return run_session_loop(session, self.helper)

    nested = Nested()
    nested.child = Child()
    nested(user())
    assert model.keys == ["nested.worker/f1.1#1", "nested.child.helper#1", "nested.worker#1"]


def test_unregistered_agents_and_calls_outside_any_workflow(model: Model) -> None:
    class Local(Workflow):
        def forward(self, session: Session) -> Session:
            return run_session_loop(session, AgentParam(system="Made on the fly."))

    Local()(user())
    run_session_loop(user(), AgentParam(system="No workflow at all."))
    run_session_loop(user(), AgentParam(system="Again."))
    assert model.keys[0] == "local._unnamed#1"
    first, second = (int(key.rsplit("#", 1)[1]) for key in model.keys[1:])
    assert model.keys[1].startswith("flow._unnamed#") and second == first + 1


# -- the agent loop and its tools ---------------------------------------------------------------------


def tool_script(tmp_path: Path) -> Tool:
    script = tmp_path / "count.py"
    script.write_text("import json, sys\nargs = json.loads(sys.argv[1])\nprint(len(args['text'].split()))\n")
    return Tool(
        name="count_words",
        description="Count the words of a text",
        argv=(sys.executable, str(script)),
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )


def test_an_agent_calls_a_command_tool_and_answers_with_its_output(model: Model, tmp_path: Path) -> None:
    def answer(call: ModelCall) -> ModelReply:
        if call.key.endswith("#1"):
            asked = ToolCall.from_dict({"id": "c1", "name": "count_words", "arguments": {"text": "one two three"}})
            wrong = ToolCall.from_dict({"id": "c2", "name": "no_such_tool", "arguments": {}})
            return ModelReply(content="let me count", tool_calls=(asked, wrong))
        tool_message = call.messages[-2]
        return ModelReply(content=f"there are {tool_message['content'].strip()} words")

    model.answer = answer
    agent = Agent("Count words.", "local", tools=[tool_script(tmp_path)], description="Counts")
    start = user("count these")
    out = agent(start)
    assert model.keys == ["agent.agent#1", "agent.agent#3"]  # #2 was the tool step
    assert out.text() == "there are 3 words"
    assert model.calls[0].tools == (
        {
            "name": "count_words",
            "description": "Count the words of a text",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        },
    )
    roles = [(m.role, m.tool_name, m.is_error) for m in out.messages]
    assert roles == [
        ("user", None, False),
        ("assistant", None, False),
        ("tool", "count_words", False),
        ("tool", "no_such_tool", True),
        ("assistant", None, False),
    ]
    assert "there is no tool 'no_such_tool'" in out.messages[3].content
    assert out.parents == (start.id,)


def test_register_tool_keeps_one_tool_per_name(tmp_path: Path) -> None:
    agent = Agent("x")
    first = tool_script(tmp_path)
    agent.register_tool(first).register_tool(Tool(name="other", description="", argv=("true",)))
    agent.register_tool(Tool(name="count_words", description="replaced", argv=("true",)))
    assert [(t.name, t.description) for t in agent.tools] == [("other", ""), ("count_words", "replaced")]


def test_the_loop_stops_after_max_turns(model: Model) -> None:
    looping = ToolCall.from_dict({"id": "c", "name": "missing", "arguments": {}})
    model.answer = lambda call: ModelReply(content="", tool_calls=(looping,))
    tool = Tool(name="present", description="", argv=("true",))
    with pytest.raises(FlowError, match="made 3 model calls without a final answer"):
        run_session_loop(user(), AgentParam(system="Loop."), tools=[tool], max_turns=3)


def test_a_catalog_agent_goes_to_the_backend_by_id_and_takes_no_tools(model: Model) -> None:
    out = run_session_loop(user("review this"), AgentParam("reviewer"))
    call = model.calls[0]
    assert call.agent == "reviewer" and call.messages == ({"role": "user", "content": "review this"},)
    assert out.text() == f"answer to {call.key}"
    with pytest.raises(FlowError, match="catalog agent 'reviewer' uses its own tools"):
        run_session_loop(user(), AgentParam("reviewer"), tools=[Tool(name="t", description="", argv=("true",))])


def test_the_compressor_returns_one_user_message_on_the_same_branch(model: Model) -> None:
    model.answer = lambda call: "the short version"
    long = user("a long request").append("assistant", "a long answer").fork()
    out = Compressor(provider="local")(long)
    assert [(m.role, m.content) for m in out.messages] == [("user", "the short version")]
    assert out.branch == long.branch == "f1" and out.parents == (long.id,)
    sent = model.calls[0]
    assert sent.key == "compressor.agent/f1#1" and sent.messages[0]["role"] == "system"
    assert "a long answer" in sent.messages[1]["content"]


# -- selection ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "count", "expected"),
    [
        ("1", 2, 1),
        ("0", 2, 0),
        ("I choose 1, not 0.", 2, 1),
        ("Option 1: resolve", 3, 1),
        ("  2\n", 3, 2),
        ("", 2, None),
        ("none of them", 2, None),
        ("-1", 2, None),
        ("-0", 2, 0),
        ("2", 2, None),
        ("17 then 0", 2, None),
        ("0", 0, None),
    ],
)
def test_parse_selection_takes_the_first_integer_token(text: str, count: int, expected: int | None) -> None:
    assert parse_selection(text, count) == expected


class Desk(Workflow):
    def __init__(self) -> None:
        super().__init__()
        self.triage = Agent("Triage the request.", description="Classify a new support request")
        self.resolve = Agent("Resolve the problem.", description="Installation, configuration or runtime errors")
        self.route = Selector(provider="local", candidates=(self.triage, self.resolve))

    def forward(self, session: Session) -> Session:
        return self.route(session)(session)


@pytest.mark.parametrize(
    ("reply", "chosen"),
    [("1", "resolve"), ("0 - triage", "triage"), ("no idea", None), ("-1", None), ("5", None)],
)
def test_the_selector_routes_or_returns_an_empty_workflow(model: Model, reply: str, chosen: str | None) -> None:
    model.answer = lambda call: reply if call.key.startswith("desk.route") else f"answer to {call.key}"
    out = Desk()(user("pip install fails"))
    routing = model.calls[0]
    assert routing.key == "desk.route.router#1" and routing.tools is None
    question = routing.messages[-1]["content"]
    assert "0. Classify a new support request\n1. Installation, configuration or runtime errors" in question
    assert "pip install fails" in question
    if chosen is None:
        assert model.keys == ["desk.route.router#1"] and out.text() is None  # EmptyWorkflow: identity
    else:
        assert model.keys == ["desk.route.router#1", f"desk.{chosen}.agent#1"]


def test_selector_candidates_given_at_call_time_win_and_none_means_no_request(model: Model) -> None:
    selector = Selector()
    special = Agent("Special.", description="Only this")
    model.answer = lambda call: "0"
    assert selector.forward(user(), special) is special
    assert isinstance(selector.forward(user()), EmptyWorkflow)
    assert select_session(user(), selector.router) is None
    assert len(model.calls) == 1
    session = user()
    assert EmptyWorkflow()(session) is session


# -- the backend ------------------------------------------------------------------------------------


def test_without_a_backend_a_call_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RHO_SCRIPT_CHANNEL", raising=False)
    previous = use_backend(None)
    try:
        with pytest.raises(FlowError, match=r"use_backend\(fn\).*rho-notebook run FILE.py --flow NAME"):
            Agent("Hi.")(user())
    finally:
        use_backend(previous)


def test_a_backend_must_answer_a_reply_or_text(model: Model) -> None:
    model.answer = lambda call: 42  # type: ignore[assignment,return-value]
    with pytest.raises(FlowError, match="answered call 'agent.agent#1' with int"):
        Agent("Hi.")(user())
    with pytest.raises(TypeError, match="use_backend takes a callable"):
        use_backend("not callable")  # type: ignore[arg-type]


def test_the_shim_takes_built_keys_once_and_never_a_plain_step_id() -> None:
    from rho_notebook.script._steps import _Keys

    book = _Keys()
    assert book.claim_built("team.writer/f1#2") == "team.writer/f1#2"
    with pytest.raises(ValueError, match="already used"):
        book.claim_built("team.writer/f1#2")
    with pytest.raises(ValueError, match="must not be a plain step id"):
        book.claim_built("writer")
    with pytest.raises(ValueError, match="non-empty"):
        book.claim_built("")
    assert book.claim(None) == "call-1"  # authors' default keys are not shifted by built ones
