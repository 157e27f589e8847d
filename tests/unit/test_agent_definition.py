"""Agent definition parsing (Rho's schema page) and the agent catalog's search order."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from rho_notebook.agents.catalog import BUILTIN_AGENT_IDS, builtin_agents, resolve_agent
from rho_notebook.agents.definition import is_agent_id, parse_agent_definition
from rho_notebook.errors import Diagnostic, InvalidWorkflow
from rho_notebook.model.agent import AgentDefinition

FILE = "agents/agent.md"


def doc(*keys: str, body: str = "") -> str:
    """A definition file: the keys start on line 2, the closing fence follows the last key."""
    return "---\n" + "".join(f"{key}\n" for key in keys) + "---\n" + body


def parse(text: str, *, default_id: str = "agent") -> AgentDefinition:
    return parse_agent_definition(text, file=FILE, default_id=default_id, origin="project")


def problems(text: str, *, default_id: str = "agent") -> list[Diagnostic]:
    with pytest.raises(InvalidWorkflow) as info:
        parse(text, default_id=default_id)
    return info.value.diagnostics()


# -- the schema page's examples -----------------------------------------------------------------

SECURITY_REVIEW = """\
---
id: security-review
description: Reviews changes for security defects
runtime: rho
model-policy: inherit
reasoning: high
tools: [read_file, list_dir, bash]
---
Review the requested changes. Do not modify files.
"""

PINNED_WORKER = """\
---
id: worker
description: Implements delegated tasks
runtime: rho
model-policy: prefer
model: grok-4.5
provider: xai
auth: xai-oauth
reasoning: medium
tools: all
---
Complete the delegated task fully before finishing.
"""

CLAUDE_PLANNER = """\
---
id: claude-planner
description: Plans with Claude Code on the user subscription
runtime: claude-cli
model: claude-opus-5
reasoning: high
tools: [Read, Edit, "Bash(git *)"]
inherit_claude_config: false
---
Produce a short plan. Prefer reading before editing.
"""


def test_rho_example() -> None:
    agent = parse(SECURITY_REVIEW)
    assert agent == AgentDefinition(
        id="security-review",
        description="Reviews changes for security defects",
        runtime="rho",
        prompt="extend",
        model_policy="inherit",
        reasoning="high",
        tools=("read_file", "list_dir", "bash"),
        body="Review the requested changes. Do not modify files.",
        origin="project",
    )
    assert not agent.is_read_only()


def test_rho_example_with_pinned_provider_and_auth() -> None:
    agent = parse(PINNED_WORKER)
    assert agent == AgentDefinition(
        id="worker",
        description="Implements delegated tasks",
        runtime="rho",
        model_policy="prefer",
        model="grok-4.5",
        provider="xai",
        auth="xai-oauth",
        reasoning="medium",
        tools="all",
        body="Complete the delegated task fully before finishing.",
        origin="project",
    )


def test_claude_example() -> None:
    agent = parse(CLAUDE_PLANNER)
    assert agent == AgentDefinition(
        id="claude-planner",
        description="Plans with Claude Code on the user subscription",
        runtime="claude-cli",
        model_policy="select",
        model="claude-opus-5",
        reasoning="high",
        tools=("Read", "Edit", "Bash(git *)"),
        inherit_claude_config=False,
        body="Produce a short plan. Prefer reading before editing.",
        origin="project",
    )
    assert agent.capability_set() == frozenset({"Read", "Edit", "Bash"})


# -- accepted shapes ----------------------------------------------------------------------------


def test_every_frontmatter_field() -> None:
    text = doc(
        "id: deep-review",
        "description: '  Reviews: with a colon, quoted  '",
        "runtime: rho",
        "prompt: replace",
        'model-policy: "require"',
        "model: '@deep'",
        "provider: xai",
        "auth: xai-api-key",
        "reasoning: max",
        "tools: [read_file, \"grep\", 'acme_custom', shell]",
        "inherit_claude_config: false",
        body="\n\n  You are the whole prompt.\n\n",
    )
    agent = parse_agent_definition(text, file=FILE, default_id="ignored", origin="workflow", content_sha256="ab" * 32)
    assert agent == AgentDefinition(
        id="deep-review",
        description="Reviews: with a colon, quoted",
        runtime="rho",
        prompt="replace",
        model_policy="require",
        model="@deep",
        provider="xai",
        auth="xai-api-key",
        reasoning="max",
        tools=("read_file", "grep", "acme_custom", "shell"),
        inherit_claude_config=False,
        body="You are the whole prompt.",
        origin="workflow",
        content_sha256="ab" * 32,
    )


def test_defaults_with_only_a_description() -> None:
    agent = parse(doc("description: demo"), default_id="from-stem")
    assert agent.id == "from-stem"
    assert (agent.runtime, agent.prompt, agent.model_policy, agent.tools) == (
        "rho",
        "extend",
        "inherit",
        "all",
    )
    assert (agent.model, agent.provider, agent.auth, agent.reasoning) == (None, None, None, None)
    assert agent.inherit_claude_config is False
    assert agent.body == ""


def test_model_without_policy_is_select() -> None:
    agent = parse(doc("description: demo", "model: gpt-5.5", "provider: openai"))
    assert agent.model_policy == "select"
    assert agent.model == "gpt-5.5"


def test_claude_defaults_to_no_tools_and_takes_the_claude_options() -> None:
    agent = parse(doc("description: demo", "runtime: claude-cli"))
    assert agent.tools == ()
    assert agent.model_policy == "inherit"
    agent = parse(
        doc(
            "description: demo",
            "runtime: claude-cli",
            "model-policy: select",
            "model: opus",
            "inherit_claude_config: true",
            "reasoning: xhigh",
            'tools: [mcp__server__tool, "Bash(git log --format=%(refname))", Bash(), WebSearch]',
        )
    )
    assert agent.inherit_claude_config is True
    assert agent.tools == (
        "mcp__server__tool",
        "Bash(git log --format=%(refname))",
        "Bash()",
        "WebSearch",
    )


def test_runtime_is_resolved_before_tools_whatever_the_key_order() -> None:
    agent = parse(doc("tools: [Read]", "description: demo", "runtime: claude-cli"))
    assert agent.tools == ("Read",)


def test_empty_tool_list_means_no_tools() -> None:
    assert parse(doc("description: demo", "tools: []")).tools == ()
    assert parse(doc("description: demo", "tools: []")).is_read_only()


def test_extension_capability_names_are_accepted_on_rho() -> None:
    agent = parse(doc("description: demo", "tools: [read_file, acme_custom]"))
    assert agent.tools == ("read_file", "acme_custom")


def test_quoted_and_unquoted_specifiers_with_quotes_inside() -> None:
    agent = parse(
        doc(
            "description: demo",
            "runtime: claude-cli",
            """tools: ['Bash(echo "hi")', Bash(don't *)]""",
        )
    )
    assert agent.tools == ('Bash(echo "hi")', "Bash(don't *)")


