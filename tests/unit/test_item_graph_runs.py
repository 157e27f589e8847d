"""Item graphs run on the same runner and store (docs/graphs.md): the item's path through set,
branch, join, loop, code and command steps, the stalled outcome, the item cap and what each
attempt records. Runs execute in-process through the service (real owner, real store, real
Starlark worker and real subprocesses for command steps)."""

from __future__ import annotations

import asyncio
import json
import textwrap
from typing import Any

import pytest

from rho_notebook.errors import InvalidWorkflow
from rho_notebook.model.graph import ItemNode
from rho_notebook.model.run_state import RunState
from rho_notebook.service import Consent, StartRun
from tests.conftest import Project
from tests.unit.test_itemgraph_validate import TRIAGE


def run_graph(project: Project, text: str, inputs: dict[str, Any] | None = None) -> RunState:
    project.write("g.graph.yaml", textwrap.dedent(text))
    plan = project.plan("g.graph.yaml", inputs or {})
    return asyncio.run(project.service.run(StartRun(plan=plan.plan_id, consent=Consent(yes=True))))


def output_of(project: Project, state: RunState, node: str) -> Any:
    folder = project.service.run_store.folder(state.run_id)
    record = state.nodes[node]
    assert record.current is not None
    return json.loads((folder.attempt_dir(node, record.attempt) / "value.json").read_text())


def input_of(project: Project, state: RunState, node: str) -> Any:
    folder = project.service.run_store.folder(state.run_id)
    return json.loads((folder.attempt_dir(node, state.nodes[node].attempt) / "input.json").read_text())


def states(state: RunState) -> dict[str, str]:
    return {name: record.state.value for name, record in state.nodes.items()}


# -- the example --------------------------------------------------------------------------------


@pytest.mark.parametrize(("score", "level"), [(70, "high"), (10, "low"), (50, "high")])
def test_the_triage_example_branches_on_the_score(project: Project, score: int, level: str) -> None:
    state = run_graph(project, TRIAGE, {"score": score})
    assert state.outcome == "success"
    assert state.output == {"score": score, "label": f"ticket {score}", "level": level}
    other = "low" if level == "high" else "high"
    assert states(state)[other] == "skipped" and states(state)[level] == "success"
    # per attempt: the item the step received and the item it passed on
    assert input_of(project, state, "start") == {"score": score}
    assert output_of(project, state, "start") == {"score": score, "label": f"ticket {score}"}
    assert input_of(project, state, level) == output_of(project, state, "route")


def test_a_mapping_without_equals_is_refused_before_anything_runs(project: Project) -> None:
    project.write("g.graph.yaml", TRIAGE.replace('"=ticket {{', '"ticket {{'))
    with pytest.raises(InvalidWorkflow) as caught:
        project.plan("g.graph.yaml", {"score": 70})
    message = str(caught.value)
    assert "step 'start', field 'params.fields.label'" in message and "g.graph.yaml:5:" in message
    assert project.stored_plans() == []


def test_the_plan_freezes_the_document_and_every_version_is_a_new_plan(project: Project) -> None:
    project.write("g.graph.yaml", TRIAGE)
    first = project.plan("g.graph.yaml", {"score": 1})
    assert {type(node) for node in first.graph.nodes} == {ItemNode}
    assert first.graph.node("route").routes[0].when == {"field": "score", "op": "gte", "value": 50}
    project.write("g.graph.yaml", TRIAGE.replace("value: 50", "value: 60"))
    second = project.plan("g.graph.yaml", {"score": 1})
    assert first.graph_digest != second.graph_digest
    assert len(project.stored_plans()) == 2


def test_inputs_are_checked_against_the_declaration(project: Project) -> None:
    project.write("g.graph.yaml", TRIAGE)
    with pytest.raises(InvalidWorkflow, match="score"):
        project.plan("g.graph.yaml", {"score": "high"})


# -- mappings at run time ------------------------------------------------------------------------------


def test_mappings_keep_types_splice_text_and_resolve_missing_to_empty(project: Project) -> None:
    state = run_graph(
        project,
        """\
        name: maps
        inputs:
          n: {type: integer}
        steps:
          - id: s
            kind: set
            params:
              fields:
                whole: "={{ $json.n }}"
                spliced: "=n is {{ $json.n }}"
                missing_whole: "={{ $json.nope.deeper }}"
                missing_text: "=[{{ $json.nope }}]"
                nested: {list: ["={{ $json.n }}", "=x{{ $json.n }}"]}
                literal: "==5"
                run: "={{ $runId }}"
          - {id: out, kind: output}
        edges:
          - {from: s, to: out}
        """,
        {"n": 7},
    )
    assert state.outcome == "success"
    item = state.output
    assert item["whole"] == 7 and item["spliced"] == "n is 7"
    assert item["missing_whole"] is None and item["missing_text"] == "[]"
    assert item["nested"] == {"list": [7, "x7"]} and item["literal"] == "=5"
    assert item["run"] == state.run_id and item["n"] == 7  # set keeps the other fields


