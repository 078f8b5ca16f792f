"""Productivity tasks: everyday desktop work that mixes dialogs and scripts."""
