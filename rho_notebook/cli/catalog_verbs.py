"""``list`` and ``get NAME``: the workspace's workflows, and one workflow's source, kind and inputs;
``agents [DIR]``: the agents a workflow in DIR can name (:mod:`rho_notebook.service.agent_list`).

Both read the workspace's files as MCP's ``workflow_list`` does (:mod:`rho_notebook.service.catalog`):
``list --output json`` prints the same object. ``get`` also evaluates a Starlark workflow's top level
(in the sandboxed planning worker, stopped before ``build``) to read its declared inputs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rho_notebook.service import Service, Workspace, check_path, find_workspace
from rho_notebook.service.catalog import (
    WorkflowDetail,
    WorkflowScan,
    catalog_json,
    describe_workflow,
    find_workflow,
)
from rho_notebook.service.sync import run_sync

__all__ = ["run_list", "run_get", "run_agents"]


def _workspace(given: Path | None) -> Workspace:
    """``--workspace DIR`` (or ``--dir``): the workspace holding DIR; default, the current directory's."""
    if given is not None:
        check_path(given, argument="--workspace")
        if not given.is_dir():
            from rho_notebook.errors import BadArgument

            msg = f"--workspace {given}: no such folder"
            raise BadArgument(msg)
    return find_workspace(given)


def _scan(workspace: Workspace) -> WorkflowScan:
    scan = run_sync(Service.default().workflow_scan(workspace.root))
    for skipped in scan.skipped:
        print(f"rho-notebook: warning: skipped {skipped}", file=sys.stderr)
    if scan.truncated:
        print(f"rho-notebook: warning: the scan stopped after {scan.files_read} files; more may exist", file=sys.stderr)
    return scan


def run_list(args: argparse.Namespace) -> int:
    """``list``: one line per workflow (name, kind, file), or the catalog as JSON."""
    workspace = _workspace(args.workspace)
    scan = _scan(workspace)
    if args.output == "json":
        print(json.dumps(catalog_json(workspace.root, scan), indent=2))
        return 0
    if not scan.workflows:
        print(f"no workflows in the workspace {workspace.root}")
        return 0
    width = max(24, *(len(entry.name) for entry in scan.workflows))
    for name, kind, file in [("NAME", "KIND", "FILE"), *((e.name, e.kind, e.file) for e in scan.workflows)]:
        print(f"{name:<{width}} {kind:<9} {file}")
    return 0


def run_get(args: argparse.Namespace) -> int:
    """``get NAME``: the workflow's kind, file, inputs and source."""
    workspace = _workspace(args.workspace)
    entry = find_workflow(workspace.root, args.name, _scan(workspace))
    service = Service.default()

    def starlark(source: Path | str) -> Any:
        return service.request_for(source, workspace=workspace)

    detail = run_sync(describe_workflow(workspace.root, entry, starlark=starlark))
    if args.output == "json":
        print(json.dumps(detail.to_json(), indent=2))
        return 0
    for line in _detail_lines(detail):
        print(line)
    return 0


def _detail_lines(detail: WorkflowDetail) -> list[str]:
    lines = [
        f"workflow  {detail.name}",
        f"kind      {detail.kind}",
        f"file      {detail.file}",
        f"run       {detail.run}",
    ]
    if detail.inputs is None:
        lines.append(f"inputs    unknown: {detail.inputs_error}")
    elif not detail.inputs:
        lines.append("inputs    none")
    else:
        lines.append("inputs")
        width = max(len(item.name) for item in detail.inputs)
        for item in detail.inputs:
            how = "required" if item.required else f"default {json.dumps(item.default)}"
            choices = f"  one of {json.dumps(item.choices)}" if item.choices else ""
            lines.append(f"  {item.name:<{width}}  {item.type:<8} {how}{choices}")
    lines.append("source")
    lines.extend(f"  {line}" for line in detail.source.splitlines())
    return lines


def run_agents(args: argparse.Namespace) -> int:
    """``agents [DIR]``: one line per agent id (where its definition comes from, its runtime and
    whether it is read-only, what it hides), then the diagnostics of the ids that cannot be
    resolved; exit 1 when there are any."""
    from rho_notebook.service.agent_list import AgentRow, agent_rows

    folder = Path.cwd() if args.folder is None else args.folder
    check_path(folder, argument="DIR")
    if not folder.is_dir():
        from rho_notebook.errors import BadArgument

        msg = f"{folder}: no such folder (give the folder of a workflow's entry file)"
        raise BadArgument(msg)
    folder = folder.resolve()
    workspace = find_workspace(folder)
    rows = agent_rows(folder, workspace=workspace.root, user_home=Service.default().layout.home)
    broken = [row for row in rows if row.problems]
    if args.output == "json":
        print(json.dumps({"folder": str(folder), "agents": [row.to_json() for row in rows]}, indent=2))
        return 1 if broken else 0

    def shown(file: str) -> str:
        path = Path(file)
        return str(path.relative_to(workspace.root)) if path.is_relative_to(workspace.root) else file

    def line(row: AgentRow) -> str:
        definition = row.definition
        if definition is None:
            claimed = ", ".join(shown(file) for file in row.claimed_by)
            return _AGENT_ROW.format(row.agent_id, "-", "-", "-", f"cannot be resolved (below): {claimed}")
        where = "built-in" if row.file is None else shown(row.file)
        access = "read-only" if definition.is_read_only() else "writes"
        return _AGENT_ROW.format(row.agent_id, definition.origin, definition.runtime, access, where)

    print(_AGENT_ROW.format("ID", "ORIGIN", "RUNTIME", "ACCESS", "DEFINED IN"))
    for row in rows:
        print(line(row))
        if row.hides:
            print(f"  hides {', '.join(shown(file) for file in row.hides)}")
    for row in broken:
        for problem in row.problems:
            print(problem.render(), file=sys.stderr)
    return 1 if broken else 0


_AGENT_ROW = "{:<20} {:<9} {:<11} {:<10} {}"
