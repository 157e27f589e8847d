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


def encode(value: Any) -> bytes:
    """Canonical bytes of JSON-shaped data (None, bool, int64, str, list, dict[str, ...])."""
    out = bytearray()
    _encode_into(value, out)
    return bytes(out)


def graph_bytes(graph: Graph) -> bytes:
    """The versioned canonical encoding of a frozen graph."""
    return MAGIC + _U32.pack(ENCODING_VERSION) + encode(graph.model_dump(mode="json"))


def graph_digest(graph: Graph) -> str:
    """``sha256:<hex>`` over :func:`graph_bytes`."""
    return "sha256:" + hashlib.sha256(graph_bytes(graph)).hexdigest()
