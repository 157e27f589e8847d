"""The shipped notebooks opened in a real JupyterLab without trusting them (what a newcomer sees).

JupyterLab renders an untrusted output with its first *safe* MIME type by rank: the widget view
and the SVG are not safe, sanitized HTML would outrank the PNG. The DAG outputs carry no HTML, so
each shows its PNG: an ``<img>``, loaded, not cropped, with the legend's last chip painted inside
the picture, and no sanitized text such as ``○ pending 6◔ ready 0`` anywhere. Nothing is run.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.browser.conftest import ARTIFACTS, REPO, Lab

pytestmark = pytest.mark.browser

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
SVG = "{http://www.w3.org/2000/svg}"
GARBLE = ("\u25cb pending", "\u25d4 ready", "\u25c9 running", "\u2713 success")
"""The legend's chips as text: what a sanitized inline SVG used to show."""


def _pictures(path: Path) -> list[dict[str, Any]]:
    """The saved outputs that carry a DAG picture, in order."""
    notebook = nbformat.read(path, as_version=4)
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    return [output for output in outputs if "image/png" in output.get("data", {})]


def _last_chip(svg: str) -> tuple[float, float, float, str, float]:
    """(x, y, width, fill) of the legend's last chip, and the SVG's width, in SVG units."""
    root = ET.fromstring(svg)
    chips = [g for g in root.iter(f"{SVG}g") if g.get("class") == "legend"]
    rect = chips[-1].find(f"{SVG}rect")
    assert rect is not None
    x, y, width = (float(rect.get(key, 0)) for key in ("x", "y", "width"))
    return x, y, width, rect.get("fill", ""), float(root.get("width", 0))


def _open_untrusted(page: Any, lab: Lab, name: str) -> None:
    page.goto(lab.tree(name))
    page.wait_for_function(
        "(path) => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        " return Boolean(w && w.context && w.context.path === path && w.content && w.content.widgets.length"
        " && w.context.isReady); }",
        arg=name,
        timeout=120_000,
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_a_shipped_notebook_opened_untrusted_shows_the_dag_pictures(lab: Lab, page: Any, notebook: Path) -> None:
    pictures = _pictures(notebook)
    assert pictures, f"{notebook.name} has no DAG picture: run scripts/refresh_notebooks.py"
    assert not any("text/html" in output["data"] for output in pictures)
    shutil.copy(notebook, lab.root / notebook.name)
    _open_untrusted(page, lab, notebook.name)
    trusted = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets"
        ".filter(c => c.model.type === 'code').map(c => c.model.trusted)"
    )
    assert trusted and not any(trusted), "the notebook was trusted: this test is about untrusted ones"

    images = page.locator(".jp-OutputArea-output.jp-RenderedImage img")
    images.nth(len(pictures) - 1).wait_for(timeout=60_000)
    assert images.count() == len(pictures)
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.jp-RenderedImage img')).every(i => i.complete && i.naturalWidth > 0)",
        timeout=30_000,
    )
    text = page.evaluate(
        "() => Array.from(document.querySelectorAll('.jp-OutputArea')).map(a => a.textContent).join('\\n')"
    )
    assert not [garble for garble in GARBLE if garble in text], text[:2000]

    for index, output in enumerate(pictures):
        image = images.nth(index)
        image.scroll_into_view_if_needed()
        box = image.bounding_box()
        area = image.locator("xpath=ancestor::div[contains(@class, 'jp-OutputArea-output')]").bounding_box()
        assert box is not None and area is not None
        assert box["x"] >= area["x"] - 1 and box["x"] + box["width"] <= area["x"] + area["width"] + 1  # not cropped
        size = output["metadata"]["image/png"]
        assert abs(box["width"] - size["width"]) <= 1, (box, size)  # shown at the SVG's size, not doubled
        svg = output["data"].get("image/svg+xml")
        if svg is None:
            continue  # a run cell's picture: no SVG saved (see notebook/display.py)
        x, y, width, fill, svg_width = _last_chip(svg)
        # sample the decoded PNG just inside the right edge of the legend's last chip
        painted = image.evaluate(
            "(img, at) => { const c = document.createElement('canvas'); c.width = img.naturalWidth;"
            " c.height = img.naturalHeight; const g = c.getContext('2d'); g.drawImage(img, 0, 0);"
            " const k = img.naturalWidth / at.svgWidth;"
            " const d = g.getImageData(Math.round((at.x + at.width - 3) * k), Math.round((at.y + 7) * k), 1, 1).data;"
            " return '#' + Array.from(d.slice(0, 3)).map(v => v.toString(16).padStart(2, '0')).join(''); }",
            {"x": x, "y": y, "width": width, "svgWidth": svg_width},
        )
        assert painted == fill, f"the legend's last chip ({x + width:.0f} of {svg_width:.0f}) is not in the picture"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"untrusted-{notebook.stem}.png"), full_page=True)
