"""``json_bytes`` writes the same bytes whichever encoder it takes.

Plain values (strings, integers, booleans, None, lists, dicts with string keys) are encoded by
orjson, everything else by json (store/_plain_json.py); the bytes are a contract (files hash and
compare), so each is checked against json's encoding on random values and on the edges.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rho_notebook.store._plain_json import plain
from rho_notebook.store.files import json_bytes


def _json_reference(value: Any, *, compact: bool) -> bytes:
    """What json_bytes wrote before orjson: json's encoding, sorted keys, UTF-8, a newline."""
    if compact:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    else:
        text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return (text + "\n").encode()


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.text(max_size=12)
    | st.floats(allow_nan=False, allow_infinity=False)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=24,
)


class _Colour(enum.StrEnum):
    RED = "red"


EDGES: list[Any] = [
    {},
    [],
    {"a": {}, "b": [], "c": [[]], "d": [{}]},
    {"é ☃": '\u2028\x00\x1f\x7f\n\t"\\', "\U0001f600": ["\b\f\r"]},
    {"b": 1, "a": 2, "B": 3, "ä": 4, "z": 5, "": 6},
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    2**64,  # past what orjson takes: json
    -(2**63) - 1,
    {"n": 1.5, "m": 1e-05},  # a float: json
    {"t": (1, 2)},  # a tuple: json
    {"c": _Colour.RED},  # a str subclass: json
    {1: "int key"},  # json turns the key into a string
    True,
    None,
    "just a string",
]


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("value", EDGES, ids=range(len(EDGES)))
def test_the_edges_encode_as_json_does(value: Any, compact: bool) -> None:
    assert json_bytes(value, compact=compact) == _json_reference(value, compact=compact)


@settings(max_examples=400, deadline=None)
@given(_VALUES, st.booleans())
def test_random_values_encode_as_json_does(value: Any, compact: bool) -> None:
    assert json_bytes(value, compact=compact) == _json_reference(value, compact=compact)


def test_plain_takes_only_exact_plain_types() -> None:
    assert plain({"a": [1, "x", None, True, {"b": -3}]})
    assert not plain({"a": 1.0})
    assert not plain({"a": (1,)})
    assert not plain({1: "x"})
    assert not plain({"a": _Colour.RED})
    assert not plain({"a": [object()]})


def test_a_lone_surrogate_fails_as_before() -> None:
    with pytest.raises(UnicodeEncodeError):
        json_bytes({"a": "\ud800"})


def test_a_plain_value_is_encoded_without_json_and_any_other_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("json.dumps was called")

    monkeypatch.setattr(json, "dumps", refuse)  # the module json_bytes calls
    request = {"function": "step", "args": {"i": 5, "prev": None}, "modules": {"nodes/step.py": "sha256:ab"}}
    assert json_bytes(request).startswith(b'{\n  "args": {\n    "i": 5,')
    assert json_bytes(request, compact=True).startswith(b'{"args":{"i":5,')
    with pytest.raises(AssertionError, match="json.dumps was called"):
        json_bytes({"a": 1.5})
    with pytest.raises(AssertionError, match="json.dumps was called"):
        json_bytes({"a": 2**64})
