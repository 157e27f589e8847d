"""The module-tree view (views/flowtree.py) of a compiled flow manifest: rows in tree order (a
module, its agents, a selector's candidates, then its children), placements with their defaults,
and the text and HTML it renders."""

from __future__ import annotations

from rho_notebook.flow import Agent, AgentParam, Selector, Workflow
from rho_notebook.views.flowtree import flow_rows, flow_tree_html, flow_tree_text


class Research(Workflow):
    def __init__(self) -> None:
        super().__init__(description="Dig into sources")
        self.scout = AgentParam(agent="scout")


class Team(Workflow):
    def __init__(self) -> None:
        super().__init__()
        self.writer = AgentParam(system="Write.", provider="local", model="m1")
        self.research = Research()
        self.triage = Agent("Triage.", description="Classify <requests>")
        self.route = Selector(candidates=(self.research, self.triage, Agent("Loose.", description="Not registered")))


def test_rows_follow_the_tree() -> None:
    rows = flow_rows(Team().compile())
    assert [(row.depth, row.kind, row.path) for row in rows] == [
        (0, "module", "team"),
        (1, "agent", "team.writer"),
        (1, "module", "team.research"),
        (2, "agent", "team.research.scout"),
        (1, "module", "team.triage"),
        (2, "agent", "team.triage.agent"),
        (1, "selector", "team.route"),
        (2, "agent", "team.route.router"),
        (2, "candidate", "team.research"),
        (2, "candidate", "team.triage"),
        (2, "candidate", "(not in the tree)"),
    ]
    facts = dict(rows[1].facts)
    assert (facts["provider"], facts["model"], facts["definition"]) == ("local", "m1", "inline system prompt")
    assert facts["digest"] == Team().writer.digest()
    scout = dict(rows[3].facts)
    assert (scout["provider"], scout["model"], scout["definition"]) == (
        "(default provider)",
        "(default model)",
        "agent scout",
    )
    assert "credential" not in scout  # the manifest gives no credential reference: none is shown


def test_text_and_html() -> None:
    manifest = Team().compile()
    text = flow_tree_text(manifest).splitlines()
    assert text[0] == "flow team: 4 modules, 4 agents, 1 selector"
    assert text[2].startswith(
        "    agent writer  provider local  model m1  credential settings:providers.local  sha256:"
    )
    assert text[2].endswith("(inline system prompt)")
    assert "    route  Selector (chooses at run time)" in text
    assert '      -> team.triage (Agent)  choice 2  "Classify <requests>"' in text
    html = flow_tree_html(manifest)
    assert "Classify &lt;requests&gt;" in html and "<requests>" not in html  # escaped
    assert html.count('class="rho-flow-row"') == len(flow_rows(manifest))
    assert 'data-kind="selector" data-path="team.route"' in html
