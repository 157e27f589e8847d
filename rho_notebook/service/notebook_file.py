"""Reading a saved ``.ipynb`` file: its JSON, and the code cells a workflow can come from.

A notebook is a file someone else may have written, so it is read as untrusted input: opened
non-blocking (a FIFO in its place cannot hang the reader), at most :data:`MAX_NOTEBOOK_BYTES`,
decoded as UTF-8, parsed as JSON (nesting too deep to parse is refused, not a ``RecursionError``),
and its shape checked before a cell is looked at: a JSON object, ``nbformat`` 4 (``cells``) or 3
(``worksheets[].cells``, a code cell's text in ``input``), each cell an object whose source is
text or a list of text. Anything else is an :class:`~rho_notebook.errors.ExportError` that names
the file and what is wrong; nothing here raises another exception on a malformed notebook.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from rho_notebook.errors import ExportError
from rho_notebook.oshelpers import read_fd

__all__ = ["MAX_NOTEBOOK_BYTES", "NotebookCell", "read_notebook_json", "notebook_cells", "tagged_code_cells"]

MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
"""Larger files are refused before they are read (a notebook with big outputs is still far below)."""

NotebookCell = tuple[int, str, str]
"""(1-based cell number, cell type, source text)."""


def read_notebook_json(notebook: Path) -> dict[str, Any]:
    """The notebook's top-level JSON object.

    Raises
    ------
    ExportError
        The file does not exist, cannot be read, is not a regular file, is too large, or is not
        a JSON object.
    """
    try:
        fd = os.open(notebook, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        msg = f"{notebook}: no such notebook"
        raise ExportError(msg) from None
    except (OSError, ValueError) as err:
        msg = f"{notebook}: not a readable notebook ({getattr(err, 'strerror', None) or err})"
        raise ExportError(msg) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            msg = f"{notebook}: not a readable notebook (not a regular file)"
            raise ExportError(msg)
        if info.st_size > MAX_NOTEBOOK_BYTES:
            msg = f"{notebook}: not a readable notebook ({info.st_size} bytes, more than {MAX_NOTEBOOK_BYTES})"
            raise ExportError(msg)
        os.set_blocking(fd, True)
        raw = read_fd(fd)
    except OSError as err:
        msg = f"{notebook}: not a readable notebook ({err.strerror})"
        raise ExportError(msg) from None
    finally:
        os.close(fd)
    return _parse(notebook, raw)


def _parse(notebook: Path, raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        msg = f"{notebook}: not a readable notebook (not UTF-8 at byte {err.start})"
        raise ExportError(msg) from None
    except ValueError as err:
        msg = f"{notebook}: not a readable notebook (not JSON: {err})"
        raise ExportError(msg) from None
    except RecursionError:
        msg = f"{notebook}: not a readable notebook (its JSON nests too deeply to read)"
        raise ExportError(msg) from None
    if not isinstance(data, dict):
        msg = f"{notebook}: not a readable notebook (the file holds {_kind(data)}, not a JSON object)"
        raise ExportError(msg)
    return data


def notebook_cells(notebook: Path, data: dict[str, Any]) -> list[NotebookCell]:
    """Every cell of the notebook ``data`` (read from ``notebook``), in order.

    Raises
    ------
    ExportError
        ``nbformat`` is neither 4 nor 3, the cells are not a list of objects, or a cell's source
        is neither text nor a list of text.
    """
    major, raw = _raw_cells(notebook, data)
    cells: list[NotebookCell] = []
    for index, cell in enumerate(raw, start=1):
        kind = cell.get("cell_type")
        key = "input" if major == 3 and kind == "code" else "source"
        cells.append((index, kind if isinstance(kind, str) else "", _text(notebook, index, cell.get(key, ""))))
    return cells


def tagged_code_cells(notebook: Path, data: dict[str, Any], tag: str) -> list[NotebookCell]:
    """The code cells of ``data`` whose ``metadata.tags`` list holds ``tag`` (papermill's
    ``parameters``), in order. A cell whose metadata or tags are not the shape nbformat gives them
    is not tagged: tags only ever add meaning, so a malformed one is read as none.

    Raises
    ------
    ExportError
        As :func:`notebook_cells`: the notebook itself is malformed.
    """
    _, raw = _raw_cells(notebook, data)
    cells = notebook_cells(notebook, data)
    found: list[NotebookCell] = []
    for cell, (index, kind, source) in zip(raw, cells, strict=True):
        metadata = cell.get("metadata")
        tags = metadata.get("tags") if isinstance(metadata, dict) else None
        if kind == "code" and isinstance(tags, list) and tag in tags:
            found.append((index, kind, source))
    return found


def _raw_cells(notebook: Path, data: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """(nbformat major version, every cell as its JSON object), the shape checked."""
    major = data.get("nbformat")
    if major == 4:
        raw = data.get("cells", [])
    elif major == 3:
        raw = _v3_cells(notebook, data.get("worksheets", []))
    else:
        msg = f"{notebook}: nbformat {major!r} is not supported; save the notebook with Jupyter (nbformat 4)"
        raise ExportError(msg)
    if not isinstance(raw, list):
        msg = f"{notebook}: not a readable notebook (its cells are {_kind(raw)}, not a list)"
        raise ExportError(msg)
    for index, cell in enumerate(raw, start=1):
        if not isinstance(cell, dict):
            msg = f"{notebook} cell {index}: not a readable cell ({_kind(cell)}, not an object)"
            raise ExportError(msg)
    return major, raw


def _v3_cells(notebook: Path, worksheets: Any) -> list[Any]:
    if not isinstance(worksheets, list) or not all(isinstance(w, dict) for w in worksheets):
        msg = f"{notebook}: not a readable notebook (nbformat 3 worksheets are not a list of objects)"
        raise ExportError(msg)
    cells: list[Any] = []
    for sheet in worksheets:
        found = sheet.get("cells", [])
        if not isinstance(found, list):
            msg = f"{notebook}: not a readable notebook (a worksheet's cells are not a list)"
            raise ExportError(msg)
        cells.extend(found)
    return cells


def _text(notebook: Path, index: int, source: Any) -> str:
    """A cell's source as one string (nbformat stores it as text or a list of lines)."""
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    msg = f"{notebook} cell {index}: its source is not text (nor a list of text lines); fix the cell in Jupyter"
    raise ExportError(msg)


def _kind(value: Any) -> str:
    """What JSON value ``value`` is, for messages."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    for kind, name in ((dict, "an object"), (list, "a list"), (str, "a string"), ((int, float), "a number")):
        if isinstance(value, kind):
            return name
    return type(value).__name__
