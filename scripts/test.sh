#!/usr/bin/env bash
# The whole test suite, from a fresh machine: venv, install, then pytest.
# Usage: bash scripts/test.sh [pytest args...]
# Exits with pytest's exit code. Without /usr/bin/chromium the browser tests are skipped (unless CI
# is set, which .ci/run does: then they fail), and a notice after pytest's summary says so.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# the venv first on PATH, as `activate` would: workflow commands such as `python3` then resolve to
# the venv's real interpreter, not to a version-manager shim script (see docs/running.md)
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/python -m pip install --quiet -e '.[test]'
status=0
.venv/bin/python -m pytest "$@" || status=$?
if [ ! -x /usr/bin/chromium ]; then
  cat <<'MSG'

!!! The browser tests (tests/browser: the JupyterLab sidebar and the notebook widget in a real
!!! jupyter lab) did NOT run: /usr/bin/chromium is missing, so they were skipped (or failed, when CI
!!! is set) and this run tested no UI. To run them, install Debian's chromium as root, then run
!!! this script again:
!!!     apt-get update && apt-get install -y chromium
!!! .ci/run installs it itself and sets CI=1, which makes a missing chromium a failure.
MSG
fi
exit "$status"
