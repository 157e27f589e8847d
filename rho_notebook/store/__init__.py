"""The durable local store: layout, private directories, atomic writes, IDs, plans and runs."""
