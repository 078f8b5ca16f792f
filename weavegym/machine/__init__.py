"""A machine to run episodes on: the backends (libvirt VM, ssh desktop) and the client for its guest agent.

Above ``core`` and the guest protocol; below evaluators and the env, which reach the guest only through here.
"""
