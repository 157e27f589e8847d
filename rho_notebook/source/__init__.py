"""Starlark evaluation in a supervised worker: labels, module loading, limits, diagnostics."""
