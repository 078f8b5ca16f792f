"""Web tasks (Weave-Web-N)."""