def test_crlf_line_endings_and_body_trimming() -> None:
    text = "---\r\ndescription: demo\r\nprompt: replace\r\n---\r\n\r\nBody line.\r\n"
    assert parse(text).body == "Body line."


def test_a_line_of_dashes_in_the_body_is_body() -> None:
    agent = parse(doc("description: demo", body="intro\n---\nmore\n"))
    assert agent.body == "intro\n---\nmore"


def test_agent_id_grammar() -> None:
    assert is_agent_id("a")
    assert is_agent_id("security-review-2")
    assert is_agent_id("x" * 64)
    for bad in ("", "-a", "a-", "a--b", "A", "a_b", "a b", "x" * 65):
        assert not is_agent_id(bad), bad


# -- rejected files: one problem each -----------------------------------------------------------

# (case id, file text, default id, rule, line, words the message must contain)
INVALID = [
    ("no-opening-fence", "description: demo\n---\n", "agent", "agent.frontmatter", 1, ["'---'"]),
    ("empty-file", "", "agent", "agent.frontmatter", 1, ["empty"]),
    ("byte-order-mark", "\ufeff" + doc("description: d"), "agent", "agent.frontmatter", 1, ["BOM"]),
    ("fence-with-spaces", "--- \ndescription: d\n---\n", "agent", "agent.frontmatter", 1, ["'--- '", "exactly '---'"]),
    ("never-closed", "---\ndescription: demo\nbody\n", "agent", "agent.frontmatter", 1, ["never closed"]),
    (
        "unknown-key",
        doc("description: d", "name: x"),
        "agent",
        "agent.unknown-key",
        3,
        ["'name'", "did you mean 'id'", "model-policy"],
    ),
    (
        "misspelled-key",
        doc("description: d", "model_policy: inherit"),
        "agent",
        "agent.unknown-key",
        3,
        ["'model_policy'", "'model-policy'"],
    ),
    (
        "duplicate-key",
        doc("description: a", "runtime: rho", "description: b"),
        "agent",
        "agent.duplicate-key",
        4,
        ["'description'", "line 2"],
    ),
    (
        "indented-line",
        doc("description: d", "tools: all", "  extra: x"),
        "agent",
        "agent.syntax",
        4,
        ["indented", "nested maps"],
    ),
    ("block-list-item", doc("description: d", "- read_file"), "agent", "agent.syntax", 3, ["'- read_file'", "inline"]),
    ("comment-line", doc("# reviewer", "description: d"), "agent", "agent.syntax", 2, ["'# reviewer'", "comment"]),
    ("no-colon", doc("description: d", "just words"), "agent", "agent.syntax", 3, ["'just words'", "'key: value'"]),
    (
        "id-grammar",
        doc("id: Security_Review", "description: d"),
        "agent",
        "agent.id",
        2,
        ["id:", "'Security_Review'", "lowercase"],
    ),
    ("id-double-hyphen", doc("id: a--b", "description: d"), "agent", "agent.id", 2, ["'a--b'", "double hyphen"]),
    ("id-too-long", doc("id: " + "a" * 65, "description: d"), "agent", "agent.id", 2, ["65 characters", "1-64"]),
    ("stem-not-an-id", doc("description: d"), "My Agent", "agent.id", 1, ["'My Agent'", "file name", "rename"]),
    ("description-missing", doc("runtime: rho"), "agent", "agent.description", 1, ["description is required"]),
    (
        "description-empty",
        doc('description: "   "'),
        "agent",
        "agent.description",
        2,
        ["description:", "empty", "1-1024"],
    ),
    (
        "description-too-long",
        doc("description: " + "d" * 1025),
        "agent",
        "agent.description",
        2,
        ["1025 characters", "1024"],
    ),
    (
        "description-unclosed-quote",
        doc('description: "Reviews'),
        "agent",
        "agent.description",
        2,
        ["'\"Reviews'", "not closed"],
    ),
    ("description-is-a-map", doc("description: {a: b}"), "agent", "agent.description", 2, ["'{a: b}'", "nested maps"]),
    ("description-block-scalar", doc("description: |"), "agent", "agent.description", 2, ["'|'", "block scalar"]),
    (
        "runtime-unknown",
        doc("description: d", "runtime: bun"),
        "agent",
        "agent.runtime",
        3,
        ["runtime:", "'bun'", "rho, claude-cli"],
    ),
    (
        "prompt-unknown",
        doc("description: d", "prompt: append"),
        "agent",
        "agent.prompt",
        3,
        ["'append'", "extend, replace"],
    ),
    (
        "replace-without-body",
        doc("description: d", "prompt: replace", body="\n  \n"),
        "agent",
        "agent.prompt",
        3,
        ["'replace'", "non-empty Markdown body"],
    ),
    (
        "policy-unknown",
        doc("description: d", "model-policy: pin", "model: m"),
        "agent",
        "agent.model-policy",
        3,
        ["'pin'", "inherit, prefer, require, select"],
    ),
    (
        "inherit-with-model",
        doc("description: d", "model-policy: inherit", "model: gpt-5"),
        "agent",
        "agent.model",
        4,
        ["model:", "'gpt-5'", "model-policy: inherit"],
    ),
    (
        "inherit-with-auth",
        doc("description: d", "model-policy: inherit", "auth: xai-oauth"),
        "agent",
        "agent.auth",
        4,
        ["auth:", "'xai-oauth'", "model-policy: inherit"],
    ),
    (
        "provider-without-model",
        doc("description: d", "provider: xai"),
        "agent",
        "agent.provider",
        3,
        ["provider:", "'xai'", "needs a model"],
    ),
    (
        "prefer-without-model",
        doc("description: d", "model-policy: prefer"),
        "agent",
        "agent.model",
        3,
        ["'prefer'", "needs a model"],
    ),
    (
        "require-without-model",
        doc("description: d", "model-policy: require"),
        "agent",
        "agent.model",
        3,
        ["'require'", "needs a model"],
    ),
    (
        "select-without-model",
        doc("description: d", "model-policy: select", "provider: xai"),
        "agent",
        "agent.model",
        3,
        ["'select'", "needs a model"],
    ),
    ("model-whitespace", doc("description: d", 'model: "gpt 5"'), "agent", "agent.model", 3, ["'gpt 5'", "whitespace"]),
    ("model-empty", doc("description: d", "model: ''"), "agent", "agent.model", 3, ["model:", "empty"]),
    ("model-no-value", doc("description: d", "model:"), "agent", "agent.model", 3, ["model:", "no value"]),
    (
        "model-is-a-list",
        doc("description: d", "model: [a, b]"),
        "agent",
        "agent.model",
        3,
        ["'[a, b]'", "only tools takes a list"],
    ),
    (
        "provider-whitespace",
        doc("description: d", "model: m", "provider: 'x ai'"),
        "agent",
        "agent.provider",
        4,
        ["'x ai'", "whitespace"],
    ),
    (
        "reasoning-unknown",
        doc("description: d", "reasoning: extreme"),
        "agent",
        "agent.reasoning",
        3,
        ["'extreme'", "off, minimal, low, medium, high, xhigh, max"],
    ),
    (
        "claude-provider",
        doc("description: d", "runtime: claude-cli", "model: opus", "provider: anthropic"),
        "agent",
        "agent.provider",
        5,
        ["'anthropic'", "runtime: claude-cli"],
    ),
    (
        "claude-auth",
        doc("description: d", "runtime: claude-cli", "auth: xai-oauth"),
        "agent",
        "agent.auth",
        4,
        ["'xai-oauth'", "runtime: claude-cli"],
    ),
    (
        "claude-prefer",
        doc("description: d", "runtime: claude-cli", "model-policy: prefer", "model: opus"),
        "agent",
        "agent.model-policy",
        4,
        ["'prefer'", "claude-cli", "inherit or select"],
    ),
    (
        "claude-require",
        doc("description: d", "runtime: claude-cli", "model-policy: require", "model: opus"),
        "agent",
        "agent.model-policy",
        4,
        ["'require'", "claude-cli"],
    ),
    (
        "claude-inherit-with-model",
        doc("description: d", "runtime: claude-cli", "model-policy: inherit", "model: opus"),
        "agent",
        "agent.model",
        5,
        ["'opus'", "model-policy: inherit"],
    ),
    (
        "claude-alias",
        doc("description: d", "runtime: claude-cli", "model: '@deep'"),
        "agent",
        "agent.model",
        4,
        ["'@deep'", "alias", "claude-cli"],
    ),
    (
        "claude-reasoning-off",
        doc("description: d", "runtime: claude-cli", "reasoning: off"),
        "agent",
        "agent.reasoning",
        4,
        ["'off'", "low, medium, high, xhigh, max"],
    ),
    (
        "claude-reasoning-minimal",
        doc("description: d", "runtime: claude-cli", "reasoning: minimal"),
        "agent",
        "agent.reasoning",
        4,
        ["'minimal'", "effort level"],
    ),
    (
        "claude-tools-all",
        doc("description: d", "runtime: claude-cli", "tools: all"),
        "agent",
        "agent.tools",
        4,
        ["'all'", "claude-cli"],
    ),
    (
        "inherit-claude-config-on-rho",
        doc("description: d", "inherit_claude_config: true"),
        "agent",
        "agent.inherit_claude_config",
        3,
        ["true", "runtime: claude-cli"],
    ),
    (
        "inherit-claude-config-not-bool",
        doc("description: d", "runtime: claude-cli", "inherit_claude_config: yes"),
        "agent",
        "agent.inherit_claude_config",
        4,
        ["'yes'", "true or false"],
    ),
    (
        "rho-tools-mixed",
        doc("description: d", 'tools: [read_file, Read, "Bash(git *)"]'),
        "agent",
        "agent.tools",
        3,
        ["mixes", "'Read'", "'Bash(git *)'", "'read_file'"],
    ),
    (
        "rho-tools-claude-only",
        doc("description: d", "tools: [Read]"),
        "agent",
        "agent.tools",
        3,
        ["'Read'", "Claude Code", "runtime is rho"],
    ),
    (
        "rho-tools-bad-name",
        doc("description: d", "tools: [read-file]"),
        "agent",
        "agent.tools",
        3,
        ["'read-file'", "not a Rho capability name", "read_file"],
    ),
    (
        "rho-tools-duplicate",
        doc("description: d", "tools: [grep, grep]"),
        "agent",
        "agent.tools",
        3,
        ["'grep'", "more than once"],
    ),
    (
        "claude-tools-rho-name",
        doc("description: d", "runtime: claude-cli", "tools: [read_file, Read]"),
        "agent",
        "agent.tools",
        4,
        ["'read_file'", "Rho capability name", "claude-cli"],
    ),
    (
        "claude-tools-comma-quoted",
        doc("description: d", "runtime: claude-cli", 'tools: ["Edit(a, b)"]'),
        "agent",
        "agent.tools",
        4,
        ["'Edit(a, b)'", "comma"],
    ),
    (
        "claude-tools-comma-plain",
        doc("description: d", "runtime: claude-cli", "tools: [Read, Bash(git log, x)]"),
        "agent",
        "agent.tools",
        4,
        ["'Bash(git log, x)'", "comma"],
    ),
    (
        "claude-tools-unbalanced",
        doc("description: d", "runtime: claude-cli", 'tools: ["Bash(a(b)"]'),
        "agent",
        "agent.tools",
        4,
        ["'Bash(a(b)'", "unbalanced"],
    ),
    (
        "claude-tools-unclosed-specifier",
        doc("description: d", "runtime: claude-cli", 'tools: ["Bash(git"]'),
        "agent",
        "agent.tools",
        4,
        ["'Bash(git'", "')'"],
    ),
    (
        "claude-tools-stray-paren",
        doc("description: d", "runtime: claude-cli", 'tools: ["Tool)"]'),
        "agent",
        "agent.tools",
        4,
        ["'Tool)'", "')'"],
    ),
    (
        "claude-tools-no-name",
        doc("description: d", "runtime: claude-cli", 'tools: ["(x)"]'),
        "agent",
        "agent.tools",
        4,
        ["'(x)'", "no tool name"],
    ),
    (
        "claude-tools-bad-name",
        doc("description: d", "runtime: claude-cli", 'tools: ["Bad Name"]'),
        "agent",
        "agent.tools",
        4,
        ["'Bad Name'", "letters, digits"],
    ),
    (
        "claude-tools-empty-entry",
        doc("description: d", "runtime: claude-cli", 'tools: [""]'),
        "agent",
        "agent.tools",
        4,
        ["''", "empty entry"],
    ),
    (
        "claude-tools-duplicate",
        doc("description: d", "runtime: claude-cli", "tools: [Read, Read]"),
        "agent",
        "agent.tools",
        4,
        ["'Read'", "more than once"],
    ),
    (
        "tools-not-a-list",
        doc("description: d", "tools: read_file, grep"),
        "agent",
        "agent.tools",
        3,
        ["'read_file, grep'", "all or an inline list"],
    ),
    (
        "tools-no-value",
        doc("description: d", "tools:"),
        "agent",
        "agent.tools",
        3,
        ["no value", "block lists are not accepted"],
    ),
    (
        "tools-unclosed-list",
        doc("description: d", "tools: [read_file, grep"),
        "agent",
        "agent.tools",
        3,
        ["'[read_file, grep'", "not closed"],
    ),
    (
        "tools-empty-entry",
        doc("description: d", "tools: [grep,, glob]"),
        "agent",
        "agent.tools",
        3,
        ["'[grep,, glob]'", "empty entry"],
    ),
    (
        "tools-trailing-comma",
        doc("description: d", "tools: [grep, glob,]"),
        "agent",
        "agent.tools",
        3,
        ["'[grep, glob,]'", "extra comma"],
    ),
    ("tools-nested-list", doc("description: d", "tools: [[grep]]"), "agent", "agent.tools", 3, ["'[grep]'", "nested"]),
    ("tools-unclosed-quote", doc("description: d", 'tools: ["grep]'), "agent", "agent.tools", 3, ["not closed"]),
    (
        "tools-text-after-quote",
        doc("description: d", 'tools: ["grep" glob]'),
        "agent",
        "agent.tools",
        3,
        ["'grep'", "commas"],
    ),
]


