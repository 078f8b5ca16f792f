"""Games tasks (Weave-Games-N)."""
