"""The ``mcp`` verb: serve the workflow tools to an MCP host over standard input and output.

Standard output carries the protocol and nothing else; warnings go to standard error. The
server runs in the workspace's root folder (a host may start it anywhere), so relative file
names in tool calls and in the workflows' commands mean the same as on the command line.
"""

from __future__ import annotations

import argparse
import os
import sys

from rho_notebook.service import Service, check_path, find_workspace
from rho_notebook.service.sync import run_sync

__all__ = ["run_mcp"]


def run_mcp(args: argparse.Namespace) -> int:
    from rho_notebook.mcp import build_server, serve_stdio  # the SDK loads only for this verb

    if args.workspace is not None:
        check_path(args.workspace, argument="--workspace")
    if args.workspace is not None and not args.workspace.is_dir():
        print(f"rho-notebook: --workspace {args.workspace}: no such folder", file=sys.stderr)
        return 2
    workspace = find_workspace(args.workspace)
    os.chdir(workspace.root)
    run_sync(serve_stdio(build_server(Service.default(), workspace)))
    return 0
