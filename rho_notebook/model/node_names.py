"""How every front end says that a run, plan or view has no node of a name: one wording."""

from __future__ import annotations

import difflib
from collections.abc import Collection

__all__ = ["no_node"]


def no_node(subject: str, node: str, names: Collection[str]) -> str:
    """``run R has no node 'x'; its nodes: a, b`` (``subject`` is ``run R``, ``plan P``, ...).

    A subject without nodes says so instead of listing none: a script's or a flow's steps are
    its nodes, and they exist only once it runs. A name close to one of them (a typo) is pointed
    at it."""
    if not names:
        return f"{subject} has no node {node!r}; it has no nodes (a script's steps become nodes as it runs)"
    close = difflib.get_close_matches(node, sorted(names), n=1, cutoff=0.8)
    meant = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{subject} has no node {node!r}{meant}; its nodes: {', '.join(sorted(names))}"
