"""Where weavegym keeps images, overlays, locks and probe results: outside the repo, shared by envs."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$WEAVEGYM_CACHE_DIR``, else ``~/.cache/weavegym``."""
    override = os.environ.get("WEAVEGYM_CACHE_DIR")
    return Path(override) if override else Path.home() / ".cache" / "weavegym"
