"""Spatial tasks (Weave-Spatial-N)."""
