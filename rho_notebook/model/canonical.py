"""Versioned canonical binary encoding of JSON-shaped data, and the sha256 graph digest.

Encoding (version 1), big-endian, one tag byte per value:

    N                     null
    T / F                 true / false
    I <int64>             integer (signed 64-bit; anything wider is rejected)
    S <u32 len> <utf-8>   string
    L <u32 n> <value>*n   list (order kept)
    M <u32 n> (<S key> <value>)*n   map, keys sorted by their UTF-8 bytes, no duplicates

The digest input is ``MAGIC + VERSION + encode(graph)``. Map key order, the process and the
Python version cannot change the bytes; floats cannot appear (the model has none and
the encoder refuses them). A small, fixed format written here rather than a CBOR dependency:
canonical CBOR would need a float policy and tag rules we do not use.
"""

from __future__ import annotations

import hashlib
import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: reading a stored graph's digest needs no model (store/graphs.py)
    from rho_notebook.model.graph import Graph

__all__ = ["ENCODING_VERSION", "MAGIC", "encode", "graph_bytes", "graph_digest"]

MAGIC = b"RHONB\x00"
ENCODING_VERSION = 1

_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


def _encode_into(value: Any, out: bytearray) -> None:
    if value is None:
        out += b"N"
    elif value is True:
        out += b"T"
    elif value is False:
        out += b"F"
    elif isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            msg = f"integer {value} is outside signed 64-bit range"
            raise ValueError(msg)
        out += b"I"
        out += _I64.pack(value)
    elif isinstance(value, str):
        _encode_str(value.encode("utf-8"), out)
    elif isinstance(value, (list, tuple)):
        out += b"L"
        out += _U32.pack(len(value))
        for item in value:
            _encode_into(item, out)
    elif isinstance(value, dict):
        _encode_map(value, out)
    else:
        msg = f"cannot encode {type(value).__name__} canonically"
        raise TypeError(msg)


def _encode_str(data: bytes, out: bytearray) -> None:
    out += b"S"
    out += _U32.pack(len(data))
    out += data


def _encode_map(value: dict[Any, Any], out: bytearray) -> None:
    keys = []
    for key in value:
        if not isinstance(key, str):
            msg = f"map key {key!r} is not a string"
            raise TypeError(msg)
        keys.append((key.encode("utf-8"), key))
    keys.sort()
    out += b"M"
    out += _U32.pack(len(keys))
    for raw, key in keys:
        _encode_str(raw, out)
        _encode_into(value[key], out)


class _FastEncoder:
    """An encoder into ``out`` that gives :func:`_encode_into`'s bytes, faster on a graph.

    A graph repeats itself: every node has the same keys, and node names recur in every ``needs``.
    So the encoded form of each string and the sorted, encoded keys of each key set are kept for
    the call. Only values of exactly the JSON types take this path; anything else (a subclass, a
    float, a non-string key) goes through :func:`_encode_into`, which encodes or refuses it as
    it always did.
    """

    def __init__(self, out: bytearray) -> None:
        self.out = out
        self.extend = out.extend
        self.strings: dict[str, bytes] = {}
        self.layouts: dict[tuple[Any, ...], tuple[bytes, list[tuple[bytes, str]]] | None] = {}

    def string(self, value: str) -> bytes:
        data = self.strings.get(value)
        if data is None:
            raw = value.encode("utf-8")
            data = self.strings[value] = b"S" + _U32.pack(len(raw)) + raw
        return data

    def put(self, value: Any) -> None:  # noqa: PLR0912  (one dispatch on the value's type)
        kind = type(value)
        if kind is str:
            self.extend(self.strings.get(value) or self.string(value))
        elif kind is dict:
            self.put_map(value)
        elif kind is list or kind is tuple:
            self.extend(b"L" + _U32.pack(len(value)))
            strings, extend = self.strings, self.extend
            for item in value:  # a list of strings (needs, argv) without a call for each
                if type(item) is str:
                    extend(strings.get(item) or self.string(item))
                else:
                    self.put(item)
        elif kind is int and -(2**63) <= value < 2**63:
            self.extend(b"I" + _I64.pack(value))
        elif value is None:
            self.extend(b"N")
        elif value is True:
            self.extend(b"T")
        elif value is False:
            self.extend(b"F")
        else:
            _encode_into(value, self.out)

    def put_map(self, value: dict[Any, Any]) -> None:
        keys = tuple(value)
        layout = self.layouts.get(keys)
        if layout is None and keys not in self.layouts:
            layout = self.layouts[keys] = _layout(keys)
        if layout is None:
            _encode_map(value, self.out)
            return
        extend = self.extend
        extend(layout[0])
        for data, key in layout[1]:
            extend(data)
            item = value[key]
            kind = type(item)
            if kind is str:
                extend(self.strings.get(item) or self.string(item))
            elif item is None:
                extend(b"N")
            else:
                self.put(item)


def _layout(keys: tuple[Any, ...]) -> tuple[bytes, list[tuple[bytes, str]]] | None:
    """A map's header and its keys' encodings in canonical order; None when a key is not a str."""
    if any(type(key) is not str for key in keys):
        return None
    ordered = sorted((key.encode("utf-8"), key) for key in keys)
    return b"M" + _U32.pack(len(keys)), [(b"S" + _U32.pack(len(raw)) + raw, key) for raw, key in ordered]


def encode(value: Any) -> bytes:
    """Canonical bytes of JSON-shaped data (None, bool, int64, str, list, dict[str, ...])."""
    out = bytearray()
    _FastEncoder(out).put(value)
    return bytes(out)


def graph_bytes(graph: Graph) -> bytes:
    """The versioned canonical encoding of a frozen graph."""
    return MAGIC + _U32.pack(ENCODING_VERSION) + encode(graph.model_dump(mode="json"))


def graph_digest(graph: Graph) -> str:
    """``sha256:<hex>`` over :func:`graph_bytes`."""
    return "sha256:" + hashlib.sha256(graph_bytes(graph)).hexdigest()
