"""The bottom layer: errors, config, episode records, frame hashes and the guest's accounts.

Nothing here imports from any other weavegym package, so every layer above can share it.
"""
