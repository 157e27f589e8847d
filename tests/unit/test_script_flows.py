"""The ``flow.unnamed`` lint rule (planning/script_flows.py): a module that only defines a flow,
checked as a script, is told which ``--flow`` to pass; a script that does something is not."""

from __future__ import annotations

import ast

import pytest

from rho_notebook.planning.script_flows import flows_defined
from rho_notebook.planning.script_lint import lint_script

REVIEW = """\
from rho_notebook.flow import AgentParam, Workflow, run_session_loop


class Review(Workflow):
    def __init__(self):
        super().__init__()
        self.writer = AgentParam(system="w")

    def forward(self, session):
        return run_session_loop(session, self.writer)
"""


def unnamed(text: str, *, flow: str | None = None) -> list[str]:
    return [f.render() for f in lint_script(text, "//m.py", display="m.py", flow=flow) if f.rule == "flow.unnamed"]


def test_a_module_that_only_defines_a_flow_is_told_the_flow_to_pass() -> None:
    assert unnamed(REVIEW) == [
        "m.py:4:1: warning[flow.unnamed]: the module defines the flow Review and its top-level code runs nothing: "
        "as a script, a run of it calls no step; to validate, plan or run the flow, pass --flow Review"
    ]
    assert unnamed(REVIEW, flow="Review") == []  # checked as the flow: nothing to say


@pytest.mark.parametrize(
    ("text", "named"),
    [
        # an instance made at the top level is the name to pass, as OpenRath's examples write it
        (REVIEW + "\nreview = Review()\n", "--flow review"),
        # an alias, the module imported whole, a subclass of a subclass
        (
            REVIEW.replace("import AgentParam, Workflow,", "import AgentParam, Workflow as Base,").replace(
                "(Workflow)", "(Base)"
            ),
            "--flow Review",
        ),
        (
            "import rho_notebook.flow as rf\n\n\nclass A(rf.Workflow):\n    pass\n\n\nclass B(A):\n    pass\n",
            "--flow A or --flow B",
        ),
        ("from rho_notebook import flow\n\n\nclass A(flow.Workflow):\n    '''doc'''\n", "--flow A"),
    ],
)
def test_every_spelling_of_a_flow_definition_is_seen(text: str, named: str) -> None:
    found = unnamed(text)
    assert len(found) == 1 and found[0].endswith(f"pass {named}"), found


def test_a_preset_instance_is_a_flow_defined_at_its_line() -> None:
    """porting.md's ``agent = flow.Agent(...)``: run without ``--flow`` it calls nothing, and
    ``--flow agent`` is what runs it, so the warning says so at the instance."""
    text = "from rho_notebook import flow\n\nLIMIT = 3\nagent = flow.Agent(system_prompt='x', provider='main')\n"
    assert unnamed(text) == [
        "m.py:4:1: warning[flow.unnamed]: the module defines the flow agent and its top-level code runs nothing: "
        "as a script, a run of it calls no step; to validate, plan or run the flow, pass --flow agent"
    ]


@pytest.mark.parametrize(
    "tail",
    [
        'if __name__ == "__main__":\n    print(Review())\n',
        "print('starting')\n",
        "result = run_flow(Review(), Session.from_user_message('hi'))\n",
        "for _ in range(1):\n    pass\n",
    ],
)
def test_a_module_whose_top_level_code_does_something_is_a_script(tail: str) -> None:
    assert unnamed(REVIEW.replace("run_session_loop\n", "run_flow, run_session_loop, Session\n") + "\n" + tail) == []


def test_a_script_without_a_flow_is_not_flagged() -> None:
    assert unnamed("from rho_notebook.script import run_command\n\nrun_command(['true'])\n") == []
    assert unnamed("class Workflow:\n    pass\n\n\nclass A(Workflow):\n    pass\n") == []  # not rho_notebook's


def test_flows_defined_lists_classes_then_instances() -> None:
    tree = ast.parse(REVIEW + "\nreview = Review()\nother = dict()\n")
    assert flows_defined(tree) == ["Review", "review"]


def test_an_annotated_instance_is_a_flow_defined_and_the_flow_to_pass() -> None:
    text = REVIEW + "\nreview: Review = Review()\n"
    assert flows_defined(ast.parse(text)) == ["Review", "review"]
    [found] = unnamed(text)
    assert found.endswith("pass --flow review")