@pytest.mark.parametrize(
    ("text", "default_id", "rule", "line", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in INVALID],
)
def test_invalid_file_gives_one_diagnostic(text: str, default_id: str, rule: str, line: int, words: list[str]) -> None:
    found = problems(text, default_id=default_id)
    assert [(d.rule, d.line) for d in found] == [(rule, line)], [d.render() for d in found]
    (diagnostic,) = found
    assert diagnostic.file == FILE
    assert diagnostic.column == 1
    for word in words:
        assert word in diagnostic.message, (word, diagnostic.message)


def test_independent_problems_are_reported_together_in_line_order() -> None:
    text = doc(
        "id: Bad",
        "description: d",
        "runtime: claude-cli",
        "provider: anthropic",
        "colour: blue",
        "reasoning: off",
        "tools: all",
    )
    found = problems(text)
    assert [(d.rule, d.line) for d in found] == [
        ("agent.id", 2),
        ("agent.provider", 5),
        ("agent.unknown-key", 6),
        ("agent.reasoning", 7),
        ("agent.tools", 8),
    ]
    rendered = str(InvalidWorkflow(found))
    assert f"{FILE}:5:1: error[agent.provider]" in rendered


def test_an_unreadable_line_suppresses_missing_key_guesses() -> None:
    found = problems(doc("description 'no colon'", "model-policy: prefer"))
    assert [d.rule for d in found] == ["agent.syntax"]


