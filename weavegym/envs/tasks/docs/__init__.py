"""Docs tasks (Weave-Docs-N)."""
