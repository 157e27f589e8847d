"""Generate ``rho_notebook/schemas/graph.schema.json``, the JSON Schema of item-graph documents
(``*.graph.yaml``), from the pydantic model :class:`rho_notebook.model.itemgraph.ItemGraph`.

The model is the one definition of the document; editors validate against the generated schema
(docs/graphs.md). The file ships in the wheel inside the package.

Usage (from the repository root)::

    .venv/bin/python scripts/gen_graph_schema.py            # rewrite the committed schema
    .venv/bin/python scripts/gen_graph_schema.py --check    # exit 1 if it is stale
    .venv/bin/python scripts/gen_graph_schema.py --output /tmp/graph.schema.json

``tests/unit/test_itemgraph_schema.py`` fails when the committed file differs from the generated one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rho_notebook.model.itemgraph import GRAPH_SCHEMA_FILE, graph_json_schema


def schema_text() -> str:
    """The schema as committed: two-space indented JSON, keys in the model's order, a final newline."""
    return json.dumps(graph_json_schema(), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed schema is stale")
    parser.add_argument("--output", type=Path, default=GRAPH_SCHEMA_FILE, help="where to write the schema")
    args = parser.parse_args()
    text = schema_text()
    if args.check:
        current = GRAPH_SCHEMA_FILE.read_text(encoding="utf-8") if GRAPH_SCHEMA_FILE.exists() else ""
        if current != text:
            print(f"{GRAPH_SCHEMA_FILE} is stale: run .venv/bin/python scripts/gen_graph_schema.py", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
