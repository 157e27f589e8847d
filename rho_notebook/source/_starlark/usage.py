"""What a request used, sent with every answer (the parent records it in the plan's manifest)."""

from __future__ import annotations

import resource
import time

TYPE_CHECKING = False  # not typing's: importing typing would cost every worker start 7 ms
if TYPE_CHECKING:
    from typing import Any

    from rho_notebook.source._starlark.session import Session


def peak_address_space() -> int:
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmPeak:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def stats(session: Session) -> dict[str, Any]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "peak_address_space_bytes": peak_address_space(),
        "ticks": session.ticks,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
        "modules": len(session.sources),
        "module_depth": session.max_depth,
        "source_bytes": session.source_bytes,
        "wall_ms": int((time.monotonic() - session.started) * 1000),
    }
