"""Which executor runs a run's remotable attempts: ``local`` (the default) or ``dask`` (docs/distributed.md).

A choice is written ``local``, ``dask`` or ``dask=ADDRESS`` (``run --executor``, ``%workflow run
--executor``, the Python API's ``executor=``). ``dask`` without an address takes, in order,
``$RHO_NOTEBOOK_DASK_SCHEDULER``, then the user settings key ``dask_scheduler``; with neither, the
run starts a ``LocalCluster`` of its own. :func:`resolve_executor` settles that once, when the run
is created, and the run manifest keeps the result (``executor``), so a resume runs where the run
ran unless it is given another choice. The choice is not part of the graph digest: the same frozen
plan runs the same way wherever its attempts run.

Only the user's settings (``$RHO_NOTEBOOK_HOME/settings.json``) are read, never a project's: a
checkout cannot send a person's attempts to a scheduler of its choosing. ``dask_path_map`` maps an
owner path prefix to the prefix the workers see the same files under::

    {"dask_scheduler": "tcp://scheduler.lan:8786", "dask_path_map": {"/home/me/ws": "/srv/ws"}}
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rho_notebook.errors import DaskNotInstalled, ExecutorInvalid, SettingsError
from rho_notebook.exec.base import Executor
from rho_notebook.store.settings import settings_documents

__all__ = [
    "SCHEDULER_ENV",
    "ExecutorChoice",
    "parse_executor",
    "resolve_executor",
    "require_dask",
    "remote_executor",
]

SCHEDULER_ENV = "RHO_NOTEBOOK_DASK_SCHEDULER"
"""The default scheduler address of ``dask`` (before the settings key ``dask_scheduler``)."""


@dataclass(frozen=True)
class ExecutorChoice:
    """A parsed choice: ``kind`` and, for ``dask``, the scheduler address (None: a LocalCluster)."""

    kind: Literal["local", "dask"]
    address: str | None = None
    path_map: Mapping[str, str] = field(default_factory=dict)
    """Owner path prefix -> worker path prefix (``dask_path_map``)."""

    def spec(self) -> str:
        """The choice as written (and as the run manifest keeps it)."""
        if self.kind == "local":
            return "local"
        return "dask" if self.address is None else f"dask={self.address}"


def _check_address(address: str, *, given: str) -> str:
    if address == "" or address != address.strip() or any(not ch.isprintable() or ch.isspace() for ch in address):
        msg = (
            f"executor {given!r}: the scheduler address must be one word such as tcp://scheduler:8786 "
            "(or write `dask` alone for a LocalCluster started for the run)"
        )
        raise ExecutorInvalid(msg, given=given)
    return address


def parse_executor(spec: str) -> ExecutorChoice:
    """``local``, ``dask`` or ``dask=ADDRESS`` as a choice (no defaults applied).

    Raises
    ------
    ExecutorInvalid
        Anything else; the message lists the three forms.
    """
    kind, sep, address = spec.partition("=")
    if kind == "local" and not sep:
        return ExecutorChoice(kind="local")
    if kind == "dask":
        return ExecutorChoice(kind="dask", address=_check_address(address, given=spec) if sep else None)
    msg = f"unknown executor {spec!r}: write local, dask (a LocalCluster for the run) or dask=ADDRESS (tcp://host:8786)"
    raise ExecutorInvalid(msg, given=spec)


def _user_settings(home: Path) -> tuple[str | None, dict[str, str]]:
    """``dask_scheduler`` and ``dask_path_map`` of the user settings (later documents win)."""
    scheduler: str | None = None
    path_map: dict[str, str] = {}
    for document in settings_documents(home, None, trusted=False):
        data = document.data
        if "dask_scheduler" in data:
            value = data["dask_scheduler"]
            if not isinstance(value, str):
                msg = f"{document.path}: dask_scheduler must be a scheduler address string such as tcp://host:8786"
                raise SettingsError(msg)
            scheduler = _check_address(value, given=f"dask={value}")
        if "dask_path_map" in data:
            value = data["dask_path_map"]
            ok = isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, str) and k.startswith("/") and v.startswith("/")
                for k, v in value.items()
            )
            if not ok:
                msg = (
                    f"{document.path}: dask_path_map must map absolute owner path prefixes to absolute worker "
                    'path prefixes, such as {"/home/me/ws": "/srv/ws"}'
                )
                raise SettingsError(msg)
            path_map = dict(value)
    return scheduler, path_map


def resolve_executor(spec: str | None, *, home: Path, environ: Mapping[str, str]) -> ExecutorChoice:
    """The choice a run is created with: ``spec`` (None: local), an address-less ``dask`` given
    ``$RHO_NOTEBOOK_DASK_SCHEDULER`` or the settings key ``dask_scheduler`` (either, else a
    LocalCluster), and the user's ``dask_path_map``. A ``dask`` choice checks that ``distributed``
    can be imported here (:class:`DaskNotInstalled` otherwise), before anything is created."""
    choice = parse_executor(spec or "local")
    if choice.kind == "local":
        return choice
    require_dask()
    scheduler, path_map = _user_settings(home)
    address = choice.address
    if address is None and environ.get(SCHEDULER_ENV):
        address = _check_address(environ[SCHEDULER_ENV], given=f"{SCHEDULER_ENV}={environ[SCHEDULER_ENV]}")
    if address is None:
        address = scheduler
    return ExecutorChoice(kind="dask", address=address, path_map=path_map)


def require_dask() -> None:
    """Raise :class:`DaskNotInstalled` (naming ``pip install rho-notebook[dask]``) when
    ``distributed`` cannot be imported."""
    try:
        importlib.import_module("distributed")
    except ImportError as err:
        raise DaskNotInstalled(reason=str(err)) from None


def remote_executor(choice: ExecutorChoice) -> Executor | None:
    """The executor of the remotable attempts of a run with ``choice`` (None: everything local).
    Imported only here, so a local run never imports ``distributed``."""
    if choice.kind == "local":
        return None
    require_dask()
    from rho_notebook.exec.dask import DaskExecutor

    return DaskExecutor(choice.address, dict(choice.path_map))
