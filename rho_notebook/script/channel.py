"""The channel as the rest of rho_notebook sees it: the public face of the shim's protocol.

Script authors import :mod:`rho_notebook.script`; this module is for the other packages that speak
to, or for, a script process. The runner (:mod:`rho_notebook.runtime`) puts the channel in a
script's environment under :data:`CHANNEL_VARIABLE` and :data:`TOKEN_VARIABLE`, and computes
:func:`request_fingerprint` of each journaled step request to offer replays the script takes
without a round trip. :mod:`rho_notebook.flow` sends its model, agent and tool calls as steps under
keys it builds (``team.writer/f1#2``) with :func:`keyed_step`. The step-id grammar
(:data:`STEP_ID`, :func:`step_id_problem`) is here for ``validate``, which checks literal ids
with the very rule the shim applies.

The protocol itself (JSON lines, kept connections, replay offers, how refusals become exceptions)
is described and implemented in :mod:`rho_notebook.script._channel`; step keys, edges and handles in
:mod:`rho_notebook.script._steps`. Standard library only, like the whole package.
"""

from __future__ import annotations

from rho_notebook.script._channel import CHANNEL_VARIABLE, TOKEN_VARIABLE, ChannelError, request_fingerprint
from rho_notebook.script._steps import STEP_ID, STEP_ID_PATTERN, STEP_ID_TEXT, StepHandle, step_id_problem
from rho_notebook.script._steps import _keyed_step as keyed_step

__all__ = [
    "CHANNEL_VARIABLE",
    "TOKEN_VARIABLE",
    "ChannelError",
    "StepHandle",
    "keyed_step",
    "request_fingerprint",
    "STEP_ID",
    "STEP_ID_PATTERN",
    "STEP_ID_TEXT",
    "step_id_problem",
]
