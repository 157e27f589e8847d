"""Names of the code the worker evaluates itself, which diagnostics never point at as the user's file.

The driver runs inside the entry module, before it is frozen, so that ``build`` sees the entry
module's globals still mutable (Rho calls build, then freezes); loaded modules are frozen already.
A code step's source is evaluated as the module CODE.
"""

from __future__ import annotations

PRELUDE = "<prelude>"
DRIVER = "<driver>"
CODE = "<code>"
