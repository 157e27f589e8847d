"""The worker's end of the length-prefixed JSON channel to the parent.

The real stdout is moved to a private descriptor and fd 1 is pointed at stderr, so nothing
evaluated can write into the channel.
"""

from __future__ import annotations

import json
import os
import struct
import sys

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

_HEADER = struct.Struct(">I")


class Channel:
    def __init__(self) -> None:
        self._in = sys.stdin.buffer
        out_fd = os.dup(1)
        os.dup2(2, 1)
        self._out = os.fdopen(out_fd, "wb", buffering=0)

    def send(self, message: dict[str, Any]) -> None:
        self.send_text(json.dumps(message, separators=(",", ":")))

    def send_text(self, text: str) -> None:
        """Send a frame already encoded as JSON text (a JSON object)."""
        data = text.encode()
        self._out.write(_HEADER.pack(len(data)) + data)

    def receive(self) -> dict[str, Any]:
        head = self._in.read(_HEADER.size)
        if len(head) < _HEADER.size:
            sys.exit(3)
        (size,) = _HEADER.unpack(head)
        result: dict[str, Any] = json.loads(self._in.read(size))
        return result