def test_block_list_under_tools_is_rejected_with_both_lines() -> None:
    found = problems(doc("description: d", "tools:", "  - read_file"))
    assert [(d.rule, d.line) for d in found] == [("agent.tools", 3), ("agent.syntax", 4)]


# -- the catalog --------------------------------------------------------------------------------


def agent_file(root: Path, name: str, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def homes(tmp_path: Path) -> dict[str, Path]:
    return {
        "workflow_dir": tmp_path / "flow",
        "workspace": tmp_path / "repo",
        "user_home": tmp_path / "home",
    }


def resolve(
    agent_id: str,
    homes: dict[str, Path],
    *,
    overlay: dict[str, tuple[str, str]] | None = None,
) -> tuple[AgentDefinition, Path | None]:
    return resolve_agent(
        agent_id,
        workflow_dir=homes["workflow_dir"],
        workspace=homes["workspace"],
        user_home=homes["user_home"],
        overlay=overlay,
    )


def catalog_problems(agent_id: str, homes: dict[str, Path]) -> list[Diagnostic]:
    with pytest.raises(InvalidWorkflow) as info:
        resolve(agent_id, homes)
    return info.value.diagnostics()


def test_builtin_agents() -> None:
    agents = builtin_agents()
    assert tuple(agents) == BUILTIN_AGENT_IDS == ("default", "explorer", "reviewer", "worker")
    for agent_id, agent in agents.items():
        assert agent.id == agent_id
        assert agent.origin == "builtin"
        assert agent.runtime == "rho"
        assert agent.model_policy == "inherit"
        assert agent.content_sha256 is None
        assert agent.description and agent.body
    for agent_id in ("explorer", "reviewer"):
        assert agents[agent_id].tools == ("read_file", "list_dir", "grep", "glob")
        assert agents[agent_id].is_read_only()
    for agent_id in ("default", "worker"):
        assert agents[agent_id].tools == "all"
        assert not agents[agent_id].is_read_only()


def test_precedence_workflow_then_project_then_user_then_builtin(homes: dict[str, Path]) -> None:
    text = doc("description: {} reviewer", body="Custom.")
    roots = {
        "workflow": homes["workflow_dir"] / "agents",
        "project": homes["workspace"] / ".rho" / "agents",
        "user": homes["user_home"] / "agents",
    }
    files = {origin: agent_file(root, "reviewer.md", text.format(origin)) for origin, root in roots.items()}
    for origin, path in files.items():
        agent, found_at = resolve("reviewer", homes)
        assert (agent.origin, found_at) == (origin, path)
        assert agent.content_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert not agent.is_read_only()
        path.unlink()
    agent, found_at = resolve("reviewer", homes)
    assert (agent.origin, found_at) == ("builtin", None)
    assert agent == builtin_agents()["reviewer"]


def test_overlay_beats_every_directory(homes: dict[str, Path]) -> None:
    agent_file(homes["workflow_dir"] / "agents", "worker.md", doc("description: from flow"))
    text = doc("description: from the notebook")
    agent, found_at = resolve("worker", homes, overlay={"worker": ("cell [3]", text)})
    assert (agent.origin, agent.description, found_at) == ("notebook", "from the notebook", None)
    assert agent.content_sha256 == hashlib.sha256(text.encode()).hexdigest()


def test_without_a_workflow_dir_the_project_root_comes_first(homes: dict[str, Path]) -> None:
    agent_file(homes["workspace"] / ".rho" / "agents", "helper.md", doc("description: repo"))
    agent, _ = resolve_agent("helper", workflow_dir=None, workspace=homes["workspace"], user_home=homes["user_home"])
    assert agent.origin == "project"


def test_the_id_key_beats_the_file_stem(homes: dict[str, Path]) -> None:
    path = agent_file(homes["user_home"] / "agents", "notes.md", doc("id: tidy", "description: d"))
    agent, found_at = resolve("tidy", homes)
    assert (agent.id, found_at) == ("tidy", path)
    assert [d.rule for d in catalog_problems("notes", homes)] == ["agent.unknown"]


def test_unknown_id_lists_available_agents_and_searched_roots(homes: dict[str, Path]) -> None:
    agent_file(homes["workspace"] / ".rho" / "agents", "tidy.md", doc("description: d"))
    (found,) = catalog_problems("reviewr", homes)
    assert found.rule == "agent.unknown"
    assert "'reviewr'" in found.message
    assert "did you mean 'reviewer'" in found.message
    assert "default, explorer, reviewer, tidy, worker" in found.message
    for root in (
        homes["workflow_dir"] / "agents",
        homes["workspace"] / ".rho" / "agents",
        homes["user_home"] / "agents",
    ):
        assert str(root) in found.message
    assert "built-ins" in found.message
    assert found.message.endswith(
        f". Define it in {homes['workflow_dir'] / 'agents' / 'reviewr.md'} or use an available agent"
    )
    with pytest.raises(InvalidWorkflow) as caught:  # no workflow folder: the project's; a notebook: a %%agent cell
        resolve_agent(
            "reviewr", workflow_dir=None, workspace=homes["workspace"], user_home=homes["user_home"], overlay={}
        )
    project_agents = homes["workspace"] / ".rho" / "agents" / "reviewr.md"
    assert f". Define it in {project_agents} (or a %%agent cell) or use" in caught.value.diagnostics()[0].message


def test_symlinked_agent_file_is_rejected(homes: dict[str, Path], tmp_path: Path) -> None:
    target = agent_file(tmp_path / "elsewhere", "real.md", doc("description: d"))
    link = homes["user_home"] / "agents" / "reviewer.md"
    link.parent.mkdir(parents=True)
    os.symlink(target, link)
    (found,) = catalog_problems("reviewer", homes)
    assert (found.rule, found.file) == ("agent.symlink", str(link))
    assert "symbolic link" in found.message
    # A symlink only matters to the id it claims.
    assert resolve("explorer", homes)[0].origin == "builtin"


def test_symlinked_agent_directory_is_rejected(homes: dict[str, Path], tmp_path: Path) -> None:
    real = tmp_path / "real-agents"
    agent_file(real, "tidy.md", doc("description: d"))
    (homes["workspace"] / ".rho").mkdir(parents=True)
    os.symlink(real, homes["workspace"] / ".rho" / "agents")
    (found,) = catalog_problems("tidy", homes)
    assert found.rule == "agent.root"
    assert "symbolic link" in found.message


def test_a_broken_file_matters_only_when_it_claims_the_id(homes: dict[str, Path]) -> None:
    root = homes["workspace"] / ".rho" / "agents"
    path = agent_file(root, "broken.md", doc("description: d", "colour: blue"))
    assert resolve("explorer", homes)[0].origin == "builtin"
    (found,) = catalog_problems("broken", homes)
    assert (found.rule, found.file, found.line) == ("agent.unknown-key", str(path), 3)


def test_a_broken_override_does_not_fall_back_to_the_builtin(homes: dict[str, Path]) -> None:
    agent_file(homes["user_home"] / "agents", "reviewer.md", doc("description: d", "tools: [Read]"))
    (found,) = catalog_problems("reviewer", homes)
    assert (found.rule, found.line) == ("agent.tools", 3)


def test_a_broken_file_claims_the_id_it_declares(homes: dict[str, Path]) -> None:
    root = homes["workflow_dir"] / "agents"
    agent_file(root, "mine.md", doc("id: reviewer", "description: d", "runtime: bun"))
    (found,) = catalog_problems("reviewer", homes)
    assert (found.rule, found.line) == ("agent.runtime", 4)


def test_two_files_with_one_id_in_a_root_collide(homes: dict[str, Path]) -> None:
    root = homes["workspace"] / ".rho" / "agents"
    agent_file(root, "a.md", doc("id: twin", "description: a"))
    second = agent_file(root, "b.md", doc("description: b", "id: twin"))
    (found,) = catalog_problems("twin", homes)
    assert (found.rule, found.file, found.line) == ("agent.duplicate", str(second), 3)
    assert "a.md" in found.message and "b.md" in found.message


def test_a_valid_file_colliding_with_a_broken_one_reports_both(homes: dict[str, Path]) -> None:
    root = homes["workspace"] / ".rho" / "agents"
    agent_file(root, "twin.md", doc("description: a", "colour: red"))
    agent_file(root, "other.md", doc("id: twin", "description: b"))
    found = catalog_problems("twin", homes)
    assert [d.rule for d in found] == ["agent.unknown-key", "agent.duplicate"]


def test_a_file_that_is_not_utf8_is_reported(homes: dict[str, Path]) -> None:
    root = homes["user_home"] / "agents"
    root.mkdir(parents=True)
    (root / "latin.md").write_bytes(b"---\ndescription: caf\xe9\n---\n")
    (found,) = catalog_problems("latin", homes)
    assert found.rule == "agent.encoding"
    assert "UTF-8" in found.message


def test_an_agent_root_that_is_a_file_is_reported(homes: dict[str, Path]) -> None:
    (homes["workspace"] / ".rho").mkdir(parents=True)
    (homes["workspace"] / ".rho" / "agents").write_text("not a directory")
    (found,) = catalog_problems("tidy", homes)
    assert found.rule == "agent.root"
    assert "not a directory" in found.message
