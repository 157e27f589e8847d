"""Which Python interpreter a saved notebook's Python nodes are frozen with when it runs headless.

In a kernel, Python nodes are frozen with the kernel's ``sys.executable``. ``rho-notebook run
NOTEBOOK.ipynb`` freezes the interpreter that notebook's kernel would use, so that the same cells
give the same graph digest in Jupyter and on the command line:

1. The notebook's ``metadata.kernelspec.name`` names a kernel installed on this machine (found as
   Jupyter finds it, by ``jupyter_client``'s ``KernelSpecManager``) whose language is Python.
2. Its ``argv[0]`` is an absolute path to an executable file: that interpreter.
3. Its ``argv[0]`` is ``python``, ``python3`` or ``python3.X`` of this Python: Jupyter never looks
   that up on PATH but starts the kernel with the interpreter of the process that launches it;
   headless, that process is this command, so it is this command's own interpreter.
4. Anything else (no kernelspec, a kernel not installed here, another language, a relative or bare
   program name, a missing file): this command's own interpreter. Interpreters are never looked
   up on PATH.

The choice comes with the reason, which the command prints.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rho_notebook.errors import ExportError
from rho_notebook.service.notebook_file import read_notebook_json

__all__ = ["InterpreterChoice", "notebook_interpreter"]


@dataclass(frozen=True)
class InterpreterChoice:
    """An interpreter for a notebook's Python nodes, and why it was chosen."""

    path: Path
    reason: str
    from_kernel: bool
    """True when it is the notebook's kernel's interpreter (rules 2 and 3 of the module docstring)."""

    def __str__(self) -> str:
        return f"python {self.path}  ({self.reason})"


def _launcher_names() -> frozenset[str]:
    """The ``argv[0]`` values Jupyter replaces by the launching process's ``sys.executable``."""
    major, minor = sys.version_info[:2]
    return frozenset({"python", f"python{major}", f"python{major}.{minor}"})


def _kernelspec(notebook: Path) -> dict[str, Any]:
    """The notebook's ``metadata.kernelspec`` ({} when it has none or the file is not JSON)."""
    try:
        data = read_notebook_json(notebook)
    except ExportError:  # planning the notebook says what is wrong with it
        return {}
    metadata = data.get("metadata")
    spec = metadata.get("kernelspec") if isinstance(metadata, dict) else None
    return spec if isinstance(spec, dict) else {}


def notebook_interpreter(notebook: Path) -> InterpreterChoice:
    """The interpreter ``run NOTEBOOK.ipynb`` freezes Python nodes with (see the module docstring)."""
    own = Path(sys.executable)
    name = _kernelspec(notebook).get("name")
    if not isinstance(name, str) or not name:
        return InterpreterChoice(own, "the notebook names no kernel; this command's own interpreter", False)
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        reason = f"the notebook's kernel {name!r} is not installed on this machine; this command's own interpreter"
        return InterpreterChoice(own, reason, False)
    except (OSError, ValueError) as err:
        reason = f"the notebook's kernel {name!r} has an unreadable kernel.json: {err}; this command's own interpreter"
        return InterpreterChoice(own, reason, False)
    where = os.path.join(spec.resource_dir, "kernel.json")
    language = str(spec.language or "")
    if language.lower() != "python":
        reason = f"the notebook's kernel {name!r} is a {language or 'non-Python'} kernel, not a Python one; this command's own interpreter"
        return InterpreterChoice(own, reason, False)
    program = str(spec.argv[0]) if spec.argv else ""
    if program in _launcher_names():
        reason = (
            f"the notebook's kernel {name!r} in {where} starts {program!r}, which Jupyter runs with the interpreter "
            "that launches the kernel: this command's own"
        )
        return InterpreterChoice(own, reason, True)
    path = Path(program)
    if not path.is_absolute():
        reason = (
            f"the notebook's kernel {name!r} in {where} starts {program!r}, not an absolute path, and interpreters "
            "are never looked up on PATH; this command's own interpreter"
        )
        return InterpreterChoice(own, reason, False)
    if not (path.is_file() and os.access(path, os.X_OK)):
        reason = f"the notebook's kernel {name!r} starts {path}, which is not an executable file here; this command's own interpreter"
        return InterpreterChoice(own, reason, False)
    return InterpreterChoice(path, f"the interpreter of the notebook's kernel {name!r} in {where}", True)
