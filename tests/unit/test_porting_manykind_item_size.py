"""Issue 33 point 12, from the seed's own example (manykind-workflows.txt, "The carried item": "Keep
the item lean. A run holds the inputs of the steps it is waiting on in a 1 MiB budget; above that,
the runner drops carried input from waiting steps, largest first. Store bulky data in a cubby or the
Memory Bank and carry ids.").

The graph is the seed's ticket triage with its own prompt mapping ("=Summarise this ticket from
{{ $json.customer }}:\\n{{ $json.text }}"), where a step adds a bulky attachment to the item under
`into` (what the seed's cubby query does; a command step stands in, as there are no cubbies
offline). Adapted where docs/graphs.md names a deliberate difference ("Differences from
Manykind"): the seed would drop carried input and go on; we keep our fail-loud cap, so the step
that made the item too large fails, naming the step, the item's size and its three largest
fields, and nothing after it runs on a silently shortened item. The run is real (service, owner,
store, a real subprocess for the command step).
"""

from __future__ import annotations

import json
import pickle

import pytest

from rho_notebook.errors import ItemTooLarge
from rho_notebook.model.itemgraph import check_item_size, item_bytes
from tests.conftest import Project
from tests.unit.test_item_graph_runs import input_of, run_graph, states

TRIAGE = """\
name: triage
inputs:
  customer: {type: string}
  text: {type: string}
  priority: {type: integer}
steps:
  - {id: trigger, kind: set, params: {fields: {customer: "={{ $json.customer }}", text: "={{ $json.text }}"}}}
  - id: fetch
    kind: command
    params: {argv: [python3, attach.py], into: attachment, max_output_bytes: 4000000}
  - id: classify
    kind: set
    params: {fields: {prompt: "=Summarise this ticket from {{ $json.customer }}:\\n{{ $json.text }}"}}
  - {id: result, kind: output}
edges:
  - {from: trigger, to: fetch}
  - {from: fetch, to: classify}
  - {from: classify, to: result}
"""

INPUTS = {"customer": "Ada Lovelace", "text": "printer on fire", "priority": 2}
ATTACHMENT = "x" * 1_100_000


def test_a_step_over_the_budget_fails_naming_the_step_the_size_and_the_largest_fields(project: Project) -> None:
    project.write("attach.py", f"print('\"' + 'x' * {len(ATTACHMENT)} + '\"')\n")
    state = run_graph(project, TRIAGE, INPUTS)
    assert state.outcome == "failure"
    assert states(state) == {"trigger": "success", "fetch": "failure", "classify": "blocked", "result": "blocked"}
    item = {**INPUTS, "attachment": ATTACHMENT}
    size = item_bytes(item)
    assert size == len(json.dumps(item, separators=(",", ":")))
    message = state.nodes["fetch"].current.message  # type: ignore[union-attr]
    assert message == (
        f"step 'fetch': the item is {size} bytes (canonical JSON), over the 'item_bytes' limit of 1048576 bytes; "
        f"its largest fields: 'attachment' {len(ATTACHMENT) + 2} bytes, 'text' 17 bytes, 'customer' 14 bytes; "
        "keep the item lean: carry IDs or paths of bulky data instead of the data"
    )
    # nothing was dropped: the step's input is kept whole and no later step ran on a shortened item
    assert input_of(project, state, "fetch") == INPUTS
    assert state.output is None


def test_the_seed_advice_carry_ids_fits_the_budget(project: Project) -> None:
    """The seed's fix: keep the bulky data outside and carry its id; the same graph then succeeds."""
    project.write("attach.py", "print('\"cubby://tickets/attachments/42\"')\n")
    state = run_graph(project, TRIAGE, INPUTS)
    assert state.outcome == "success"
    assert state.output["attachment"] == "cubby://tickets/attachments/42"
    assert state.output["prompt"] == "Summarise this ticket from Ada Lovelace:\nprinter on fire"


def test_the_error_names_at_most_three_fields_largest_first_and_pickles() -> None:
    item = {"b": "yy", "a": "yy", "big": "z" * 50, "n": 1}
    with pytest.raises(ItemTooLarge) as caught:
        check_item_size(item, step="classify@2", limit=40)
    err = caught.value
    assert (err.step, err.limit, err.measured) == ("classify@2", 40, item_bytes(item))
    assert err.largest == (("big", 52), ("a", 4), ("b", 4))  # ties by name; 'n' is the 4th
    assert "its largest fields: 'big' 52 bytes, 'a' 4 bytes, 'b' 4 bytes;" in err.message
    again = pickle.loads(pickle.dumps(err))
    assert (again.largest, again.message) == (err.largest, err.message)
    with pytest.raises(ItemTooLarge) as whole:
        check_item_size(["not", "an", "object"], step="s", limit=1)
    assert whole.value.largest == () and "largest fields" not in whole.value.message
