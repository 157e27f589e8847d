"""Widget update cost for a 750-node run: kernel-side µs per state change, front-end messages/s.

Two drives of a real run view (``RunController`` + ``DagWidget``, an anywidget with a recording
comm instead of a kernel comm; every message the widget would send is counted):

1. synthetic: the plan of ``limit_corpus.graph_case()`` (750 nodes, 7,500 edges) and a journal-
   shaped event stream fed from a thread at a fixed rate (``--rate`` events/s, default 3,000) and
   then as fast as possible; per node: ready, launched, process_started, 2 output chunks, finished;
2. real: the same plan executed by ``execute_run`` on a thread (750 runs of /bin/true, two at a
   time), the view listening as it would in a kernel.

Reported: listener cost per event and per state change (the runner thread's share), flush cost
per message (the pump thread's share), front-end messages per second and per run, nodes per
message, bytes per message.

    python -m bench.widget_updates [--rate 3000] [--skip-real] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.limit_corpus import graph_case, write_case
from rho_notebook.model.events import now_iso
from rho_notebook.model.plan import Plan
from rho_notebook.model.run_state import RunState
from rho_notebook.runtime.owner import create_run
from rho_notebook.runtime.status import load_state
from rho_notebook.service import Service
from rho_notebook.source.workspace import Workspace
from rho_notebook.store.layout import StoreLayout
from rho_notebook.widgets._run import RunController
from rho_notebook.widgets._testing import RecordingComm, ThreadRunHandle, recording_comms

STATE_KINDS = {"node_ready", "node_launched", "node_finished", "node_skipped", "node_blocked", "node_reset"}


class SyntheticHandle:
    """A handle whose events the bench emits itself (no process is started)."""

    def __init__(self, service: Service, run_id: str) -> None:
        self.run_id = run_id
        self.service = service
        self._state = load_state(service.layout, run_id)
        self._listeners: list[Callable[[dict[str, Any]], None]] = []
        self._done = False

    def add_listener(self, callback: Callable[[dict[str, Any]], None]) -> None:
        self._listeners.append(callback)

    def state(self) -> RunState:
        import copy

        return copy.deepcopy(self._state)

    def done(self) -> bool:
        return self._done

    def cancel(self) -> None:
        return None

    def emit(self, event: dict[str, Any]) -> None:
        for listener in self._listeners:
            listener(event)


def _events(plan: Plan, run_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    seq = 1  # run_created is seq 1 in the journal already

    def add(kind: str, **data: Any) -> None:
        nonlocal seq
        record = {"run_id": run_id, "at": now_iso(), "kind": kind, **data}
        if kind != "output_chunk":
            seq += 1
            record["seq"] = seq
        found.append(record)

    add("run_started", pid=1, resumed=False)
    for node in plan.graph.nodes:
        add("node_ready", node=node.name)
        add("node_launched", node=node.name, attempt=1)
        add("process_started", node=node.name, attempt=1, pid=2)
        add("output_chunk", node=node.name, attempt=1, stream="stdout", bytes=10)
        add("output_chunk", node=node.name, attempt=1, stream="stderr", bytes=10)
        add("node_finished", node=node.name, attempt=1, state="success", exit={"kind": "exit", "code": 0}, message="")
    add("run_completed", outcome="success")
    return found


class Meter:
    """Wraps the controller's listener and flush to time them."""

    def __init__(self, controller: RunController, handle: Any) -> None:
        self.listen_s = 0.0
        self.listen_calls = 0
        self.state_changes = 0
        self.flush_s = 0.0
        self.flushes = 0
        listen, flush = controller._listen, controller._flush

        def timed_listen(event: dict[str, Any]) -> None:
            started = time.perf_counter()
            listen(event)
            self.listen_s += time.perf_counter() - started
            self.listen_calls += 1
            if event.get("kind") in STATE_KINDS:
                self.state_changes += 1

        def timed_flush() -> None:
            started = time.perf_counter()
            flush()
            self.flush_s += time.perf_counter() - started
            self.flushes += 1

        # the run's feed (shared by its views) holds the bound listener: swap it for the timed one
        feed = controller.feed
        feed._listeners[:] = [timed_listen if cb == listen else cb for cb in feed._listeners]
        controller.throttle._flush = timed_flush


