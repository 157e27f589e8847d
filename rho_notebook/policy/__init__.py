"""Permission modes, hooks, trust and approval records."""
