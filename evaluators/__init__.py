"""Post-episode checkers: state probes through the guest agent plus trajectory rules (see DESIGN.md)."""
