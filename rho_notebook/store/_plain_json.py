"""Which values orjson encodes exactly as the store's json encoding does (private to store).

For a tree of strings, integers (within 64 bits), booleans, None, lists, and dicts with string
keys, ``orjson.dumps`` with sorted keys writes the bytes ``json.dumps(..., sort_keys=True,
ensure_ascii=False)`` writes, compact or indented by two spaces, in a tenth of the time
(tests/unit/test_store_json_bytes.py and test_journal_bytes.py compare them on random values).
A float may be spelled otherwise (``1e-05`` against ``0.00001``), and a subclass (an enum, a
tuple) is encoded otherwise, so any other value goes through json.
"""

from __future__ import annotations

from typing import Any


def plain(value: Any) -> bool:
    """Whether ``value`` is such a tree (an integer's range is orjson's to refuse)."""
    kind = type(value)
    if kind is str or kind is int or value is None or kind is bool:
        return True
    if kind is dict:
        return all(type(key) is str and plain(item) for key, item in value.items())
    if kind is list:
        return all(plain(item) for item in value)
    return False


def plain_values(record: dict[str, Any]) -> bool:
    """:func:`plain` for every value of ``record`` (whose keys are known to be strings)."""
    for value in record.values():
        kind = type(value)
        if kind is str or kind is int or value is None or kind is bool:
            continue
        if not plain(value):
            return False
    return True