def test_run_initiator_reads_the_run_manifest(project: Project) -> None:
    state = run_graph(
        project,
        """\
        name: who
        steps:
          - {id: s, kind: set, params: {fields: {who: "={{ $run.initiator }}", via: "={{ $run.via }}"}}}
        """,
    )
    manifest = project.service.run_store.manifest(state.run_id)
    assert state.nodes["s"].state.value == "success"
    assert output_of(project, state, "s") == {"who": manifest.initiator, "via": manifest.via}


# -- fan-out, join, branch ------------------------------------------------------------------------------


FAN = """\
name: fan
inputs:
  x: {type: integer}
steps:
  - {id: start, kind: set, params: {fields: {seen: start}}}
  - {id: a, kind: set, params: {fields: {seen: a, from_a: 1}}}
  - {id: b, kind: set, params: {fields: {seen: b, from_b: 2}}}
  - {id: skip, kind: set, params: {fields: {seen: skip}}}
  - {id: j, kind: join}
  - {id: out, kind: output}
edges:
  - {from: start, to: b}
  - {from: start, to: a}
  - {from: start, to: skip, when: {field: x, op: gt, value: 100}}
  - {from: b, to: j}
  - {from: skip, to: j}
  - {from: a, to: j}
  - {from: j, to: out}
"""


def test_fan_out_sends_the_item_down_every_edge_and_join_merges_in_edge_order(project: Project) -> None:
    state = run_graph(project, FAN, {"x": 1})
    assert state.outcome == "success"
    assert states(state)["skip"] == "skipped"  # its condition failed, so its edge cannot deliver
    item = state.output
    # the in-edges b, skip, a in document order: a (last) wins the clash on `seen`
    assert item["seen"] == "a" and item["from_a"] == 1 and item["from_b"] == 2
    assert list(item)[-2:] == ["b", "a"]  # each delivered item added under its step id, in edge order
    assert item["b"] == {"x": 1, "seen": "b", "from_b": 2}
    assert "skip" not in item


def test_join_waits_for_every_edge_that_can_still_deliver(project: Project) -> None:
    state = run_graph(project, FAN, {"x": 500})
    assert states(state)["skip"] == "success"
    assert [k for k in state.output if k in ("a", "b", "skip")] == ["b", "skip", "a"]


def test_branch_takes_the_first_edge_whose_condition_holds(project: Project) -> None:
    state = run_graph(
        project,
        """\
        name: first
        inputs:
          x: {type: integer}
        steps:
          - {id: route, kind: branch}
          - {id: one, kind: set, params: {fields: {took: one}}}
          - {id: two, kind: set, params: {fields: {took: two}}}
          - {id: three, kind: set, params: {fields: {took: three}}}
        edges:
          - {from: route, to: one, when: {field: x, op: gt, value: 10}}
          - {from: route, to: two, when: {field: x, op: gt, value: 0}}
          - {from: route, to: three}
        """,
        {"x": 20},
    )
    assert states(state) == {"route": "success", "one": "success", "two": "skipped", "three": "skipped"}


# -- loops --------------------------------------------------------------------------------------------


LOOP = """\
name: loop
inputs:
  limit: {type: integer}
steps:
  - {id: init, kind: set, params: {fields: {count: 0}}}
  - id: bump
    kind: code
    params:
      source: |
        def run(item):
            return dict(item, count = item["count"] + 1)
  - {id: check, kind: branch}
  - {id: out, kind: output}
edges:
  - {from: init, to: bump}
  - {from: bump, to: check}
  - {from: check, to: bump, when: {field: count, op: lt, value: 100}, loop: {max_rounds: 3}}
  - {from: check, to: out}
"""


def test_a_loop_runs_at_most_max_rounds_as_per_round_nodes(project: Project) -> None:
    state = run_graph(project, LOOP, {"limit": 0})
    assert state.outcome == "success"
    assert state.output["count"] == 3  # max_rounds is the total number of rounds
    assert {n for n in state.nodes if n.startswith("bump")} == {"bump@1", "bump@2", "bump@3"}
    assert all(states(state)[f"bump@{r}"] == "success" for r in (1, 2, 3))


def test_a_round_whose_loop_edge_did_not_deliver_is_skipped(project: Project) -> None:
    state = run_graph(project, LOOP.replace("value: 100", "value: 2"), {"limit": 0})
    assert state.outcome == "success" and state.output["count"] == 2
    assert states(state)["bump@3"] == "skipped" and states(state)["check@3"] == "skipped"


