#!/usr/bin/env bash
# The main job, from a fresh machine: venv, install, then plan and run the shipped example.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
.venv/bin/rho-notebook validate examples/hello/hello.star
plan_id=$(.venv/bin/rho-notebook plan examples/hello/hello.star --input 'pattern="*.py"' --output json \
  | .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["plan_id"])')
.venv/bin/rho-notebook run "$plan_id" --yes
