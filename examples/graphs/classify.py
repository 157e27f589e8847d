"""The triage example's classifier: a deterministic stand-in for a local model, printing one JSON
value (the ticket's category) on stdout."""

import json
import sys

text = " ".join(sys.argv[1:]).lower()
category = "hardware" if any(word in text for word in ("printer", "disk", "screen")) else "software"
print(json.dumps(category))