def test_loops_that_share_a_step_are_refused(project: Project) -> None:
    project.write(
        "g.graph.yaml",
        """\
name: twice
steps:
  - {id: a, kind: set, params: {fields: {n: 1}}}
  - {id: b, kind: branch}
edges:
  - {from: a, to: b}
  - {from: b, to: a, loop: {max_rounds: 2}, when: {field: n, op: lt, value: 0}}
  - {from: b, to: b, loop: {max_rounds: 2}, when: {field: n, op: lt, value: 0}}
""",
    )
    with pytest.raises(InvalidWorkflow):
        project.plan("g.graph.yaml")


# -- stalled ----------------------------------------------------------------------------------------


def test_a_step_whose_edges_all_fail_stalls_the_run(project: Project) -> None:
    state = run_graph(
        project,
        """\
        name: stuck
        inputs:
          x: {type: integer}
        steps:
          - {id: route, kind: branch}
          - {id: big, kind: output}
          - {id: small, kind: output}
        edges:
          - {from: route, to: big, when: {field: x, op: gt, value: 10}}
          - {from: route, to: small, when: {field: x, op: lt, value: 0}}
        """,
        {"x": 5},
    )
    assert state.outcome == "stalled"
    assert states(state) == {"route": "success", "big": "skipped", "small": "skipped"}


def test_a_failure_outranks_stalled(project: Project) -> None:
    state = run_graph(
        project,
        """\
        name: worse
        inputs:
          x: {type: integer}
        steps:
          - {id: route, kind: set, params: {fields: {y: 1}}}
          - {id: big, kind: output}
          - id: boom
            kind: code
            params: {source: "def run(item):\\n    return item[\\"missing\\"]\\n"}
        edges:
          - {from: route, to: big, when: {field: x, op: gt, value: 10}}
        """,
        {"x": 5},
    )
    assert state.outcome == "failure"
    assert states(state)["boom"] == "failure"


# -- code and command steps ----------------------------------------------------------------------------


def test_code_steps_replace_the_item_and_report_sandbox_refusals(project: Project) -> None:
    state = run_graph(
        project,
        """\
        name: code
        steps:
          - {id: seed, kind: set, params: {fields: {words: [b, a, c]}}}
          - id: sort
            kind: code
            params:
              source: |
                def run(item):
                    return {"sorted": sorted(item["words"]), "n": len(item["words"])}
          - id: escape
            kind: code
            params:
              source: |
                load("//lib.star", "x")
                def run(item):
                    return item
        edges:
          - {from: seed, to: sort}
          - {from: seed, to: escape}
        """,
    )
    assert output_of(project, state, "sort") == {"sorted": ["a", "b", "c"], "n": 3}  # replaced, not merged
    assert states(state)["escape"] == "failure"
    assert "cannot load modules" in (state.nodes["escape"].current.message or "")  # type: ignore[union-attr]
    assert state.outcome == "failure"


def test_a_command_step_adds_its_stdout_json_under_into(project: Project) -> None:
    project.write(
        "tool.py",
        "import json, sys\nprint(json.dumps({'args': sys.argv[1:]}))\n",
    )
    state = run_graph(
        project,
        """\
        name: cmd
        inputs:
          n: {type: integer}
        steps:
          - id: call
            kind: command
            params: {argv: [python3, tool.py, "={{ $json.n }}", "=n={{ $json.n }}"], into: got}
          - {id: out, kind: output}
        edges:
          - {from: call, to: out}
        """,
        {"n": 4},
    )
    assert state.outcome == "success"
    assert state.output == {"n": 4, "got": {"args": ["4", "n=4"]}}


def test_the_item_cap_fails_the_step_naming_both_sizes(project: Project) -> None:
    project.write(
        "big.py",
        "print('\"' + 'x' * 2_000_000 + '\"')\n",
    )
    state = run_graph(
        project,
        """\
        name: cap
        steps:
          - id: call
            kind: command
            params: {argv: [python3, big.py], into: blob, max_output_bytes: 4000000}
          - {id: out, kind: output}
        edges:
          - {from: call, to: out}
        """,
    )
    assert state.outcome == "failure"
    message = state.nodes["call"].current.message  # type: ignore[union-attr]
    assert "1048576" in message and "2000011" in message, message  # {"blob":"x...x"}
    assert states(state)["out"] == "blocked"


# -- agent and model steps against a local OpenAI-compatible server ---------------------------------


ASKING = """\
name: asking
inputs:
  text: {type: string}
steps:
  - id: classify
    kind: agent
    params:
      agent: tester
      prompt: "=Classify: {{ $json.text }}"
      answer: {verdict: {type: enum, choices: [ok, bad]}}
  - id: tag
    kind: agent
    params: {agent: tester, prompt: "=Tags for {{ $json.verdict }}"}
  - id: sum
    kind: model
    params: {provider: local, model: test-model, prompt: "=Summarise {{ $json.text }}", into: summary}
  - {id: out, kind: output}
edges:
  - {from: classify, to: tag}
  - {from: tag, to: sum}
  - {from: sum, to: out}
"""


