"""Which providers this process knows, so a placement by name is checked where it is written.

OpenRath's ``agent_param.to(provider="main")`` reads the provider's configuration during
``.to(...)``: a name that is not configured fails there, not at the first model request. Our
providers live in settings (docs/providers.md), and this package cannot read them: it runs in the
flow's own interpreter with the standard library only. So the host that knows settings tells this
layer the provider names and their kinds, as a table ``{name: kind}``:

* in-process, with :func:`use_providers` (a test, any Python host): a table, or a function that
  reads it at each check (a kernel with the extension loaded reads settings there, so a provider
  added to settings is known at the next ``.to``);
* in a subprocess, through the environment variable :data:`PROVIDERS_VARIABLE`, holding the table
  as a JSON object.

:func:`resolve_provider` checks a name against that table and raises
:class:`~rho_notebook.flow.FlowError` naming the known providers. When the process has no table
(neither source), a name cannot be checked here; it is kept, and ``rho-notebook validate`` (which
reads settings) checks it before anything runs (docs/flows.md, "Differences from OpenRath").
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from typing import TypeAlias

from rho_notebook.flow._errors import FlowError

__all__ = ["KINDS", "PROVIDERS_VARIABLE", "ProviderSource", "known_providers", "resolve_provider", "use_providers"]

PROVIDERS_VARIABLE = "RHO_FLOW_PROVIDERS"
"""Environment variable holding ``{name: kind}`` as JSON for a flow subprocess."""
KINDS = ("openai", "anthropic")
"""The provider kinds this installation speaks (settings' ``type``)."""

ProviderSource: TypeAlias = "dict[str, str] | Callable[[], Mapping[str, str] | None]"
"""What :func:`use_providers` installs: a table, or a function returning the current one (None
when it cannot be read: then a name is kept unchecked, as with no table)."""

_LOCK = threading.Lock()
_table: ProviderSource | None = None


def use_providers(table: Mapping[str, str] | Callable[[], Mapping[str, str] | None] | None) -> ProviderSource | None:
    """Install the provider table ``{name: kind}`` of this process (None removes it); the previous
    one (give it back to :func:`use_providers` to restore it). ``table`` may also be a function
    called at each check for the current table (what a kernel installs: settings can change while
    it runs); a table it returns is checked as an installed one is.

    An installed table takes precedence over :data:`PROVIDERS_VARIABLE`.

    Raises
    ------
    TypeError
        ``table`` is not a mapping of text to text (nor a function, nor None).
    """
    global _table
    installed: ProviderSource | None = table if table is None or callable(table) else _checked(table)
    with _LOCK:
        previous, _table = _table, installed
    return previous


def known_providers() -> dict[str, str] | None:
    """The provider table of this process (a copy), or None when no host gave one (or the
    installed function could not read it).

    Raises
    ------
    TypeError
        The installed function returned something other than a mapping of text to text.
    """
    with _LOCK:
        installed = _table
    if callable(installed):
        current = installed()
        return None if current is None else _checked(current)
    if installed is not None:
        return dict(installed)
    text = os.environ.get(PROVIDERS_VARIABLE)
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        msg = f"${PROVIDERS_VARIABLE} is not JSON; it must be an object of provider name to kind"
        raise FlowError(msg) from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        msg = f"${PROVIDERS_VARIABLE} must be a JSON object of provider name to kind"
        raise FlowError(msg)
    return {str(k): v for k, v in data.items()}


def _checked(table: object) -> dict[str, str]:
    """``table`` as a plain dict, when it is a mapping of provider name to kind (text to text)."""
    if not isinstance(table, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        msg = f"use_providers takes a mapping of provider name to kind (text to text), or None; got {table!r:.80}"
        raise TypeError(msg)
    return dict(table)


def resolve_provider(name: str, *, where: str) -> str:
    """``name`` when the process's table defines it, or when there is no table to check against.

    Raises
    ------
    FlowError
        ``name`` is not in the table; the message names ``where`` and every known provider.
    """
    table = known_providers()
    if table is None or name in table:
        return name
    known = ", ".join(sorted(table)) or "none"
    msg = (
        f"{where}: provider {name!r} is not defined in settings (providers: {known}); name one of them, "
        'or add it under "providers" in settings.json (docs/providers.md)'
    )
    raise FlowError(msg)
