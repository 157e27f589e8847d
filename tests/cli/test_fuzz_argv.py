"""Fuzz the ``rho-notebook`` command line (issue 14, item 5): random argv drawn from the verbs,
their options and random strings (invalid UTF-8 included) never ends in a traceback or a hang."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rho_notebook.cli.main import build_parser
from tests.conftest import REPO, Project, star

WF = star(
    'return workflow(name = "t", nodes = [command(name = "s", argv = ["true"], timeout_seconds = 10, max_output_bytes = 100)])'
)
WF_INPUT = (
    "def build(inputs):\n"
    '    return workflow(name = "i", nodes = [command(name = "s", argv = ["echo", inputs["x"]], '
    "timeout_seconds = 10, max_output_bytes = 100)])\n\n"
    'WORKFLOW = define(inputs = {"x": input.string(default = "d")}, build = build)\n'
)


def _verbs() -> dict[str, list[str]]:
    parser = build_parser()
    verb = next(action for action in parser._actions if action.dest == "verb")
    return {
        name: [o for action in sub._actions for o in action.option_strings if o not in ("-h", "--help", "--follow")]
        for name, sub in verb.choices.items()  # type: ignore[union-attr]
    }


VERBS = _verbs()
FIXED = ["wf.star", "in.star", "x=1", 'x="s"', "x=", "=", "-1", "0", "json", "text", "jsonl", "RUN", "PLAN"]

no_nul_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)
undecodable = st.binary(max_size=20).filter(lambda raw: b"\x00" not in raw).map(os.fsdecode)


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    verb = draw(st.sampled_from(sorted(VERBS)))
    pool = st.one_of(st.sampled_from(VERBS[verb] or ["--output"]), st.sampled_from(FIXED), no_nul_text, undecodable)
    # --f... would abbreviate --follow (which waits for a run forever by design): not a hang to find.
    rest = draw(st.lists(pool.filter(lambda token: not token.startswith("--f")), max_size=5))
    return [verb, *rest]


@pytest.fixture
def store_project(project: Project) -> tuple[Project, str, str]:
    project.write("wf.star", WF)
    project.write("in.star", WF_INPUT)
    plan = project.plan("wf.star")
    return project, plan.plan_id, project.create_run(plan)


def test_random_argv_never_tracebacks(store_project: tuple[Project, str, str]) -> None:
    project, plan_id, run_id = store_project
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}

    @settings(
        max_examples=30,  # each is a process start (~3 s on 2 cores)
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(argv=argvs())
    @example(argv=["validate", "in.star", "--input", os.fsdecode(b'x="\xff"')])  # seen: UnicodeEncodeError
    @example(argv=["validate", "in.star", "--input", "x=" + "[" * 2_000 + "]" * 2_000])  # seen: RecursionError
    @example(argv=["validate", "in.star", "--input", 'x="a\\u0000b"'])
    def no_traceback(argv: list[str]) -> None:
        argv = [plan_id[:13] if a == "PLAN" else run_id if a == "RUN" else a for a in argv]
        out = subprocess.run(
            [sys.executable, "-m", "rho_notebook", *argv],
            cwd=project.root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
        )
        err = out.stderr.decode(errors="replace")
        assert "Traceback" not in err, (argv, err)
        assert out.returncode in (0, 1, 2, 3, 4, 5, 130, 141), (argv, out.returncode, err)

    no_traceback()
