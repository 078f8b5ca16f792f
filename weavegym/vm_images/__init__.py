"""Reproducible guest image recipes (debootstrap from the Debian mirror; an Ubuntu variant)."""
