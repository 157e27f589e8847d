"""Running a ``%%py`` module in the kernel, as the cell's own code.

The module text (the cell body, exactly as frozen into plans) is compiled on its own, as a module
file would be (no ``from __future__`` flags inherited from earlier cells), under a name IPython
shows as ``Cell In[N]``, padded with one blank line so that a line number in a traceback or a
``SyntaxError`` is the line of the cell (line 1 is the magic line). It then runs in the user
namespace, so its functions can be called in the next cell.

Errors are the cell's errors, shown as for any cell, and the cell fails (``Run all`` stops there):
an exception with a traceback of the module's own frames (the magic's frames are left out), and
a ``SyntaxError`` as IPython shows one in a cell (line and caret, no frames), followed by a
one-line ``UsageError`` that fails the cell (a ``SyntaxError`` raised from a magic would be shown
with the frames of IPython's magic dispatch).
"""

from __future__ import annotations

import inspect
from typing import Any

from IPython.core.error import UsageError

from rho_notebook.service.cells import PythonCell

__all__ = ["run_python_cell"]


def _own_frames(shell: Any, err: BaseException) -> None:
    """Make IPython show ``err`` with the traceback of the module's frames only.

    ``_render_traceback_`` is IPython's hook for an exception that renders its own traceback;
    the frames above the module (the cell's magic call, IPython's magic dispatch, this file)
    are not the person's code.
    """
    tb = err.__traceback__.tb_next if err.__traceback__ is not None else None
    rendered = shell.InteractiveTB.structured_traceback(type(err), err, tb, tb_offset=0)
    try:
        err._render_traceback_ = lambda: rendered  # type: ignore[attr-defined]
    except AttributeError:  # an exception type without instance attributes keeps IPython's rendering
        pass


def _cell_number(shell: Any) -> int:
    """The ``N`` of the running cell's ``In[N]`` (IPython 9 counts the cell up before running it)."""
    running = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    number = getattr(running, "execution_count", None)
    return int(number) if isinstance(number, int) else int(shell.execution_count)


def run_python_cell(shell: Any, cell: PythonCell) -> list[str]:
    """Execute ``cell``'s module in ``shell``'s user namespace; the names of the functions it defined.

    Raises
    ------
    UsageError
        The module does not compile; the ``SyntaxError`` (with the cell's line numbers) is shown
        before it.
    BaseException
        Whatever the module raised while running; IPython shows it as the cell's error.
    """
    text = "\n" + cell.text
    filename = shell.compile.cache(text, _cell_number(shell), raw_code=text)
    try:
        code = compile(text, filename, "exec", dont_inherit=True)
    except SyntaxError as err:
        shell.showsyntaxerror()
        where = f" (line {err.lineno})" if err.lineno else ""
        msg = f"%%py {cell.label}: the module does not compile{where}; it is held as written, fix it and run the cell again"
        raise UsageError(msg) from None
    namespace = shell.user_ns
    try:
        exec(code, shell.user_global_ns, namespace)
    except (Exception, KeyboardInterrupt) as err:  # an interrupt (Ctrl-C) stops the module's own code too
        _own_frames(shell, err)
        raise
    return sorted(
        name
        for name, value in namespace.items()
        if inspect.isfunction(value) and value.__code__.co_filename == filename and not name.startswith("_")
    )
