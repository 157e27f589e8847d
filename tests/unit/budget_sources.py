"""Workflow sources that run out of a planning worker's budgets, shared by the tests of the
budgets (test_planning_limits.py) and of the warm worker that must survive them
(test_warm_planner.py)."""

from __future__ import annotations

from tests.conftest import star

__all__ = ["ENDLESS", "GREEDY", "HUGE_STRING"]

ENDLESS = star(
    """
    def spin():
        n = 0
        for i in range(2147483647):
            n += 1
        return n
    spin()
    return workflow(name = "x", nodes = [])
    """
)
"""Runs until the work budget (ticks) or the wall-time budget stops it."""

GREEDY = star(
    """
    def hog():
        hoard = []
        for i in range(2147483647):
            hoard.append("x" * 1000000)
        return hoard
    hog()
    return workflow(name = "x", nodes = [])
    """
)
"""Allocates until the address-space budget (or a work budget) stops it."""

HUGE_STRING = star(
    """
    s = "x" * 100000000
    s = s + s + s + s + s + s + s + s
    return workflow(name = "x", nodes = [])
    """
)
"""One string past the string budget, or an allocation past the address-space budget."""