def test_agent_and_model_steps_merge_answers_and_add_completions(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.agents.fakeserver import OPENAI, ScriptedServer
    from tests.agents.helpers import KEY_ENV, SECRET, assert_no_secret, write_settings_for
    from tests.unit.test_script_steps import AGENT

    monkeypatch.setenv(KEY_ENV, SECRET)
    with ScriptedServer(
        [OPENAI.answer('{"verdict": "bad"}'), OPENAI.answer('{"tags": ["urgent"]}'), OPENAI.answer("A fire.")]
    ) as server:
        write_settings_for(project.home, server)
        project.write(".rho/agents/tester.md", AGENT)
        state = run_graph(project, ASKING, {"text": "printer on fire"})
        assert state.outcome == "success", states(state)
        assert "Classify: printer on fire" in OPENAI.task(server.requests[0])
        assert "Tags for bad" in OPENAI.task(server.requests[1])
        assert server.requests[2].body["messages"][-1]["content"] == "Summarise printer on fire"
    assert state.output == {"text": "printer on fire", "verdict": "bad", "tags": ["urgent"], "summary": "A fire."}
    assert_no_secret(project.home)


def test_an_agent_answer_that_breaks_its_types_fails_the_step(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.agents.fakeserver import OPENAI, ScriptedServer
    from tests.agents.helpers import KEY_ENV, SECRET, write_settings_for
    from tests.unit.test_script_steps import AGENT

    monkeypatch.setenv(KEY_ENV, SECRET)
    with ScriptedServer([OPENAI.answer('{"verdict": "maybe"}')]) as server:
        write_settings_for(project.home, server)
        project.write(".rho/agents/tester.md", AGENT)
        state = run_graph(project, ASKING, {"text": "x"})
    assert state.outcome == "failure"
    assert states(state)["classify"] == "failure" and states(state)["tag"] == "blocked"


def test_a_code_step_over_its_budget_fails_naming_the_budget(project: Project) -> None:
    state = run_graph(
        project,
        """\
        name: spin
        steps:
          - id: spin
            kind: code
            params:
              source: |
                def run(item):
                    n = 0
                    for i in range(100000000):
                        n += i
                    return {"n": n}
        """,
    )
    assert state.outcome == "failure"
    message = state.nodes["spin"].current.message  # type: ignore[union-attr]
    assert "code step 'spin'" in message and "evaluator_" in message and "exceeded" in message, message


def test_a_steps_files_are_private(project: Project) -> None:
    """value.json and input.json of an item step are 0600, as every store file is (docs/running.md)."""
    state = run_graph(project, LOOP, {"limit": 0})
    folder = project.service.run_store.folder(state.run_id)
    attempt = folder.attempt_dir("init", state.nodes["init"].attempt)
    modes = {path.name: path.stat().st_mode & 0o777 for path in attempt.iterdir()}
    assert modes["value.json"] == 0o600 and modes["input.json"] == 0o600, modes


ONE = """\
name: one
inputs:
  text: {type: string}
steps:
  - {id: mark, kind: set, params: {fields: {seen: mark}}}
"""


def test_a_small_item_is_journaled_with_its_step_and_its_copy_written(project: Project) -> None:
    """As a Python node's (exec/base.JOURNALED_VALUE_BYTES): a step's item of at most 4 KiB travels
    in its ``node_finished``, its ``value.json`` a copy made without waiting; a bigger one is
    written durably and not journaled. Both read back the same, and a lost copy is recovered."""
    from rho_notebook.exec.base import JOURNALED_VALUE_BYTES
    from rho_notebook.service.wire import result_json
    from rho_notebook.store.journal_reader import read_journal

    for text, journaled in (("hi", True), ("y" * JOURNALED_VALUE_BYTES, False)):
        state = run_graph(project, ONE, {"text": text})
        assert state.outcome == "success", states(state)
        folder = project.service.run_store.folder(state.run_id)
        finished = next(r for r in read_journal(folder.events).events if r["kind"] == "node_finished")
        item = output_of(project, state, "mark")
        assert item == {"text": text, "seen": "mark"}
        assert finished.get("step_value") == (item if journaled else None)
        copy = folder.attempt_dir("mark", 1) / "value.json"
        assert copy.stat().st_mode & 0o777 == 0o600
    small = run_graph(project, ONE, {"text": "again"})
    folder = project.service.run_store.folder(small.run_id)
    (folder.attempt_dir("mark", 1) / "value.json").unlink()  # lost in a crash: readers take the record's
    assert result_json(folder, small)["nodes"]["mark"]["output"] == {"text": "again", "seen": "mark"}
