"""``rho_notebook.flow.Session``: immutable to callers, lineage through append/fork/detach/merge,
branch ids in fork order, JSON round trip; and ``import rho_notebook.flow`` in a fresh ``-I``
interpreter with only the standard library and the checkout on ``sys.path``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rho_notebook.flow import Message, Session, ToolCall

ROOT = Path(__file__).resolve().parents[2]
STDLIB_PATH = [p for p in sys.path if p and "site-packages" not in p and not p.startswith(str(ROOT))]


def test_a_session_cannot_be_changed_in_place() -> None:
    session = Session.from_user_message("hello")
    with pytest.raises(AttributeError, match="immutable"):
        session._messages = ()  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        session.branch = "f9"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del session._id
    assert isinstance(session.messages, tuple)
    with pytest.raises(AttributeError):
        session.messages[0].content = "changed"  # type: ignore[misc]


def test_append_returns_a_new_session_and_leaves_the_input_alone() -> None:
    first = Session.from_user_message("hello")
    second = first.append("assistant", "hi there")
    assert [m.content for m in first.messages] == ["hello"]
    assert [(m.role, m.content) for m in second.messages] == [("user", "hello"), ("assistant", "hi there")]
    assert second.parents == (first.id,) and second.id != first.id
    assert first.parents == ()
    with pytest.raises(ValueError, match="role 'robot'"):
        first.append("robot", "beep")


def test_text_is_the_last_assistant_message() -> None:
    session = Session.from_user_message("q")
    assert session.text() is None
    session = session.append("assistant", "a1").append("user", "q2").append("assistant", "a2").append("user", "q3")
    assert session.text() == "a2"


def test_fork_numbers_branches_per_parent_branch_in_fork_order() -> None:
    root = Session.from_user_message("start")
    left, right = root.fork(), root.fork()
    assert (root.branch, left.branch, right.branch) == ("", "f1", "f2")
    assert left.parents == (root.id,) and right.parents == (root.id,)
    assert left.messages == root.messages
    # a later session of the same branch continues the count: never f1 twice
    assert root.append("user", "more").fork().branch == "f3"
    assert left.fork().branch == "f1.1" and left.append("user", "x").fork().branch == "f1.2"
    assert left.append("assistant", "a").branch == "f1"  # deriving keeps the branch


def test_detach_keeps_messages_and_branch_and_cuts_history() -> None:
    left = Session.from_user_message("start").fork().append("assistant", "answer")
    clean = left.detach()
    assert clean.messages == left.messages and clean.branch == left.branch
    assert clean.parents == () and clean.id != left.id


def test_merge_concatenates_on_the_left_branch_with_both_parents() -> None:
    root = Session.from_user_message("start")
    left = root.fork().append("assistant", "bear")
    right = root.fork().append("assistant", "bull")
    merged = left.merge(right)
    assert [m.content for m in merged.messages] == ["start", "bear", "start", "bull"]
    assert merged.parents == (left.id, right.id) and merged.branch == left.branch == "f1"
    with pytest.raises(TypeError, match="merge takes a Session"):
        left.merge("text")  # type: ignore[arg-type]


def test_json_round_trip_keeps_messages_lineage_and_branch() -> None:
    call = ToolCall.from_dict({"id": "c1", "name": "grep", "arguments": {"pattern": "TODO"}})
    session = (
        Session.from_user_message("find todos")
        .fork()
        .extend(
            [
                Message("assistant", "", tool_calls=(call,)),
                Message("tool", "app.py:2", tool_call_id="c1", tool_name="grep"),
                Message("assistant", "one TODO"),
            ]
        )
    )
    data = session.to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["branch"] == "f1" and data["parents"] == list(session.parents) and data["id"] == session.id
    assert data["messages"][1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "grep", "arguments": {"pattern": "TODO"}}],
    }
    assert data["messages"][2] == {"role": "tool", "content": "app.py:2", "tool_call_id": "c1", "tool_name": "grep"}
    back = Session.from_json(data)
    assert back.messages == session.messages and back.text() == "one TODO"
    assert (back.id, back.parents, back.branch) == (session.id, session.parents, session.branch)
    assert back.to_json() == data


def test_importing_flow_loads_only_flow_and_the_script_shim_and_no_third_party_module() -> None:
    code = (
        "import json, sys\n"
        f"sys.path[:] = {[*STDLIB_PATH, str(ROOT)]!r}\n"
        "before = set(sys.modules)\n"
        "import rho_notebook.flow\n"
        "from rho_notebook.flow import Workflow, AgentParam, Session, Selector\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    ours = {name for name in loaded if name.split(".")[0] == "rho_notebook"}
    assert {"rho_notebook.flow", "rho_notebook.flow.module", "rho_notebook.script._steps"} <= ours
    assert {name for name in ours if name != "rho_notebook"} == {
        name for name in ours if name.startswith(("rho_notebook.flow", "rho_notebook.script"))
    }
    others = [name for name in loaded if name.split(".")[0] not in sys.stdlib_module_names | {"rho_notebook"}]
    assert others == []
