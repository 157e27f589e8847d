"""Validation and planning: inputs, normalisation, graph rules, resolution, frozen plans."""
