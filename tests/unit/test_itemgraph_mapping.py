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
)

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
