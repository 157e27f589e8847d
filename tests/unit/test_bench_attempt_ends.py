"""bench/attempt_ends.py stamps the end of each forked Python attempt and matches it to its node."""

from __future__ import annotations

from pathlib import Path

from bench.attempt_ends import ENDS_STEP, EndStamps, watched_ends
from bench.python_nodes import python_chain
from bench.run_overhead import make_plan, run_once
from rho_notebook.exec.forked import Forked
from rho_notebook.service import Service
from rho_notebook.store.layout import StoreLayout

MS = 1_000_000


def test_stages_are_matched_to_nodes_by_pid_and_the_live_stamps_are_taken() -> None:
    stamps = EndStamps(exited={11: 3 * MS, 12: 12 * MS}, reported={11: 4 * MS, 12: 12 * MS + MS // 2})
    events = [
        {"kind": "process_started", "node": "a", "pid": 11},
        {"kind": "node_finished", "node": "a", "step_value": 1 * MS},
        {"kind": "process_started", "node": "b", "pid": 12},
        {"kind": "node_finished", "node": "b", "step_value": 9 * MS},
        {"kind": "node_finished", "node": "c", "state": "skipped"},  # no process, no value: left out
    ]
    stamps.take_run(events)
    assert stamps.stages["returned -> exited"] == [2.0, 3.0]
    assert stamps.stages["exited -> reported"] == [1.0, 0.5]
    assert stamps.cycles == [8.0]
    assert stamps.exited == {} and stamps.reported == {}, "the next run starts afresh"
    table = stamps.table().splitlines()
    assert table[0] == "one node to the next (function return to function return): 8.000 ms (p90 8.000, n=1)"
    assert table[2].startswith("  exited -> reported (the server reaps it, its report reaches the owner): 0.750 ms")


def test_a_real_chain_is_stamped_in_order_and_forked_is_restored(tmp_path: Path) -> None:
    originals = (Forked.__init__, Forked.finish, Forked._close)
    service = Service(layout=StoreLayout(home=tmp_path / "home"))
    (tmp_path / "ends" / "nodes").mkdir(parents=True)
    (tmp_path / "ends" / "nodes" / "step.py").write_text(ENDS_STEP)
    plan = make_plan(service, tmp_path / "ends", {"wf.star": python_chain(4)})
    with watched_ends() as stamps:
        events = run_once(service, plan).journal  # raises SystemExit unless every node succeeded
        reported = dict(stamps.reported)
        stamps.take_run(events)
    assert (Forked.__init__, Forked.finish, Forked._close) == originals
    pids = {e["node"]: e["pid"] for e in events if e["kind"] == "process_started"}
    assert len(pids) == 4 and set(reported) == set(pids.values()), "every forked attempt's report was stamped"
    # an attempt whose exit and report the loop took in one pass has no exit stamp: at most a few
    assert 1 <= len(stamps.stages["returned -> exited"]) == len(stamps.stages["exited -> reported"]) <= 4
    assert all(ms > 0 for ms in stamps.stages["returned -> exited"]), "a process exits after its function returns"
    assert all(ms >= 0 for ms in stamps.stages["exited -> reported"]), "and is reported after it exits"
    assert len(stamps.cycles) == 3 and all(ms > 0 for ms in stamps.cycles)
