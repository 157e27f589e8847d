"""model.spelling.meant: the one "did you mean" rule every refusal that suggests a name uses."""

from __future__ import annotations

from rho_notebook.model.spelling import meant


def test_the_closest_name_above_the_cutoff_is_meant_and_nothing_else_is() -> None:
    assert meant("stauts", ["runs", "status", "result"]) == "status"
    assert meant("zzz", ["runs", "status"]) is None
    assert meant("cc", ["a", "b", "c"]) == "c"  # ratio 0.67: above the default cutoff
    assert meant("cc", ["a", "b", "c"], cutoff=0.8) is None  # a node name is held to 0.8
    assert meant("x", []) is None
