"""errors.py: what a not-found error tells each front end, and that errors survive a process hop."""

from __future__ import annotations

import pickle

import pytest

from rho_notebook.errors import NotFound
from rho_notebook.store.ids import match_id


def test_a_not_found_id_names_the_verb_that_lists_them_in_each_front_end() -> None:
    with pytest.raises(NotFound) as caught:
        match_id("ffff", ["0190aaaa", "0190bbbb"], what="run")
    err = caught.value
    assert err.message == "no run matches 'ffff'; list them with `rho-notebook runs`"
    assert err.listed_with("%workflow {}") == "no run matches 'ffff'; list them with %workflow runs"
    both = NotFound("'x' is neither a plan nor a run", listers=("plans", "runs"))
    assert both.message.endswith("list them with `rho-notebook plans` and `rho-notebook runs`")
    assert NotFound("run r has no node 'n'").listed_with("%workflow {}") == "run r has no node 'n'"


def test_a_not_found_error_keeps_its_listing_across_a_pickle() -> None:
    """Errors cross process boundaries (the planning worker, Dask workers) by pickle."""
    copy = pickle.loads(pickle.dumps(NotFound("no plan matches 'p'", listers=("plans",))))
    assert isinstance(copy, NotFound)
    assert copy.message == "no plan matches 'p'; list them with `rho-notebook plans`"
    assert copy.listed_with("%workflow {}") == "no plan matches 'p'; list them with %workflow plans"
