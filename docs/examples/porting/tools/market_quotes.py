# docs/examples/porting/tools/market_quotes.py
"""The parallel port's ``market_quotes`` tool: ``market_quotes.py QUOTES_FILE ARGUMENTS_JSON``
prints the quotes QUOTES_FILE holds for the ticker the model named (``{"ticker": "ACME"}``), as
JSON (``{}`` for a ticker it does not hold). The model's arguments come last, as a flow tool gets
them, and are read as data, never run."""

import json
import sys

quotes_file, arguments = sys.argv[1], json.loads(sys.argv[2])
with open(quotes_file, encoding="utf-8") as quotes:
    print(json.dumps(json.load(quotes).get(str(arguments.get("ticker", "")).upper(), {})))
