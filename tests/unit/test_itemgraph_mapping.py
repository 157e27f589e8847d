"""The mapping language of item graphs (rho_notebook/model/mapping.py): whole values keep their
type, text splices strings, a missing field is empty, and parsing refuses what it cannot read."""

from __future__ import annotations

from typing import Any

import pytest

from rho_notebook.errors import MappingError
from rho_notebook.model.mapping import (
    MISSING,
    Ref,
    RunContext,
    Text,
    looks_like_mapping,
    lookup,
    parse_mapping,
    resolve,
    run_people,
    with_people,
)
from rho_notebook.model.run_fold import replay
from rho_notebook.model.run_state import NodeRecord, RunState

ITEM: dict[str, Any] = {
    "score": 70,
    "ok": True,
    "none": None,
    "customer": {"name": "Ada", "tags": ["vip", "eu"]},
    "odd key": "spaced",
}
RUN = RunContext(run_id="run-123", initiator="ada", via="cli")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("={{ $json.score }}", 70),
        ("={{$json.ok}}", True),
        ("={{ $json.customer }}", {"name": "Ada", "tags": ["vip", "eu"]}),
        ("={{ $json.customer.tags[1] }}", "eu"),
        ('={{ $json["odd key"] }}', "spaced"),
        ("={{ $json }}", ITEM),
    ],
)
def test_a_whole_value_mapping_keeps_the_fields_type(value: str, expected: Any) -> None:
    assert resolve(value, ITEM, RUN) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("=ticket {{ $json.score }}", "ticket 70"),
        ("={{ $json.ok }}!", "true!"),
        ("=by {{ $json.customer.name }} ({{ $json.customer.tags }})", 'by Ada (["vip","eu"])'),
        ("=null is [{{ $json.none }}]", "null is []"),
        ("=plain text", "plain text"),
        ("==5", "=5"),
        ("= {{ $json.score }}", " 70"),
    ],
)
def test_inside_text_values_are_spliced_as_strings(value: str, expected: str) -> None:
    assert resolve(value, ITEM, RUN) == expected


@pytest.mark.parametrize(
    "path", ["$json.nope", "$json.customer.nope", "$json.customer.tags[5]", "$json.score.deeper", "$json.customer[0]"]
)
def test_a_missing_field_resolves_to_empty(path: str) -> None:
    assert resolve("={{ " + path + " }}", ITEM, RUN) is None
    assert resolve("=[{{ " + path + " }}]", ITEM, RUN) == "[]"


def test_run_fields_and_the_run_id() -> None:
    assert resolve("={{ $runId }}", ITEM, RUN) == "run-123"
    assert resolve("=by {{ $run.initiator }} via {{ $run.via }}", ITEM, RUN) == "by ada via cli"
    assert resolve("={{ $run.client }}", ITEM, RUN) is None  # not recorded: empty


def test_members_and_participants_are_lists_of_people() -> None:
    run = RunContext(run_id="r", initiator="ada", members=("ada",), participants=("ada", "bob"))
    assert resolve("={{ $run.members }}", ITEM, run) == ["ada"]
    assert resolve("={{ $run.participants }}", ITEM, run) == ["ada", "bob"]
    assert resolve("=seen by {{ $run.participants }}", ITEM, run) == 'seen by ["ada","bob"]'
    assert resolve("={{ $run.participants }}", ITEM, RunContext(run_id="r")) == []  # nobody recorded


def _decided(node: str, attempt: int, by: str, at: str, decision: str = "approve") -> dict[str, Any]:
    return {
        "kind": "approval_decided",
        "run_id": "r",
        "node": node,
        "attempt": attempt,
        "request_id": f"q-{node}-{attempt}",
        "decision": decision,
        "by": by,
        "comment": "",
        "decided_at": at,
        "via": "cli",
        "facts_sha256": "x",
    }


def _state(*events: dict[str, Any]) -> RunState:
    nodes = {name: NodeRecord() for name in ("ask", "ship", "late")}
    state = RunState(run_id="r", plan_id="p", graph_digest="d", workflow="w", nodes=nodes)
    return replay(state, [{"seq": i + 1, "at": "2026-12-05T00:00:00.000+00:00", **e} for i, e in enumerate(events)])


