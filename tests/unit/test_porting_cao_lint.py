"""Issue 33, points 2 and 4, in ``validate``'s linter (planning/script_lint.py), from the CAO seed's
own examples (/work/shared/seeds/cao-workflows.txt).

Point 4, seed section "The lifecycle" (validate): ``unverifiable-recovery-policy`` is "a step()
call passing **kwargs, where the linter cannot see whether a policy is inside"; a warning, not an
error. Ours is ``script.recovery_unverifiable`` on ``run_step``/``run_command``/``run_model``,
which carry the policy (``recovery=``): CAO's separate ``step()`` declaration is a documented
difference (docs/scripts.md, "Differences from CAO's script tier"). The scripts are the seed's
``hello.py`` (Quick start) and fan-out, adapted as docs/scripts.md says: ``rho_notebook.script``
for ``cao_workflow``, ``run_step(AGENT, PROMPT)`` for ``run_step(PROVIDER, PROFILE, PROMPT)``, and
the step's options passed through ``**options``.

Point 2, seed section "Fan-out (concurrency)": its ``step_id=f"summarize:{name}"`` lints clean
(in docs/porting.md's port of the fan-out, docs/examples/porting/cao_fanout.py, read from its
file), with the very grammar the shim applies, and a flow's built keys never meet it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rho_notebook.flow import KEY
from rho_notebook.planning.script import lint_script
from rho_notebook.script.channel import STEP_ID, step_id_problem

HELLO = """\
from rho_notebook.script import run_step, emit_output


def ask(agent, prompt, **options):
    return run_step(agent, prompt, **options)


# Step 1 - a developer writes a note.
note = ask("developer", "Write a one-line hello note. Return it only.", step_id="note")

# Step 2 - a reviewer critiques it (read-only role: it READS and RETURNS).
review = run_step("reviewer", f"Critique this note in one line: {note.output}", recovery="rerun", **{})

emit_output({"note": note.output, "review": review.output})
"""

FANOUT = (Path(__file__).resolve().parents[2] / "docs" / "examples" / "porting" / "cao_fanout.py").read_text()
"""The seed's fan-out as docs/porting.md ports it, read from its file (one copy)."""


def findings(text: str) -> list[tuple[str, str, int]]:
    return [(f.rule, f.severity, f.line) for f in lint_script(text, "//hello.py")]


def test_a_step_call_passing_kwargs_without_recovery_is_an_unverifiable_policy_warning() -> None:
    found = lint_script(HELLO, "//hello.py")
    assert [(f.rule, f.severity, f.line) for f in found] == [("script.recovery_unverifiable", "warning", 5)]
    assert "passes **kwargs and no recovery=" in found[0].message
    assert "pass recovery= explicitly" in found[0].message


@pytest.mark.parametrize("callee", ["run_step('a', 'p', **o)", "run_command(['true'], **o)", "run_model([], **o)"])
def test_every_step_call_kind_is_checked(callee: str) -> None:
    assert findings(f"from rho_notebook.script import run_step, run_command, run_model\no = dict()\n{callee}\n") == [
        ("script.recovery_unverifiable", "warning", 3)
    ]


def test_an_explicit_recovery_or_no_splat_needs_no_warning() -> None:
    text = "o = {}\nrun_step('a', 'p', recovery=None, **o)\nrun_step('a', 'p')\nprint(dict(**o))\n"
    assert findings(text) == []


def test_the_seeds_fanout_ids_lint_clean_and_bad_ones_are_errors() -> None:
    assert findings(FANOUT) == []
    for bad, line in (("'summarize {n}'", 2), ("f'#{n}'", 2), ("'call-1'", 2), ("f'-{n}'", 2)):
        assert findings(f"n = 1\nrun_step('a', 'p', step_id={bad})\n") == [("script.step_id", "error", line)], bad


def test_the_lint_and_the_shim_apply_one_step_id_rule() -> None:
    assert step_id_problem("summarize:docs/guide@v2.md") is None
    assert step_id_problem("A" * 128) is None
    problem = step_id_problem("A" * 129)
    assert problem is not None
    literal = lint_script("run_step('a', 'p', step_id='" + "A" * 129 + "')\n", "//x.py")
    assert [f.message for f in literal] == [problem]
    assert "reserved" in (step_id_problem("call-12") or "")


@pytest.mark.parametrize(
    "key", ["review.writer#1", "team.research.writer/f1#2", "_root.Agent_1/f1.2.3#40", "flow._unnamed#7"]
)
def test_a_flow_key_is_never_a_step_id(key: str) -> None:
    assert KEY.fullmatch(key) is not None
    assert STEP_ID.fullmatch(key) is None, "a flow key holds '#', which no step id does"


def test_a_splat_the_linter_can_read_is_checked_like_recovery() -> None:
    """A literal ``**{...}``, or a module-level literal dict used only as ``**NAME`` (as our own
    examples/scripts/fanout_review.py passes its limits), shows whether ``recovery`` is inside."""
    limits = "LIMITS = {'timeout_seconds': 60, 'max_output_bytes': 1000}\n"
    assert findings(limits + "run_command(['true'], **LIMITS)\nrun_command(['ls'], **LIMITS)\n") == []
    assert findings("run_step('a', 'p', **{'recovery': 'rerun'})\n") == []
    assert findings("run_step('a', 'p', **{'recovery': 'retry'})\n") == [("script.recovery", "error", 1)]
    assert findings("P = {'recovery': 'later'}\nrun_step('a', 'p', **P)\n") == [("script.recovery", "error", 1)]
    # bound twice, changed in place, passed on, or a parameter of that name: not readable
    for change in ("LIMITS = {}\n", "LIMITS['recovery'] = 'x'\n", "print(LIMITS)\n", "def f(LIMITS):\n    pass\n"):
        assert findings(limits + change + "run_command(['true'], **LIMITS)\n") == [
            ("script.recovery_unverifiable", "warning", 3 if not change.startswith("def") else 4)
        ], change
