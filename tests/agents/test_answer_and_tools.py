"""Pure parts: typed-answer parsing and schema rendering, the tool box, redaction, model selection."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.agents.answer import describe_schema, parse_typed_answer
from rho_notebook.agents.provider import ToolCall
from rho_notebook.agents.redact import Redactor
from rho_notebook.agents.resolve import read_credential, select_model
from rho_notebook.agents.settings import AgentSettings, AuthProfile, ProviderSettings
from rho_notebook.agents.tools import ToolBox, ToolLimits, ToolResult
from rho_notebook.errors import AgentFailure, AnswerError
from rho_notebook.model.schema import (
    BoolSchema,
    EnumSchema,
    IntegerSchema,
    ListSchema,
    NullSchema,
    OptionalSchema,
    RecordSchema,
    StringSchema,
)
from tests.agents.helpers import DECISION, definition, process_alive

# -- typed answers -------------------------------------------------------------------------------


def test_describe_schema() -> None:
    schema = RecordSchema(
        fields=(
            ("count", IntegerSchema()),
            ("flags", ListSchema(items=BoolSchema())),
            ("kind", EnumSchema(members=("a", 1, None))),
            ("note", OptionalSchema(inner=StringSchema())),
            ("nothing", NullSchema()),
            ("inner", RecordSchema(fields=(("x", StringSchema()),))),
        )
    )
    assert describe_schema(schema) == (
        "{\n"
        '  "count": integer,\n'
        '  "flags": [ true | false, ... ],\n'
        '  "kind": "a" | 1 | null,\n'
        '  "note"?: string | null,\n'
        '  "nothing": null,\n'
        '  "inner": {\n'
        '    "x": string\n'
        "  }\n"
        "}"
    )


@pytest.mark.parametrize(
    "text",
    ['{"decision": "approve", "summary": "s"}', '\n\t {"summary": "s", "decision": "revise"}  \n'],
)
def test_whole_answer_parses(text: str) -> None:
    assert parse_typed_answer(text, DECISION)["summary"] == "s"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\n{"decision": "approve", "summary": "s"}\n```', "code fence is not stripped"),
        ('Here: {"decision": "approve", "summary": "s"}', "not one JSON value"),
        ('{"decision": "approve", "summary": "s"} thanks', "Extra data"),
        ('{"decision": "approve", "decision": "revise", "summary": "s"}', "duplicate key 'decision'"),
        ('{"decision": NaN, "summary": "s"}', "NaN is not JSON"),
        ("", "not one JSON value"),
    ],
)
def test_anything_but_one_json_value_fails(text: str, expected: str) -> None:
    with pytest.raises(AnswerError) as caught:
        parse_typed_answer(text, DECISION)
    assert caught.value.kind == "not_json" and expected in caught.value.message


def test_schema_mismatch_lists_problems() -> None:
    with pytest.raises(AnswerError) as caught:
        parse_typed_answer('{"decision": "approve", "summary": 1.5}', DECISION)
    assert caught.value.kind == "schema" and "$.summary: expected string, got float" in caught.value.message


def test_integer_schema_rejects_floats_and_big_numbers() -> None:
    for text in ("1.0", str(2**63)):
        with pytest.raises(AnswerError):
            parse_typed_answer(text, IntegerSchema())
    assert parse_typed_answer("-7", IntegerSchema()) == -7


# -- tools -----------------------------------------------------------------------------------------


def call(box: ToolBox, name: str, **arguments: Any) -> ToolResult:
    return asyncio.run(box.call(ToolCall(id="x", name=name, arguments=arguments)))


@pytest.fixture
def box(tmp_path: Path) -> ToolBox:
    root = tmp_path / "ws"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "deep.txt").write_text("needle here\n")
    (root / "lines.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    (root / "bin.dat").write_bytes(b"\0\1\2")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("needle in git\n")
    return ToolBox(
        root,
        offered={"read_file", "list_dir", "grep", "glob", "write", "edit", "bash"},
        environ={"PATH": os.environ["PATH"]},
        read_only=False,
    )


def test_read_file_window(box: ToolBox) -> None:
    result = call(box, "read_file", path="lines.txt", offset=3, limit=2)
    assert result.content == "     3\tline 3\n     4\tline 4\n[... the file has 10 lines; read on with offset=5]"
    assert call(box, "read_file", path="bin.dat").is_error
    assert call(box, "read_file", path="a").content == "a is not a regular file"
    assert "integer >= 1" in call(box, "read_file", path="lines.txt", offset=0).content


def test_grep_and_glob_skip_git(box: ToolBox) -> None:
    assert call(box, "grep", pattern="needle").content == "a/b/deep.txt:1: needle here"
    assert (
        call(box, "grep", pattern="NEEDLE", ignore_case=True, include="*.txt").content == "a/b/deep.txt:1: needle here"
    )
    assert call(box, "grep", pattern="(").is_error
    assert call(box, "glob", pattern="**/*.txt").content == "a/b/deep.txt\nlines.txt"
    assert call(box, "glob", pattern="a/*").content == "a/b/"


def test_absolute_path_inside_the_workspace_is_fine(box: ToolBox) -> None:
    assert "line 1" in call(box, "read_file", path=str(box.root / "lines.txt")).content


def test_write_through_a_symlink_to_outside_is_refused(box: ToolBox, tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    os.symlink(target, box.root / "dangling")
    result = call(box, "write", path="dangling", content="x")
    assert result.is_error and "symbolic link" in result.content and not target.exists()
    assert call(box, "write", path="../escape.txt", content="x").is_error
    assert not (tmp_path / "escape.txt").exists()


def test_edit_needs_a_unique_match(box: ToolBox) -> None:
    assert "occurs 10 times" in call(box, "edit", path="lines.txt", old_string="line", new_string="row").content
    assert (
        call(box, "edit", path="lines.txt", old_string="line", new_string="row", replace_all=True).content
        == "replaced 10 occurrences in lines.txt"
    )
    assert "does not occur" in call(box, "edit", path="lines.txt", old_string="line", new_string="x").content


def test_output_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 5000 + "\n")
    small = ToolBox(
        tmp_path,
        offered={"read_file", "bash"},
        environ={"PATH": os.environ["PATH"]},
        read_only=False,
        limits=ToolLimits(output_bytes=1000),
    )
    assert call(small, "read_file", path="big.txt").content.endswith("[... output truncated at 1000 bytes of 5007]")
    shell = call(small, "bash", command="yes | head -c 5000").content
    assert "--- stdout (truncated) ---" in shell and len(shell) < 700


def test_shell_timeout_stops_the_command(box: ToolBox) -> None:
    result = call(box, "bash", command="sleep 30", timeout_seconds=0.3)
    assert result.is_error and result.content.startswith("timed out after 0.3 s")


def test_arguments_that_are_not_an_object(box: ToolBox) -> None:
    result = asyncio.run(box.call(ToolCall(id="1", name="read_file", arguments=None, raw_arguments="{oops")))
    assert result.is_error and "not a JSON object" in result.content


# -- redaction and selection ---------------------------------------------------------------------------


def test_redactor() -> None:
    redactor = Redactor(["short1", "a-long-secret-value", None])  # type: ignore[list-item]
    assert redactor.text("x a-long-secret-value short1") == "x [REDACTED] [REDACTED]"
    redactor = Redactor(["abc"])  # too short to be a secret
    assert redactor.value({"abc": ["abc", 1]}) == {"abc": ["abc", 1]}


SETTINGS = AgentSettings(
    providers={
        "local": ProviderSettings(type="openai", base_url="http://127.0.0.1:1/v1"),
        "hosted": ProviderSettings(type="anthropic", api_key_env="HOSTED_KEY"),
    },
    auth_profiles={"team": AuthProfile(api_key_env="TEAM_KEY", provider="hosted")},
    default_provider="local",
    default_model="small",
)


def test_inherit_uses_the_settings_defaults() -> None:
    chosen = select_model(definition(), SETTINGS)
    assert (chosen.provider, chosen.model, chosen.credential_env) == ("local", "small", None)
    assert read_credential(chosen, {}) is None


@pytest.mark.parametrize("policy", ["select", "prefer", "require"])
def test_pinned_policies(policy: str) -> None:
    chosen = select_model(definition(model_policy=policy, model="big", provider="hosted"), SETTINGS)
    assert (chosen.provider, chosen.model, chosen.credential) == ("hosted", "big", "environment variable HOSTED_KEY")
    on_default = select_model(definition(model_policy=policy, model="big"), SETTINGS)
    assert on_default.provider == "local"


def test_auth_profile_selects_the_credential() -> None:
    chosen = select_model(definition(model_policy="select", model="big", provider="hosted", auth="team"), SETTINGS)
    assert chosen.credential == "environment variable TEAM_KEY (auth profile 'team')"
    assert read_credential(chosen, {"TEAM_KEY": "value-123456"}) == "value-123456"


@pytest.mark.parametrize(
    ("agent", "settings", "expected"),
    [
        (definition(), SETTINGS.model_copy(update={"default_model": None}), "settings set no default_model"),
        (definition(model_policy="select", model="@fast"), SETTINGS, "model alias '@fast'"),
        (
            definition(model_policy="select", model="m", provider="gone"),
            SETTINGS,
            "provider 'gone' (from the agent file) is not defined",
        ),
        (
            definition(model_policy="select", model="m", provider="local", auth="team"),
            SETTINGS,
            "only valid for provider 'hosted'",
        ),
        (
            definition(model_policy="select", model="m"),
            SETTINGS.model_copy(update={"default_provider": None}),
            "without a provider",
        ),
    ],
)
def test_selection_failures(agent: Any, settings: AgentSettings, expected: str) -> None:
    with pytest.raises(AgentFailure) as caught:
        select_model(agent, settings)
    assert caught.value.kind == "config" and expected in caught.value.message


def test_shell_children_left_behind_are_stopped_without_waiting(box: ToolBox) -> None:
    pid_file = box.root / "bg.pid"
    result = call(box, "bash", command=f"sleep 30 & echo $! > {pid_file}; echo started", timeout_seconds=20)
    assert result.content == "exit code: 0\n--- stdout ---\nstarted\n"
    assert not process_alive(int(pid_file.read_text()), "sleep")
