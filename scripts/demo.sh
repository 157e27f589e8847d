#!/usr/bin/env bash
# The main job, from a fresh machine: venv, install, then run the quickstart notebook headless
# (export its %%workflow cell, plan it, show and confirm the digest, run with live progress, then
# a summary: each node's state, allowed failures marked, and the validated output values).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# the venv first on PATH, as `activate` would: workflow commands such as `python3` then resolve to
# the venv's real interpreter, not to a version-manager shim script (see docs/running.md)
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/python -m pip install --quiet -e .
.venv/bin/rho-notebook run notebooks/01_quickstart.ipynb --yes