def _launched(node: str, attempt: int) -> list[dict[str, Any]]:
    return [
        {"kind": "node_launched", "run_id": "r", "node": node, "attempt": attempt},
        {"kind": "approval_requested", "run_id": "r", "node": node, "attempt": attempt, "request_id": "q"},
    ]


def test_participants_fold_from_the_journal_in_the_order_people_decided() -> None:
    state = _state(
        *_launched("late", 1),
        *_launched("ask", 1),
        _decided("ask", 1, "bob", "2026-12-05T00:00:01.000+00:00"),
        *_launched("ship", 1),
        _decided("ship", 1, "carol", "2026-12-05T00:00:02.000+00:00"),
        *_launched("ship", 2),
        _decided("ship", 2, "bob", "2026-12-05T00:00:03.000+00:00"),  # bob again: once
        _decided("late", 1, "ada", "2026-12-05T00:00:04.000+00:00"),  # the initiator again: once
    )
    assert run_people("ada", state) == (("ada",), ("ada", "bob", "carol"))
    assert run_people(None, state) == ((), ("bob", "carol", "ada"))
    fields = with_people({"initiator": "ada", "via": "cli", "client": None}, state)
    assert RunContext(run_id="r", **fields).participants == ("ada", "bob", "carol")


def test_denials_and_carried_approvals_are_not_participation() -> None:
    carried = {
        "kind": "approval_carried",
        "run_id": "r",
        "node": "ship",
        "attempt": 1,
        "facts_sha256": "x",
        "from_run": "older",
        "by": "dora",
        "decided_at": "2026-12-01T00:00:00.000+00:00",
    }
    state = _state(
        *_launched("ask", 1),
        _decided("ask", 1, "bob", "2026-12-05T00:00:01.000+00:00", decision="deny"),
        {"kind": "node_launched", "run_id": "r", "node": "ship", "attempt": 1},
        carried,
    )
    assert run_people("ada", state) == (("ada",), ("ada",))
    assert run_people("ada", _state()) == (("ada",), ("ada",))  # nobody was asked


def test_values_without_the_leading_equals_are_themselves_and_containers_are_walked() -> None:
    value = {"a": ["={{ $json.score }}", "literal", 3, None], "b": {"c": "=x{{ $json.score }}"}}
    assert resolve(value, ITEM, RUN) == {"a": [70, "literal", 3, None], "b": {"c": "x70"}}
    assert resolve("ticket {{ $json.score }}", ITEM, RUN) == "ticket {{ $json.score }}"
    assert value["a"][0] == "={{ $json.score }}"  # not changed in place


def test_parsing_builds_a_small_ast() -> None:
    parsed = parse_mapping("=ticket {{ $json.a[0].b }} for {{ $runId }}")
    assert parsed.parts == (
        Text("ticket "),
        Ref("json", ("a", 0, "b"), "$json.a[0].b"),
        Text(" for "),
        Ref("runId", (), "$runId"),
    )
    assert not parsed.whole
    assert parse_mapping("={{ $json.score }}").whole
    assert parse_mapping("=ticket {{ $json.score }}") is parse_mapping("=ticket {{ $json.score }}")  # parsed once


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("={{ $json.a", "has no closing"),
        ("={{ json.a }}", "is not a mapping expression"),
        ("={{ $json.a + 1 }}", "cannot read the path"),
        ("={{ $jsonx }}", "is not a mapping expression"),
        ("={{ $runId.x }}", "$runId has no fields"),
        ("={{ $run.secret }}", "is not a run field"),
        ("={{ __import__('os') }}", "is not a mapping expression"),
        ("no equals {{ $json.a }}", "a mapping starts with '='"),
    ],
)
def test_what_the_parser_refuses(text: str, message: str) -> None:
    with pytest.raises(MappingError, match=message.replace("$", r"\$")):
        parse_mapping(text)


def test_a_string_that_looks_like_a_mapping_without_equals_is_found() -> None:
    assert looks_like_mapping("ticket {{ $json.score }}")
    assert looks_like_mapping("{{$runId}}")
    assert not looks_like_mapping("=ticket {{ $json.score }}")
    assert not looks_like_mapping("braces {{ not a mapping }}")
    assert not looks_like_mapping(7)


def test_lookup_tells_missing_from_null() -> None:
    assert lookup(ITEM, ("none",)) is None
    assert lookup(ITEM, ("nothing",)) is MISSING
