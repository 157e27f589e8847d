"""Pure data and pure functions: the graph, schemas, conditions, states and digests. No I/O."""