def _report(name: str, meter: Meter, comm: RecordingComm, seconds: float) -> dict[str, Any]:
    patches = [(t, m) for t, m in comm.custom_timed() if m.get("kind") == "patch"]
    sizes = [len(json.dumps(m)) for _, m in patches]
    nodes = [len(m.get("nodes") or {}) for _, m in patches]
    times = [t for t, _ in patches]
    gaps = [b - a for a, b in zip(times, times[1:])]
    result = {
        "drive": name,
        "seconds": round(seconds, 3),
        "events": meter.listen_calls,
        "state_changes": meter.state_changes,
        "listener_us_per_event": round(meter.listen_s / max(meter.listen_calls, 1) * 1e6, 2),
        "listener_us_per_state_change": round(meter.listen_s / max(meter.state_changes, 1) * 1e6, 2),
        "flush_ms_per_message": round(meter.flush_s / max(meter.flushes, 1) * 1e3, 3),
        "kernel_us_per_state_change": round((meter.listen_s + meter.flush_s) / max(meter.state_changes, 1) * 1e6, 2),
        "messages": len(patches),
        "messages_per_second": round(len(patches) / seconds, 2) if seconds else None,
        "max_messages_in_any_1s": max((sum(1 for u in times if t <= u < t + 1.0) for t in times), default=0),
        "min_gap_ms": round(min(gaps) * 1000, 1) if gaps else None,
        "nodes_per_message_mean": round(sum(nodes) / max(len(nodes), 1), 1),
        "bytes_per_message_mean": round(sum(sizes) / max(len(sizes), 1)),
        "trait_updates": len(comm.updates()),
    }
    return result


def _settle(controller: RunController, comm: RecordingComm, *, quiet: float = 0.4, timeout: float = 30.0) -> None:
    """Wait until the last flush went out (no new message for ``quiet`` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        times = comm.times
        if controller.widget.run.get("lifecycle") == "completed" and (
            not times or time.monotonic() - times[-1] > quiet
        ):
            return
        time.sleep(0.05)


def synthetic(service: Service, plan: Plan, *, rate: float | None) -> dict[str, Any]:
    with recording_comms() as comms:
        run_id = create_run(service.layout, plan)
        handle = SyntheticHandle(service, run_id)
        controller = RunController(handle, service=service)
        meter = Meter(controller, handle)
        comm = next(c for c in comms if c.comm_id == controller.widget.model_id)
        events = _events(plan, run_id)
        comm.messages.clear()
        comm.times.clear()

        def feed() -> None:
            started = time.perf_counter()
            for index, event in enumerate(events):
                if rate:
                    due = started + index / rate
                    while time.perf_counter() < due:
                        time.sleep(min(0.001, max(due - time.perf_counter(), 0)))
                handle.emit(event)
            handle._done = True

        started = time.monotonic()
        thread = threading.Thread(target=feed, name="synthetic-runner")
        thread.start()
        thread.join()
        fed = time.monotonic() - started
        _settle(controller, comm)
        result = _report(f"synthetic {f'{int(rate)} events/s' if rate else 'unthrottled'}", meter, comm, fed)
        states = set(controller.widget.states().values())
        result["final_states"] = sorted(states)
        return result


def real(service: Service, plan: Plan) -> dict[str, Any]:
    with recording_comms() as comms:
        run_id = create_run(service.layout, plan)
        handle = ThreadRunHandle(service, run_id)
        controller = RunController(handle, service=service)
        meter = Meter(controller, handle)
        comm = next(c for c in comms if c.comm_id == controller.widget.model_id)
        comm.messages.clear()
        comm.times.clear()
        started = time.monotonic()
        handle.start()
        final = handle.wait(timeout=1800)
        ran = time.monotonic() - started
        _settle(controller, comm)
        result = _report("real run of 750 /bin/true", meter, comm, ran)
        result["outcome"] = final.outcome
        result["final_states_match"] = controller.widget.states() == {n: r.state.value for n, r in final.nodes.items()}
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=3000.0, help="synthetic events per second (default 3000)")
    parser.add_argument("--skip-real", action="store_true", help="only the synthetic drives")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        (root / ".rho").mkdir(parents=True)
        entry = write_case(graph_case(), root)
        service = Service(layout=StoreLayout(home=Path(tmp) / "home"))
        plan = asyncio.run(service.plan(service.request_for(entry, inputs={}, workspace=Workspace(root=root))))
        results = [synthetic(service, plan, rate=args.rate), synthetic(service, plan, rate=None)]
        if not args.skip_real:
            results.append(real(service, plan))
    for result in results:
        print(f"== {result['drive']}")
        for key, value in result.items():
            if key != "drive":
                print(f"   {key:<30} {value}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
