#!/usr/bin/env bash
# The whole test suite, from a fresh machine: venv, install, then pytest.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# the venv first on PATH, as `activate` would: workflow commands such as `python3` then resolve to
# the venv's real interpreter, not to a version-manager shim script (see docs/running.md)
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/python -m pip install --quiet -e '.[test]'
exec .venv/bin/python -m pytest "$@"
