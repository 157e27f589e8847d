"""How every front end says that a run, plan or view has no node of a name: one wording."""

from __future__ import annotations

from collections.abc import Collection

from rho_notebook.model.spelling import meant

__all__ = ["no_node"]


def no_node(subject: str, node: str, names: Collection[str]) -> str:
    """``run R has no node 'x'; its nodes: a, b`` (``subject`` is ``run R``, ``plan P``, ...).

    A subject without nodes says so instead of listing none: a script's or a flow's steps are
    its nodes, and they exist only once it runs. A name close to one of them (a typo) is pointed
    at it."""
    if not names:
        return f"{subject} has no node {node!r}; it has no nodes (a script's steps become nodes as it runs)"
    close = meant(node, sorted(names), cutoff=0.8)
    guess = f" (did you mean {close!r}?)" if close else ""
    return f"{subject} has no node {node!r}{guess}; its nodes: {', '.join(sorted(names))}"
