"""Data tasks (Weave-Data-N)."""
