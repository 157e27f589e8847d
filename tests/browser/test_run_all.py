"""Run All, twice, on one kernel: every cell of notebooks/03_cancel_and_resume.ipynb finishes.

JupyterLab finishes a cell only when the kernel's ``status: idle`` for that execute request
arrives with the request's msg_id as its parent. A message sent with the wrong parent (output or
widget traffic from the runner thread, a stale parent left behind by a comm handled while a cell
was awaiting) leaves the cell at ``[*]`` forever: the second Run All on a kernel that already ran
the notebook is where issue 13 saw it. Waits are bounded; a stuck cell fails the test with the
prompts of every cell.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from tests.browser.conftest import REPO, Lab
from tests.browser.test_lab import _errors, _open, _run_all

pytestmark = pytest.mark.browser

NOTEBOOK = REPO / "notebooks" / "03_cancel_and_resume.ipynb"

_PROMPTS = (
    "() => window.jupyterapp.shell.currentWidget.content.widgets"
    ".filter(c => c.model.type === 'code').map(c => c.promptNode ? c.promptNode.textContent.trim() : '?')"
)
_FINISHED = (
    "(before) => { const w = window.jupyterapp.shell.currentWidget;"
    " const k = w.sessionContext.session && w.sessionContext.session.kernel;"
    " const cells = w.content.widgets.filter(c => c.model.type === 'code');"
    " return Boolean(k) && k.status === 'idle' && cells.every(c => {"
    "   const n = c.model.executionCount; const p = c.promptNode ? c.promptNode.textContent : '';"
    "   return typeof n === 'number' && n > before && !p.includes('*'); }); }"
)


def _counts(page: Any) -> list[int | None]:
    counts: list[int | None] = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets"
        ".filter(c => c.model.type === 'code').map(c => c.model.executionCount)"
    )
    return counts


def _run_all_and_finish(page: Any, *, before: int, timeout: float = 120_000) -> list[int | None]:
    _run_all(page)
    try:
        page.wait_for_function(_FINISHED, arg=before, timeout=timeout)
    except Exception as err:  # a Playwright timeout: say which cells are stuck
        prompts = page.evaluate(_PROMPTS)
        pytest.fail(f"Run All did not finish every cell within {timeout / 1000:.0f} s; prompts {prompts}: {err}")
    return _counts(page)


def test_run_all_twice_on_one_kernel_finishes_every_cell(lab: Lab, page: Any) -> None:
    shutil.copy(NOTEBOOK, lab.root / "run_all_twice.ipynb")
    _open(page, lab, "run_all_twice.ipynb")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    first = _run_all_and_finish(page, before=0)
    assert all(isinstance(n, int) for n in first), first
    assert first == sorted(first), first  # one cell after the other
    second = _run_all_and_finish(page, before=max(n for n in first if n is not None))
    assert all(isinstance(n, int) for n in second), second
    assert min(n for n in second if n is not None) > max(n for n in first if n is not None)
    prompts = page.evaluate(_PROMPTS)
    assert not any("*" in p for p in prompts), prompts
    assert not _errors(page), _errors(page)
    text = page.evaluate(
        "() => Array.from(document.querySelectorAll('.jp-OutputArea-output')).map(e => e.textContent).join('\\n')"
    )
    assert "slow: running" in text and "outcome: success" in text, text[-2000:]
