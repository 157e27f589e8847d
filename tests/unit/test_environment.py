"""The environment a command node receives (rho_notebook.exec.base.node_environment), from a plain
mapping and from the run's EnvironmentSnapshot, which filters once per policy."""

from __future__ import annotations

from rho_notebook.exec.base import EnvironmentSnapshot, node_environment
from rho_notebook.model.graph import EnvironmentPolicy

SOURCE = {"PATH": "/usr/bin", "HOME": "/home/u", "LC_ALL": "C", "SECRET_TOKEN": "t0ken", "LD_PRELOAD": "/x.so"}


def test_snapshot_and_plain_mapping_give_the_same_environment() -> None:
    policy = EnvironmentPolicy()
    plain = node_environment(policy, SOURCE, run_id="r1", node="n1")
    snap = node_environment(policy, EnvironmentSnapshot(SOURCE), run_id="r1", node="n1")
    assert plain == snap == {"PATH": "/usr/bin", "HOME": "/home/u", "LC_ALL": "C", "RHO_RUN_ID": "r1", "RHO_NODE": "n1"}


def test_snapshot_is_a_copy_and_each_launch_gets_its_own_dict() -> None:
    source = dict(SOURCE)
    snapshot = EnvironmentSnapshot(source)
    source["PATH"] = "/changed"
    first = node_environment(EnvironmentPolicy(), snapshot, run_id="r", node="a")
    first["PATH"] = "/tampered"
    second = node_environment(EnvironmentPolicy(), snapshot, run_id="r", node="b")
    assert second["PATH"] == "/usr/bin" and second["RHO_NODE"] == "b"
    assert snapshot["SECRET_TOKEN"] == "t0ken" and len(snapshot) == len(SOURCE)  # agents read credentials from it


def test_each_policy_is_filtered_on_its_own() -> None:
    snapshot = EnvironmentSnapshot(SOURCE)
    narrow = EnvironmentPolicy(names=("PATH",), prefixes=())
    assert node_environment(narrow, snapshot, run_id="r", node="n") == {
        "PATH": "/usr/bin",
        "RHO_RUN_ID": "r",
        "RHO_NODE": "n",
    }
    assert "HOME" in node_environment(EnvironmentPolicy(), snapshot, run_id="r", node="n")
