"""Backends own a machine's lifecycle: boot, snapshot reset, VNC, teardown. The env talks to the agent."""
