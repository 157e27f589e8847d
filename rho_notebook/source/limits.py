"""Named, measured planning budgets, read from the checked-in receipt ``limit_receipt.json``.

The receipt is produced and verified by ``bench/measure_limits.py`` from the deterministic stress
corpus (``bench/limit_corpus.py``); each budget records the accepted limit, the corpus
measurement it was derived from and the case that measured it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from rho_notebook.model.base import FrozenModel

__all__ = ["Budget", "Limits", "load_limits", "RECEIPT_PATH", "WORKER_BUDGETS"]

RECEIPT_PATH = Path(__file__).with_name("limit_receipt.json")

WORKER_BUDGETS = (
    "source_bytes",
    "module_count",
    "module_depth",
    "evaluator_ticks",
    "evaluator_wall_ms",
    "evaluator_call_depth",
    "evaluator_address_space",
    "string_bytes",
    "list_items",
    "dict_items",
    "value_depth",
)
"""Budgets the planning worker enforces itself; the rest are checked on the returned graph."""


class Budget(FrozenModel):
    limit: int
    """The accepted value; exceeding it is a LimitError."""
    measured: int
    """What the stress corpus measured (0 for a floor that no corpus case approaches)."""
    case: str
    """The corpus case that measured it."""
    unit: str


class Limits(FrozenModel):
    format: str
    budgets: dict[str, Budget]

    def limit(self, name: str) -> int:
        return self.budgets[name].limit

    def worker_limits(self) -> dict[str, int]:
        return {name: self.budgets[name].limit for name in WORKER_BUDGETS}

    def as_dict(self) -> dict[str, int]:
        return {name: budget.limit for name, budget in sorted(self.budgets.items())}


@lru_cache(maxsize=1)
def load_limits() -> Limits:
    return Limits.model_validate(json.loads(RECEIPT_PATH.read_text()))
