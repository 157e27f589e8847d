"""The authoring API of a Python script run: ``from rho_notebook.script import run_step, ...``.

A script run (``rho-notebook run SCRIPT.py``) executes the script in its own interpreter process;
each step call (:func:`run_step` for an agent, :func:`run_command` for a verified command,
:func:`run_model` for one completion) goes to the runner over a private channel. The runner
journals the step, runs it (or, on ``resume``, replays its stored result, halts for a decision,
or stops the run when the script diverged) and answers with a :class:`StepHandle`.

This package is standard library only and imports nothing else of rho_notebook: it runs in
whatever interpreter the plan froze, and reaches the runner only through the channel named by
``$RHO_SCRIPT_CHANNEL`` (a Unix socket) with the token ``$RHO_SCRIPT_TOKEN``. Run outside
rho-notebook, every call raises :class:`ChannelError` (a :class:`RuntimeError`) saying so.

The script declares its inputs in a module-level literal ``INPUTS`` (read by the planner without
running the script) and reads their resolved values with :func:`get_inputs`;
:func:`emit_output` sets the run's output. Steps keys, edges and the protocol:
:mod:`rho_notebook.script._steps` and :mod:`rho_notebook.script._channel`; docs/scripts.md.

:class:`DecisionRequired`, :class:`ReplayDivergenceError` and :class:`RunCancelled` (all
:class:`RunStopped`) mean the runner stopped the run at that call. A blanket ``except Exception``
must re-raise them: ``except RunStopped: raise``.
"""

from __future__ import annotations

from rho_notebook.script import schema
from rho_notebook.script._channel import ChannelError
from rho_notebook.script._errors import DecisionRequired, ReplayDivergenceError, RunCancelled, RunStopped
from rho_notebook.script._steps import StepHandle, emit_output, get_inputs, run_command, run_model, run_step

__all__ = [
    "run_step",
    "run_command",
    "run_model",
    "get_inputs",
    "emit_output",
    "StepHandle",
    "schema",
    "RunStopped",
    "DecisionRequired",
    "ReplayDivergenceError",
    "RunCancelled",
    "ChannelError",
]
