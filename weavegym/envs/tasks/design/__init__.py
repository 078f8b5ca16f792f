"""Design tasks (Weave-Design-N)."""
