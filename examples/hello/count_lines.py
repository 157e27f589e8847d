"""Count files matching a glob under the current folder and their lines; print one JSON object."""

import json
import sys
from pathlib import Path

pattern = sys.argv[1] if len(sys.argv) > 1 else "*.py"
files = [p for p in Path(".").rglob(pattern) if p.is_file() and ".venv" not in p.parts]
lines = sum(len(p.read_bytes().splitlines()) for p in files)
print(json.dumps({"files": len(files), "lines": lines}))
